// Large graphs (the server lays them out: each entity a disc) drawn straight on a canvas.
// Cytoscape.js builds an object, a style and a texture per element: at 5,000 nodes that took seconds
// on a loaded machine before the page answered. Here a node is a few numbers in typed arrays, a frame
// is one path per colour, and a click finds its node through a grid: drawn in milliseconds.
(function () {
  "use strict";
  const RADIUS = 5; // world units, as the small graph's 10-pixel nodes at zoom 1
  const CELL = 24; // hit-test grid cell, world units
  const MIN_ZOOM = 0.02, MAX_ZOOM = 4;
  const LABEL_ZOOM = 1.2; // labels once nodes are this large
  const MAX_LABELS = 400;

  function CanvasGraph(box, view, colours, initialMode) {
    const n = view.nodes.length;
    const xs = new Float32Array(n), ys = new Float32Array(n);
    const ids = new Array(n), labels = new Array(n), kinds = new Array(n), entities = new Array(n);
    const superseded = new Uint8Array(n);
    view.nodes.forEach(([id, label, kind, entity, sup, x, y], i) => {
      ids[i] = id; labels[i] = label; kinds[i] = kind; entities[i] = entity; superseded[i] = sup ? 1 : 0;
      xs[i] = x || 0; ys[i] = y || 0;
    });
    const byType = new Map();
    view.edges.forEach((e) => { let list = byType.get(e[2]); if (!list) byType.set(e[2], (list = [])); list.push(e); });
    const grid = new Map();
    for (let i = 0; i < n; i++) {
      const key = Math.floor(xs[i] / CELL) + "," + Math.floor(ys[i] / CELL);
      let cell = grid.get(key);
      if (!cell) grid.set(key, (cell = []));
      cell.push(i);
    }
    const canvas = document.createElement("canvas");
    canvas.className = "graph-canvas";
    canvas.setAttribute("role", "img");
    canvas.tabIndex = 0;
    canvas.setAttribute("aria-label", `graph of ${n} memories. Keys: arrows pan, + and - zoom, 0 fits, ` +
      "n and p (or ] and [) step through the memories (a search's matches when searching), Enter opens, Escape clears");
    box.appendChild(canvas);
    const tip = document.createElement("div");
    tip.className = "graph-tip";
    tip.hidden = true;
    box.appendChild(tip);
    const ctx = canvas.getContext("2d", { alpha: false });
    const dpr = Math.min(window.devicePixelRatio || 1, 2);
    let width = 0, height = 0, k = 1, tx = 0, ty = 0;
    let mode = initialMode || "kind", fill = new Array(n), hits = null, hover = -1, pending = false, dragging = null;
    let selected = -1;

    function paint() {
      fill = ids.map((_, i) => (mode === "entity" ? colours.entity(entities[i]) : colours.kind[kinds[i]] || "#999"));
    }

    function resize() {
      width = box.clientWidth; height = box.clientHeight;
      canvas.width = Math.max(1, Math.round(width * dpr)); canvas.height = Math.max(1, Math.round(height * dpr));
      canvas.style.width = width + "px"; canvas.style.height = height + "px";
    }

    function fit(which, padding) {
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      for (const i of which) {
        x0 = Math.min(x0, xs[i]); y0 = Math.min(y0, ys[i]); x1 = Math.max(x1, xs[i]); y1 = Math.max(y1, ys[i]);
      }
      if (x0 === Infinity) return;
      const w = Math.max(x1 - x0, 1), h = Math.max(y1 - y0, 1);
      k = Math.max(MIN_ZOOM, Math.min(1.6, (width - 2 * padding) / w, (height - 2 * padding) / h));
      tx = width / 2 - k * (x0 + x1) / 2; ty = height / 2 - k * (y0 + y1) / 2;
    }

    function visible(i, margin) {
      const sx = xs[i] * k + tx, sy = ys[i] * k + ty;
      return sx > -margin && sy > -margin && sx < width + margin && sy < height + margin;
    }

    function draw() {
      pending = false;
      const started = performance.now();
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, width, height);
      ctx.setTransform(dpr * k, 0, 0, dpr * k, dpr * tx, dpr * ty);
      const r = Math.max(RADIUS, 1.6 / k); // never smaller than a dot on screen
      // Edges, one path per type (a frame is cheap: they stay while dragging), faded by a search.
      ctx.globalAlpha = hits ? 0.12 : 0.7;
      for (const [type, list] of byType) {
        ctx.beginPath();
        for (const [s, t] of list) { ctx.moveTo(xs[s], ys[s]); ctx.lineTo(xs[t], ys[t]); }
        ctx.strokeStyle = colours.edge[type] || "#999";
        ctx.lineWidth = (type === "CONTRADICTS" ? 2 : 1) / k;
        ctx.setLineDash(type === "CONTRADICTS" ? [6 / k, 4 / k] : []);
        ctx.stroke();
      }
      ctx.setLineDash([]);
      // Nodes, one path per colour and opacity.
      const groups = new Map();
      for (let i = 0; i < n; i++) {
        if (!visible(i, 10)) continue;
        const alpha = hits ? (hits.has(i) ? 1 : 0.12) : (superseded[i] ? 0.45 : 1);
        const key = fill[i] + "|" + alpha;
        let list = groups.get(key);
        if (!list) groups.set(key, (list = []));
        list.push(i);
      }
      for (const [key, list] of groups) {
        const [colour, alpha] = key.split("|");
        ctx.globalAlpha = Number(alpha);
        ctx.fillStyle = colour;
        if (r * k < 2.5) { // a dot of a few pixels: a square looks the same and fills far faster
          for (const i of list) ctx.fillRect(xs[i] - r, ys[i] - r, 2 * r, 2 * r);
          continue;
        }
        ctx.beginPath();
        for (const i of list) { ctx.moveTo(xs[i] + r, ys[i]); ctx.arc(xs[i], ys[i], r, 0, 2 * Math.PI); }
        ctx.fill();
      }
      ctx.globalAlpha = 1;
      const ring = (i, w) => { ctx.beginPath(); ctx.arc(xs[i], ys[i], r + w / k, 0, 2 * Math.PI); ctx.stroke(); };
      ctx.strokeStyle = "#111";
      ctx.lineWidth = 2 / k;
      if (hits) hits.forEach((i) => ring(i, 1.5));
      if (hover >= 0) ring(hover, 1);
      if (selected >= 0) { ctx.lineWidth = 3 / k; ring(selected, 3); }
      // Labels when zoomed in (or for a search's hits), in screen space so they stay legible.
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.font = "11px system-ui, sans-serif";
      ctx.fillStyle = "#334";
      ctx.textAlign = "center";
      let shown = 0;
      for (let i = 0; i < n && shown < MAX_LABELS; i++) {
        if (!((k >= LABEL_ZOOM && !hits) || (hits && hits.has(i) && hits.size <= MAX_LABELS)) || !visible(i, 0)) continue;
        ctx.fillText(labels[i].length > 40 ? labels[i].slice(0, 39) + "…" : labels[i], xs[i] * k + tx, ys[i] * k + ty + r * k + 12);
        shown++;
      }
      box.dataset.drawMs = (performance.now() - started).toFixed(1);
      box.dataset.frames = String(Number(box.dataset.frames || 0) + 1);
    }

    function redraw() {
      if (!pending) { pending = true; requestAnimationFrame(draw); }
    }

    function at(clientX, clientY) {
      const rect = canvas.getBoundingClientRect();
      const wx = (clientX - rect.left - tx) / k, wy = (clientY - rect.top - ty) / k;
      const reach = Math.max(RADIUS, 1.6 / k) + 4 / k;
      let best = -1, bestD = reach * reach;
      const cx = Math.floor(wx / CELL), cy = Math.floor(wy / CELL), span = Math.ceil(reach / CELL);
      for (let gx = cx - span; gx <= cx + span; gx++) {
        for (let gy = cy - span; gy <= cy + span; gy++) {
          for (const i of grid.get(gx + "," + gy) || []) {
            const d = (xs[i] - wx) ** 2 + (ys[i] - wy) ** 2;
            if (d < bestD) { best = i; bestD = d; }
          }
        }
      }
      return best;
    }

    function zoomAt(factor, sx, sy) {
      const next = Math.max(MIN_ZOOM, Math.min(MAX_ZOOM, k * factor));
      tx = sx - (sx - tx) * (next / k); ty = sy - (sy - ty) * (next / k);
      k = next;
      redraw();
    }

    canvas.addEventListener("wheel", (evt) => {
      evt.preventDefault();
      const rect = canvas.getBoundingClientRect();
      zoomAt(Math.exp(-evt.deltaY * 0.0015), evt.clientX - rect.left, evt.clientY - rect.top);
    }, { passive: false });
    canvas.addEventListener("pointerdown", (evt) => {
      dragging = { x: evt.clientX, y: evt.clientY, tx, ty, moved: false };
      canvas.setPointerCapture(evt.pointerId);
    });
    canvas.addEventListener("pointermove", (evt) => {
      if (dragging) {
        const dx = evt.clientX - dragging.x, dy = evt.clientY - dragging.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) dragging.moved = true;
        tx = dragging.tx + dx; ty = dragging.ty + dy;
        redraw();
        return;
      }
      const i = at(evt.clientX, evt.clientY);
      if (i !== hover) {
        hover = i;
        canvas.style.cursor = i >= 0 ? "pointer" : "";
        tip.hidden = i < 0;
        if (i >= 0) {
          tip.textContent = labels[i] + (entities[i] ? ` · ${entities[i]}` : "");
          const rect = box.getBoundingClientRect();
          tip.style.left = (evt.clientX - rect.left + 12) + "px"; tip.style.top = (evt.clientY - rect.top + 12) + "px";
        }
        redraw();
      }
    });
    canvas.addEventListener("pointerup", (evt) => {
      const was = dragging;
      dragging = null;
      if (!was || was.moved) return;
      const i = at(evt.clientX, evt.clientY);
      if (i >= 0) box.dispatchEvent(new CustomEvent("open-memory", { detail: ids[i] }));
    });
    // Keyboard: the same moves as the pointer, and a selection to step through and open.
    function select(i) {
      selected = i;
      box.dataset.selected = i >= 0 ? ids[i] : "";
      if (i < 0) { tip.hidden = true; redraw(); return; }
      if (!visible(i, -40)) { tx = width / 2 - xs[i] * k; ty = height / 2 - ys[i] * k; }
      tip.textContent = labels[i] + (entities[i] ? ` · ${entities[i]}` : "");
      tip.style.left = (xs[i] * k + tx + 12) + "px"; tip.style.top = (ys[i] * k + ty + 12) + "px";
      tip.hidden = false;
      redraw();
    }
    function step(by) {
      const order = hits ? [...hits].sort((a, b) => a - b) : null;
      const count = order ? order.length : n;
      if (count === 0) return;
      const pos = order ? order.indexOf(selected) : selected;
      const next = pos < 0 ? (by > 0 ? 0 : count - 1) : (pos + by + count) % count;
      select(order ? order[next] : next);
    }
    canvas.addEventListener("keydown", (evt) => {
      const pan = 60;
      const moves = { ArrowLeft: [pan, 0], ArrowRight: [-pan, 0], ArrowUp: [0, pan], ArrowDown: [0, -pan] };
      if (moves[evt.key]) { tx += moves[evt.key][0]; ty += moves[evt.key][1]; redraw(); }
      else if (evt.key === "+" || evt.key === "=") zoomAt(1.25, width / 2, height / 2);
      else if (evt.key === "-" || evt.key === "_") zoomAt(0.8, width / 2, height / 2);
      else if (evt.key === "0") { fit(hits || ids.keys(), hits ? 60 : 20); redraw(); }
      else if (evt.key === "n" || evt.key === "]") step(1);
      else if (evt.key === "p" || evt.key === "[") step(-1);
      else if (evt.key === "Enter" && selected >= 0) box.dispatchEvent(new CustomEvent("open-memory", { detail: ids[selected] }));
      else if (evt.key === "Escape") select(-1);
      else return;
      evt.preventDefault();
    });
    new ResizeObserver(() => { resize(); redraw(); }).observe(box);

    resize();
    paint();
    fit(ids.keys(), 20);
    draw();

    return {
      colourBy(next) { mode = next; paint(); redraw(); },
      focus(match) {
        if (!match) { hits = null; fit(ids.keys(), 20); redraw(); return 0; }
        const found = new Set();
        for (let i = 0; i < n; i++) if (match(labels[i], entities[i])) found.add(i);
        if (found.size === 0) return 0;
        hits = found;
        fit(found, 60);
        redraw();
        return found.size;
      },
      // Where a memory is on the screen (client coordinates), for tests and the benchmark.
      screenPosition(id) {
        const i = ids.indexOf(id);
        if (i < 0) return null;
        const rect = canvas.getBoundingClientRect();
        return { x: rect.left + xs[i] * k + tx, y: rect.top + ys[i] * k + ty };
      },
      zoom() { return k; },
    };
  }

  window.HebbsCanvasGraph = CanvasGraph;
})();
