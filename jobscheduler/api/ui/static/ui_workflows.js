// jobscheduler dashboard: the Workflows list (see ui.js for the helpers it uses; a
// workflow's own page, its DAG, is ui_dag.js).
"use strict";

(function () {
  const { getJson, el, time, tenantQuery, tenantCell, badge, every, loaded } = window.jobscheduler;

  // ---- Workflows: a tenant's workflows (GET /workflows; every tenant's for a principal
  // that sees them all), newest first, filtered by status and key prefix, refreshed live.
  function workflows() {
    const table = document.getElementById("workflows");
    if (!table) return;
    const line = document.getElementById("workflows-status");
    const tenant = table.dataset.tenant;
    const here = new URLSearchParams(location.search);
    const fields = { limit: table.dataset.scan };
    for (const name of ["status", "idempotencyKeyPrefix"]) {
      const value = here.get(name);
      if (value) fields[name] = value;
      const input = document.querySelector(`#workflow-filters [name="${name}"]`);
      if (input && value) input.value = value;
    }
    const query = tenantQuery(tenant, fields);
    every(async () => {
      const rows = await loaded(line, "workflows", () => getJson(`/workflows?${query}`));
      if (rows === undefined) return;
      const scan = Number(table.dataset.scan);
      line.textContent = !rows.length
        ? "No workflow yet."
        : rows.length >= scan
          ? `The newest ${rows.length} workflows (filter to find older ones).`
          : `${rows.length} workflow${rows.length === 1 ? "" : "s"}, newest first.`;
      const body = el("tbody");
      for (const workflow of rows) {
        body.append(
          el(
            "tr",
            { "data-workflow-id": workflow.id, "data-status": workflow.status },
            ...(tenant ? [] : [tenantCell(workflow.tenantId)]),
            el(
              "td",
              { class: "workflow-key" },
              el("a", { href: `/ui/workflows/${workflow.id}`, title: workflow.id }, workflow.idempotencyKey),
            ),
            el("td", {}, badge(workflow.status)),
            el("td", { class: "number" }, String(workflow.stepCount)),
            el("td", { class: "mono" }, time(workflow.createdAt)),
            el("td", { class: "mono" }, time(workflow.finishedAt)),
          ),
        );
      }
      table.tBodies[0].replaceWith(body);
    });
  }

  window.jobscheduler.views.push(workflows);
})();
