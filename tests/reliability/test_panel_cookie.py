"""What a copy of the Memory Palace's cookie is worth (issue 39 item 1): a real daemon serving the panel,
real Chromium, programs replaying the cookie, and another OS user's server on another 127.0.0.1 port
receiving it from the browser (cookies ignore ports)."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

import processes
from daemon_fixtures import chromium, free_port, wait_until

pytest_plugins = ["daemon_fixtures"]

UI_WAIT_MS = 30_000
# What Chromium sends when the user opens a panel address: a program replaying the cookie can write
# these too; the tests that use them show what else stops it (the session binding, the other user).
BROWSER_HEADERS = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}


class Panel:
    def __init__(self, daemon: Any, answer: dict[str, Any]) -> None:
        self.daemon = daemon
        self.port = answer["port"]
        self.url = answer["url"]
        self.token = self.url.split("token=", 1)[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.home = str(Path(daemon.home).resolve())

    def memory(self, text: str) -> Any:
        with self.daemon.client(global_=True) as client:
            return client.remember(text, entity_id="panel-cookie")

    def memory_path(self, memory_id: str) -> str:
        return f"/memory?vault={quote(self.home, safe='')}&id={memory_id}"

    def stored(self, memory_id: str) -> Any:
        with self.daemon.client(global_=True) as client:
            return client.get(memory_id)


@pytest.fixture(scope="module")
def panel() -> Iterator[Panel]:
    from daemon_fixtures import DaemonHome

    daemon = DaemonHome(idle_timeout=0)
    try:
        with daemon.client(global_=True) as client:
            client.remember("The deploy pipeline is reliable.", entity_id="ops")
            client.remember("The deploy pipeline is unreliable.", entity_id="ops")
        yield Panel(daemon, daemon.palace())
    finally:
        daemon.cleanup()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as browser:
        yield browser


def signed_in(browser: Any, panel: Panel, path: str = "/") -> Any:
    """A browser context that opened the printed address (on `path`, a cheap page for the timed test),
    as the user does."""
    context = browser.new_context()
    context.set_default_timeout(UI_WAIT_MS)
    page = context.new_page()
    page.goto(panel.base + path + "?token=" + panel.token)
    assert page.url == panel.base + path
    return page


@pytest.fixture
def page(browser: Any, panel: Panel) -> Iterator[Any]:
    page = signed_in(browser, panel)
    yield page
    page.context.close()


def cookie_of(page: Any, panel: Panel) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == f"hebbs_panel_{panel.port}")


def form_value(page: Any) -> str:
    """The secret a memory page's revise form carries (the session's form value; before issue 39, the
    token), as a script on the page or a program that read the page finds it."""
    return page.locator("form.revise input[name=csrf], form.revise input[name=token]").get_attribute("value")


def browser_post(page: Any, path: str, fields: dict[str, str]) -> int:
    """A POST the browser makes from the panel's own page (its cookie, its fetch metadata)."""
    return page.evaluate("([path, fields]) => fetch(path, {method: 'POST', body: new URLSearchParams(fields),"
                         " redirect: 'manual'}).then(r => r.type === 'opaqueredirect' ? 303 : r.status)",
                         [path, fields])


def test_no_page_the_panel_serves_holds_its_token(panel: Panel, page: Any) -> None:
    """Before the fix every form carried the long-lived token (five times on a memory page)."""
    memory = panel.memory("The server room key hangs behind the blue door.")
    served: list[tuple[str, str]] = []
    vault = quote(panel.home, safe="")
    for path in ("/", f"/recall?vault={vault}&cue=deploy&run=1", panel.memory_path(memory.id), f"/timeline?vault={vault}",
                 f"/contradictions?vault={vault}", f"/insights?vault={vault}", f"/queries?vault={vault}",
                 f"/graph?vault={vault}", f"/api/graph?vault={vault}", "/static/panel.js"):
        response = page.goto(panel.base + path)
        assert response.status == 200, path
        served.append((path, response.text()))
    page.goto(panel.base + panel.memory_path(memory.id))
    page.click("button:has-text('Forget')")
    page.wait_for_selector("text=Forget this memory?")  # a page a POST answered
    served.append(("forget?", page.content()))
    forms = page.context.new_page()
    forms.goto(panel.base + panel.memory_path(memory.id))
    fields = forms.eval_on_selector_all("form[method=post] input[type=hidden]",
                                        "inputs => inputs.map(i => [i.name, i.value])")
    assert [path for path, body in served if panel.token in body] == []
    # Every form that changes something carries the session's form value, and none the token.
    value = form_value(forms)
    assert re.fullmatch(r"[0-9a-f]{64}", value)
    assert [v for name, v in fields if name == "csrf"] == [value] * 5 and "token" not in {name for name, _ in fields}
    forms.goto(panel.base + f"/recall?vault={vault}")
    assert forms.locator("#recall-form").get_attribute("data-csrf") == value


