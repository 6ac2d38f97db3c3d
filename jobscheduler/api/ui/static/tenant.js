// The tenant switcher (keys that see every tenant): the chosen tenant follows the navigation,
// so every view opens on it until "All tenants" is chosen.
"use strict";

(function () {
  document.addEventListener("DOMContentLoaded", () => {
    const tenant = new URLSearchParams(location.search).get("tenantId");
    if (!tenant) return;
    for (const link of document.querySelectorAll(".top nav a")) {
      const url = new URL(link.href, location.href);
      url.searchParams.set("tenantId", tenant);
      link.href = url.pathname + url.search;
    }
  });
})();
