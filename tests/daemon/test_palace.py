"""The Memory Palace, end to end: a real daemon over real vaults, its panel driven in headless Chromium.

Chromium is Debian's (/usr/bin/chromium; .ci/run installs it). A missing browser fails these tests:
they are never skipped.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from hebbs.paths import VAULT_DIR

import processes
from daemon_fixtures import chromium, free_port

pytest_plugins = ["daemon_fixtures"]

UI_WAIT_MS = 30_000
# What Chromium sends with a page the user opens: a request riding the cookie must carry it.
BROWSER = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
# A page's default timeout does not reach Playwright's assertions, which wait 5 s unless told: too
# short on a loaded machine for a refresh after the daemon answers (or restarts).
expect.set_options(timeout=UI_WAIT_MS)

NOTES = {
    "acme.md": "# Acme\n\nAcme uses Salesforce as their CRM, managed by [[Bob]].\n\n"
               "## Pricing\n\nAcme pays 20 dollars per seat per month on the annual plan.\n\n"
               "## Renewal\n\nThe Acme contract renews every March; Bob negotiates it.\n",
    "Bob.md": "# Bob\n\nBob is the account manager for Acme and prefers calls on Tuesday mornings.\n",
    "deploys.md": "# Deploys\n\nProduction deploys go out through the canary pipeline with two approvals.\n",
}
TOPICS = [
    "We roll back a failed production deploy with helm rollback.",
    "The CI pipeline caches Docker layers to make deploys faster.",
    "A deploy to production needs two approvals in the pipeline.",
    "The canary deploy caught a memory leak before it reached all Kubernetes pods.",
    "Carol feeds her sourdough starter with rye flour every morning.",
    "The sourdough loaf needs a long cold proof in the fridge overnight.",
    "Baking bread at 250 degrees with steam gives a crisp crust.",
    "Carol scores each loaf with a razor blade before baking it.",
    "The telescope showed Saturn's rings clearly last night.",
    "Jupiter's four largest moons are visible with binoculars.",
    "A new moon is the best time to photograph faint nebulae.",
    "The Perseid meteor shower peaks in mid August.",
]


class Palace:
    """A daemon home with a global brain and one notes vault, and the panel serving them."""

    def __init__(self, daemon: Any, notes: Path, port: int, url: str) -> None:
        self.daemon = daemon
        self.notes = notes
        self.vault = str((notes / VAULT_DIR).resolve())
        self.home = str(Path(daemon.home).resolve())
        self.port = port
        self.url = url
        self.token = url.split("token=", 1)[1]
        self.base = f"http://127.0.0.1:{port}"
        # Folders a test made for this daemon's vaults: removed once the daemon has closed them.
        self.scratch: list[Path] = []

    def page_url(self, path: str) -> str:
        return self.base + path

    def cookie(self) -> dict[str, str]:
        """The Cookie header a browser holds once it opened the printed address, with the fetch metadata
        the browser sends beside it when the user opens a page (a cookie without it is refused)."""
        traded = raw(self, "GET", f"/?token={self.token}").getheader("Set-Cookie")
        return {"Cookie": traded.split(";", 1)[0], **BROWSER}

    def form_value(self, cookie: dict[str, str]) -> str:
        """The session's form value, as the session's own pages carry it."""
        page = raw_text(self, "GET", "/recall", headers=cookie)
        return page.split('data-csrf="', 1)[1].split('"', 1)[0]


@pytest.fixture(scope="module")
def palace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Palace]:
    from daemon_fixtures import DaemonHome, short_tmp

    daemon = DaemonHome(idle_timeout=0)
    notes = short_tmp("hbnotes")
    scratch = [notes]
    for name, text in NOTES.items():
        (notes / name).write_text(text)
    try:
        daemon.hebbs("index", str(notes))
        with daemon.client(global_=True) as client:
            client.remember_many([{"content": text, "entity_id": "team"} for text in TOPICS])
            client.remember("Alice prefers tea in the afternoon.", entity_id="alice", importance=0.7)
            client.remember("The deploy pipeline is reliable.", entity_id="ops")
            client.remember("The deploy pipeline is unreliable.", entity_id="ops")
            prepared = client.reflect_prepare(max_memories=100)
            cluster = prepared.clusters[0]
            client.reflect_commit(prepared.session_id, [{
                "content": f"The team keeps notes about {cluster.terms[0]}.", "confidence": 0.8,
                "source_memory_ids": [m.id for m in cluster.memories[:3]], "tags": ["topic"]}])
        out = daemon.palace()
        port = out["port"]
        assert out["url"].startswith(f"http://127.0.0.1:{port}/?token=")
        palace = Palace(daemon, notes, port, out["url"])
        palace.scratch = scratch
        yield palace
    finally:
        daemon.cleanup()
        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser: Any, palace: Palace) -> Iterator[Any]:
    """A fresh browser context that opened the printed address (so it holds the token's cookie)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(UI_WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(palace.url)
    assert "token=" not in page.url  # the token went into a cookie, out of the address bar
    yield page
    context.close()
    assert not errors, f"script errors on the page: {errors}"


def q(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


# Pages ----------------------------------------------------------------------------------------------

def test_overview_shows_every_vault_with_its_counts_and_the_daemon(page: Any, palace: Palace) -> None:
    page.goto(palace.page_url("/"))
    global_card = page.locator(f'[data-vault-card="{palace.home}"]')
    notes_card = page.locator(f'[data-vault-card="{palace.vault}"]')
    assert global_card.locator(".count").inner_text() == "16"  # 12 topics, alice, two ops, one insight
    assert "INSIGHT" in global_card.inner_text() and "team" in global_card.inner_text()
    assert "1 pending" in global_card.inner_text()  # the reliable / unreliable pipeline
    notes_text = notes_card.inner_text()
    assert notes_card.locator(".count").inner_text() == "5"  # five sections in three notes
    assert "synced 3" in notes_text and "notes folder" in notes_text.lower()
    assert "kept in its own RocksDB database, in this folder" in notes_text  # a team's vault names its server
    assert "all-MiniLM-L6-v2" in page.locator(".card.daemon").inner_text()


def test_memory_page_shows_source_edges_and_the_section_in_its_file(page: Any, palace: Palace) -> None:
    with palace.daemon.client(vault=palace.notes) as client:
        hit = client.recall("Acme seat price", top_k=1, reinforce=False).results[0].memory
    page.goto(palace.page_url(f"/memory?vault={q(palace.vault)}&id={hit.id}"))
    assert "20 dollars per seat" in page.locator("#memory-content").inner_text()
    text = page.locator("main").inner_text()
    assert "acme.md" in text and "Acme › Pricing" in text and "lines 5–7" in text
    assert "FOLLOWED_BY" in text or "RELATED_TO" in text
    page.click("text=show the section in its file")
    assert page.locator("mark#section").inner_text().startswith("## Pricing")
    assert "Acme uses Salesforce" in page.locator("pre.source").inner_text()  # the whole file, section marked


def open_graph(page: Any, palace: Palace, vault: str) -> Any:
    """The graph page of `vault`, once its graph is drawn: the graph's box."""
    page.goto(palace.page_url(f"/graph?vault={q(vault)}"))
    page.wait_for_selector("#graph[data-ready='1']")
    return page.locator("#graph")


def graph_position(page: Any, memory_id: str) -> dict[str, float] | None:
    """Where the page drew this memory (its renderer says where), in client coordinates."""
    return page.evaluate("(id) => document.getElementById('graph').hebbsGraph.screenPosition(id)", memory_id)


def next_frame(page: Any) -> None:
    """Wait until the canvas has drawn what the last event asked for (it draws on the next frame)."""
    page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")


def test_graph_draws_the_memories(page: Any, palace: Palace) -> None:
    open_graph(page, palace, palace.home)
    assert page.locator("#graph-status").inner_text().startswith("16 memories")
    assert page.locator("#graph canvas").count() > 0


def click_memory_in_graph(page: Any, memory_id: str) -> None:
    """Click where the page drew this memory (its renderer says where), and land on its page."""
    spot = graph_position(page, memory_id)
    assert spot is not None, f"{memory_id} is not in the graph"
    page.mouse.click(spot["x"], spot["y"])
    page.wait_for_url(f"**/memory?**id={memory_id}**")


def test_a_small_graph_is_laid_out_by_cytoscape_and_a_click_opens_the_memory(page: Any, palace: Palace) -> None:
    with palace.daemon.client(global_=True) as client:
        alice = client.recall("Alice tea", top_k=1, entity_id="alice").results[0].memory
    assert open_graph(page, palace, palace.home).get_attribute("data-renderer") == "cytoscape"
    click_memory_in_graph(page, alice.id)
    assert "Alice prefers tea" in page.locator("#memory-content").inner_text()
    page.go_back()
    page.wait_for_selector("#graph[data-ready='1']")
    page.fill("#graph-search", "alice")  # an entity's name focuses its memories
    expect(page.locator("#graph")).to_have_attribute("data-focused", "1")


@pytest.fixture(scope="module")
def large_vault(palace: Palace) -> tuple[str, list[Any]]:
    """A project vault above the canvas threshold: 320 memories over 8 entities, with links."""
    from hebbs.daemon.panel.data import PRESET_LAYOUT_ABOVE

    root = palace.daemon.project()
    palace.scratch.append(root)
    count = PRESET_LAYOUT_ABOVE + 70
    with palace.daemon.client(vault=root) as client:
        made = client.remember_many([{"content": f"Crew {n % 8} logged observation number {n} of the survey.",
                                      "entity_id": f"crew-{n % 8}"} for n in range(count)], check_contradictions=False,
                                     consolidate=False)
        for a, b in zip(made[::7], made[3::7]):
            client.add_edge(a.id, "RELATED_TO", b.id, 0.9)
        # Neighbours in time, so neighbours on their entity's spiral unless the layout parts them.
        client.add_edge(made[8].id, "CONTRADICTS", made[16].id, 0.9)
    return str((root / VAULT_DIR).resolve()), made


def test_a_large_graph_is_drawn_on_a_canvas_responds_to_zoom_search_and_click(page: Any, palace: Palace,
                                                                              large_vault: tuple[str, list[Any]]) -> None:
    vault, made = large_vault
    box = open_graph(page, palace, vault)
    assert box.get_attribute("data-renderer") == "canvas"
    assert box.locator("canvas.graph-canvas").count() == 1
    status = page.locator("#graph-status").inner_text()
    assert status.startswith(f"{len(made)} memories, ") and "each entity is a disc" in status
    assert "RELATED_TO" in page.locator(".legend").inner_text()
    # Zoom with the wheel: the page draws again at the new scale.
    zoom = page.evaluate("document.getElementById('graph').hebbsGraph.zoom()")
    bounds = box.bounding_box()
    page.mouse.move(bounds["x"] + bounds["width"] / 2, bounds["y"] + bounds["height"] / 2)
    frames = int(box.get_attribute("data-frames") or 0)
    page.mouse.wheel(0, -400)
    next_frame(page)
    assert page.evaluate("document.getElementById('graph').hebbsGraph.zoom()") > zoom
    assert int(box.get_attribute("data-frames") or 0) > frames
    # Search focuses an entity's memories; hovering one names it; clicking opens it.
    page.fill("#graph-search", "crew-3")
    expect(box).to_have_attribute("data-focused", str(sum(1 for m in made if m.entity_id == "crew-3")))
    target = next(m for m in made if m.entity_id == "crew-3")
    spot = graph_position(page, target.id)
    page.mouse.move(spot["x"], spot["y"])
    expect(page.locator(".graph-tip")).to_contain_text(target.content[:30])
    click_memory_in_graph(page, target.id)
    assert target.content in page.locator("#memory-content").inner_text()


def test_a_large_graph_parts_contradictions_and_answers_the_keyboard(page: Any, palace: Palace,
                                                                       large_vault: tuple[str, list[Any]]) -> None:
    vault, made = large_vault
    box = open_graph(page, palace, vault)

    def spot(memory: Any) -> dict[str, float]:
        return graph_position(page, memory.id)

    def apart(a: Any, b: Any) -> float:
        p, r = spot(a), spot(b)
        return float(((p["x"] - r["x"]) ** 2 + (p["y"] - r["y"]) ** 2) ** 0.5)

    # made[8] and made[16] contradict: the second is drawn across its entity's disc from the first.
    same_entity = [m for m in made if m.entity_id == made[8].entity_id and m.id != made[8].id]
    assert apart(made[8], made[16]) >= max(apart(made[8], m) for m in same_entity) - 0.5
    canvas = box.locator("canvas.graph-canvas")
    canvas.focus()
    before = spot(made[0])
    page.keyboard.press("ArrowRight")
    next_frame(page)
    assert spot(made[0])["x"] < before["x"]
    zoom = page.evaluate("document.getElementById('graph').hebbsGraph.zoom()")
    page.keyboard.press("+")
    assert page.evaluate("document.getElementById('graph').hebbsGraph.zoom()") > zoom
    # Stepping goes through a search's matches; Enter opens the selected memory.
    page.fill("#graph-search", "crew-5")
    canvas.focus()
    page.keyboard.press("n")
    chosen = box.get_attribute("data-selected")
    assert chosen in {m.id for m in made if m.entity_id == "crew-5"}
    page.keyboard.press("n")
    assert box.get_attribute("data-selected") not in {"", chosen}
    page.keyboard.press("Escape")
    assert box.get_attribute("data-selected") == ""
    page.keyboard.press("p")
    chosen = box.get_attribute("data-selected")
    page.keyboard.press("Enter")
    page.wait_for_url("**/memory?**")
    assert next(m for m in made if m.id == chosen).content in page.locator("#memory-content").inner_text()


def test_timeline_lists_an_entitys_memories_in_time_order_and_filters_by_kind(page: Any, palace: Palace) -> None:
    page.goto(palace.page_url(f"/timeline?vault={q(palace.home)}&entity=team"))
    items = page.locator("ol.timeline li.event").all_inner_texts()
    assert len(items) >= 12 and "helm rollback" in items[0] and "Perseid" in items[11]
    page.select_option("select[name=entity]", "")  # submits on change
    page.wait_for_url("**entity=&**")
    page.select_option("select[name=kind]", "INSIGHT")
    page.wait_for_url("**kind=INSIGHT**")
    assert page.locator("ol.timeline li.event").count() == 1
    assert "The team keeps notes about" in page.locator("ol.timeline").inner_text()


def test_insights_show_their_source_memories_and_the_query_log_shows_recalls(page: Any, palace: Palace) -> None:
    page.goto(palace.page_url(f"/insights?vault={q(palace.home)}"))
    insight = page.locator("article.insight").first
    assert "The team keeps notes about" in insight.inner_text()
    assert insight.locator("ul.sources li").count() == 3
    with palace.daemon.client(global_=True) as client:
        client.recall("sourdough starter", top_k=3)
    page.goto(palace.page_url(f"/queries?vault={q(palace.home)}"))
    row = page.locator("table.queries tbody tr").first.inner_text()
    assert "sourdough starter" in row and "ms" in row


def test_the_memory_page_shows_the_kept_original_as_hebbs_source_does(page: Any, palace: Palace) -> None:
    with palace.daemon.client(vault=palace.notes) as client:
        hit = client.recall("Acme contract renewal", top_k=1, reinforce=False).results[0].memory
    kept = json.loads(palace.daemon.hebbs("--vault", str(palace.notes), "source", hit.id, "--format", "json").stdout)
    page.goto(palace.page_url(f"/memory?vault={q(palace.vault)}&id={hit.id}"))
    section = page.locator("#kept-original")
    text = section.inner_text()
    assert kept["file"] in text and f"{kept['line_start']}–{kept['line_end']}" in text
    assert kept["sha256"][:12] in text and "current version" in text
    assert page.locator("#original-text").inner_text().strip() == kept["text"].strip()


def test_a_memory_from_an_agent_has_no_kept_original_section(page: Any, palace: Palace) -> None:
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("Agents write memories that come from no file.", entity_id="agents")
    page.goto(palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id}"))
    assert page.locator("#kept-original").count() == 0
    assert "not indexed from a notes file" in page.locator("main").inner_text()


def test_opening_a_memory_changes_nothing_and_only_the_useful_button_reinforces_it(page: Any, palace: Palace) -> None:
    def accesses(memory_id: str) -> tuple[int, float, list[str]]:
        found = json.loads(palace.daemon.hebbs("--global", "inspect", memory_id, "--format", "json").stdout)
        memory = found["memory"]
        return memory.get("access_count", 0), memory.get("decay_score", 0.0), [a["via"] for a in found["accesses"]]

    with palace.daemon.client(global_=True) as client:
        memory = client.remember("The staging database is wiped every Sunday night.", entity_id="ops-notes")
    untouched = accesses(memory.id)
    assert untouched[0] == 0 and untouched[2] == []
    # Looking is not using: the page, reloads, a second tab by a suffix and the page fetched as a browser
    # would (plain HTTP) leave the count, the decay score and the access log as they were.
    page.goto(palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id}"))
    expect(page.locator("#access-count")).to_have_text("0 times")
    for _ in range(2):
        page.reload()
    second = page.context.new_page()
    second.goto(palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id[-8:]}"))
    second.close()
    assert "This was useful" in raw_text(palace, "GET", f"/memory?vault={q(palace.home)}&id={memory.id}",
                                         headers=palace.cookie())
    assert accesses(memory.id) == untouched
    # The person says it was useful: one use, via the panel, newest first beside an agent's use.
    page.click("button:has-text('This was useful')")
    expect(page.locator("#access-count")).to_have_text("1 time")
    assert accesses(memory.id)[::2] == (1, ["panel"])
    assert page.locator("#access-history li").all_inner_texts()[0].endswith("marked useful in the Memory Palace")
    palace.daemon.hebbs("--global", "used", memory.id)
    page.reload()
    expect(page.locator("#access-count")).to_have_text("2 times")
    assert accesses(memory.id)[::2] == (2, ["used", "panel"])
    inspected = palace.daemon.hebbs("--global", "inspect", memory.id).stdout
    assert "accesses (2, newest first)" in inspected and "marked useful in the Memory Palace" in inspected


def test_hebbs_status_prints_the_panel_address(palace: Palace) -> None:
    text = palace.daemon.hebbs("status", "--global").stdout
    assert f"panel    {palace.url}" in text
    status = json.loads(palace.daemon.hebbs("status", "--global", "--format", "json").stdout)
    assert status["daemon"]["panel"]["url"] == palace.url and status["daemon"]["panel"]["port"] == palace.port
    assert palace.url in palace.daemon.hebbs("daemon", "status").stdout
    assert json.loads(palace.daemon.hebbs("daemon", "status", "--format", "json").stdout)["panel"]["url"] == palace.url


# The recall playground ------------------------------------------------------------------------------

def test_a_recall_through_the_playground_shows_scores_strategies_and_the_command_line(page: Any, palace: Palace) -> None:
    page.goto(palace.page_url(f"/recall?vault={q(palace.vault)}"))
    page.fill("input[name=cue]", "who manages the CRM")
    page.check("input[name=strategy][value=similarity]")
    page.check("input[name=strategy][value=lexical]")
    page.fill("input[name=top_k]", "3")
    page.click("button:has-text('Recall')")
    page.wait_for_selector("#results")
    results = page.locator("article.result")
    assert results.count() == 3
    first = results.first.inner_text()
    assert "Salesforce" in first or "Bob" in first
    assert results.first.locator(".bar").count() == 4  # relevance, recency, importance, reinforcement
    assert results.first.locator(".chip.strategy").count() >= 1
    command = page.locator("#command-line").inner_text()
    assert command == (f"hebbs --vault {palace.notes.resolve()} recall 'who manages the CRM' --strategy similarity "
                       "--strategy lexical --top-k 3")


# Changing memories ----------------------------------------------------------------------------------

def test_a_contradiction_review_in_the_panel_is_what_the_cli_then_sees(page: Any, palace: Palace) -> None:
    page.goto(palace.page_url(f"/contradictions?vault={q(palace.home)}"))
    candidate = page.locator("article.candidate").first
    assert "reliable" in candidate.inner_text() and "unreliable" in candidate.inner_text()
    candidate.locator("button:has-text('Revision')").click()
    page.wait_for_selector("#no-candidates")
    assert "revision recorded" in page.locator(".notice").first.inner_text()
    listed = json.loads(palace.daemon.hebbs("--global", "contradictions", "--format", "json").stdout)
    assert listed["candidates"] == []
    recalled = json.loads(palace.daemon.hebbs("--global", "recall", "deploy pipeline reliable", "--entity", "ops",
                                              "--format", "json").stdout)
    contents = [r["memory"]["content"] for r in recalled["results"]]
    assert contents == ["The deploy pipeline is unreliable."]  # the older one is superseded now


def test_revise_pin_supersede_and_forget_from_the_memory_page(page: Any, palace: Palace) -> None:
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("The office wifi password rotates monthly.", entity_id="office")
    page.goto(palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id}"))
    page.fill("form.revise textarea[name=content]", "The office wifi password rotates every week.")
    page.click("form.revise button:has-text('Revise')")
    page.wait_for_selector("text=rotates every week")
    assert "rotates monthly" in page.locator("ul.history").inner_text()
    page.click("button:has-text('Pin')")
    page.wait_for_selector("button:has-text('Unpin')")
    shown = json.loads(palace.daemon.hebbs("--global", "get", memory.id, "--format", "json").stdout)
    assert shown["content"] == "The office wifi password rotates every week." and shown["context"]["pinned"] is True

    page.fill("form.supersede textarea[name=content]", "The office wifi has no password; it uses badges now.")
    page.click("form.supersede button:has-text('Supersede')")
    page.wait_for_selector("text=uses badges now")
    newer_id = page.url.split("id=")[1]
    chain = page.locator("ol.chain").inner_text()
    assert "rotates every week" in chain
    old = json.loads(palace.daemon.hebbs("--global", "get", memory.id, "--format", "json").stdout)
    assert old["superseded_by"] == newer_id

    page.click("button:has-text('Forget')")
    page.wait_for_selector("text=Forget this memory?")  # asks first
    assert json.loads(palace.daemon.hebbs("--global", "get", newer_id, "--format", "json").stdout)["id"] == newer_id
    page.click("button:has-text('Yes, forget it')")
    page.wait_for_url("**/timeline**")
    gone = palace.daemon.hebbs("--global", "get", newer_id, check=False)
    assert gone.returncode == 1 and "NOT_FOUND" in gone.stderr + gone.stdout or "no memory" in gone.stderr


# Live updates -----------------------------------------------------------------------------------------

def test_a_page_updates_live_after_hebbs_remember_without_a_reload(page: Any, palace: Palace) -> None:
    page.goto(palace.page_url(f"/timeline?vault={q(palace.home)}&entity=visitors"))
    page.wait_for_selector("#live.on")  # the event stream is open
    page.evaluate("window.__not_reloaded = true")
    assert page.locator("ol.timeline li.event").count() == 0
    palace.daemon.hebbs("--global", "remember", "A visitor from Globex arrives on Thursday.", "--entity", "visitors")
    page.wait_for_selector("text=A visitor from Globex arrives on Thursday.")
    assert page.evaluate("window.__not_reloaded") is True


def test_the_overview_follows_a_watcher_style_index_run(page: Any, palace: Palace) -> None:
    page.goto(palace.page_url("/"))
    page.wait_for_selector("#live.on")
    page.evaluate("window.__not_reloaded = true")
    (palace.notes / "globex.md").write_text("# Globex\n\nGlobex is a new prospect in the energy sector.\n")
    palace.daemon.hebbs("index", str(palace.notes))
    card = page.locator(f'[data-vault-card="{palace.vault}"] .count')
    # Polled through a locator: a string predicate is eval'd in the page, which the panel's CSP refuses.
    expect(card).to_have_text("6")
    assert card.inner_text() == "6" and page.evaluate("window.__not_reloaded") is True


# Security, with raw HTTP requests -----------------------------------------------------------------------

def raw(palace: Palace, method: str, path: str, *, host: str | None = None, headers: dict[str, str] | None = None,
        body: str | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", palace.port, timeout=30)
    conn.putrequest(method, path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{palace.port}")
    for k, v in (headers or {}).items():
        conn.putheader(k, v)
    data = body.encode() if body is not None else None
    if data is not None:
        conn.putheader("Content-Type", "application/x-www-form-urlencoded")
        conn.putheader("Content-Length", str(len(data)))
    conn.endheaders(data)
    response = conn.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


def raw_text(palace: Palace, method: str, path: str, **kw: Any) -> str:
    response = raw(palace, method, path, **kw)
    assert response.status == 200, (path, response.status)
    return response.body.decode()  # type: ignore[attr-defined]


def test_a_foreign_host_header_is_refused_even_with_the_token(palace: Palace) -> None:
    cookie = palace.cookie()
    assert raw(palace, "GET", "/", headers=cookie).status == 200
    assert raw(palace, "GET", "/", host=f"localhost:{palace.port}", headers=cookie).status == 200
    for host in (f"evil.example:{palace.port}", "127.0.0.1", f"127.0.0.1:{palace.port + 1}", f"attacker.localhost:{palace.port}"):
        assert raw(palace, "GET", "/", host=host, headers=cookie).status == 403, host
    assert raw(palace, "GET", f"/?token={palace.token}", host=f"evil.example:{palace.port}").status == 403


def test_every_page_and_action_needs_the_token(palace: Palace) -> None:
    for path in ("/", "/recall", "/graph", f"/api/graph?vault={q(palace.home)}", "/events", "/queries"):
        assert raw(palace, "GET", path).status == 403, path
        assert raw(palace, "GET", path, headers={"Cookie": f"hebbs_panel_{palace.port}=wrong"}).status == 403, path
        # The cookie holds a session value of its own, not the token.
        assert raw(palace, "GET", path, headers={"Cookie": f"hebbs_panel_{palace.port}={palace.token}"}).status == 403
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("A memory nobody may forget without the token.")
    form = f"vault={q(palace.home)}&id={memory.id}&confirm=yes"
    # Without the session's form value, with a wrong one, with the token in the form (it is no form
    # value), and with the cookie alone (what a cross-site form would send).
    assert raw(palace, "POST", "/memory/forget", body=form).status == 403
    cookie = palace.cookie()
    for extra in ("&csrf=wrong", f"&token={palace.token}", f"&csrf={palace.token}", ""):
        assert raw(palace, "POST", "/memory/forget", body=form + extra, headers=cookie).status == 403, extra
    with palace.daemon.client(global_=True) as client:
        assert client.get(memory.id).id == memory.id  # still there
    done = raw(palace, "POST", "/memory/forget", body=form + f"&csrf={palace.form_value(cookie)}", headers=cookie)
    assert done.status == 303


def test_the_printed_address_trades_its_token_for_a_strict_cookie(palace: Palace) -> None:
    response = raw(palace, "GET", f"/?token={palace.token}")
    assert response.status == 303 and response.getheader("Location") == "/"
    cookie = response.getheader("Set-Cookie")
    # Named after the port: cookies ignore ports, and two daemons' panels must not overwrite each other's.
    assert cookie.startswith(f"hebbs_panel_{palace.port}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert palace.token not in cookie  # a session value: the token, which authorizes changes, stays out of it


def test_responses_carry_a_self_only_policy_and_no_path_leaves_the_panel(palace: Palace) -> None:
    cookie = palace.cookie()
    response = raw(palace, "GET", "/", headers=cookie)
    csp = response.getheader("Content-Security-Policy")
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "worker-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert response.getheader("X-Content-Type-Options") == "nosniff"
    assert raw(palace, "GET", "/static/panel.css").status == 200
    for path in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fservice.py", "/static//etc/passwd",
                 f"/static/{q(palace.home)}/panel.token"):
        assert raw(palace, "GET", path, headers=cookie).status == 404, path
    # A vault the daemon does not know is refused, whatever the path.
    for vault in ("/etc", "/", str(Path(palace.home).parent)):
        assert raw(palace, "GET", f"/timeline?vault={q(vault)}", headers=cookie).status == 404, vault


def test_the_panel_listens_on_loopback_only(palace: Palace) -> None:
    local = {line.split()[1] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
             if line.split()[3] == "0A"}
    assert f"0100007F:{palace.port:04X}" in local
    assert f"00000000:{palace.port:04X}" not in local


def test_a_taken_port_is_a_clear_error_naming_its_holder(palace: Palace) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        port = squatter.getsockname()[1]
        done = palace.daemon.hebbs("palace", "--port", str(port), "--no-browser", check=False)
    assert done.returncode == 1
    assert f"port {port} is already in use by pid {os.getpid()}" in done.stderr
    assert "Traceback" not in done.stderr
    # The panel keeps being served where it was.
    again = json.loads(palace.daemon.hebbs("palace", "--no-browser", "--format", "json").stdout)
    assert again["port"] == palace.port


def test_an_index_run_shows_its_progress_on_the_overview_and_can_be_cancelled(page: Any, palace: Palace) -> None:
    import subprocess
    import sys

    from daemon_fixtures import short_tmp

    big = short_tmp("hbbig")
    palace.scratch.append(big)
    for n in range(600):
        (big / f"note-{n:04d}.md").write_text(f"# Note {n}\n\nFact number {n} about project {n % 17}.\n\n"
                                             f"## Detail\n\nMore about item {n}, owned by team {n % 5}.\n")
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    # The overview is open before the run starts: it notices the run without a reload.
    page.goto(palace.page_url("/"))
    page.wait_for_selector("#live.on")
    page.evaluate("window.__not_reloaded = true")
    run = processes.popen([hebbs, "index", str(big)], env=palace.daemon.env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        page.wait_for_selector("[data-indexing]")
        assert "indexing:" in page.locator("[data-indexing]").inner_text()
        assert page.evaluate("window.__not_reloaded") is True
        page.locator("[data-indexing] button:has-text('Cancel')").click()
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1 and "cancelled" in stderr and "Traceback" not in stderr
    # The next run picks up where the cancelled one stopped, and ends with every section indexed.
    palace.daemon.hebbs("index", str(big), timeout=600)
    listed = json.loads(palace.daemon.hebbs("list", str(big), "--format", "json").stdout)
    assert len(listed) == 600 and {f["state"] for f in listed} == {"synced"}
    with palace.daemon.client(vault=big) as client:
        assert client.status().vault.memories == 1200


def test_the_daemon_serves_the_panel_from_its_start_as_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from daemon_fixtures import DaemonHome, wait_until

    port = free_port()
    monkeypatch.setenv("HEBBS_PANEL", "on")
    monkeypatch.setenv("HEBBS_PANEL_PORT", str(port))
    daemon = DaemonHome(idle_timeout=0)
    try:
        daemon.start()
        token = Path(daemon.home) / "panel.token"

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        wait_until(answers, what="the panel to listen")
        assert token.stat().st_mode & 0o777 == 0o600
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/")
        assert conn.getresponse().status == 403  # no token, no page
        conn.close()
        daemon.stop()
        assert not token.exists() and not answers()  # the token dies with its daemon
    finally:
        daemon.cleanup()

    # [panel] enabled = false: the daemon leaves the port alone until `hebbs palace` asks.
    off = DaemonHome(idle_timeout=0)
    try:
        (Path(off.home) / "config.toml").write_text("[panel]\nenabled = false\n")
        off.start()
        time.sleep(1.0)
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0
        served = json.loads(off.hebbs("palace", "--port", str(port), "--no-browser", "--format", "json").stdout)
        assert served["port"] == port
    finally:
        off.cleanup()


# Robustness: many tabs, hostile requests, a stopped daemon, long and odd text ----------------------------

def test_eight_tabs_all_load_and_follow_live_updates(browser: Any, palace: Palace) -> None:
    """Each page used to hold its own event stream: the 7th tab waited for one of the six connections."""
    context = browser.new_context()
    try:
        tabs = []
        for n in range(8):
            tab = context.new_page()
            tab.set_default_timeout(UI_WAIT_MS)
            tab.goto(palace.url if n == 0 else palace.page_url(f"/timeline?vault={q(palace.home)}&entity=tabs"))
            if n == 0:
                tab.goto(palace.page_url(f"/timeline?vault={q(palace.home)}&entity=tabs"))
            tab.wait_for_selector("#live.on")
            tabs.append(tab)
        palace.daemon.hebbs("--global", "remember", "Eight tabs follow one event stream.", "--entity", "tabs")
        for tab in tabs:
            tab.wait_for_selector("text=Eight tabs follow one event stream.")
    finally:
        context.close()


def test_no_get_changes_a_memory(palace: Palace) -> None:
    """A page on another local port could make the browser GET anything: a GET never reinforces."""
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("The lighthouse keeper logs the weather at dawn.", entity_id="lighthouse")
    cookie = palace.cookie()
    assert raw(palace, "GET", f"/memory?vault={q(palace.home)}&id={memory.id}", headers=cookie).status == 200
    assert raw(palace, "GET", f"/recall?vault={q(palace.home)}&cue=lighthouse+weather&run=1&reinforce=1",
               headers=cookie).status == 200
    with palace.daemon.client(global_=True) as client:
        assert client.get(memory.id).access_count == 0
    # The same recall posted with the session's form value counts.
    value = palace.form_value(cookie)
    form = f"vault={q(palace.home)}&cue=lighthouse+weather&top_k=1&run=1&reinforce=1&csrf={value}"
    assert raw(palace, "POST", "/recall", body=form, headers=cookie).status == 200
    assert raw(palace, "POST", "/recall", body=form.replace(value, "wrong"), headers=cookie).status == 403
    with palace.daemon.client(global_=True) as client:
        assert client.get(memory.id).access_count == 1


def test_a_cookie_sent_by_another_site_or_port_is_refused(palace: Palace) -> None:
    cookie = palace.cookie()
    for site in ("same-site", "cross-site"):
        assert raw(palace, "GET", "/", headers={**cookie, "Sec-Fetch-Site": site}).status == 403, site
    for site in ("same-origin", "none"):
        assert raw(palace, "GET", "/", headers={**cookie, "Sec-Fetch-Site": site}).status == 200, site
    # A client that carries the token itself is not riding a cookie.
    assert raw(palace, "GET", "/", headers={"X-Hebbs-Token": palace.token, "Sec-Fetch-Site": "cross-site"}).status == 200


def test_bad_requests_get_clear_pages_never_a_500_or_an_off_site_redirect(palace: Palace) -> None:
    cookie = palace.cookie()
    token = {"X-Hebbs-Token": palace.token}
    pin = raw(palace, "POST", "/memory/pin", body=f"vault={q(palace.home)}&pinned=1", headers=token)
    assert pin.status == 400 and pin.getheader("Content-Type").startswith("text/html")
    snowman = raw(palace, "GET", f"/%E2%98%83?token={palace.token}")
    assert snowman.status == 303 and snowman.getheader("Location") == "/%E2%98%83"
    missing = raw(palace, "GET", "/%E2%98%83", headers=cookie)
    assert missing.status == 404 and missing.getheader("Content-Type").startswith("text/html")
    for path in ("//evil.com/x", "/\\evil.com/x"):
        moved = raw(palace, "GET", f"{path}?token={palace.token}")
        assert moved.status == 303 and not moved.getheader("Location").startswith(("//", "/\\")), path
    unknown = raw(palace, "POST", "/memory/pin", body=f"vault=%2Fetc&id=x&csrf={palace.form_value(cookie)}",
                  headers=cookie)
    assert unknown.status == 404 and unknown.getheader("Content-Type").startswith("text/html")
    for weight in ("nan", "-1"):
        assert raw(palace, "GET", f"/recall?vault={q(palace.home)}&w_relevance={weight}&run=1",
                   headers=cookie).status == 400, weight


def test_a_live_refresh_keeps_unsaved_text(page: Any, palace: Palace) -> None:
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("The harbour ferry leaves at seven.", entity_id="harbour")
    page.goto(palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id}"))
    expect(page.locator("#access-count")).to_have_text("0 times")  # opening it is not a use
    page.wait_for_selector("#live.on")
    page.fill("form.supersede textarea[name=content]", "The harbour ferry leaves at eight now.")
    page.click("#memory-content")  # the field loses focus, its text unsaved
    before = page.evaluate("document.body.dataset.updatedAt || ''")
    palace.daemon.hebbs("--global", "remember", "Another memory arrives meanwhile.", "--entity", "harbour")
    expect(page.locator("body")).not_to_have_attribute("data-updated-at", before)
    assert page.input_value("form.supersede textarea[name=content]") == "The harbour ferry leaves at eight now."


def test_a_live_refresh_that_comes_while_the_user_types_waits_until_the_field_is_left(page: Any, palace: Palace) -> None:
    """A refresh whose fetch left before the user entered a field came back and swapped the page while
    they typed: the field went away under the cursor, and what was typed next went nowhere (seen at load
    15 as a revise that kept the old text). The fetch is held here until the field is in use."""
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("The night bus stops at the library.", entity_id="bus")
    page.goto(palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id}"))
    expect(page.locator("#access-count")).to_have_text("0 times")  # opening it is not a use
    page.wait_for_selector("#live.on")
    held: list[Any] = []
    memory_page = re.compile(r"/memory\?")

    def hold(route: Any) -> None:
        held.append(route)

    page.route(memory_page, hold)
    with page.expect_request(lambda request: "/memory?" in request.url):
        palace.daemon.hebbs("--global", "remember", "The day bus is route 4.", "--entity", "bus")
    box = "form.revise textarea[name=content]"
    page.fill(box, "The night bus stops at the station now.")
    page.evaluate(f"document.querySelector({box!r}).dataset.mark = 'typed here'")
    held[0].continue_()
    page.unroute(memory_page, hold)
    expect(page.locator("#live")).to_have_class(re.compile(r"\bwaiting\b"))
    assert page.evaluate(f"document.activeElement === document.querySelector({box!r})")
    assert page.evaluate(f"document.querySelector({box!r}).dataset.mark") == "typed here"
    page.keyboard.type(" Since May.")
    assert page.input_value(box) == "The night bus stops at the station now. Since May."

    before = page.evaluate("document.body.dataset.updatedAt || ''")
    page.click("#memory-content")  # the field is left: the change shows, the unsaved text stays
    expect(page.locator("body")).not_to_have_attribute("data-updated-at", before)
    expect(page.locator("#live")).not_to_have_class(re.compile(r"\bwaiting\b"))
    assert page.input_value(box) == "The night bus stops at the station now. Since May."


def test_a_live_refresh_waits_while_a_button_is_held(page: Any, palace: Palace) -> None:
    """A refresh that swapped the page between a press and its release replaced the button under the
    pointer, and the click was lost: seen once as a revise that never happened, on a loaded machine.
    A second tab on the same event stream shows when the change has arrived."""
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("The tram depot opens at five.", entity_id="depot")
    other = page.context.new_page()
    other.set_default_timeout(UI_WAIT_MS)
    try:
        other.goto(palace.page_url(f"/timeline?vault={q(palace.home)}&entity=depot"))
        other.wait_for_selector("#live.on")
        page.goto(palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id}"))
        expect(page.locator("#access-count")).to_have_text("0 times")  # opening it is not a use: no refresh follows
        page.wait_for_selector("#live.on")
        box = page.locator("#memory-content").bounding_box()  # held where a release sends nothing
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        held = page.evaluate("document.body.dataset.updatedAt || ''")  # no swap from here on
        palace.daemon.hebbs("--global", "remember", "The depot's night shift starts at ten.", "--entity", "depot")
        other.wait_for_selector("text=The depot's night shift starts at ten.")  # the change has arrived
        assert page.evaluate("document.body.dataset.updatedAt || ''") == held
        page.mouse.up()
        expect(page.locator("body")).not_to_have_attribute("data-updated-at", held)
    finally:
        other.close()


def test_a_playground_error_shows_beside_the_form_which_keeps_its_values(page: Any, palace: Palace) -> None:
    page.goto(palace.page_url(f"/recall?vault={q(palace.home)}"))
    page.fill("input[name=cue]", "sourdough")
    page.fill("input[name=since]", "2030-01-02T00:00")
    page.fill("input[name=until]", "2030-01-01T00:00")
    page.click("button:has-text('Recall')")
    expect(page.locator("#results .error")).to_contain_text("time_range start is after its end")
    assert page.input_value("input[name=cue]") == "sourdough"
    assert page.input_value("input[name=since]") == "2030-01-02T00:00"


def test_a_page_says_when_its_daemon_stopped_and_when_it_restarted(browser: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from daemon_fixtures import DaemonHome, wait_until

    port = free_port()
    monkeypatch.setenv("HEBBS_PANEL", "on")
    monkeypatch.setenv("HEBBS_PANEL_PORT", str(port))
    daemon = DaemonHome(idle_timeout=0)
    context = browser.new_context()
    try:
        daemon.start()
        token = Path(daemon.home) / "panel.token"
        wait_until(token.exists, what="the panel's token")
        page = context.new_page()
        page.set_default_timeout(UI_WAIT_MS)
        page.goto(f"http://127.0.0.1:{port}/?token={token.read_text().strip()}")
        page.wait_for_selector("#live.on")
        daemon.stop()
        expect(page.locator("#daemon-banner")).to_contain_text("The daemon stopped")
        daemon.start()
        expect(page.locator("#daemon-banner")).to_contain_text(
            "The daemon restarted or this session ended: open the panel again with `hebbs palace`")
        page.reload()  # the page itself says so too, not a plain-text 403
        assert "run `hebbs palace` again" in page.locator(".error").inner_text()
    finally:
        context.close()
        daemon.cleanup()


def test_contradictions_say_how_many_are_pending_beyond_those_shown(page: Any, palace: Palace) -> None:
    root = palace.daemon.project()
    palace.scratch.append(root)
    with palace.daemon.client(vault=root) as client:
        for name in ("build", "release"):
            client.remember(f"The {name} pipeline is reliable.", entity_id=name)
            client.remember(f"The {name} pipeline is unreliable.", entity_id=name)
        pending = len(client.contradiction_prepare().candidates)
    assert pending >= 2
    vault = str((root / VAULT_DIR).resolve())
    page.goto(palace.page_url(f"/contradictions?vault={q(vault)}&limit=1"))
    assert page.locator("article.candidate").count() == 1
    assert page.locator("#candidates-shown").inner_text().startswith(f"1 of {pending} pending shown")
    page.click(f"text=show all {pending}")
    expect(page.locator("article.candidate")).to_have_count(pending)  # once the clicked page has loaded


def test_forgetting_says_forgotten_and_a_second_tab_hears_it_was_already_gone(page: Any, palace: Palace) -> None:
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("The spare key hangs behind the shed door.", entity_id="keys")
    address = palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id}")
    other = page.context.new_page()
    for tab in (page, other):
        tab.goto(address)
        tab.click("button:has-text('Forget')")
        tab.wait_for_selector("text=Forget this memory?")
    page.click("button:has-text('Yes, forget it')")
    expect(page.locator(".notice")).to_have_text("memory forgotten")
    other.click("button:has-text('Yes, forget it')")
    expect(other.locator(".notice")).to_contain_text("already gone")
    other.close()


def test_the_small_graph_keeps_the_console_free_of_policy_errors(page: Any, palace: Palace) -> None:
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    open_graph(page, palace, palace.home)
    assert page.locator("#graph").get_attribute("data-renderer") == "cytoscape"
    assert not errors, errors


def test_a_very_long_entity_name_wraps_and_bidi_controls_stay_inside_their_text(page: Any, palace: Palace) -> None:
    entity = "x" * 300
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("Invoice \u202egnp.exe\u202c was attached to the ticket.", entity_id=entity)
    for path in ("/", f"/timeline?vault={q(palace.home)}", f"/memory?vault={q(palace.home)}&id={memory.id}"):
        page.goto(palace.page_url(path))
        wide = page.evaluate("""() => Array.from(document.querySelectorAll('main *')).filter((el) =>
            el.getBoundingClientRect().right > 1280).slice(0, 3).map((el) => el.tagName + '.' + el.className)""")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280, (path, wide)
    page.goto(palace.page_url(f"/timeline?vault={q(palace.home)}&entity={entity}"))
    text = page.locator("ol.timeline .event-content").first
    assert text.get_attribute("dir") == "auto"
    assert text.evaluate("(a) => getComputedStyle(a).unicodeBidi") == "isolate"


def test_the_timeline_renders_markdown_as_the_memory_page_does_and_keeps_raw_html_as_text(page: Any,
                                                                                           palace: Palace) -> None:
    """Issue 44: the timeline showed memories raw (`##`, `|---|`, `[[...]]`). It renders them as the memory
    page does: headings and tables as elements, a wiki-link as the words it stands for, and raw HTML
    as text (no element made of it, nothing run)."""
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("## Rollout plan\n\n| stage | owner |\n|---|---|\n| canary | [[Bob]] |\n"
                                 "| all | Carol |\n\nAsk [[Carol Ops|Carol]] first. <script>window.__ran = 1</script>"
                                 "<img src=x onerror=\"window.__ran = 2\">", entity_id="rollout")
    page.goto(palace.page_url(f"/timeline?vault={q(palace.home)}&entity=rollout"))
    entry = page.locator("ol.timeline li.event .event-content")
    assert entry.count() == 1
    assert entry.locator("h2").inner_text() == "Rollout plan"
    assert entry.locator("table th").all_inner_texts() == ["stage", "owner"]
    assert entry.locator("table tbody td").all_inner_texts() == ["canary", "Bob", "all", "Carol"]
    text = entry.inner_text()
    assert "##" not in text and "|---|" not in text and "[[" not in text and "Ask Carol first." in text
    assert "<script>" in text
    assert entry.locator("script, img").count() == 0 and page.evaluate("window.__ran") is None
    page.click("ol.timeline li.event a.mem-link")  # the entry opens its memory
    page.wait_for_url(f"**id={memory.id}**")
    assert page.locator("#memory-content table td").nth(1).inner_text() == "Bob"


def test_recall_links_run_the_filters_fit_the_overview_follows_the_selector_and_markdown_is_rendered_safely(
        page: Any, palace: Palace) -> None:
    """Issue 30 item 16, in Chromium. `/recall?cue=...` without run=1 shows results; the filter box stays
    inside its card, even with a long entity name among its choices; picking a vault in the selector
    shows that vault's card alone on the overview; a memory's markdown is rendered, and the raw HTML it
    carries is shown as text (no element made of it, nothing run)."""
    page.goto(palace.page_url(f"/recall?vault={q(palace.vault)}&cue={q('who manages the CRM')}"))
    page.wait_for_selector("#results article.result")
    with palace.daemon.client(vault=palace.notes) as client:
        client.remember("The contract owner of the Acme renewal", entity_id="e" * 90)
    page.goto(palace.page_url(f"/recall?vault={q(palace.vault)}"))
    card = page.locator("#recall-form").bounding_box()
    outside = page.evaluate("""(right) => Array.from(document.querySelectorAll('#recall-form *')).filter((el) =>
        el.getBoundingClientRect().right > right + 0.5).map((el) => el.tagName + '.' + el.className + ' ' +
        el.getAttribute('name'))""", card["x"] + card["width"])
    assert outside == [], outside
    page.goto(palace.page_url("/"))
    assert page.locator("[data-vault-card]").count() >= 2
    page.select_option("#vault-select", palace.vault)
    page.wait_for_selector("#all-vaults")
    cards = page.locator("[data-vault-card]")
    assert cards.count() == 1 and cards.first.get_attribute("data-vault-card") == palace.vault
    with palace.daemon.client(global_=True) as client:
        memory = client.remember("## Plan\n\n**Ship** the parser in May.\n\n- one\n- two\n\n"
                                 "<script>window.__ran = 1</script><img src=x onerror=\"window.__ran = 2\">")
    page.goto(palace.page_url(f"/memory?vault={q(palace.home)}&id={memory.id}"))
    content = page.locator("#memory-content")
    assert content.locator("strong").inner_text() == "Ship" and content.locator("li").count() == 2
    assert content.locator("script, img").count() == 0 and "<script>" in content.inner_text()
    assert page.evaluate("window.__ran") is None


def test_a_notes_vault_graph_has_one_node_per_note_and_edge_types_can_be_left_out(page: Any, palace: Palace) -> None:
    """Issue 30 item 16: a notes vault's graph drew every section. Now, by default, one node per note
    (acme.md's three sections are one node), linked as the notes link; unticking an edge type redraws
    without it, and unticking the folding shows the sections again."""
    # Other tests of this module remember into the same vault, so the counts are taken from it.
    with palace.daemon.client(vault=palace.notes) as client:
        stored = list(client.memories())
    notes = {m.source.file_path for m in stored if m.source}
    folded = len(notes) + sum(1 for m in stored if not m.source)
    assert folded < len(stored)  # acme.md's sections are what folding takes together
    open_graph(page, palace, palace.vault)
    status = page.locator("#graph-status").inner_text()
    assert status.startswith(f"{folded} notes and memories"), status
    sections = sorted((m for m in stored if m.source and m.source.file_path == "acme.md"),
                      key=lambda m: (m.created_at, m.id))
    assert graph_position(page, sections[0].id) is not None and graph_position(page, sections[1].id) is None
    assert "0 edges" not in status  # acme.md links to [[Bob]]
    page.uncheck("#edge-types input[value=RELATED_TO]")
    page.wait_for_url("**shown=1**")
    page.wait_for_selector("#graph[data-ready='1']")
    assert page.locator("#graph-status").inner_text() == f"{folded} notes and memories, 0 edges"
    page.uncheck("#graph-options input[name=fold]")
    # expect() polls from outside the page: a wait_for_function predicate is a string the page's CSP won't eval.
    expect(page.locator("#graph-status")).to_have_text(re.compile(rf"^{len(stored)} memories"))


def test_a_notes_vaults_timeline_shows_the_notes_own_dates_not_the_day_they_were_indexed(page: Any,
                                                                                        palace: Palace) -> None:
    """Issue 30 item 16: a notes vault's timeline showed the day it was indexed. Each note is dated by
    its front matter (`created`, `date`, else `updated`); without one, by the git commit that last
    changed it when the folder is a clone (a clone's files all carry the clone's time), else by its
    file time. A note edited since its commit keeps its file time: that is when it changed."""
    from daemon_fixtures import short_tmp

    root = short_tmp("hbdated")
    palace.scratch.append(root)
    (root / "dated.md").write_text("---\ndate: 2021-03-04\n---\n# Dated\n\nThe harbour crane was replaced.\n")
    (root / "updated.md").write_text("---\nupdated: 2022-06-07T08:00:00Z\n---\n# Updated\n\nThe ferry timetable changed.\n")
    (root / "committed.md").write_text("# Committed\n\nThe lighthouse keeper retired.\n")
    (root / "edited.md").write_text("# Edited\n\nThe dock gates were painted.\n")
    env = {**os.environ, "GIT_AUTHOR_DATE": "2019-08-09T10:00:00Z", "GIT_COMMITTER_DATE": "2019-08-09T10:00:00Z",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for args in (["init", "-q"], ["add", "committed.md", "edited.md"], ["commit", "-q", "-m", "notes"]):
        processes.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    edited_on = time.strftime("%Y-%m-%d", time.gmtime())
    (root / "edited.md").write_text("# Edited\n\nThe dock gates were painted blue.\n")
    plain = root / "plain.md"
    plain.write_text("# Plain\n\nThe pier lamps were fixed.\n")
    os.utime(plain, (1_588_752_000, 1_588_752_000))  # 2020-05-06
    os.utime(root / "committed.md")  # checked out just now, as a clone is
    palace.daemon.hebbs("index", str(root))
    page.goto(palace.page_url(f"/timeline?vault={q(str((root / VAULT_DIR).resolve()))}"))
    edited_by = time.strftime("%Y-%m-%d", time.gmtime())
    events = page.locator("ol.timeline li").all_inner_texts()
    day_of: dict[str, str] = {}
    day = ""
    for text in events:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text.strip()):
            day = text.strip()
        for word in ("crane", "ferry", "lighthouse", "dock", "pier"):
            if word in text:
                day_of[word] = day
    assert day_of.pop("dock") in {edited_on, edited_by}, events
    assert day_of == {"crane": "2021-03-04", "ferry": "2022-06-07", "lighthouse": "2019-08-09",
                      "pier": "2020-05-06"}, events


def test_a_large_notes_graph_narrows_to_a_folder_a_tag_or_a_notes_neighbourhood(page: Any, palace: Palace) -> None:
    """Issue 44: a thousand notes drawn at once are a hairball whatever the layout. The graph page offers
    the vault's folders and tags and the neighbourhood of one note (within 1-3 links); each choice
    redraws only that part."""
    from daemon_fixtures import short_tmp

    root = short_tmp("hbscope")
    palace.scratch.append(root)
    for name, text in {
        "people/dana.md": "---\ntags: [team]\n---\n# Dana\n\nDana runs the payments team.\n",
        "people/erin.md": "---\ntags: [team]\n---\n# Erin\n\nErin reports to [[dana]] and owns the ledger.\n",
        "projects/apollo.md": "---\ntags: [project]\n---\n# Apollo\n\nApollo moves the ledger to Postgres; [[erin]] leads it.\n",
        "projects/zeus.md": "# Zeus\n\nZeus retires the old billing cron jobs.\n",
        "inbox.md": "# Inbox\n\nAsk about the offsite dates.\n",
    }.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text)
    palace.daemon.hebbs("index", str(root))
    vault = str((root / VAULT_DIR).resolve())
    open_graph(page, palace, vault)
    status = page.locator("#graph-status")
    assert status.inner_text().startswith("5 notes and memories")
    page.select_option("#graph-scope select[name=folder]", "people")
    expect(status).to_have_text(re.compile(r"^2 notes and memories, 1 edge"))
    page.select_option("#graph-scope select[name=folder]", "")
    page.select_option("#graph-scope select[name=tag]", "project")
    expect(status).to_have_text(re.compile(r"^1 note or memory"))
    page.select_option("#graph-scope select[name=tag]", "")
    page.fill("#graph-scope input[name=around]", "projects/apollo.md")
    page.press("#graph-scope input[name=around]", "Enter")
    expect(status).to_have_text(re.compile(r"^2 notes and memories"))  # Apollo and Erin, who it links
    page.select_option("#graph-scope select[name=hops]", "2")
    expect(status).to_have_text(re.compile(r"^3 notes and memories"))  # and Dana, whom Erin links
    assert page.locator("#graph-scope input[name=around]").input_value() == "projects/apollo.md"


def test_a_person_adds_to_a_memory_s_note_from_its_page_and_a_stale_page_is_refused(palace: Palace) -> None:
    """Tried: the page of a memory indexed from an agent's note offers "Add to the note" with the note's
    version; posting it appends to the file and indexes it; posting again from the same (now stale) page
    is a 409 naming the CONFLICT, the note unchanged; a memory from no note has no such form."""
    root = palace.daemon.project()
    palace.scratch.append(root)
    vault = str((root / VAULT_DIR).resolve())
    with palace.daemon.client(vault=root) as client:
        written = client.note_write("agent/harbour.md", "The harbour ferry leaves at seven.")
        plain = client.remember("The lighthouse keeper retired in May.")
    memory_id = written.memory_ids[0]
    cookie = palace.cookie()
    page = raw_text(palace, "GET", f"/memory?vault={q(vault)}&id={memory_id}", headers=cookie)
    assert 'action="/note/append"' in page and f'name="version" value="{written.version}"' in page
    assert 'action="/note/append"' not in raw_text(palace, "GET", f"/memory?vault={q(vault)}&id={plain.id}",
                                                   headers=cookie)
    form = (f"vault={q(vault)}&id={memory_id}&version={written.version}&text={q('Ana: and at nine on Sundays.')}"
            f"&csrf={palace.form_value(cookie)}")
    added = raw(palace, "POST", "/note/append", body=form, headers=cookie)
    assert added.status == 303 and f"id={memory_id}" in added.getheader("Location")
    note = root / "agent" / "harbour.md"
    assert note.read_text().endswith("The harbour ferry leaves at seven.\n\nAna: and at nine on Sundays.\n")
    with palace.daemon.client(vault=root) as client:
        assert "nine on Sundays" in client.get(memory_id).content
    before = note.read_text()
    stale = raw(palace, "POST", "/note/append", body=form.replace("nine", "ten"), headers=cookie)
    assert stale.status == 409 and "nothing appended" in stale.body.decode()
    assert note.read_text() == before


def test_memory_page_and_recall_show_and_filter_who_stored_it(page: Any, palace: Palace) -> None:
    """Issues 42 and 44 item 3: the panel shows a memory's author (and the daemon it came through), agent
    and session, and the playground filters recall by them (last in this module: it adds two memories)."""
    with palace.daemon.client(vault=palace.notes, agent="planner", session="sprint-12") as client:
        planned = client.remember("The quarterly roadmap review moves to the first Monday.")
        client.remember("The quarterly roadmap review is led by the product lead.", agent="scribe",
                        session="sprint-11")
    page.goto(palace.page_url(f"/memory?vault={q(palace.vault)}&id={planned.id}"))
    facts = page.locator("main").inner_text()
    assert planned.author in facts and planned.daemon in facts
    assert "planner" in facts and "sprint-12" in facts
    page.goto(palace.page_url(f"/recall?vault={q(palace.vault)}&cue={q('quarterly roadmap review')}&run=1"))
    assert page.locator("article.result").count() >= 2
    page.fill("input[name=agent]", "planner")
    page.click("button.primary")
    page.wait_for_url(re.compile(r"agent=planner"))
    results = page.locator("article.result")
    assert results.count() == 1 and "roadmap review moves" in results.first.inner_text()
    assert "agent planner" in results.first.inner_text() and "session sprint-12" in results.first.inner_text()
    assert "--agent planner" in page.locator("#command-line").inner_text()
    page.goto(palace.page_url(f"/timeline?vault={q(palace.vault)}"))
    timeline = page.locator("ol.timeline").inner_text()
    assert "agent planner" in timeline and "session sprint-11" in timeline


def test_recall_page_marks_an_older_value_and_a_conflict_and_recalls_as_of(palace: Palace) -> None:
    """Issue 41 in the panel: the older of two values carries an "older value" chip naming the newer,
    a confirmed conflict a "conflicts with" chip, the memory page says so, and "as of" recalls what
    was true then."""
    day = 86_400 * 1_000_000
    june = 1_780_272_000_000_000  # 2026-06-01
    with palace.daemon.client(global_=True) as client:
        old = client.remember("The harbour office phone extension is 5511", created_at=june - 30 * day)
        new = client.remember("The harbour office phone extension is 5512", created_at=june + 30 * day)
        a = client.remember("The harbour ferry leaves at 7:15 every morning")
        b = client.remember("The harbour ferry never runs in the morning")
        client.add_edge(a.id, "CONTRADICTS", b.id)
    cookie = palace.cookie()
    cue = q("harbour office extension")
    page = raw_text(palace, "GET", f"/recall?vault={q(palace.home)}&cue={cue}&run=1", headers=cookie)
    assert page.index(new.id) < page.index(old.id)
    assert "older value 5511 -&gt; 5512 · newer" in page
    then = raw_text(palace, "GET", f"/recall?vault={q(palace.home)}&cue={cue}&run=1&as_of=2026-06-01T00:00",
                    headers=cookie)
    assert old.id in then and new.id not in then and "--as-of 2026-06-01T00:00Z" in then
    ferry = raw_text(palace, "GET", f"/recall?vault={q(palace.home)}&cue={q('when does the harbour ferry leave')}"
                     f"&run=1", headers=cookie)
    assert "conflicts with" in ferry
    memory = raw_text(palace, "GET", f"/memory?vault={q(palace.home)}&id={old.id}", headers=cookie)
    assert "older value (5511 -&gt; 5512)" in memory
    newer = raw_text(palace, "GET", f"/memory?vault={q(palace.home)}&id={new.id}", headers=cookie)
    assert "newer value of" in newer and old.id[-8:] in newer and "(5511 -&gt; 5512)" in newer