def test_a_copy_of_the_cookie_replayed_by_a_program_reads_and_changes_nothing(panel: Panel, page: Any) -> None:
    """What another local server received from the browser, replayed with httpx (as with curl)."""
    memory = panel.memory("The backup tapes go offsite every Friday.")
    page.goto(panel.base + panel.memory_path(memory.id))
    value, cookie = form_value(page), cookie_of(page, panel)
    headers = {"Cookie": f"hebbs_panel_{panel.port}={cookie}"}
    with httpx.Client(base_url=panel.base, headers=headers, timeout=60) as thief:
        for path in ("/", panel.memory_path(memory.id), f"/timeline?vault={quote(panel.home, safe='')}",
                     f"/api/graph?vault={quote(panel.home, safe='')}", "/api/alive"):
            refused = thief.get(path)
            assert refused.status_code == 403 and "Sec-Fetch" in refused.text, path
            assert panel.token not in refused.text and value not in refused.text
        fields = {"vault": panel.home, "id": memory.id, "csrf": value}
        assert thief.post("/memory/forget", data={**fields, "confirm": "yes"}).status_code == 403
        assert thief.post("/memory/revise", data={**fields, "content": "The backup tapes stay here."}).status_code == 403
    kept = panel.stored(memory.id)
    assert kept.content == "The backup tapes go offsite every Friday."
    # The browser that holds the same cookie still reads and changes (the copy was refused, not the session).
    assert browser_post(page, "/memory/pin", {"vault": panel.home, "id": memory.id, "pinned": "1", "csrf": value}) == 303
    assert panel.stored(memory.id).context.get("pinned") is True


def test_a_form_value_is_worth_nothing_with_another_session_or_without_the_cookie(panel: Panel, browser: Any) -> None:
    memory = panel.memory("The spare laptop charger is in drawer three.")
    alice, mallory = signed_in(browser, panel), signed_in(browser, panel)
    try:
        for page in (alice, mallory):
            page.goto(panel.base + panel.memory_path(memory.id))
        value = form_value(alice)
        assert value != form_value(mallory) and cookie_of(alice, panel) != cookie_of(mallory, panel)
        revise = {"vault": panel.home, "id": memory.id, "content": "The charger was taken.", "csrf": value}
        # Another session's page posting it from the browser itself (its own cookie, real fetch metadata).
        assert browser_post(mallory, "/memory/revise", revise) == 403
        with httpx.Client(base_url=panel.base, timeout=60) as program:
            # Without any cookie, even with the browser's headers.
            assert program.post("/memory/revise", data=revise, headers=BROWSER_HEADERS).status_code == 403
            # With another session's cookie and the browser's headers.
            other = {"Cookie": f"hebbs_panel_{panel.port}={cookie_of(mallory, panel)}", **BROWSER_HEADERS}
            assert program.post("/memory/revise", data=revise, headers=other).status_code == 403
            # With the right cookie but no browser metadata.
            own = {"Cookie": f"hebbs_panel_{panel.port}={cookie_of(alice, panel)}"}
            assert program.post("/memory/revise", data=revise, headers=own).status_code == 403
            # A program with the token in the header needs no form value (as before).
            assert program.post("/memory/revise", data={**revise, "csrf": "", "content": "By token."},
                                headers={"X-Hebbs-Token": panel.token}).status_code == 303
        assert panel.stored(memory.id).content == "By token."
        assert browser_post(alice, "/memory/revise", {**revise, "content": "Alice's own revision."}) == 303
        assert panel.stored(memory.id).content == "Alice's own revision."
    finally:
        alice.context.close()
        mallory.context.close()


def test_revise_and_forget_through_the_forms_still_work(panel: Panel, page: Any) -> None:
    memory = panel.memory("The coffee machine is descaled on Mondays.")
    page.goto(panel.base + panel.memory_path(memory.id))
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.post_data or "") if r.method == "POST" else None)
    page.fill("form.revise textarea[name=content]", "The coffee machine is descaled on Thursdays.")
    page.click("form.revise button:has-text('Revise')")
    page.wait_for_selector("text=descaled on Thursdays")
    assert panel.stored(memory.id).content == "The coffee machine is descaled on Thursdays."
    page.click("button:has-text('Forget')")
    page.wait_for_selector("text=Forget this memory?")
    page.click("button:has-text('Yes, forget it')")
    page.wait_for_url("**/timeline**")
    with panel.daemon.client(global_=True) as client:
        assert memory.id not in {m.id for m in client.export()}
    # What the forms sent: the session's form value, never the token.
    assert posted and all("csrf=" in body and panel.token not in body for body in posted)


def test_opening_the_panel_again_ends_the_session_the_browser_held(panel: Panel, browser: Any) -> None:
    page = signed_in(browser, panel)
    try:
        first = cookie_of(page, panel)
        # The one-time code `hebbs palace` hands a browser, opened in the same browser.
        with panel.daemon.client(global_=True) as client:
            opener = client.panel(panel.port).opener
        page.goto(opener)
        second = cookie_of(page, panel)
        assert second != first
        assert page.goto(panel.base + "/timeline").status == 200
        # A copy of the first cookie, now in another browser: that session has ended.
        copy = browser.new_context()
        copy.add_cookies([{"name": f"hebbs_panel_{panel.port}", "value": first, "url": panel.base}])
        stale = copy.new_page().goto(panel.base + "/timeline")
        assert stale.status == 403 and "needs a session" in stale.text()
        copy.close()
        # The printed address too opens a new session and ends this one.
        page.goto(panel.url)
        assert cookie_of(page, panel) not in (first, second)
    finally:
        page.context.close()


