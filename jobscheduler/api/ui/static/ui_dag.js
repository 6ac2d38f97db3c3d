// jobscheduler dashboard: one workflow, its steps drawn as a DAG (inline SVG, laid out here),
// each step a link to its job, refreshed live (see ui.js for the helpers it uses).
"use strict";

(function () {
  const { meta, send, act, el, time, badge, every, loadedItem } = window.jobscheduler;
  const SVG = "http://www.w3.org/2000/svg";

  // The drawing's measures, in SVG units (1 unit = 1 CSS pixel).
  const NODE_W = 170;
  // Names longer than this are cut (the whole name is in the node's tooltip).
  const NAME_CHARS = 18;
  const NODE_H = 38;
  const GAP_X = 56;
  const GAP_Y = 14;
  const PAD = 12;
  // A layer draws at most this many steps; the rest are one "+N more" node.
  const MAX_PER_LAYER = 24;
  // The step list shows at most this many rows (a fan-out may spawn thousands).
  const MAX_ROWS = 500;

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // What each step waits for, by name: its dependsOn and afterChildrenOf, and for a step
  // waiting for a spawner's children (afterChildrenOf), those children too.
  function waitsFor(steps) {
    const names = new Set(steps.map((s) => s.name));
    const spawned = new Map();
    for (const step of steps) {
      if (!step.spawnedBy) continue;
      if (!spawned.has(step.spawnedBy)) spawned.set(step.spawnedBy, []);
      spawned.get(step.spawnedBy).push(step.name);
    }
    const parents = new Map();
    for (const step of steps) {
      const own = [...(step.dependsOn || []), ...(step.afterChildrenOf || [])];
      for (const spawner of step.afterChildrenOf || []) own.push(...(spawned.get(spawner) || []));
      parents.set(step.name, [...new Set(own)].filter((name) => names.has(name)));
    }
    return parents;
  }

  // The layered layout: a step's layer is one more than its deepest parent's (roots: 0),
  // found in topological order; within a layer, steps sit near the mean position of their
  // parents (two passes), and a layer longer than MAX_PER_LAYER folds its rest into one node.
  function layout(steps) {
    const parents = waitsFor(steps);
    const children = new Map(steps.map((s) => [s.name, []]));
    const pending = new Map();
    for (const [name, ps] of parents) {
      pending.set(name, ps.length);
      for (const parent of ps) children.get(parent).push(name);
    }
    const layer = new Map();
    const queue = steps.filter((s) => pending.get(s.name) === 0).map((s) => s.name);
    for (const name of queue) layer.set(name, 0);
    for (let i = 0; i < queue.length; i++) {
      const name = queue[i];
      for (const child of children.get(name)) {
        layer.set(child, Math.max(layer.get(child) || 0, layer.get(name) + 1));
        pending.set(child, pending.get(child) - 1);
        if (pending.get(child) === 0) queue.push(child);
      }
    }
    const layers = [];
    for (const step of steps) {
      const index = layer.has(step.name) ? layer.get(step.name) : 0;
      (layers[index] = layers[index] || []).push(step);
    }
    const row = new Map();
    for (let pass = 0; pass < 2; pass++) {
      for (const members of layers) {
        if (!members) continue;
        members.forEach((step, i) => row.set(step.name, row.has(step.name) ? row.get(step.name) : i));
        const mean = (step) => {
          const ps = parents.get(step.name).filter((p) => row.has(p));
          return ps.length ? ps.reduce((sum, p) => sum + row.get(p), 0) / ps.length : row.get(step.name);
        };
        members.sort((a, b) => mean(a) - mean(b));
        members.forEach((step, i) => row.set(step.name, i));
      }
    }
    const tallest = Math.max(1, ...layers.filter(Boolean).map((m) => Math.min(m.length, MAX_PER_LAYER + 1)));
    const nodes = new Map();
    const folds = [];
    layers.forEach((members, index) => {
      if (!members) return;
      const x = PAD + index * (NODE_W + GAP_X);
      // Each layer centred on the tallest one.
      const top = PAD + ((tallest - Math.min(members.length, MAX_PER_LAYER + 1)) * (NODE_H + GAP_Y)) / 2;
      members.forEach((step, i) => {
        const y = top + Math.min(i, MAX_PER_LAYER) * (NODE_H + GAP_Y);
        if (i < MAX_PER_LAYER) nodes.set(step.name, { step, x, y, layer: index });
        else nodes.set(step.name, { step, x, y, layer: index, folded: true });
      });
      if (members.length > MAX_PER_LAYER) {
        folds.push({
          layer: index,
          x,
          y: top + MAX_PER_LAYER * (NODE_H + GAP_Y),
          steps: members.slice(MAX_PER_LAYER),
        });
      }
    });
    return {
      nodes,
      folds,
      parents,
      width: PAD * 2 + layers.length * (NODE_W + GAP_X) - GAP_X,
      height: PAD * 2 + tallest * (NODE_H + GAP_Y) - GAP_Y,
    };
  }

  function counts(steps) {
    const by = {};
    for (const step of steps) by[step.status] = (by[step.status] || 0) + 1;
    return Object.entries(by).map(([status, n]) => `${n} ${status}`).join(", ");
  }

  function draw(figure, workflow) {
    const plan = layout(workflow.steps);
    figure.setAttribute("viewBox", `0 0 ${plan.width} ${plan.height}`);
    figure.setAttribute("width", plan.width);
    figure.setAttribute("height", plan.height);
    const title = figure.querySelector("title");
    figure.replaceChildren(title);
    const edges = svg("g", { class: "edges" });
    const boxes = svg("g", { class: "nodes" });
    const anchor = (node) => (node.folded ? plan.folds.find((f) => f.layer === node.layer) : node);
    const drawn = new Set();
    for (const [name, ps] of plan.parents) {
      const to = anchor(plan.nodes.get(name));
      for (const parent of ps) {
        const from = anchor(plan.nodes.get(parent));
        const key = `${from.x},${from.y}>${to.x},${to.y}`;
        if (drawn.has(key)) continue;
        drawn.add(key);
        const x1 = from.x + NODE_W;
        const y1 = from.y + NODE_H / 2;
        const x2 = to.x;
        const y2 = to.y + NODE_H / 2;
        const bend = Math.max(GAP_X / 2, (x2 - x1) / 2);
        edges.append(
          svg("path", {
            class: "edge",
            d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`,
            "data-from": parent,
            "data-to": name,
          }),
        );
      }
    }
    for (const [name, node] of plan.nodes) {
      if (node.folded) continue;
      const step = node.step;
      const link = svg(
        "a",
        {
          href: `/ui/jobs/${step.jobId}`,
          class: "step",
          "data-step": name,
          "data-status": step.status,
          "data-layer": node.layer,
          "data-x": node.x,
          "data-y": node.y,
          "aria-label": `${name}: ${step.status}`,
        },
        svg("title", {}, `${name} (${step.jobType}): ${step.status}${step.lastError ? ` — ${step.lastError}` : ""}`),
        svg("rect", { x: node.x, y: node.y, width: NODE_W, height: NODE_H, rx: 6, class: `node s-${step.status}` }),
        svg("text", { x: node.x + 10, y: node.y + 16, class: "node-name" }, name.length > NAME_CHARS ? `${name.slice(0, NAME_CHARS - 1)}…` : name),
        svg("text", { x: node.x + 10, y: node.y + 30, class: "node-status" }, step.status),
      );
      boxes.append(link);
    }
    for (const fold of plan.folds) {
      boxes.append(
        svg(
          "g",
          { class: "step-more", "data-more": fold.steps.length, "data-layer": fold.layer },
          svg("title", {}, counts(fold.steps)),
          svg("rect", { x: fold.x, y: fold.y, width: NODE_W, height: NODE_H, rx: 6, class: "node node-more" }),
          svg("text", { x: fold.x + 10, y: fold.y + 16, class: "node-name" }, `+${fold.steps.length} more`),
          svg("text", { x: fold.x + 10, y: fold.y + 30, class: "node-status" }, counts(fold.steps).slice(0, 22)),
        ),
      );
    }
    figure.append(edges, boxes);
  }

  function stepRows(workflow) {
    const body = el("tbody");
    for (const step of workflow.steps.slice(0, MAX_ROWS)) {
      const waits = [...(step.dependsOn || []), ...(step.afterChildrenOf || []).map((n) => `${n} + its children`)];
      body.append(
        el(
          "tr",
          { "data-step": step.name, "data-status": step.status },
          el("td", {}, el("a", { href: `/ui/jobs/${step.jobId}` }, step.name)),
          el("td", {}, badge(step.status)),
          el("td", {}, waits.join(", ") || "—"),
          el("td", {}, step.jobType),
          el("td", { class: "number" }, String(step.attempts)),
          el("td", { class: "wide error-text", title: step.lastError || "" }, step.lastError || ""),
        ),
      );
    }
    if (workflow.steps.length > MAX_ROWS) {
      body.append(el("tr", {}, el("td", { colspan: "6", class: "muted" }, `and ${workflow.steps.length - MAX_ROWS} more steps`)));
    }
    return body;
  }

  function fields(workflow) {
    const list = document.getElementById("wf-fields");
    const shown = [
      ["Id", workflow.id], ["Tenant", workflow.tenantId], ["Idempotency key", workflow.idempotencyKey],
      ["Created", time(workflow.createdAt)], ["Updated", time(workflow.updatedAt)],
      ["Finished", time(workflow.finishedAt)],
    ];
    if (workflow.templateId) shown.push(["Cron template", el("a", { href: `/ui/jobs/${workflow.templateId}` }, workflow.templateId)]);
    if (workflow.lastError) shown.push(["Last error", workflow.lastError]);
    list.replaceChildren(...shown.flatMap(([label, value]) => [el("dt", {}, label), el("dd", {}, value || "—")]));
  }

  function workflowPage() {
    const box = document.getElementById("workflow");
    if (!box) return;
    const id = box.dataset.workflowId;
    const problem = document.getElementById("wf-error");
    const figure = document.getElementById("dag");
    const table = document.getElementById("steps");
    let shown = "";
    let latest = null;
    const refresh = every(async () => {
      const workflow = await loadedItem(problem, "workflow", `/workflows/${id}`);
      if (workflow === undefined) return;
      latest = workflow;
      document.getElementById("wf-key").textContent = workflow.idempotencyKey;
      document.getElementById("wf-status").replaceWith(Object.assign(badge(workflow.status), { id: "wf-status" }));
      document.getElementById("wf-counts").textContent = counts(workflow.steps);
      const state = JSON.stringify(workflow.steps.map((s) => [s.name, s.status]));
      if (state !== shown) {
        draw(figure, workflow);
        table.tBodies[0].replaceWith(stepRows(workflow));
        shown = state;
      }
      fields(workflow);
      const actions = document.getElementById("wf-actions");
      if (actions && meta("js-can-act") === "yes") {
        const retryable = workflow.steps.some((s) => s.status === "dlq" || s.status === "cancelled");
        actions.querySelector('[data-action="cancel"]').hidden = workflow.status !== "running";
        actions.querySelector('[data-action="retry"]').hidden = !retryable;
      }
      box.dataset.status = workflow.status;
    });
    const actions = document.getElementById("wf-actions");
    if (!actions) return;
    const result = document.getElementById("wf-result");
    actions.addEventListener("click", async (event) => {
      const action = event.target.closest("button[data-action]")?.dataset.action;
      if (!action || !latest) return;
      if (action === "cancel" && !confirm("Cancel every unfinished step of this workflow?")) return;
      await act(
        result,
        action,
        () => send("POST", `/workflows/${id}/${action}`),
        (after) => `Done: the workflow is ${after.status}.`,
        () => refresh(),
      );
    });
  }

  window.jobscheduler.views.push(workflowPage);
})();
