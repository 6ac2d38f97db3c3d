"""Serving an ASGI app on hypercorn's trio worker inside a nursery, with JSON bodies for the errors
hypercorn answers itself."""
