// jobscheduler dashboard: the Jobs table, its filters, pages, selection and bulk actions (see ui.js for the helpers it uses).
"use strict";

(function () {
  const { el, time, tenantCell, badge, every, loaded, getPage, bulk } = window.jobscheduler;

  // The Type cell: a template is marked as one (its expression in the title).
  function typeCell(job) {
    const cell = el("td", {}, job.jobType);
    if (job.cron) cell.append(" ", el("span", { class: "tag", title: job.cron }, "template"));
    return cell;
  }

  // ---- Jobs: the table of one tenant's jobs (or every tenant's, with a Tenant column),
  // filtered by the form's values, one cursor page at a time; a writer selects rows (or
  // takes everything matching) for bulk actions, offered only while something matches.
  function jobs() {
    const table = document.getElementById("jobs");
    if (!table) return;
    const line = document.getElementById("jobs-status");
    const selectable = Boolean(document.getElementById("select-page"));
    const everyTenant = !table.dataset.tenant;
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
      const page = await loaded(line, "jobs", () => getPage(`/jobs?${query}`));
      if (page === undefined) return;
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
            ...(everyTenant ? [tenantCell(job.tenantId)] : []),
            typeCell(job),
            el("td", {}, badge(job.status)),
            el("td", { class: "mono created" }, time(job.createdAt)),
            el("td", { class: "mono" }, time(job.scheduledAt)),
            el("td", { class: "num attempts" }, `${job.attempts}/${job.maxAttempts}`),
            el("td", { class: "wide mono", title: job.idempotencyKey }, job.idempotencyKey),
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
      // "... all matching" acts on nothing when the first page is empty.
      const nothing = page.rows.length === 0 && number === 1;
      for (const button of document.querySelectorAll('#bulk button[data-scope="filter"]')) {
        button.disabled = nothing;
      }
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

  window.jobscheduler.views.push(jobs);
})();
