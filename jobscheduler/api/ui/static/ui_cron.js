// jobscheduler dashboard: the cron templates and their row actions (see ui.js for the helpers it uses).
"use strict";

(function () {
  const { meta, getJson, send, act, el, time, tenantQuery, tenantCell, badge, every, loaded } =
    window.jobscheduler;

  // ---- Cron: a tenant's templates (GET /jobs?cron=true; every tenant's for a principal
  // that sees them all), their schedule in words, next fire time (in UTC and in the
  // template's zone) and last run; a writer pauses, resumes, runs now, edits or deletes
  // them from here.
  const TEMPLATE_ACTIONS = {
    pause: { label: "Pause", statuses: ["pending"], method: "POST" },
    resume: { label: "Resume", statuses: ["paused"], method: "POST" },
    trigger: { label: "Run now", statuses: ["pending", "paused"], method: "POST" },
    delete: { label: "Delete", statuses: ["pending", "paused"], method: "DELETE" },
  };

  // A run is final in these statuses: its template's "Last run" need not be read again.
  const FINAL = ["completed", "dlq", "cancelled", "failed"];

  function cronTemplates() {
    const table = document.getElementById("templates");
    if (!table) return;
    const line = document.getElementById("cron-status");
    const result = document.getElementById("cron-result");
    const canAct = meta("js-can-act") === "yes";
    const scan = Number(table.dataset.scan);
    const tenant = table.dataset.tenant;
    const query = tenantQuery(tenant, { cron: "true", limit: scan });
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
    // Each template's newest run (GET /jobs?templateId=...&limit=1), read again only when
    // the template fired since (its next fire time moved) or its run is not final yet.
    const lastRuns = new Map();
    async function lastRun(job) {
      const known = lastRuns.get(job.id);
      if (known && known.scheduledAt === job.scheduledAt && (!known.run || FINAL.includes(known.run.status))) {
        return known.run;
      }
      const params = new URLSearchParams({ tenantId: job.tenantId, templateId: job.id, limit: 1 });
      try {
        const [run] = await getJson(`/jobs?${params}`);
        lastRuns.set(job.id, { scheduledAt: job.scheduledAt, run: run || null });
        return run || null;
      } catch (_) {
        return known ? known.run : null;
      }
    }
    async function readLastRuns(rows) {
      // At most four reads at a time.
      const runs = new Array(rows.length);
      let next = 0;
      async function worker() {
        while (next < rows.length) {
          const index = next++;
          runs[index] = await lastRun(rows[index]);
        }
      }
      await Promise.all([worker(), worker(), worker(), worker()]);
      return runs;
    }
    function runCell(run) {
      if (!run) return el("td", { class: "muted last-run" }, "none yet");
      return el(
        "td",
        { class: "last-run", "data-run-status": run.status },
        el("a", { href: `/ui/jobs/${run.id}`, title: run.id }, badge(run.status)),
        " ",
        el("span", { class: "mono small-line" }, time(run.updatedAt)),
      );
    }
    // Next fire: in UTC, and in the template's zone below it when that is another zone.
    function nextCell(job) {
      const cell = el("td", { class: "mono next-fire" });
      if (job.status !== "pending") return cell;
      cell.append(el("span", { class: "utc" }, time(job.scheduledAt)));
      if (job.timezone && job.timezone !== "UTC") {
        cell.append(" ", el("span", { class: "local small-line" }, time(job.scheduledAt, job.timezone)));
      }
      return cell;
    }
    function actionsFor(job) {
      const cell = el("div", { class: "row-actions" });
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
      return el("td", { class: "actions-cell" }, cell);
    }
    const refreshNow = every(async () => {
      const rows = await loaded(line, "templates", () => getJson(`/jobs?${query}`));
      if (rows === undefined) return;
      const runs = await readLastRuns(rows);
      const body = el("tbody");
      for (const [index, job] of rows.entries()) {
        body.append(
          el(
            "tr",
            { "data-job-id": job.id, "data-status": job.status, "data-tenant": job.tenantId },
            ...(tenant ? [] : [tenantCell(job.tenantId)]),
            el(
              "td",
              { class: "template-key" },
              el("a", { href: `/ui/jobs/${job.id}` }, job.idempotencyKey),
              // A template declared in code: `schedules sync` changes it, not this page.
              ...(job.managedBy
                ? [" ", el("span", { class: "managed", title: `managed by app ${job.managedBy}` }, "managed by code")]
                : []),
            ),
            el(
              "td",
              { class: "wide schedule" },
              el("span", { class: "words" }, await describe(job)),
              " ",
              el("code", { class: "expression small-line" }, job.cron),
            ),
            el("td", {}, badge(job.status)),
            nextCell(job),
            runCell(runs[index]),
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
      await act(
        result,
        action,
        () => send(spec.method, action === "delete" ? `/jobs/${id}` : `/jobs/${id}/${action}`),
        (job) => (action === "trigger" ? `Started run ${job.id}.` : `Done: the template is ${job.status}.`),
        () => {
          lastRuns.delete(id);
          refreshNow();
        },
        `${spec.label}…`,
      );
    });
  }

  window.jobscheduler.views.push(cronTemplates);
})();
