// The graph page: memories as nodes, edges by type. Small graphs get Cytoscape.js (vendored, loaded
// only for them) and a force layout that draws contradictions apart; large ones come laid out by the
// server and are drawn by graph-canvas.js, which stays responsive at 5,000 nodes.
(function () {
  "use strict";
  const box = document.getElementById("graph");
  if (!box) return;
  const status = document.getElementById("graph-status");
  const palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                   "#9c755f", "#bab0ac", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#17becf"];
  const colours = {
    kind: { EPISODE: "#4e79a7", INSIGHT: "#f28e2b", REVISION: "#bab0ac" },
    edge: { CAUSED_BY: "#e15759", RELATED_TO: "#76b7b2", FOLLOWED_BY: "#c9ced6", REVISED_FROM: "#b07aa1",
            INSIGHT_FROM: "#f28e2b", CONTRADICTS: "#d62728", CO_ACTIVATED: "#59a14f" },
    entity(name) {
      if (!name) return "#bab0ac";
      let h = 0;
      for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
      return palette[h % palette.length];
    },
  };
  let graph = null;

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = src; s.onload = resolve; s.onerror = () => reject(new Error("could not load " + src));
      document.head.appendChild(s);
    });
  }

  // Colours come from selectors (by kind) or one data mapping (by entity, set only when asked for):
  // per-element mappings are what makes building many elements slow.
  function cyStyles(mode) {
    const colourRules = mode === "entity"
      ? [{ selector: "node[colour]", style: { "background-color": "data(colour)" } }]
      : Object.entries(colours.kind).map(([kind, colour]) => ({ selector: `node[kind = '${kind}']`,
          style: { "background-color": colour } }));
    return [
      { selector: "node", style: { "background-color": "#999", width: 10, height: 10, label: "data(label)", "font-size": 5,
        color: "#334", "text-valign": "bottom", "text-margin-y": 2, "text-max-width": 90, "text-wrap": "ellipsis",
        "min-zoomed-font-size": 6 } },
      ...colourRules,
      { selector: "node[superseded = 1]", style: { opacity: 0.45, "border-width": 1, "border-style": "dashed", "border-color": "#777" } },
      { selector: "edge", style: { width: 1, "line-color": "#999", "curve-style": "bezier", opacity: 0.7,
        "target-arrow-shape": "triangle", "target-arrow-color": "#999", "arrow-scale": 0.5 } },
      ...Object.entries(colours.edge).map(([type, colour]) => ({ selector: `edge[type = '${type}']`,
        style: { "line-color": colour, "target-arrow-color": colour } })),
      { selector: "edge[type = 'CONTRADICTS']", style: { width: 2, "line-style": "dashed", opacity: 1 } },
      { selector: ".focus", style: { "border-width": 3, "border-color": "#111", width: 18, height: 18, "z-index": 10,
        label: "data(label)", "font-size": 8 } },
      { selector: ".faded", style: { opacity: 0.12 } },
    ];
  }

  function cytoscapeGraph(view, mode) {
    const elements = view.nodes.map(([id, label, kind, entity, superseded]) => ({ group: "nodes",
      data: { id, label, kind, entity, superseded: superseded ? 1 : 0, colour: colours.entity(entity) } }));
    view.edges.forEach(([s, t, type], i) =>
      elements.push({ group: "edges", data: { id: "e" + i, source: view.nodes[s][0], target: view.nodes[t][0], type } }));
    const cy = cytoscape({ container: box, elements, minZoom: 0.02, maxZoom: 4, style: cyStyles(mode), layout: { name: "preset" } });
    // Contradicting memories are drawn apart: their edge pushes instead of pulling.
    cy.layout({ name: "cose", animate: false, randomize: true, numIter: 600, nodeRepulsion: () => 8000,
      idealEdgeLength: (e) => (e.data("type") === "CONTRADICTS" ? 260 : 60),
      edgeElasticity: (e) => (e.data("type") === "CONTRADICTS" ? 20 : 100) }).run();
    if (cy.zoom() > 1.6) { cy.zoom(1.6); cy.center(); }
    cy.on("tap", "node", (evt) => box.dispatchEvent(new CustomEvent("open-memory", { detail: evt.target.id() })));
    return {
      colourBy(next) { cy.style(cyStyles(next)); },
      focus(match) {
        cy.batch(() => { cy.elements().removeClass("focus faded"); });
        if (!match) { cy.fit(undefined, 20); return 0; }
        const hits = cy.nodes().filter((n) => match(n.data("label"), n.data("entity")));
        if (hits.length === 0) return 0;
        cy.batch(() => { cy.elements().addClass("faded"); hits.removeClass("faded").addClass("focus"); hits.connectedEdges().removeClass("faded"); });
        cy.animate({ fit: { eles: hits, padding: 60 }, duration: 300 });
        return hits.length;
      },
      screenPosition(id) {
        const node = cy.getElementById(id);
        if (node.empty()) return null;
        const rect = box.getBoundingClientRect(), p = node.renderedPosition();
        return { x: rect.left + p.x, y: rect.top + p.y };
      },
      zoom() { return cy.zoom(); },
    };
  }

  function describe(view) {
    const count = (n, one, many) => `${n} ${n === 1 ? one : many}`;
    const nodes = view.folded ? count(view.nodes.length, "note or memory", "notes and memories")
                              : count(view.nodes.length, "memory", "memories");
    let shown = `${nodes}, ${count(view.edges.length, "edge", "edges")}`;
    if (view.sampled) shown += ` shown: the ${view.nodes.length} most connected of ${view.total_nodes} memories (sampled to stay responsive)`;
    if (view.followed_by_hidden) shown += "; each entity is a disc, oldest memory in the middle; FOLLOWED_BY edges left out (the spiral is the time order)";
    return shown;
  }

  const t0 = performance.now();
  fetch(box.dataset.src, { credentials: "same-origin" }).then((r) => r.json()).then(async (view) => {
    box.dataset.fetchMs = String(Math.round(performance.now() - t0));
    if (view.error) { status.textContent = view.error; return; }
    const mode = document.getElementById("graph-color").value;
    const started = performance.now();
    const large = view.nodes.some((node) => node[5] !== null && node[5] !== undefined);
    if (view.nodes.length === 0) {
      status.textContent = "no memories yet";
    } else if (large) {
      box.dataset.renderer = "canvas";
      graph = window.HebbsCanvasGraph(box, view, colours, mode);
    } else {
      box.dataset.renderer = "cytoscape";
      // Cytoscape inserts a <style> for its container unless an element with this id exists; the
      // CSP refuses inline styles, and panel.css carries the rule.
      if (!document.getElementById("__________cytoscape_stylesheet")) {
        const marker = document.createElement("meta");
        marker.id = "__________cytoscape_stylesheet";
        document.head.appendChild(marker);
      }
      await loadScript("/static/vendor/cytoscape.min.js");
      graph = cytoscapeGraph(view, mode);
    }
    if (view.nodes.length) status.textContent = describe(view);
    box.dataset.initMs = String(Math.round(performance.now() - started));
    box.dataset.ready = "1";
  }).catch((err) => { status.textContent = String(err); });

  box.addEventListener("open-memory", (evt) => {
    location.href = "/memory?vault=" + encodeURIComponent(box.dataset.vault) + "&id=" + encodeURIComponent(evt.detail);
  });
  // For tests and the benchmark: where a memory is drawn.
  box.hebbsGraph = { screenPosition: (id) => graph && graph.screenPosition(id), zoom: () => graph && graph.zoom() };
  document.getElementById("graph-color").addEventListener("change", (e) => graph && graph.colourBy(e.target.value));
  document.getElementById("graph-search").addEventListener("input", (e) => {
    if (!graph) return;
    const text = e.target.value.trim().toLowerCase();
    const found = graph.focus(text ? (label, entity) => label.toLowerCase().includes(text) || entity.toLowerCase() === text : null);
    box.dataset.focused = String(found);
  });
})();
