"""Request and response shapes of the HTTP API, declared for the route table."""
