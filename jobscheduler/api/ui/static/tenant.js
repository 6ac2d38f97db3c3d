// The tenant picker (principals that see every tenant): offers "All tenants" and the tenants
// that hold jobs (GET /tenants); the chosen tenant follows the navigation, so every view
// opens on it until "All tenants" is chosen. Switching keeps the view's other filters.
"use strict";

(function () {
  document.addEventListener("DOMContentLoaded", async () => {
    const tenant = new URLSearchParams(location.search).get("tenantId");
    if (tenant) {
      for (const link of document.querySelectorAll(".top nav a")) {
        const url = new URL(link.href, location.href);
        url.searchParams.set("tenantId", tenant);
        link.href = url.pathname + url.search;
      }
    }
    const form = document.getElementById("tenant-switcher");
    const select = document.getElementById("switch-tenant");
    if (!form || !select) return;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const url = new URL(location.href);
      if (select.value) url.searchParams.set("tenantId", select.value);
      else url.searchParams.delete("tenantId");
      location.assign(url.pathname + url.search);
    });
    let listed;
    try {
      const response = await fetch("/tenants", {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      if (!response.ok) return;
      listed = (await response.json()).tenants;
    } catch (_) {
      return;
    }
    // "All tenants", then every tenant in order (the one looked at too, even without jobs).
    const names = [...new Set([...listed, ...(tenant ? [tenant] : [])])].sort();
    const options = names.map((name) => {
      const option = document.createElement("option");
      option.value = name;
      option.textContent = name;
      option.selected = name === tenant;
      return option;
    });
    select.replaceChildren(select.options[0], ...options);
    select.dataset.loaded = String(listed.length);
  });
})();
