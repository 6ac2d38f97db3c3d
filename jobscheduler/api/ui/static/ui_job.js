// jobscheduler dashboard: a job's detail page, a template's editor and ledger (see ui.js for the helpers it uses).
"use strict";

(function () {
  const { getJson, send, act, el, when, badge, every, loadedItem } = window.jobscheduler;

  // ---- Job detail: every field, the payload, a template's next fire times.
  const FIELDS = [
    ["id", "Id"], ["tenantId", "Tenant"], ["jobType", "Type"], ["status", "Status"],
    ["held", "Held back"], ["idempotencyKey", "Idempotency key"], ["priority", "Priority"],
    ["concurrencyKey", "Concurrency key"], ["fairnessKey", "Fairness key"],
    ["scheduledAt", "Scheduled"], ["attempts", "Attempts"], ["maxAttempts", "Max attempts"],
    ["cron", "Cron"], ["timezone", "Time zone"], ["claimedBy", "Claimed by"],
    ["claimedAt", "Claimed at"], ["createdAt", "Created"], ["updatedAt", "Updated"],
  ];

  // The attempt history, oldest first: outcome, worker, times, error and traceback. A
  // retried job's later runs (1, 2, ...) count their attempts from #1 again.
  function timeline(attempts) {
    const list = el("ol", { class: "timeline", id: "attempts" });
    if (!attempts.length) list.append(el("li", { class: "muted" }, "No attempt yet."));
    for (const attempt of attempts) {
      const run = attempt.run ? `run ${attempt.run} ` : "";
      const item = el(
        "li",
        { "data-outcome": attempt.outcome, "data-run": String(attempt.run || 0) },
        el("span", { class: `badge o-${attempt.outcome}` }, `${run}#${attempt.number} ${attempt.outcome}`),
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
        await act(
          result,
          action,
          () => send(method, path ? `/jobs/${id}/${path}` : `/jobs/${id}`),
          (job) => (action === "trigger" ? `Started run ${job.id}.` : `Done: the job is ${job.status}.`),
          () => refreshNow(),
        );
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
      const job = await loadedItem(problem, "job", `/jobs/${id}`);
      if (job === undefined) return;
      // Offer only what the job's status allows (the API re-checks it).
      const template = Boolean(job.cron);
      const offers = template
        ? { pause: ["pending"], resume: ["paused"], trigger: ["pending", "paused"],
            delete: ["pending", "paused"], retry: ["dlq", "cancelled"] }
        : { cancel: ["waiting", "pending", "queued", "claimed", "running"], retry: ["dlq", "cancelled"] };
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
      if (job.workflowId) {
        // A workflow step: its workflow's page draws where it stands among the others.
        fields.append(
          el("dt", {}, "Workflow"),
          el(
            "dd",
            { "data-field": "workflowId" },
            el("a", { href: `/ui/workflows/${job.workflowId}` }, job.workflowId),
            ` (step ${job.step})`,
          ),
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
      if (template) await ledger(id, job.timezone || "UTC");
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
          const zone = next.timezone || job.timezone || "UTC";
          for (const fire of next.fireTimes || []) {
            const item = el("li", { class: "mono", "data-at": fire.at }, when(fire.at));
            if (zone !== "UTC") item.append(el("span", { class: "muted" }, ` · ${when(fire.at, zone)}`));
            list.append(item);
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
  async function ledger(id, zone) {
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
          el("td", { class: "mono" }, when(item.fireAt, zone)),
          el("td", {}, outcome),
          el("td", { class: "mono" }, run),
          el("td", {}, runStatus),
        ),
      );
    }
    const table = document.getElementById("ledger");
    if (table.tBodies[0].textContent !== body.textContent) table.tBodies[0].replaceWith(body);
  }

  window.jobscheduler.views.push(detail);
})();
