"""The Memory Palace in the browser over a 10,000-memory vault: first paint, a rendered recall, the graph.

    .venv/bin/python -m bench.bench_palace [--memories 10000] [--runs 5]

A throwaway HEBBS_HOME; memories are remembered through the daemon in batches of 500 (the real
embedding path), over 50 entities. Then headless Chromium (Debian's /usr/bin/chromium) measures:

- overview first paint: navigation start to first-contentful-paint, a fresh page each run;
- floor: the same for a page rendered through the same layout with no vault data (the query log
  of an empty vault), so the ratio says what the vault's size costs;
- rendered recall: click on Recall to the results painted (a form submit, server recall, render);
- its floor: the same recall through the SDK (Client.recall), no browser;
- graph interactive: page load to the sampled 5,000-node graph drawn AND a zoom (mouse wheel) answered
  with a new frame: until then the page does not respond to the user;
- a pan frame: a drag step to the frame that shows it, once the graph is up;
- reference: Cytoscape.js (what drew every graph before) building and drawing the very same 5,000
  nodes and their edges, preset positions, labels and arrows off, in the same browser;
- its floor: the graph page of an empty vault.
The vault also gets RELATED_TO edges (one per 4 memories, mostly within an entity), so the graph has
edges to draw. Figures are medians; the machine is shared, so compare ratios rather than absolute times.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

if TYPE_CHECKING:
    from hebbs import Client

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SUBJECTS = ["the billing service", "the deploy pipeline", "the Acme account", "the search cluster", "the mobile app",
            "the data warehouse", "the auth gateway", "the design system", "the on-call rota", "the Q3 roadmap"]
VERBS = ["was migrated to", "now depends on", "had an incident involving", "was reviewed together with",
         "got a new owner after", "is blocked by", "shipped a fix for", "was load-tested against"]
OBJECTS = ["Kubernetes 1.31", "a Postgres replica", "the new CDN", "the Stripe webhook", "an expired certificate",
           "the Redis cache", "the Kafka topic", "the SSO provider", "the nightly batch job", "the staging cluster"]
CUES = ["what happened to the billing service", "who owns the auth gateway", "incidents with expired certificates",
        "what is blocked by the Kafka topic", "mobile app load tests"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sentences(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} (note {i})."
        out.append({"content": text, "entity_id": f"team-{i % 50:02d}", "importance": round(rng.random(), 2)})
    return out


NEXT_FRAME = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
# What the graph page did for every graph before graph-canvas.js: Cytoscape.js with the server's
# positions and its cheapest settings for large graphs (no labels, straight edges, no arrows).
CYTOSCAPE_REFERENCE = """async (src) => {
  const view = await (await fetch(src, {credentials: 'same-origin'})).json();
  const box = document.createElement('div');
  box.style.width = '1200px'; box.style.height = '700px';
  document.body.appendChild(box);
  const t0 = performance.now();
  const elements = view.nodes.map(([id, label, kind, entity, superseded, x, y]) =>
    ({group: 'nodes', data: {id, label, kind, entity, superseded: superseded ? 1 : 0}, position: {x, y}}));
  view.edges.forEach(([s, t, type], i) =>
    elements.push({group: 'edges', data: {id: 'e' + i, source: view.nodes[s][0], target: view.nodes[t][0], type}}));
  const cy = cytoscape({container: box, elements, minZoom: 0.02, maxZoom: 4, textureOnViewport: true,
    hideEdgesOnViewport: true, pixelRatio: 1, layout: {name: 'preset', fit: true, padding: 20},
    style: [{selector: 'node', style: {'background-color': '#4e79a7', width: 10, height: 10}},
            {selector: "node[kind = 'INSIGHT']", style: {'background-color': '#f28e2b'}},
            {selector: 'edge', style: {width: 1, 'line-color': '#76b7b2', 'curve-style': 'haystack', opacity: 0.7}}]});
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const ms = performance.now() - t0;
  cy.destroy(); box.remove();
  return ms;
}"""


def cytoscape_reference(page: Any, base: str, vault: str) -> float:
    page.goto(f"{base}/queries?vault={vault}")
    page.add_script_tag(url="/static/vendor/cytoscape.min.js")
    return page.evaluate(CYTOSCAPE_REFERENCE, f"/api/graph?vault={vault}")


def add_edges(client: Client, memories: int, seed: int = 11) -> int:
    """RELATED_TO edges, one per 4 memories: 4 of 5 inside an entity (as notes link their neighbours),
    the rest across. Made once per home: a rerun finds the first one and adds nothing."""
    by_entity: dict[str, list[str]] = {}
    for memory in client.export():
        by_entity.setdefault(memory.entity_id or "", []).append(memory.id)
    rng = random.Random(seed)
    groups = [sorted(ids) for _, ids in sorted(by_entity.items()) if len(ids) > 1]
    everything = [i for ids in groups for i in ids]
    pairs = [rng.sample(rng.choice(groups), 2) if n % 5 else rng.sample(everything, 2) for n in range(memories // 4)]
    source, target = pairs[0]
    if any(e.edge_type == "RELATED_TO" and e.target == target for e in client.edges(source, "out")):
        return 0
    for source, target in pairs:
        client.add_edge(source, "RELATED_TO", target, 0.8)
    return len(pairs)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--home", help="reuse this HEBBS_HOME (kept afterwards): its memories are made once")
    args = parser.parse_args()
    if not Path("/usr/bin/chromium").exists():
        print("needs Debian's chromium: apt-get install chromium", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    from hebbs.client import Client

    work = Path(tempfile.mkdtemp(prefix="hbbench", dir="/tmp"))
    home = Path(args.home).absolute() if args.home else work / "home"
    empty = work / "empty"
    empty.mkdir()
    env = {**os.environ, "HEBBS_HOME": str(home), "HEBBS_PANEL": "off", "HEBBS_IDLE_TIMEOUT": "0"}
    os.environ.update(env)
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    try:
        started = time.perf_counter()
        with Client(global_=True, home=home) as client:
            have = client.status().vault.memories
            items = sentences(args.memories)[have:]
            for at in range(0, len(items), 500):
                client.remember_many(items[at:at + 500])
            linked = add_edges(client, args.memories)
        print(f"remembered {len(items)} memories, linked {linked} pairs in {time.perf_counter() - started:.0f} s "
              "(setup, not a figure)", flush=True)
        subprocess.run([hebbs, "init", str(empty)], env=env, check=True, capture_output=True)
        with Client(vault=empty, home=home) as client:
            client.status()
        port = free_port()
        url = json.loads(subprocess.run([hebbs, "palace", "--port", str(port), "--no-browser", "--format", "json"],
                                        env=env, check=True, capture_output=True, text=True).stdout)["url"]
        base = f"http://127.0.0.1:{port}"
        g = quote(str(home.resolve()), safe="")
        e = quote(str((empty / ".hebbs").resolve()), safe="")

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.set_default_timeout(120_000)
            page.goto(url)

            def first_paint(path: str) -> float:
                """Navigation start to first-contentful-paint, as the browser itself records it."""
                fresh = context.new_page()
                fresh.goto(base + path, wait_until="load")
                fcp = fresh.evaluate("""new Promise((resolve) => new PerformanceObserver((list, observer) => {
                    const entry = list.getEntriesByName('first-contentful-paint')[0];
                    if (entry) { observer.disconnect(); resolve(entry.startTime); }
                }).observe({type: 'paint', buffered: true}))""")
                fresh.close()
                return fcp

            cold = first_paint("/")  # the panel's whole-vault views are built on this first visit
            overview = [first_paint("/") for _ in range(args.runs)]
            floor = [first_paint(f"/queries?vault={e}") for _ in range(args.runs)]

            recall_ui, recall_sdk = [], []
            with Client(global_=True, home=home) as client:
                for cue in CUES[:args.runs]:
                    page.goto(f"{base}/recall?vault={g}")
                    page.fill("input[name=cue]", cue)
                    t0 = time.perf_counter()
                    page.click("button:has-text('Recall')")
                    page.wait_for_selector("#results article.result")
                    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                    recall_ui.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    client.recall(cue, top_k=10, reinforce=False)
                    recall_sdk.append((time.perf_counter() - t0) * 1000)

            def graph_interactive(vault: str) -> float:
                """Navigation to the graph drawn and a mouse-wheel zoom answered with a new frame."""
                t0 = time.perf_counter()
                page.goto(f"{base}/graph?vault={vault}")
                page.wait_for_selector("#graph[data-ready='1']")
                box = page.locator("#graph").bounding_box()
                if box is not None and page.locator("#graph").get_attribute("data-renderer"):
                    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                    page.mouse.wheel(0, -240)
                page.evaluate(NEXT_FRAME)
                return (time.perf_counter() - t0) * 1000

            def pan_frames(steps: int = 10) -> list[float]:
                """Drag steps over the drawn graph, each to the frame that shows it."""
                box = page.locator("#graph").bounding_box()
                x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
                idle = []
                for step in range(steps):  # the floor: the same round trips over the page's header, nothing to draw
                    t0 = time.perf_counter()
                    page.mouse.move(20 + 15 * step, 12)
                    page.evaluate(NEXT_FRAME)
                    idle.append((time.perf_counter() - t0) * 1000)
                page.mouse.move(x, y)
                page.mouse.down()
                out, drawn = [], []
                for step in range(steps):
                    t0 = time.perf_counter()
                    page.mouse.move(x + 15 * (step + 1), y + 9 * (step + 1))
                    page.evaluate(NEXT_FRAME)
                    out.append((time.perf_counter() - t0) * 1000)
                    drawn.append(float(page.locator("#graph").get_attribute("data-draw-ms") or "nan"))
                page.mouse.up()
                return out, drawn, idle

            graph_interactive(g)  # the first one builds the server's graph view (then cached until a change)
            graph = [graph_interactive(g) for _ in range(args.runs)]
            status = page.locator("#graph-status").inner_text()
            renderer = page.locator("#graph").get_attribute("data-renderer")
            pans, draws, idle = pan_frames()
            graph_floor = [graph_interactive(e) for _ in range(args.runs)]
            reference = [cytoscape_reference(page, base, g) for _ in range(max(1, args.runs // 2))]
            browser.close()
    finally:
        subprocess.run([hebbs, "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    med = statistics.median
    print(f"\nMemory Palace, {args.memories} memories, medians of {args.runs} runs (shared 2-core machine)")
    print(f"  overview first paint        {med(overview):7.0f} ms   (goal < 1000 ms)")
    print(f"  floor: empty page paint     {med(floor):7.0f} ms   ratio {med(overview) / med(floor):.1f}x")
    print(f"  rendered recall (click)     {med(recall_ui):7.0f} ms")
    print(f"  floor: SDK recall           {med(recall_sdk):7.0f} ms   ratio {med(recall_ui) / med(recall_sdk):.1f}x")
    print(f"  graph interactive           {med(graph):7.0f} ms   ({status.split(';')[0]}; drawn by {renderer})")
    print(f"  floor: empty graph page     {med(graph_floor):7.0f} ms   ratio {med(graph) / med(graph_floor):.1f}x")
    print(f"  reference: Cytoscape.js     {med(reference):7.0f} ms   the same nodes and edges built and drawn, "
          f"page already loaded; ratio {med(reference) / med(graph):.1f}x the whole graph page")
    print(f"  pan (drag step to frame)    {med(pans):7.0f} ms   median of {len(pans)}, worst {max(pans):.0f} ms; "
          f"drawing the frame itself {med(draws):.0f} ms (in the page)")
    print(f"  floor: a move off the graph {med(idle):7.0f} ms   ratio {med(pans) / med(idle):.1f}x")
    print(f"  first visit (views cold)    {cold:7.0f} ms   overview first paint before anything was cached")
    return 0


if __name__ == "__main__":
    sys.exit(main())
