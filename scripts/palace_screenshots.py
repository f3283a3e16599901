"""Regenerate docs/palace/*.png: a screenshot of every page of the Memory Palace over a small demo.

    .venv/bin/python scripts/palace_screenshots.py

A throwaway HEBBS_HOME and notes folder under /tmp, a real daemon, Debian's chromium through
Playwright; nothing of the user's ~/.hebbs is touched.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "palace"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
NOTES = {
    "customers/acme.md": "---\nentity: acme\ntags: [customer]\n---\n# Acme\n\nAcme uses Salesforce as their CRM; "
                         "[[Bob]] manages the account.\n\n## Pricing\n\nAcme pays 20 dollars per seat per month on the "
                         "annual plan, 400 seats.\n\n## Renewal\n\nThe contract renews every March. Bob negotiates it "
                         "with their CFO.\n",
    "people/Bob.md": "# Bob\n\nBob is the account manager for [[acme|Acme]] and prefers calls on Tuesday mornings.\n",
    "ops/deploys.md": "# Deploys\n\nProduction deploys go out through the canary pipeline with two approvals.\n\n"
                      "## Rollback\n\nA failed deploy is rolled back with helm rollback within five minutes.\n",
    "ops/incidents.md": "# Incidents\n\nThe March outage was caused by an expired TLS certificate on the gateway.\n\n"
                        "## Follow-up\n\nCertificates are now renewed automatically by cert-manager.\n",
}
GLOBAL = [
    ("Alice prefers short answers with code first.", "alice", "preference"),
    ("Alice works in Berlin and is online from 9 to 17 CET.", "alice", "fact"),
    ("Alice's team owns the billing service.", "alice", "fact"),
    ("We roll back a failed production deploy with helm rollback.", "team", None),
    ("The CI pipeline caches Docker layers to make deploys faster.", "team", None),
    ("A deploy to production needs two approvals in the pipeline.", "team", None),
    ("The canary deploy caught a memory leak before it reached all pods.", "team", None),
    ("Carol feeds her sourdough starter with rye flour every morning.", "carol", None),
    ("The sourdough loaf needs a long cold proof in the fridge overnight.", "carol", None),
    ("Baking bread at 250 degrees with steam gives a crisp crust.", "carol", None),
    ("Carol scores each loaf with a razor blade before baking it.", "carol", None),
]


LARGE_GRAPH = 1500
SITES = ["north ridge", "river delta", "old quarry", "pine valley", "salt flats", "east harbour", "glacier lake",
         "red canyon", "moss forest", "dune belt", "basalt cliffs", "reed marsh"]
SIGHTINGS = ["a heron", "fresh fox tracks", "a new lichen patch", "storm damage", "a nesting pair of kites",
             "high water", "a collapsed burrow", "frost on the north face", "an unfamiliar beetle", "a dry spring"]


def survey(n: int) -> list[dict]:
    """A field survey's log, one entity per site: enough memories for the large-graph view."""
    return [{"content": f"Survey visit {i}: {SIGHTINGS[(i * 7) % len(SIGHTINGS)]} at the {SITES[i % len(SITES)]}, "
                        f"day {i // len(SITES) + 1}.", "entity_id": SITES[i % len(SITES)].replace(" ", "-")}
            for i in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    if not Path("/usr/bin/chromium").exists():
        print("needs Debian's chromium: apt-get install chromium", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    from hebbs.client import Client

    work = Path(tempfile.mkdtemp(prefix="hbshots", dir="/tmp"))
    home, notes = work / "home", work / "notes"
    env = {**os.environ, "HEBBS_HOME": str(home), "HEBBS_PANEL": "off", "HEBBS_IDLE_TIMEOUT": "0"}
    hebbs = str(Path(sys.executable).with_name("hebbs"))

    def run(*args: str) -> str:
        return subprocess.run([hebbs, *args], env=env, check=True, capture_output=True, text=True).stdout

    try:
        for rel, text in NOTES.items():
            (notes / rel).parent.mkdir(parents=True, exist_ok=True)
            (notes / rel).write_text(text)
        run("index", str(notes))
        start = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)
        with Client(global_=True, home=home) as client:
            made = client.remember_many([
                {"content": text, "entity_id": entity, "created_at": start + dt.timedelta(days=n, hours=n % 5),
                 "importance": 0.8 if kind else 0.5, "context": {"type": kind} if kind else None}
                for n, (text, entity, kind) in enumerate(GLOBAL)])
            # Two claims that disagree: queued as a contradiction candidate when the second arrives.
            client.remember("The deploy pipeline is reliable.", entity_id="ops")
            client.remember("The deploy pipeline is unreliable.", entity_id="ops")
            client.revise(made[1].id, content="Alice works in Berlin and is online from 8 to 16 CET.")
            prepared = client.reflect_prepare(max_memories=100)
            for cluster in prepared.clusters[:2]:
                client.reflect_commit(prepared.session_id, [{
                    "content": f"Recurring theme: {', '.join(cluster.terms[:3])}.", "confidence": 0.8,
                    "source_memory_ids": [m.id for m in cluster.memories[:3]], "tags": cluster.terms[:2]}])
                prepared = client.reflect_prepare(max_memories=100)
            for cue in ("how do we roll back a deploy", "what does Alice prefer", "sourdough"):
                client.recall(cue, top_k=5)
        with Client(vault=notes, home=home) as client:
            client.recall("who manages the Acme account", top_k=5)
            pricing = client.recall("Acme seat price", top_k=1, reinforce=False).results[0].memory
            # Its access history: an agent's answer relied on it, then a recall that counted as use
            # (the memory page itself changes nothing: looking is not a use).
            client.reinforce(pricing.id)
            client.recall("what does Acme pay per seat", top_k=1, reinforce=True)
        large = work / "survey"
        large.mkdir()
        run("init", str(large))
        with Client(vault=large, home=home) as client:  # above the canvas threshold: the large-graph view
            made = client.remember_many(survey(LARGE_GRAPH), check_contradictions=False, consolidate=False)
            for a, b in zip(made[::3], made[7::3]):
                client.add_edge(a.id, "RELATED_TO", b.id, 0.8)
        port = free_port()
        url = json.loads(run("palace", "--port", str(port), "--no-browser", "--format", "json"))["url"]
        vault = str((notes / ".hebbs").resolve())
        base = f"http://127.0.0.1:{port}"
        g, v = quote(str(home.resolve()), safe=""), quote(vault, safe="")
        shots = [
            ("overview", "/", None),
            ("recall", f"/recall?vault={v}&run=1&cue=who+manages+the+Acme+account&strategy=similarity&strategy=lexical"
                       "&top_k=4", None),
            ("memory", f"/memory?vault={v}&id={pricing.id}", None),
            ("source", f"/source?vault={v}&id={pricing.id}", None),
            ("graph", f"/graph?vault={g}", "#graph[data-ready='1']"),
            ("graph-large", f"/graph?vault={quote(str((large / '.hebbs').resolve()), safe='')}", "#graph[data-ready='1']"),
            ("timeline", f"/timeline?vault={g}", None),
            ("contradictions", f"/contradictions?vault={g}", None),
            ("insights", f"/insights?vault={g}", None),
            ("queries", f"/queries?vault={g}", None),
        ]
        OUT.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(url)
            for name, path, ready in shots:
                page.goto(base + path)
                if ready:
                    page.wait_for_selector(ready)
                page.wait_for_timeout(300)
                page.screenshot(path=str(OUT / f"{name}.png"), full_page=not name.startswith("graph"))
                print(f"docs/palace/{name}.png")
            browser.close()
    finally:
        subprocess.run([hebbs, "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
