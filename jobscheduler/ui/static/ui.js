// jobscheduler dashboard: fills the server-rendered shells from the same-origin JSON API and
// refreshes them in place. Data is written with textContent only (never as HTML).
"use strict";

(function () {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content;
  const refreshMs = 1000 * Number(meta("js-refresh-seconds") || 5);

  async function getJson(url) {
    const response = await fetch(url, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const message = body && body.error ? body.error : `HTTP ${response.status}`;
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return body;
  }

  // A write to the JSON API: same origin, the session's CSRF token in its header.
  async function send(method, url, body) {
    const csrf = document.querySelector('meta[name="js-csrf"]');
    const headers = { Accept: "application/json" };
    if (csrf && csrf.content) headers[csrf.dataset.header] = csrf.content;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(url, {
      method,
      credentials: "same-origin",
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let reply = null;
    try {
      reply = await response.json();
    } catch (_) {
      reply = null;
    }
    if (!response.ok) {
      throw new Error(reply && reply.error ? reply.error : `HTTP ${response.status}`);
    }
    return reply;
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

  function when(text) {
    if (!text) return "";
    const date = new Date(text);
    return Number.isNaN(date.getTime()) ? text : date.toISOString().replace(".000Z", "Z");
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

  // A page of GET /jobs: the rows and the cursor of the next page (from its Link header).
  async function getPage(url) {
    const response = await fetch(url, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      throw new Error(body && body.error ? body.error : `HTTP ${response.status}`);
    }
    const link = response.headers.get("Link") || "";
    const match = link.match(/<([^>]+)>;\s*rel="next"/);
    const next = match ? new URL(match[1], location.href).searchParams.get("cursor") : null;
    return { rows: body, next };
  }

  // ---- Jobs: the table of one tenant's jobs, filtered by the form's values, one cursor
  // page at a time; a writer selects rows (or takes everything matching) for bulk actions.
  function jobs() {
    const table = document.getElementById("jobs");
    if (!table) return;
    const line = document.getElementById("jobs-status");
    const selectable = Boolean(document.getElementById("select-page"));
    const selected = new Set();
    // The cursors of the pages before this one (the first page has none).
    const previous = [];
    let cursor = null;
    let next = null;
    let shown = [];
    const pager = {
      first: document.getElementById("page-first"),
      prev: document.getElementById("page-prev"),
      next: document.getElementById("page-next"),
      number: document.getElementById("page-number"),
    };

    function syncSelection() {
      const count = document.getElementById("selected-count");
      if (count) count.textContent = `${selected.size} selected`;
      for (const button of document.querySelectorAll('#bulk button[data-scope="selection"]')) {
        button.disabled = selected.size === 0;
      }
      const all = document.getElementById("select-page");
      if (all) {
        const onPage = shown.filter((id) => selected.has(id)).length;
        all.checked = shown.length > 0 && onPage === shown.length;
        all.indeterminate = onPage > 0 && onPage < shown.length;
      }
    }

    const refreshNow = every(async () => {
      const query = new URLSearchParams(table.dataset.query);
      if (cursor) query.set("cursor", cursor);
      let page;
      try {
        page = await getPage(`/jobs?${query}`);
      } catch (error) {
        line.textContent = `Could not load jobs: ${error.message}`;
        line.classList.add("bad");
        return;
      }
      line.classList.remove("bad");
      next = page.next;
      shown = page.rows.map((job) => job.id);
      const body = el("tbody");
      for (const job of page.rows) {
        const link = el("a", { href: `/ui/jobs/${job.id}` }, job.id);
        const cells = [];
        if (selectable) {
          const box = el("input", {
            type: "checkbox",
            class: "pick-row",
            "data-job-id": job.id,
            "aria-label": `Select job ${job.id}`,
          });
          box.checked = selected.has(job.id);
          cells.push(el("td", { class: "pick" }, box));
        }
        body.append(
          el(
            "tr",
            { "data-job-id": job.id, "data-status": job.status },
            ...cells,
            el("td", { class: "mono" }, link),
            el("td", {}, job.jobType),
            el("td", {}, badge(job.status)),
            el("td", { class: "mono created" }, when(job.createdAt)),
            el("td", { class: "mono" }, when(job.scheduledAt)),
            el("td", { class: "num attempts" }, `${job.attempts}/${job.maxAttempts}`),
            el("td", { class: "wide mono" }, job.idempotencyKey),
          ),
        );
      }
      // Keep keyboard focus on a checkbox that the refresh replaces.
      const focused = document.activeElement?.classList?.contains("pick-row")
        ? document.activeElement.dataset.jobId
        : null;
      table.tBodies[0].replaceWith(body);
      if (focused) body.querySelector(`input[data-job-id="${focused}"]`)?.focus();
      const number = previous.length + 1;
      pager.number.textContent = `Page ${number}`;
      pager.first.disabled = pager.prev.disabled = number === 1;
      pager.next.disabled = !next;
      line.textContent = page.rows.length
        ? `${page.rows.length} job${page.rows.length === 1 ? "" : "s"} on this page${next ? "; more on the next" : ""}.`
        : "No job matches these filters.";
      syncSelection();
    });

    function go(to, stack) {
      cursor = to;
      previous.length = 0;
      previous.push(...stack);
      pager.first.disabled = pager.prev.disabled = pager.next.disabled = true;
      refreshNow();
    }
    pager.next.addEventListener("click", () => next && go(next, [...previous, cursor]));
    pager.prev.addEventListener("click", () => go(previous[previous.length - 1], previous.slice(0, -1)));
    pager.first.addEventListener("click", () => go(null, []));

    if (selectable) {
      table.addEventListener("change", (event) => {
        const box = event.target;
        if (box.id === "select-page") {
          for (const id of shown) {
            if (box.checked) selected.add(id);
            else selected.delete(id);
          }
          for (const row of table.querySelectorAll("input.pick-row")) row.checked = box.checked;
        } else if (box.classList.contains("pick-row")) {
          if (box.checked) selected.add(box.dataset.jobId);
          else selected.delete(box.dataset.jobId);
        }
        syncSelection();
      });
    }
    bulk(table, selected, () => {
      selected.clear();
      syncSelection();
      refreshNow();
    });
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
          : `${verb} ${count} jobs matching these filters (tenant ${filter.tenantId})?`,
      );
      if (!ok) return;
      try {
        const reply = await send("POST", `/jobs/${action}`, { filter: target });
        result.textContent = `${reply.changed} of ${reply.matched} matching jobs changed.`;
        done();
      } catch (error) {
        result.textContent = `${action} refused: ${error.message}`;
        result.classList.add("bad");
      }
    });
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

  // ---- Job detail: every field, the payload, a template's next fire times.
  const FIELDS = [
    ["id", "Id"], ["tenantId", "Tenant"], ["jobType", "Type"], ["status", "Status"],
    ["idempotencyKey", "Idempotency key"], ["priority", "Priority"],
    ["scheduledAt", "Scheduled"], ["attempts", "Attempts"], ["maxAttempts", "Max attempts"],
    ["cron", "Cron"], ["timezone", "Time zone"], ["claimedBy", "Claimed by"],
    ["claimedAt", "Claimed at"], ["createdAt", "Created"], ["updatedAt", "Updated"],
  ];

  // The attempt history, oldest first: outcome, worker, times, error and traceback.
  function timeline(attempts) {
    const list = el("ol", { class: "timeline", id: "attempts" });
    if (!attempts.length) list.append(el("li", { class: "muted" }, "No attempt yet."));
    for (const attempt of attempts) {
      const item = el(
        "li",
        { "data-outcome": attempt.outcome },
        el("span", { class: `badge o-${attempt.outcome}` }, `#${attempt.number} ${attempt.outcome}`),
        " ",
        el("span", { class: "mono" }, `${when(attempt.startedAt) || "?"} → ${when(attempt.finishedAt)}`),
        attempt.worker ? el("span", { class: "muted" }, ` on ${attempt.worker}`) : "",
      );
      if (attempt.errorType || attempt.errorMessage) {
        item.append(
          el("div", { class: "error" }, `${attempt.errorType || "error"}: ${attempt.errorMessage || ""}`),
        );
      }
      if (attempt.traceback) {
        item.append(
          el("details", {}, el("summary", {}, "Traceback"), el("pre", { class: "error" }, attempt.traceback)),
        );
      }
      list.append(item);
    }
    return list;
  }

  function detail() {
    const box = document.getElementById("job");
    if (!box) return;
    const id = box.dataset.jobId;
    const problem = document.getElementById("job-error");
    const actions = document.getElementById("actions");
    // What each button sends (the management routes), and its question, if any.
    const ROUTES = {
      cancel: ["POST", "cancel"],
      retry: ["POST", "retry"],
      pause: ["POST", "pause"],
      resume: ["POST", "resume"],
      trigger: ["POST", "trigger"],
      delete: ["DELETE", ""],
    };
    let current = null;
    let refreshNow = () => {};
    if (actions) {
      const result = document.getElementById("action-result");
      actions.addEventListener("click", async (event) => {
        const action = event.target.closest("button[data-action]")?.dataset.action;
        if (!action) return;
        if (action === "delete" && !confirm("Delete this template? Its past runs stay.")) return;
        const [method, path] = ROUTES[action];
        result.textContent = `${action}…`;
        result.classList.remove("bad");
        try {
          const job = await send(method, path ? `/jobs/${id}/${path}` : `/jobs/${id}`);
          result.textContent =
            action === "trigger" ? `Started run ${job.id}.` : `Done: the job is ${job.status}.`;
          refreshNow();
        } catch (error) {
          result.textContent = `${action} refused: ${error.message}`;
          result.classList.add("bad");
        }
      });
      const edit = document.getElementById("edit-payload");
      const editError = document.getElementById("edit-error");
      document.getElementById("edit-send").addEventListener("click", async () => {
        let payload;
        try {
          payload = JSON.parse(edit.value);
        } catch (error) {
          editError.textContent = `Not JSON: ${error.message}`;
          return;
        }
        if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
          editError.textContent = "The payload must be a JSON object.";
          return;
        }
        editError.textContent = "";
        try {
          const job = await send("POST", `/jobs/${id}/retry`, { payload });
          editError.textContent = "";
          result.textContent = `Retried with the new payload: the job is ${job.status}.`;
          result.classList.remove("bad");
          refreshNow();
        } catch (error) {
          editError.textContent = error.message;
        }
      });
      templateEditor(id, () => refreshNow());
    }
    refreshNow = every(async () => {
      let job;
      try {
        job = await getJson(`/jobs/${id}`);
      } catch (error) {
        problem.textContent = error.status === 404 ? "No such job." : `Could not load: ${error.message}`;
        problem.hidden = false;
        return;
      }
      problem.hidden = true;
      // Offer only what the job's status allows (the API re-checks it).
      const template = Boolean(job.cron);
      const offers = template
        ? { pause: ["pending"], resume: ["paused"], trigger: ["pending", "paused"],
            delete: ["pending", "paused"], retry: ["dlq", "cancelled"] }
        : { cancel: ["pending", "queued", "claimed", "running"], retry: ["dlq", "cancelled"] };
      for (const button of document.querySelectorAll("button[data-action]")) {
        button.hidden = !(offers[button.dataset.action] || []).includes(job.status);
      }
      const editBox = document.getElementById("edit-retry");
      if (editBox) {
        editBox.hidden = template || !["dlq", "cancelled"].includes(job.status);
        const edit = document.getElementById("edit-payload");
        // Fill it once per job state; never overwrite what the user is typing.
        if (current !== job.updatedAt && document.activeElement !== edit) {
          edit.value = JSON.stringify(job.payload, null, 2);
        }
      }
      fillTemplateForm(job, current);
      current = job.updatedAt;
      const status = document.getElementById("job-status");
      status.textContent = job.status;
      status.className = `badge s-${job.status}`;
      const fields = document.createElement("dl");
      fields.className = "fields";
      fields.id = "fields";
      for (const [key, label] of FIELDS) {
        if (job[key] === undefined || job[key] === null) continue;
        const value = key.endsWith("At") ? when(job[key]) : String(job[key]);
        fields.append(el("dt", {}, label), el("dd", { "data-field": key }, value));
      }
      if (job.templateId) {
        fields.append(
          el("dt", {}, "Template"),
          el("dd", { "data-field": "templateId" }, el("a", { href: `/ui/jobs/${job.templateId}` }, job.templateId)),
        );
      }
      document.getElementById("fields").replaceWith(fields);
      document.getElementById("payload").textContent = JSON.stringify(job.payload, null, 2);
      const resultBox = document.getElementById("result-box");
      resultBox.hidden = job.result === undefined;
      document.getElementById("result").textContent =
        job.result === undefined ? "" : JSON.stringify(job.result, null, 2);
      try {
        const history = await getJson(`/jobs/${id}/attempts`);
        // Keep an open traceback open: replace the list only when it changed.
        const fresh = timeline(history.attempts);
        const current = document.getElementById("attempts");
        if (current.textContent !== fresh.textContent) current.replaceWith(fresh);
      } catch (_) {
        // An older server without attempt history: the list stays as it is.
      }
      if (template) await ledger(id);
      const errorBox = document.getElementById("error-box");
      errorBox.hidden = !job.lastError;
      document.getElementById("last-error").textContent = job.lastError || "";
      const cronBox = document.getElementById("cron-box");
      cronBox.hidden = !(job.cron && job.status === "pending");
      if (!cronBox.hidden) {
        const words = document.getElementById("cron-words");
        const schedule = `${job.cron} ${job.timezone || "UTC"}`;
        if (words.dataset.cron !== schedule) {
          try {
            const query = new URLSearchParams({ cron: job.cron, timezone: job.timezone || "UTC" });
            words.textContent = (await getJson(`/ui/describe?${query}`)).text;
            words.dataset.cron = schedule;
          } catch (_) {
            words.textContent = job.cron;
          }
        }
        try {
          const next = await getJson(`/jobs/${id}/next?count=5`);
          const list = el("ol", { class: "fires", id: "fires" });
          for (const fire of next.fireTimes || []) {
            list.append(el("li", { class: "mono" }, `${when(fire.at)} (${fire.local})`));
          }
          document.getElementById("fires").replaceWith(list);
        } catch (_) {
          cronBox.hidden = true;
        }
      }
    });
  }

  // ---- A template's editor (PATCH /jobs/{id} with the fields that changed) and ledger.
  let templateShown = null;

  function fillTemplateForm(job, seenVersion) {
    const box = document.getElementById("edit-template");
    if (!box) return;
    box.hidden = !(job.cron && ["pending", "paused"].includes(job.status));
    if (box.hidden) return;
    if (location.hash === "#edit-template" && !box.dataset.opened) {
      box.open = true;
      box.dataset.opened = "yes";
    }
    templateShown = job;
    // Fill it once per template version; never overwrite what the user is typing.
    if (seenVersion === job.updatedAt || box.contains(document.activeElement)) return;
    document.getElementById("t-cron").value = job.cron;
    document.getElementById("t-timezone").value = job.timezone || "UTC";
    document.getElementById("t-priority").value = job.priority;
    document.getElementById("t-max-attempts").value = job.maxAttempts;
    document.getElementById("t-payload").value = JSON.stringify(job.payload, null, 2);
  }

  function templateEditor(id, refreshNow) {
    const form = document.getElementById("template-form");
    if (!form) return;
    const problem = document.getElementById("template-error");
    const result = document.getElementById("action-result");
    function fail(field, message) {
      problem.textContent = message;
      for (const input of form.querySelectorAll("input, textarea")) {
        input.removeAttribute("aria-invalid");
      }
      if (field) {
        const input = form.elements[field];
        if (input) {
          input.setAttribute("aria-invalid", "true");
          input.focus();
        }
      }
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const job = templateShown;
      if (!job) return;
      const changes = {};
      const cron = form.elements.cron.value.trim();
      if (cron !== job.cron) changes.cron = cron;
      const zone = form.elements.timezone.value.trim();
      if (zone !== (job.timezone || "UTC")) changes.timezone = zone;
      for (const [name, current] of [["priority", job.priority], ["maxAttempts", job.maxAttempts]]) {
        const raw = form.elements[name].value.trim();
        const value = Number(raw);
        if (raw === "" || !Number.isInteger(value)) return fail(name, `${name}: must be an integer`);
        if (value !== current) changes[name] = value;
      }
      let payload;
      try {
        payload = JSON.parse(form.elements.payload.value);
      } catch (error) {
        return fail("payload", `payload: not JSON (${error.message})`);
      }
      if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
        return fail("payload", "payload: must be a JSON object");
      }
      if (JSON.stringify(payload) !== JSON.stringify(job.payload)) changes.payload = payload;
      if (!Object.keys(changes).length) return fail(null, "Nothing changed.");
      try {
        const saved = await send("PATCH", `/jobs/${id}`, changes);
        fail(null, "");
        result.classList.remove("bad");
        result.textContent = `Saved: next fire ${when(saved.scheduledAt)}.`;
        refreshNow();
      } catch (error) {
        // The API names the field first ("cron: ...", "timezone: ...").
        const field = Object.keys(changes).find((name) => error.message.startsWith(name));
        fail(field || null, error.message);
      }
    });
  }

  // The template's recent fire times and what became of each (GET /jobs/{id}/occurrences).
  async function ledger(id) {
    const box = document.getElementById("ledger-box");
    let reply;
    try {
      reply = await getJson(`/jobs/${id}/occurrences?limit=20`);
    } catch (_) {
      box.hidden = true;
      return;
    }
    box.hidden = false;
    const body = el("tbody");
    if (!reply.occurrences.length) {
      body.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "No fire time yet.")));
    }
    for (const item of reply.occurrences) {
      const outcome = item.reason ? `${item.status} (${item.reason})` : item.status;
      const run = item.runId ? el("a", { href: `/ui/jobs/${item.runId}` }, item.runId) : "";
      const runStatus = item.run ? badge(item.run.status) : item.run === null ? "deleted" : "";
      body.append(
        el(
          "tr",
          { "data-fire-at": item.fireAt, "data-outcome": item.status },
          el("td", { class: "mono" }, when(item.fireAt)),
          el("td", { class: "mono" }, item.fireAtLocal),
          el("td", {}, outcome),
          el("td", { class: "mono" }, run),
          el("td", {}, runStatus),
        ),
      );
    }
    const table = document.getElementById("ledger");
    if (table.tBodies[0].textContent !== body.textContent) table.tBodies[0].replaceWith(body);
  }

  // ---- Dead letters: a tenant's dlq jobs grouped by job type and error message.
  function deadLetters() {
    const table = document.getElementById("dlq");
    if (!table) return;
    const line = document.getElementById("dlq-status");
    const scan = Number(table.dataset.scan);
    const query = new URLSearchParams({ tenantId: table.dataset.tenant, status: "dlq", limit: scan });
    const canAct = meta("js-can-act") === "yes";
    const result = document.getElementById("dlq-result");
    // The ids of each group as last shown ("retry this group" retries exactly those).
    let members = new Map();
    const refreshNow = every(async () => {
      let rows;
      try {
        rows = await getJson(`/jobs?${query}`);
      } catch (error) {
        line.textContent = `Could not load dead letters: ${error.message}`;
        line.classList.add("bad");
        return;
      }
      line.classList.remove("bad");
      const groups = new Map();
      for (const job of rows) {
        const error = (job.lastError || "(no error recorded)").split("\n")[0];
        const key = `${job.jobType}\u0000${error}`;
        const group = groups.get(key) || { jobType: job.jobType, error, count: 0, oldest: null, newest: null, ids: [] };
        group.count += 1;
        group.ids.push(job.id);
        if (!group.oldest || job.updatedAt < group.oldest) group.oldest = job.updatedAt;
        if (!group.newest || job.updatedAt > group.newest) group.newest = job.updatedAt;
        groups.set(key, group);
      }
      const sorted = [...groups.values()].sort((a, b) => b.count - a.count || a.jobType.localeCompare(b.jobType));
      const body = el("tbody");
      members = new Map();
      sorted.forEach((group, index) => {
        const filter = new URLSearchParams({ tenantId: table.dataset.tenant, status: "dlq", jobType: group.jobType });
        members.set(String(index), group);
        body.append(
          el(
            "tr",
            { "data-job-type": group.jobType, "data-count": group.count, "data-group": index },
            el("td", {}, el("a", { href: `/ui/jobs?${filter}` }, group.jobType)),
            el("td", { class: "wide error-text", title: group.error }, group.error),
            el("td", { class: "num" }, group.count),
            el("td", { class: "mono" }, when(group.oldest)),
            el("td", { class: "mono" }, when(group.newest)),
            ...(canAct
              ? [el("td", {}, el("button", { type: "button", "data-retry-group": index, class: "small" }, "Retry group"))]
              : []),
          ),
        );
      });
      const focused = document.activeElement?.dataset?.retryGroup;
      table.tBodies[0].replaceWith(body);
      if (focused !== undefined) body.querySelector(`button[data-retry-group="${focused}"]`)?.focus();
      const partial = rows.length === scan ? ` (the newest ${scan} only)` : "";
      line.textContent = rows.length
        ? `${rows.length} dead letter${rows.length === 1 ? "" : "s"} in ${groups.size} group${groups.size === 1 ? "" : "s"}${partial}.`
        : "No dead letters.";
    });
    // "Retry this group": the group's jobs by id (as listed), still in dlq at the time.
    table.addEventListener("click", async (event) => {
      const button = event.target.closest("button[data-retry-group]");
      if (!button) return;
      const group = members.get(button.dataset.retryGroup);
      if (!group) return;
      const filter = { tenantId: table.dataset.tenant, status: "dlq", ids: group.ids };
      result.classList.remove("bad");
      const ok = await confirmCount(result, "retry", filter, (count) =>
        `Retry ${count} ${group.jobType} dead letter${count === 1 ? "" : "s"} that failed with "${group.error}"?`,
      );
      if (!ok) return;
      try {
        const reply = await send("POST", "/jobs/retry", { filter });
        result.textContent = `${reply.changed} of ${reply.matched} dead letters retried.`;
        refreshNow();
      } catch (error) {
        result.textContent = `retry refused: ${error.message}`;
        result.classList.add("bad");
      }
    });
  }

  // ---- Cron: a tenant's templates (GET /jobs?cron=true), their schedule in words and
  // next fire time; a writer pauses, resumes, runs now, edits or deletes them from here.
  const TEMPLATE_ACTIONS = {
    pause: { label: "Pause", statuses: ["pending"], method: "POST" },
    resume: { label: "Resume", statuses: ["paused"], method: "POST" },
    trigger: { label: "Run now", statuses: ["pending", "paused"], method: "POST" },
    delete: { label: "Delete", statuses: ["pending", "paused"], method: "DELETE" },
  };

  function cronTemplates() {
    const table = document.getElementById("templates");
    if (!table) return;
    const line = document.getElementById("cron-status");
    const result = document.getElementById("cron-result");
    const canAct = meta("js-can-act") === "yes";
    const scan = Number(table.dataset.scan);
    const query = new URLSearchParams({ tenantId: table.dataset.tenant, cron: "true", limit: scan });
    const words = new Map();
    async function describe(job) {
      const key = `${job.cron}\u0000${job.timezone || "UTC"}`;
      if (!words.has(key)) {
        const params = new URLSearchParams({ cron: job.cron, timezone: job.timezone || "UTC" });
        try {
          words.set(key, (await getJson(`/ui/describe?${params}`)).text);
        } catch (_) {
          words.set(key, "");
        }
      }
      return words.get(key);
    }
    function actionsFor(job) {
      const cell = el("td", { class: "row-actions" });
      for (const [action, spec] of Object.entries(TEMPLATE_ACTIONS)) {
        if (!spec.statuses.includes(job.status)) continue;
        cell.append(
          el(
            "button",
            {
              type: "button",
              "data-action": action,
              "data-job-id": job.id,
              class: action === "delete" ? "danger small" : "small",
            },
            spec.label,
          ),
        );
      }
      if (["pending", "paused"].includes(job.status)) {
        cell.append(el("a", { href: `/ui/jobs/${job.id}#edit-template`, class: "small" }, "Edit"));
      }
      return cell;
    }
    const refreshNow = every(async () => {
      let rows;
      try {
        rows = await getJson(`/jobs?${query}`);
      } catch (error) {
        line.textContent = `Could not load templates: ${error.message}`;
        line.classList.add("bad");
        return;
      }
      line.classList.remove("bad");
      const body = el("tbody");
      for (const job of rows) {
        body.append(
          el(
            "tr",
            { "data-job-id": job.id, "data-status": job.status },
            el("td", {}, el("a", { href: `/ui/jobs/${job.id}` }, job.idempotencyKey)),
            el("td", { class: "mono" }, job.cron),
            el("td", { class: "wide" }, await describe(job)),
            el("td", {}, badge(job.status)),
            el("td", { class: "mono" }, job.status === "pending" ? when(job.scheduledAt) : ""),
            ...(canAct ? [actionsFor(job)] : []),
          ),
        );
      }
      const focused = document.activeElement?.closest?.("#templates") ? document.activeElement : null;
      const focusKey = focused ? [focused.dataset.jobId, focused.dataset.action] : null;
      table.tBodies[0].replaceWith(body);
      if (focusKey) {
        body.querySelector(`button[data-job-id="${focusKey[0]}"][data-action="${focusKey[1]}"]`)?.focus();
      }
      const partial = rows.length === scan ? ` (the newest ${scan})` : "";
      line.textContent = rows.length
        ? `${rows.length} template${rows.length === 1 ? "" : "s"}${partial}.`
        : "No cron template.";
    });
    table.addEventListener("click", async (event) => {
      const button = event.target.closest("button[data-action]");
      if (!button) return;
      const action = button.dataset.action;
      const id = button.dataset.jobId;
      if (action === "delete" && !confirm("Delete this template? Its past runs stay.")) return;
      const spec = TEMPLATE_ACTIONS[action];
      result.classList.remove("bad");
      result.textContent = `${spec.label}…`;
      try {
        const job = await send(spec.method, action === "delete" ? `/jobs/${id}` : `/jobs/${id}/${action}`);
        result.textContent =
          action === "trigger" ? `Started run ${job.id}.` : `Done: the template is ${job.status}.`;
        refreshNow();
      } catch (error) {
        result.textContent = `${action} refused: ${error.message}`;
        result.classList.add("bad");
      }
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    jobs();
    detail();
    deadLetters();
    cronTemplates();
  });
})();
