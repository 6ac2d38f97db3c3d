// jobscheduler dashboard: dead letters grouped by job type and error (see ui.js for the helpers it uses).
"use strict";

(function () {
  const { meta, send, act, el, time, tenantQuery, tenantCell, every, loaded, getPage, confirmCount } =
    window.jobscheduler;

  // ---- Dead letters: a tenant's dlq jobs grouped by job type and error message (every
  // tenant's, grouped by tenant too, for a principal that sees them all).
  function deadLetters() {
    const table = document.getElementById("dlq");
    if (!table) return;
    const line = document.getElementById("dlq-status");
    // The newest `pageSize` dead letters are grouped; "Show older" adds a page each time
    // (every refresh re-reads as many pages, following the API's cursors).
    const pageSize = Number(table.dataset.scan);
    const tenant = table.dataset.tenant;
    const query = tenantQuery(tenant, { status: "dlq", limit: pageSize });
    const more = document.getElementById("dlq-more");
    let pages = 1;
    async function load() {
      const rows = [];
      let next = null;
      for (let page = 0; page < pages; page++) {
        const cursor = next === null ? "" : `&cursor=${encodeURIComponent(next)}`;
        const got = await getPage(`/jobs?${query}${cursor}`);
        rows.push(...got.rows);
        next = got.next;
        if (next === null) break;
      }
      return { rows, older: next !== null };
    }
    const canAct = meta("js-can-act") === "yes";
    const result = document.getElementById("dlq-result");
    // The ids of each group as last shown ("retry this group" retries exactly those).
    let members = new Map();
    const refreshNow = every(async () => {
      const page = await loaded(line, "dead letters", load);
      if (page === undefined) return;
      const { rows, older } = page;
      const groups = new Map();
      for (const job of rows) {
        const error = (job.lastError || "(no error recorded)").split("\n")[0];
        const key = `${job.tenantId}\u0000${job.jobType}\u0000${error}`;
        const group = groups.get(key) || {
          tenant: job.tenantId, jobType: job.jobType, error, count: 0, oldest: null, newest: null, ids: [],
        };
        group.count += 1;
        group.ids.push(job.id);
        if (!group.oldest || job.updatedAt < group.oldest) group.oldest = job.updatedAt;
        if (!group.newest || job.updatedAt > group.newest) group.newest = job.updatedAt;
        groups.set(key, group);
      }
      const sorted = [...groups.values()].sort(
        (a, b) => b.count - a.count || a.tenant.localeCompare(b.tenant) || a.jobType.localeCompare(b.jobType),
      );
      const body = el("tbody");
      members = new Map();
      sorted.forEach((group, index) => {
        const filter = new URLSearchParams({ tenantId: group.tenant, status: "dlq", jobType: group.jobType });
        members.set(String(index), group);
        body.append(
          el(
            "tr",
            { "data-tenant": group.tenant, "data-job-type": group.jobType, "data-count": group.count, "data-group": index },
            ...(tenant ? [] : [tenantCell(group.tenant)]),
            el("td", {}, el("a", { href: `/ui/jobs?${filter}` }, group.jobType)),
            el("td", { class: "wide error-text", title: group.error }, group.error),
            el("td", { class: "num" }, group.count),
            el("td", { class: "mono" }, time(group.oldest)),
            el("td", { class: "mono" }, time(group.newest)),
            ...(canAct
              ? [el("td", {}, el("button", { type: "button", "data-retry-group": index, class: "small" }, "Retry group"))]
              : []),
          ),
        );
      });
      const focused = document.activeElement?.dataset?.retryGroup;
      table.tBodies[0].replaceWith(body);
      if (focused !== undefined) body.querySelector(`button[data-retry-group="${focused}"]`)?.focus();
      const partial = older ? ` (the newest ${rows.length}; older ones not grouped yet)` : "";
      more.hidden = !older;
      line.textContent = rows.length
        ? `${rows.length} dead letter${rows.length === 1 ? "" : "s"} in ${groups.size} group${groups.size === 1 ? "" : "s"}${partial}.`
        : "No dead letters.";
    });
    more.addEventListener("click", () => {
      pages += 1;
      refreshNow();
    });
    // "Retry this group": the group's jobs by id (as listed), still in dlq at the time.
    table.addEventListener("click", async (event) => {
      const button = event.target.closest("button[data-retry-group]");
      if (!button) return;
      const group = members.get(button.dataset.retryGroup);
      if (!group) return;
      const filter = { tenantId: group.tenant, status: "dlq", ids: group.ids };
      result.classList.remove("bad");
      const ok = await confirmCount(result, "retry", filter, (count) =>
        `Retry ${count} ${group.jobType} dead letter${count === 1 ? "" : "s"} that failed with "${group.error}"?`,
      );
      if (!ok) return;
      await act(
        result,
        "retry",
        () => send("POST", "/jobs/retry", { filter }),
        (reply) => `${reply.changed} of ${reply.matched} dead letters retried.`,
        () => refreshNow(),
      );
    });
  }

  window.jobscheduler.views.push(deadLetters);
})();
