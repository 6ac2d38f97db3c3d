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

  // ---- Jobs: the table of one tenant's jobs, filtered by the form's values.
  function jobs() {
    const table = document.getElementById("jobs");
    if (!table) return;
    const line = document.getElementById("jobs-status");
    const query = new URLSearchParams({
      tenantId: table.dataset.tenant,
      limit: table.dataset.limit,
    });
    if (table.dataset.status) query.set("status", table.dataset.status);
    bulk(table.dataset.tenant, table.dataset.status);
    every(async () => {
      let rows;
      try {
        rows = await getJson(`/jobs?${query}`);
      } catch (error) {
        line.textContent = `Could not load jobs: ${error.message}`;
        line.classList.add("bad");
        return;
      }
      line.classList.remove("bad");
      const body = el("tbody");
      for (const job of rows) {
        const link = el("a", { href: `/ui/jobs/${job.id}` }, job.id);
        body.append(
          el(
            "tr",
            { "data-job-id": job.id, "data-status": job.status },
            el("td", { class: "mono" }, link),
            el("td", {}, job.jobType),
            el("td", {}, badge(job.status)),
            el("td", { class: "mono" }, when(job.scheduledAt)),
            el("td", { class: "num" }, `${job.attempts}/${job.maxAttempts}`),
            el("td", { class: "wide mono" }, job.idempotencyKey),
          ),
        );
      }
      table.tBodies[0].replaceWith(body);
      line.textContent = rows.length
        ? `${rows.length} job${rows.length === 1 ? "" : "s"} shown (newest first).`
        : "No job matches these filters.";
    });
  }

  // ---- Bulk actions on everything matching the status filter (not only this page), with
  // a confirmation that says how many jobs (from GET /stats) it will touch.
  function bulk(tenant, status) {
    const box = document.getElementById("bulk");
    if (!box || !status) return;
    const result = document.getElementById("bulk-result");
    const offers = { retry: ["dlq", "cancelled"], cancel: ["pending", "queued", "claimed", "running"] };
    for (const button of box.querySelectorAll("button[data-bulk]")) {
      button.hidden = !offers[button.dataset.bulk].includes(status);
    }
    box.addEventListener("click", async (event) => {
      const action = event.target.closest("button[data-bulk]")?.dataset.bulk;
      if (!action) return;
      let count;
      try {
        const stats = await getJson(`/stats?${new URLSearchParams({ tenantId: tenant })}`);
        count = (stats.byStatus || {})[status] || 0;
      } catch (error) {
        result.textContent = `Could not count the jobs: ${error.message}`;
        result.classList.add("bad");
        return;
      }
      if (!confirm(`${action === "retry" ? "Retry" : "Cancel"} all ${count} ${status} jobs of tenant ${tenant}?`)) return;
      result.textContent = `${action}…`;
      result.classList.remove("bad");
      try {
        const reply = await send("POST", `/jobs/${action}`, { filter: { tenantId: tenant, status } });
        result.textContent = `${reply.changed} of ${reply.matched} matching jobs changed.`;
      } catch (error) {
        result.textContent = `${action} refused: ${error.message}`;
        result.classList.add("bad");
      }
    });
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
      const errorBox = document.getElementById("error-box");
      errorBox.hidden = !job.lastError;
      document.getElementById("last-error").textContent = job.lastError || "";
      const cronBox = document.getElementById("cron-box");
      cronBox.hidden = !(job.cron && job.status === "pending");
      if (!cronBox.hidden) {
        const words = document.getElementById("cron-words");
        if (!words.dataset.cron || words.dataset.cron !== job.cron) {
          try {
            const query = new URLSearchParams({ cron: job.cron, timezone: job.timezone || "UTC" });
            words.textContent = (await getJson(`/ui/describe?${query}`)).text;
            words.dataset.cron = job.cron;
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

  // ---- Dead letters: a tenant's dlq jobs grouped by job type and error message.
  function deadLetters() {
    const table = document.getElementById("dlq");
    if (!table) return;
    const line = document.getElementById("dlq-status");
    const scan = Number(table.dataset.scan);
    const query = new URLSearchParams({ tenantId: table.dataset.tenant, status: "dlq", limit: scan });
    every(async () => {
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
        const group = groups.get(key) || { jobType: job.jobType, error, count: 0, oldest: null, newest: null };
        group.count += 1;
        if (!group.oldest || job.updatedAt < group.oldest) group.oldest = job.updatedAt;
        if (!group.newest || job.updatedAt > group.newest) group.newest = job.updatedAt;
        groups.set(key, group);
      }
      const sorted = [...groups.values()].sort((a, b) => b.count - a.count || a.jobType.localeCompare(b.jobType));
      const body = el("tbody");
      for (const group of sorted) {
        const filter = new URLSearchParams({ tenantId: table.dataset.tenant, status: "dlq" });
        body.append(
          el(
            "tr",
            { "data-job-type": group.jobType, "data-count": group.count },
            el("td", {}, el("a", { href: `/ui/jobs?${filter}` }, group.jobType)),
            el("td", { class: "wide error-text", title: group.error }, group.error),
            el("td", { class: "num" }, group.count),
            el("td", { class: "mono" }, when(group.oldest)),
            el("td", { class: "mono" }, when(group.newest)),
          ),
        );
      }
      table.tBodies[0].replaceWith(body);
      const partial = rows.length === scan ? ` (the newest ${scan} only)` : "";
      line.textContent = rows.length
        ? `${rows.length} dead letter${rows.length === 1 ? "" : "s"} in ${groups.size} group${groups.size === 1 ? "" : "s"}${partial}.`
        : "No dead letters.";
    });
  }

  // ---- Cron: a tenant's templates, their schedule in words and next fire time.
  function cronTemplates() {
    const table = document.getElementById("templates");
    if (!table) return;
    const line = document.getElementById("cron-status");
    const scan = Number(table.dataset.scan);
    const query = new URLSearchParams({ tenantId: table.dataset.tenant, limit: scan });
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
    every(async () => {
      let rows;
      try {
        rows = await getJson(`/jobs?${query}`);
      } catch (error) {
        line.textContent = `Could not load templates: ${error.message}`;
        line.classList.add("bad");
        return;
      }
      line.classList.remove("bad");
      const templates = rows.filter((job) => job.cron);
      const body = el("tbody");
      for (const job of templates) {
        body.append(
          el(
            "tr",
            { "data-job-id": job.id, "data-status": job.status },
            el("td", {}, el("a", { href: `/ui/jobs/${job.id}` }, job.idempotencyKey)),
            el("td", { class: "mono" }, job.cron),
            el("td", { class: "wide" }, await describe(job)),
            el("td", {}, badge(job.status)),
            el("td", { class: "mono" }, job.status === "pending" ? when(job.scheduledAt) : ""),
          ),
        );
      }
      table.tBodies[0].replaceWith(body);
      const partial = rows.length === scan ? ` among the newest ${scan} jobs` : "";
      line.textContent = templates.length
        ? `${templates.length} template${templates.length === 1 ? "" : "s"}${partial}.`
        : `No cron template${partial}.`;
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    jobs();
    detail();
    deadLetters();
    cronTemplates();
  });
})();