def test_a_session_ends_when_unused_and_when_old(make_daemon: Any, browser: Any) -> None:
    """[panel] session_idle_seconds and session_max_seconds, set short in this home's config.toml."""
    idle, longest = 6, 15
    daemon = make_daemon(idle_timeout=0)
    (daemon.home / "config.toml").write_text(f"[panel]\nsession_idle_seconds = {idle}\n"
                                             f"session_max_seconds = {longest}\n")
    panel = Panel(daemon, daemon.palace())
    alive = "() => fetch('/api/alive').then(r => r.status)"
    unused = signed_in(browser, panel, "/graph")
    try:
        assert unused.evaluate(alive) == 204
        unused_since = time.monotonic()
        opened = time.monotonic()  # before `used` was: its session is no older than this
        used = signed_in(browser, panel, "/graph")
        # `used` makes a request every moment until it is refused; `unused` is asked once more after its
        # idle limit has passed (not a race: by then it is over, whatever the machine's load).
        answers: list[tuple[float, int]] = []
        unused_later: list[int] = []

        def ended() -> bool:
            if not unused_later and time.monotonic() - unused_since > idle + 1:
                unused_later.append(unused.evaluate(alive))
            answers.append((time.monotonic() - opened, used.evaluate(alive)))
            return answers[-1][1] == 403

        wait_until(ended, timeout=longest * 10, what="the session's end")
        assert unused_later == [403]
        # Used all along, it outlived the idle limit, and still ended once `longest` seconds old.
        lived = [at for at, status in answers if status == 204]
        assert max(lived) > idle + 1 and answers[-1][0] > longest
    finally:
        for context in browser.contexts:
            context.close()


ATTACKER = r"""
import http.server, json, sys, urllib.request, urllib.error
panel, memory_path, vault, memory_id, value = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
received = {}

class Catch(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        received["cookie"] = self.headers.get("Cookie", "")
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"hi")

def status(path, cookie, headers, body=None):
    request = urllib.request.Request(panel + path, data=body, headers={"Cookie": cookie, **headers})
    try:
        return urllib.request.urlopen(request, timeout=60).status
    except urllib.error.HTTPError as e:
        return e.code

server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[6])), Catch)
print("listening", flush=True)
server.handle_request()
cookie = received["cookie"]
browser = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
forget = ("vault=" + urllib.request.quote(vault, safe="") + "&id=" + memory_id + "&confirm=yes&csrf=" + value).encode()
print(json.dumps({"cookie": cookie,
                  "read": status(memory_path, cookie, {}),
                  "read_as_a_browser": status(memory_path, cookie, browser),
                  "forget": status("/memory/forget", cookie, {}, forget),
                  "forget_as_a_browser": status("/memory/forget", cookie, browser, forget)}), flush=True)
"""


@pytest.fixture
def stranger() -> Iterator[str]:
    """A throwaway OS user with no home, removed afterwards (tests run as root, as .ci/run does)."""
    if os.geteuid() != 0:
        pytest.fail("this test adds a throwaway user: run the suite as root, as .ci/run does")
    name = f"hbx{secrets.token_hex(4)}"
    processes.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield name
    finally:
        processes.run(["userdel", name], check=False)


def test_another_users_server_on_another_port_receives_the_cookie_and_gets_nothing(panel: Panel, page: Any,
                                                                                   stranger: str) -> None:
    """The report's case: another local user's server on another 127.0.0.1 port gets the cookie when the
    browser visits it, and replays it from a program, plainly and with a browser's headers forged, even
    holding the session's form value."""
    memory = panel.memory("The alarm code for the lab is kept in the safe.")
    page.goto(panel.base + panel.memory_path(memory.id))
    value = form_value(page)
    port = free_port()
    with processes.started(["/usr/bin/python3", "-c", ATTACKER, panel.base, panel.memory_path(memory.id), panel.home,
                            memory.id, value, str(port)], user=stranger, cwd="/", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) as attacker:
        assert attacker.stdout.readline().strip() == "listening", attacker.stderr.read()
        # The user opens another local app in the same browser: cookies ignore ports, it gets the panel's.
        assert "hi" in page.goto(f"http://127.0.0.1:{port}/").text()
        out, err = attacker.communicate(timeout=120)
    got = json.loads(out)
    assert f"hebbs_panel_{panel.port}={cookie_of(page, panel)}" in got["cookie"]
    assert (got["read"], got["read_as_a_browser"], got["forget"], got["forget_as_a_browser"]) == (403, 403, 403, 403), err
    assert panel.stored(memory.id).content == "The alarm code for the lab is kept in the safe."
    # The browser the cookie was given to still uses it.
    assert page.goto(panel.base + panel.memory_path(memory.id)).status == 200
