// The graph page: memories as nodes, edges by type, drawn with the vendored Cytoscape.js.
(function () {
  "use strict";
  const box = document.getElementById("graph");
  if (!box || !window.cytoscape) return;
  const status = document.getElementById("graph-status");
  const palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                   "#9c755f", "#bab0ac", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#17becf"];
  const kindColour = { EPISODE: "#4e79a7", INSIGHT: "#f28e2b", REVISION: "#bab0ac" };
  const edgeColour = { CAUSED_BY: "#e15759", RELATED_TO: "#76b7b2", FOLLOWED_BY: "#c9ced6", REVISED_FROM: "#b07aa1",
                       INSIGHT_FROM: "#f28e2b", CONTRADICTS: "#d62728" };
  let cy = null;

  function entityColour(name) {
    if (!name) return "#bab0ac";
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return palette[h % palette.length];
  }

  // Colours come from selectors (by kind) or one data mapping (by entity, set only when asked for):
  // per-element mappings are what makes building thousands of elements slow.
  function styles(big, mode) {
    const label = big ? {} : { label: "data(label)", "font-size": 5, color: "#334", "text-valign": "bottom",
      "text-margin-y": 2, "text-max-width": 90, "text-wrap": "ellipsis", "min-zoomed-font-size": 6 };
    const colours = mode === "entity"
      ? [{ selector: "node[colour]", style: { "background-color": "data(colour)" } }]
      : Object.entries(kindColour).map(([kind, colour]) => ({ selector: `node[kind = '${kind}']`,
          style: { "background-color": colour } }));
    return [
      { selector: "node", style: { "background-color": "#999", width: 10, height: 10, ...label } },
      ...colours,
      { selector: "node[superseded = 1]", style: { opacity: 0.45, "border-width": 1, "border-style": "dashed", "border-color": "#777" } },
      { selector: "edge", style: { width: 1, "line-color": "#999", "curve-style": big ? "haystack" : "bezier", opacity: 0.7,
        "target-arrow-shape": big ? "none" : "triangle", "target-arrow-color": "#999", "arrow-scale": 0.5 } },
      ...Object.entries(edgeColour).map(([type, colour]) => ({ selector: `edge[type = '${type}']`,
        style: { "line-color": colour, "target-arrow-color": colour } })),
      { selector: "edge[type = 'CONTRADICTS']", style: { width: 2, "line-style": "dashed", opacity: 1 } },
      { selector: ".focus", style: { "border-width": 3, "border-color": "#111", width: 18, height: 18, "z-index": 10,
        label: "data(label)", "font-size": 8 } },
      { selector: ".faded", style: { opacity: 0.12 } },
    ];
  }

  function colourBy(mode) {
    if (mode === "entity") cy.batch(() => cy.nodes().forEach((n) => n.data("colour", entityColour(n.data("entity")))));
    cy.style(styles(cy.nodes().length > 1500, mode));
  }

  const t0 = performance.now();
  fetch(box.dataset.src, { credentials: "same-origin" }).then((r) => r.json()).then((view) => {
    box.dataset.fetchMs = String(Math.round(performance.now() - t0));
    if (view.error) { status.textContent = view.error; return; }
    const elements = [];
    const t1 = performance.now();
    const mode = document.getElementById("graph-color").value;
    let preset = false;
    view.nodes.forEach(([id, label, kind, entity, superseded, x, y]) => {
      const data = { id, label, kind, entity, superseded: superseded ? 1 : 0 };
      if (mode === "entity") data.colour = entityColour(entity);
      const node = { group: "nodes", data };
      if (x !== null && x !== undefined) { node.position = { x, y }; preset = true; }
      elements.push(node);
    });
    view.edges.forEach(([s, t, type], i) =>
      elements.push({ group: "edges", data: { id: "e" + i, source: view.nodes[s][0], target: view.nodes[t][0], type } }));
    const big = view.nodes.length > 1500;
    cy = cytoscape({
      container: box, elements, minZoom: 0.02, maxZoom: 4,
      textureOnViewport: big, hideEdgesOnViewport: big, pixelRatio: big ? 1 : "auto",
      style: styles(big, mode), layout: { name: "preset" },
    });
    box.dataset.initMs = String(Math.round(performance.now() - t1));
    // Contradicting memories are drawn apart: their edge pushes instead of pulling.
    // Large graphs come laid out by the server (each entity a disc), small ones get a force layout here.
    const layout = preset
      ? { name: "preset", fit: true, padding: 20 }
      : { name: "cose", animate: false, randomize: true, numIter: 600, nodeRepulsion: () => 8000,
          idealEdgeLength: (e) => (e.data("type") === "CONTRADICTS" ? 260 : 60),
          edgeElasticity: (e) => (e.data("type") === "CONTRADICTS" ? 20 : 100) };
    const started = performance.now();
    cy.layout(layout).run();
    if (cy.zoom() > 1.6) { cy.zoom(1.6); cy.center(); }
    let shown = `${view.nodes.length} memories, ${view.edges.length} edges`;
    if (view.sampled) shown += ` shown: the ${view.nodes.length} most connected of ${view.total_nodes} memories (sampled to stay responsive)`;
    if (view.followed_by_hidden) shown += "; each entity is a disc, oldest memory in the middle; FOLLOWED_BY edges left out (the spiral is the time order)";
    status.textContent = shown;
    box.dataset.ready = "1";
    box.dataset.layoutMs = String(Math.round(performance.now() - started));
    cy.on("tap", "node", (evt) => {
      location.href = "/memory?vault=" + encodeURIComponent(box.dataset.vault) + "&id=" + encodeURIComponent(evt.target.id());
    });
  });

  document.getElementById("graph-color").addEventListener("change", (e) => cy && colourBy(e.target.value));
  document.getElementById("graph-search").addEventListener("input", (e) => {
    if (!cy) return;
    const text = e.target.value.trim().toLowerCase();
    cy.batch(() => { cy.elements().removeClass("focus faded"); });
    if (!text) { cy.fit(undefined, 20); return; }
    const hits = cy.nodes().filter((n) => n.data("label").toLowerCase().includes(text) || n.data("entity").toLowerCase() === text);
    if (hits.length === 0) return;
    cy.batch(() => { cy.elements().addClass("faded"); hits.removeClass("faded").addClass("focus"); hits.connectedEdges().removeClass("faded"); });
    cy.animate({ fit: { eles: hits, padding: 60 }, duration: 300 });
  });
})();
