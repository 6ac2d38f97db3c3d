// The Overview: reads GET /stats/overview (the URL is in #overview's data-api) every
// UI_REFRESH and fills the fixed-size shell in place; the throughput chart is inline SVG drawn
// here. Text is written with textContent only (never as HTML).
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const { el, refreshMs } = window.jobscheduler;

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    return node;
  }

  function seconds(value) {
    if (value < 1) return `${Math.round(value * 1000)} ms`;
    if (value < 120) return `${value.toFixed(1)} s`;
    if (value < 7200) return `${Math.round(value / 60)} min`;
    return `${(value / 3600).toFixed(1)} h`;
  }

  // Stacked bars (completed below, dead-lettered above), one per minute, with a light grid.
  // Fixed viewBox: the chart keeps its size whatever the numbers.
  function throughputChart(series) {
    const width = 600, height = 180, left = 34, bottom = 18, top = 6;
    const n = series.minutes;
    const totals = series.completed.map((c, i) => c + series.failed[i]);
    const largest = Math.max(1, ...totals);
    const plotH = height - bottom - top;
    const step = (width - left) / n;
    const chart = svg("svg", {
      viewBox: `0 0 ${width} ${height}`,
      preserveAspectRatio: "none",
      role: "img",
      "aria-label": "jobs finished per minute over the last hour",
      "data-completed": series.completed.reduce((a, b) => a + b, 0),
      "data-failed": series.failed.reduce((a, b) => a + b, 0),
    });
    for (const fraction of [0, 0.5, 1]) {
      const y = top + plotH * (1 - fraction);
      chart.append(svg("line", { x1: left, x2: width, y1: y, y2: y, class: "grid" }));
      const label = svg("text", { x: left - 4, y: y + 4, "text-anchor": "end", class: "axis" });
      label.textContent = String(Math.round(largest * fraction));
      chart.append(label);
    }
    series.completed.forEach((completed, i) => {
      const failed = series.failed[i];
      const x = left + i * step + 0.5;
      const w = Math.max(step - 1, 1);
      const hc = (plotH * completed) / largest;
      const hf = (plotH * failed) / largest;
      const bar = svg("g", { "data-minute": i, "data-completed": completed, "data-failed": failed });
      bar.append(svg("rect", { x, y: top + plotH - hc, width: w, height: hc, class: "s-completed" }));
      bar.append(svg("rect", { x, y: top + plotH - hc - hf, width: w, height: hf, class: "s-dlq" }));
      const title = svg("title");
      const ago = n - 1 - i;
      title.textContent = `${ago === 0 ? "this minute" : `${ago} min ago`}: ${completed} completed, ${failed} dead-lettered`;
      bar.append(title);
      chart.append(bar);
    });
    for (const [i, text] of [[0, "-60 min"], [n / 2, "-30 min"], [n - 1, "now"]]) {
      const label = svg("text", {
        x: left + i * step + step / 2,
        y: height - 4,
        "text-anchor": i === 0 ? "start" : i === n - 1 ? "end" : "middle",
        class: "axis",
      });
      label.textContent = text;
      chart.append(label);
    }
    return chart;
  }

  function retentionLine(retention) {
    if (!retention) return "";
    const kept = Object.entries(retention.defaults).map(([s, d]) => `${s} ${d}`).join(", ");
    const last = retention.lastPrune;
    let text = `Finished jobs are kept ${kept} (by default).`;
    if (last) {
      const pruned = Object.values(last.pruned).reduce((a, b) => a + b, 0);
      text += ` Last prune: ${pruned.toLocaleString("en")} jobs at ${last.at} in ${last.took} s.`;
    }
    return text;
  }

  function workerName(worker) {
    return worker.id.replace(/^(scheduler|executor):/, "");
  }

  // The busiest scopes the leader's latest claims held back (concurrency, rate limits).
  function fillHeld(held) {
    const rows = held.holds.map((h) =>
      el(
        "tr",
        { "data-scope": `${h.tenantId}/${h.jobType}/${h.key ?? ""}` },
        el("td", {}, h.tenantId),
        el("td", {}, h.jobType),
        el("td", { class: "mono" }, h.key ?? "(every key)"),
        el("td", {}, h.text),
        el("td", { class: "num" }, h.waiting)
      )
    );
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "5", class: "muted" }, "Nothing held back.")));
    document.querySelector("#ov-held tbody").replaceChildren(...rows);
    document.getElementById("ov-held-at").textContent =
      held.at ? `as of ${window.jobscheduler.when(held.at)}` : "";
  }

  function fill(body) {
    document.getElementById("ov-total").textContent = body.total.toLocaleString("en");
    document.getElementById("ov-lag").textContent = seconds(body.queueLagSeconds);
    document.getElementById("ov-dlq").textContent = body.dlq.toLocaleString("en");
    for (const row of document.querySelectorAll("#ov-counts tbody tr")) {
      row.querySelector(".num").textContent = String(body.byStatus[row.dataset.status] ?? 0);
    }
    const box = document.getElementById("ov-throughput");
    box.replaceChildren(throughputChart(body.throughput));
    const done = body.throughput.completed.reduce((a, b) => a + b, 0);
    const dead = body.throughput.failed.reduce((a, b) => a + b, 0);
    document.getElementById("ov-throughput-sum").textContent =
      `${done} completed, ${dead} dead-lettered in the last hour.`;
    document.getElementById("ov-retention").textContent = retentionLine(body.retention);
    fillHeld(body.held);
    const cluster = body.cluster;
    const leader = document.getElementById("ov-leader");
    if (!cluster) {
      leader.textContent = "(operators only)";
      return;
    }
    leader.textContent = cluster.leader ? workerName(cluster.leader) : "none";
    leader.title = cluster.leader ? `${cluster.leader.host} pid ${cluster.leader.pid}` : "";
    const rows = cluster.executors.map((w) =>
      el(
        "tr",
        { "data-worker": w.id },
        el("td", { class: "mono" }, workerName(w)),
        el("td", {}, `${w.host} / ${w.pid}`),
        el("td", {}, w.jobTypes.join(", ")),
        el("td", { class: "num" }, w.inFlight),
        el("td", { class: "num" }, `${Math.round(w.secondsSinceSeen)} s ago`)
      )
    );
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "5", class: "muted" }, "No live executor.")));
    document.querySelector("#ov-executors tbody").replaceChildren(...rows);
    document.getElementById("ov-executors-count").textContent = `${cluster.executors.length} live`;
    const schedulers = cluster.schedulers.map((w) =>
      el("li", { "data-worker": w.id }, `${workerName(w)} on ${w.host}${w.leader ? " — leader" : " — standby"}`)
    );
    if (!schedulers.length) schedulers.push(el("li", { class: "muted" }, "No live scheduler."));
    document.getElementById("ov-schedulers").replaceChildren(...schedulers);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const root = document.getElementById("overview");
    if (!root) return;
    const line = document.getElementById("refreshed");
    let busy = false;
    const tick = async () => {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const response = await fetch(root.dataset.api, {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
        });
        const body = await response.json().catch(() => null);
        if (!response.ok) throw new Error(body && body.error ? body.error : `HTTP ${response.status}`);
        fill(body);
        line.classList.remove("bad");
        const now = window.jobscheduler.when(new Date().toISOString());
        line.textContent = `Updated ${now}; refreshes every ${refreshMs / 1000} s.`;
      } catch (error) {
        line.classList.add("bad");
        line.textContent = `Could not refresh: ${error.message}`;
      } finally {
        busy = false;
        // How many refreshes the page has done (tests wait on it).
        document.body.dataset.refreshes = Number(document.body.dataset.refreshes || 0) + 1;
      }
    };
    tick();
    setInterval(tick, refreshMs);
  });
})();
