"""The web dashboard, served by the API role at ``/ui`` (``/`` redirects there).

Shape, and why:

- **Server-rendered shells, data over the public JSON API.** Each page is a Jinja2 template
  (Quart's own) holding the layout, the navigation, the filter form (filled from the query
  string) and empty tables of fixed row height; a small hand-written script
  (``static/ui.js``) fills them from the same-origin JSON routes (``GET /jobs``,
  ``GET /jobs/{id}``, ``GET /jobs/{id}/next``, ...) and refreshes them in place. The UI thus
  depends only on the HTTP contract, not on store internals that other slices are changing,
  and every read and action goes through the API's own checks (tenant scope, role,
  validation). The Overview is the same: ``static/overview.js`` reads ``GET /stats/overview``.
- **Every tenant, or one.** A principal bound to a tenant sees that tenant. One that sees
  every tenant (an all-tenant admin key, or anyone with ``AUTH=off``) opens every view on all
  of them (``GET /jobs?allTenants=true``, a Tenant column) and narrows it with the tenant
  picker, which offers the tenants that hold jobs (``GET /tenants``, ``static/tenant.js``).
  There is no default tenant: a page never guesses one.
- **No build step, no CDN**: templates and static files are package data; the CSS and the
  scripts are ours, the Overview's chart is inline SVG drawn by its script.
- **Roles decide what is drawn**: the page knows the request's principal
  (:func:`jobscheduler.api.auth.current_principal`); a reader gets no action buttons, and the
  API refuses its writes anyway.
"""

from __future__ import annotations

from ._routes import register_ui_routes as register_ui_routes
