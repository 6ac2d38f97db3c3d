// jobscheduler dashboard: fills the server-rendered shells from the same-origin JSON API and
// refreshes them in place. Data is written with textContent only (never as HTML).
// This file holds what every view shares; each view is a file of its own (ui_*.js) that
// registers itself in `jobscheduler.views`, and all of them run once the page is parsed.
"use strict";

window.jobscheduler = (function () {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content;
  const refreshMs = 1000 * Number(meta("js-refresh-seconds") || 5);

  // A request to the JSON API, same origin: its response and its body (null when not JSON);
  // an Error with the API's message, and the status, when it failed.
  async function request(url, init) {
    const response = await fetch(url, { credentials: "same-origin", ...init });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const error = new Error(body && body.error ? body.error : `HTTP ${response.status}`);
      error.status = response.status;
      throw error;
    }
    return { response, body };
  }

  async function getJson(url) {
    return (await request(url, { headers: { Accept: "application/json" } })).body;
  }

  // A write to the JSON API: same origin, the session's CSRF token in its header.
  async function send(method, url, body) {
    const csrf = document.querySelector('meta[name="js-csrf"]');
    const headers = { Accept: "application/json" };
    if (csrf && csrf.content) headers[csrf.dataset.header] = csrf.content;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
    return (await request(url, init)).body;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // One time format everywhere: "2026-12-02 09:00:00 UTC", or in a time zone
  // "2026-12-02 10:00:00 Europe/Paris" (to the second; the API's exact value is in `title`).
  function when(text, zone) {
    if (!text) return "";
    const date = new Date(text);
    if (Number.isNaN(date.getTime())) return text;
    if (zone && zone !== "UTC") {
      try {
        const parts = {};
        const format = new Intl.DateTimeFormat("en-GB", {
          timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
          hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
        });
        for (const part of format.formatToParts(date)) parts[part.type] = part.value;
        return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${zone}`;
      } catch (_) {
        // A zone this browser does not know: UTC below.
      }
    }
    return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
  }

  // A <time> showing `text` as `when` does, its exact value in `datetime` and `title`.
  function time(text, zone) {
    return text ? el("time", { datetime: text, title: text }, when(text, zone)) : "";
  }

  // The API query of the page's tenant, or of every tenant (allTenants=true).
  function tenantQuery(tenant, fields) {
    const query = new URLSearchParams(tenant ? { tenantId: tenant } : { allTenants: "true" });
    for (const [name, value] of Object.entries(fields || {})) query.set(name, value);
    return query;
  }

  // The Tenant column's cell: the tenant's name, a link to this view narrowed to it.
  function tenantCell(tenant) {
    const url = new URL(location.href);
    url.searchParams.set("tenantId", tenant);
    return el("td", { class: "tenant" }, el("a", { href: url.pathname + url.search }, tenant));
  }

  function badge(status) {
    return el("span", { class: `badge s-${status}` }, status);
  }

  // Run `refresh` now and then every refreshMs while the tab is visible; never two at once.
  function every(refresh) {
    let busy = false;
    const tick = async () => {
      if (busy || document.hidden) return;
      busy = true;
      try {
        await refresh();
      } finally {
        busy = false;
        // How many refreshes the page has done (tests wait on it).
        document.body.dataset.refreshes = Number(document.body.dataset.refreshes || 0) + 1;
      }
    };
    tick();
    setInterval(tick, refreshMs);
    return tick;
  }

  // What `read()` reads, once `line` no longer shows an earlier failure; on a failure,
  // undefined, and `line` says (marked bad) that `what` could not be loaded.
  async function loaded(line, what, read) {
    let result;
    try {
      result = await read();
    } catch (error) {
      line.textContent = `Could not load ${what}: ${error.message}`;
      line.classList.add("bad");
      return undefined;
    }
    line.classList.remove("bad");
    return result;
  }

  // The item of the API at `url` (a job, a workflow), once `problem` is hidden again; on a
  // failure, undefined, and `problem` shows why: "No such <noun>." for a 404.
  async function loadedItem(problem, noun, url) {
    let item;
    try {
      item = await getJson(url);
    } catch (error) {
      problem.textContent = error.status === 404 ? `No such ${noun}.` : `Could not load: ${error.message}`;
      problem.hidden = false;
      return undefined;
    }
    problem.hidden = true;
    return item;
  }

  // A page of GET /jobs: the rows and the cursor of the next page (from its Link header).
  async function getPage(url) {
    const { response, body } = await request(url, { headers: { Accept: "application/json" } });
    const link = response.headers.get("Link") || "";
    const match = link.match(/<([^>]+)>;\s*rel="next"/);
    const next = match ? new URL(match[1], location.href).searchParams.get("cursor") : null;
    return { rows: body, next };
  }

  // ---- Bulk actions, on the selected jobs or on everything matching the filters. The
  // confirmation says how many jobs the action will touch: the API counts them first with
  // the same filter (dryRun), so the number is what the action itself would match.
  function bulk(table, selected, done) {
    const box = document.getElementById("bulk");
    if (!box) return;
    const result = document.getElementById("bulk-result");
    const filter = JSON.parse(table.dataset.filter);
    box.addEventListener("click", async (event) => {
      const button = event.target.closest("button[data-bulk]");
      if (!button) return;
      const action = button.dataset.bulk;
      const bySelection = button.dataset.scope === "selection";
      const target = bySelection ? { tenantId: filter.tenantId, ids: [...selected] } : filter;
      const verb = action === "retry" ? "Retry" : "Cancel";
      result.classList.remove("bad");
      const ok = await confirmCount(result, action, target, (count) =>
        bySelection
          ? `${verb} ${count} of the ${selected.size} selected jobs?`
          : `${verb} ${count} jobs matching these filters (${filter.tenantId ? `tenant ${filter.tenantId}` : "all tenants"})?`,
      );
      if (!ok) return;
      await act(
        result,
        action,
        () => send("POST", `/jobs/${action}`, { filter: target }),
        (reply) => `${reply.changed} of ${reply.matched} matching jobs changed.`,
        done,
      );
    });
  }

  // A button's request, told in its result line: "<action>…" (or `pending`) while it runs,
  // then what `said` makes of the reply (and `then()`), or "<action> refused: <why>".
  async function act(result, action, request, said, then, pending = `${action}…`) {
    result.classList.remove("bad");
    result.textContent = pending;
    try {
      const reply = await request();
      result.textContent = said(reply);
      then();
    } catch (error) {
      result.textContent = `${action} refused: ${error.message}`;
      result.classList.add("bad");
    }
  }

  // Count what a bulk action would touch (dryRun) and ask; false if nothing or declined.
  async function confirmCount(result, action, filter, question) {
    let count;
    result.textContent = "Counting…";
    try {
      count = (await send("POST", `/jobs/${action}`, { filter, dryRun: true })).matched;
    } catch (error) {
      result.textContent = `Could not count the jobs: ${error.message}`;
      result.classList.add("bad");
      return false;
    }
    if (!count) {
      result.textContent = `No job here can be ${action === "retry" ? "retried" : "cancelled"}.`;
      return false;
    }
    if (!confirm(question(count))) {
      result.textContent = "Nothing done.";
      return false;
    }
    result.textContent = `${action}…`;
    return true;
  }

  const views = [];
  document.addEventListener("DOMContentLoaded", () => views.forEach((view) => view()));
  return {
    meta, refreshMs, getJson, send, el, when, time, tenantQuery, tenantCell, badge, every,
    loaded, loadedItem, getPage, bulk, confirmCount, act, views,
  };
})();
