// jobscheduler dashboard: the cron templates and their row actions (see ui.js for the helpers it uses).
"use strict";

(function () {
  const { meta, getJson, send, el, when, badge, every } = window.jobscheduler;

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
            el(
              "td",
              {},
              el("a", { href: `/ui/jobs/${job.id}` }, job.idempotencyKey),
              // A template declared in code: `schedules sync` changes it, not this page.
              ...(job.managedBy
                ? [" ", el("span", { class: "managed", title: `managed by app ${job.managedBy}` }, "managed by code")]
                : []),
            ),
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

  window.jobscheduler.views.push(cronTemplates);
})();
