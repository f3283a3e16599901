"""The `hebbs` command line, run as a real subprocess against a real daemon."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hebbs.cli.vaultcmds import STOP_TIMEOUT

import processes

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

HEAVY = ("numpy", "onnxruntime", "hnswlib", "rocksdict", "tokenizers", "hebbs.engine", "hebbs.embedding.embed")


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


def test_cli_imports_nothing_heavy() -> None:
    """Tried: import hebbs.cli.main (and everything a recall through the CLI loads) in a fresh
    interpreter; none of numpy, onnxruntime, hnswlib, rocksdict or the engine may be loaded."""
    code = ("import sys, hebbs.cli.main, hebbs.cli.commands, hebbs.cli.output, hebbs.client; "
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_memory_commands_text_and_json(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried, in a project folder: remember (with importance, entity, context), get by short id,
    revise, inspect, recall (flags: strategy, top-k, entity, weights, time-range), prime, queries,
    forget; each in json mode (one parseable document on stdout) and the main ones in text mode."""
    run = shared_daemon.hebbs
    made = _json(run("remember", "Dana", "prefers", "tea", "over", "coffee", "--importance", "0.9", "--entity",
                     "dana", "--context", '{"type": "preference"}', "--format", "json", cwd=project))
    assert made["content"] == "Dana prefers tea over coffee" and made["importance"] == 0.9
    assert made["entity_id"] == "dana" and made["context"] == {"type": "preference"}
    text = run("remember", "Dana's team ships on Thursdays", "--entity", "dana", cwd=project).stdout
    assert text.startswith("remembered ") and "entity dana" in text
    second_id = text.split()[1]

    short = made["id"][-8:]
    assert _json(run("get", short, "--format", "json", cwd=project))["id"] == made["id"]
    shown = run("get", short, cwd=project).stdout
    assert made["id"] in shown and "Dana prefers tea over coffee" in shown and "preference" in shown

    revised = _json(run("revise", made["id"], "--content", "Dana prefers green tea", "--importance", "0.95",
                        "--format", "json", cwd=project))
    assert revised["content"] == "Dana prefers green tea" and revised["importance"] == 0.95
    inspected = _json(run("inspect", short, "--format", "json", cwd=project))
    assert [h["content"] for h in inspected["history"]] == ["Dana prefers tea over coffee"]
    assert {e["edge_type"] for e in inspected["edges"]} >= {"REVISED_FROM"}
    assert "history (1 earlier versions)" in run("inspect", short, cwd=project).stdout

    found = _json(run("recall", "what", "does", "Dana", "drink", "--format", "json", cwd=project))
    assert found["results"][0]["memory"]["id"] == made["id"] and "score" in found["results"][0]
    table = run("recall", "what does Dana drink", "--top-k", "1", cwd=project).stdout.splitlines()
    assert table[0].split() == ["rank", "conf", "score", "id", "entity", "found", "by", "content"]
    assert table[1].split()[3] == short and len(table) == 2
    narrowed = _json(run("recall", "Dana", "--strategy", "similarity", "--strategy", "lexical", "--entity", "dana",
                         "--weights", "1:0:0:0", "--time-range", "2020-01-01..", "--no-reinforce",
                         "--format", "json", cwd=project))
    assert {r["memory"]["entity_id"] for r in narrowed["results"]} == {"dana"}
    assert all(set(r["strategies"]) <= {"similarity", "lexical"} for r in narrowed["results"])
    primed = _json(run("prime", "--entity", "dana", "--cue", "drinks", "--max", "5", "--format", "json", cwd=project))
    assert {r["memory"]["id"] for r in primed["results"]} == {made["id"], second_id}

    log = _json(run("queries", "--limit", "3", "--format", "json", cwd=project))
    assert log[0]["cue"] == "drinks"  # prime's own recall, the newest entry
    assert set(log[0]) >= {"at", "cue", "strategies", "result_count", "latency_ms"}
    assert "what does Dana drink" in run("queries", cwd=project).stdout

    assert _json(run("forget", second_id, "--format", "json", cwd=project)) == {"forgotten": 1}
    assert run("forget", "--entity", "dana", cwd=project).stdout.strip() == "forgot 1 memory"


def _renamed(lines: list[str]) -> list[str]:
    """An export with every memory id replaced by its memory's place in the file (an import gives new
    ids in the same order) and contradiction candidates' own ids dropped: what must survive a copy."""
    records = [json.loads(line) for line in lines]
    names = {r["id"]: f"#{n}" for n, r in enumerate(x for x in records if x["record"] == "memory")}
    text = "\n".join(json.dumps({k: v for k, v in r.items() if not (r["record"] == "pending" and k == "id")},
                                sort_keys=True) for r in records)
    for old, new in names.items():
        text = text.replace(old, new)
    return sorted(text.splitlines())


def test_export_then_import_carries_everything_a_vault_holds(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: a vault with an edge, a revision, a superseded memory, an access, a keyed memory, a queued
    contradiction candidate and an indexed note; export it (stdout and -o FILE), import it into another
    vault, export that. The export has a versioned header and every kind of record (CAUSED_BY among the
    edges); the copy's export is the same content up to the ids; the copied note's original is readable
    with `hebbs source`; importing again stores nothing; a version 1 file (bare memories) still imports."""
    run = shared_daemon.hebbs

    def remember(*args: str) -> str:
        return _json(run("remember", *args, "--format", "json", cwd=project))["id"]

    cause = remember("The outage on Monday was caused by a bad deploy", "--entity", "ops")
    effect = remember("Checkout failed for two hours on Monday", "--entity", "ops")
    run("add-edge", effect, "CAUSED_BY", cause, cwd=project)
    run("revise", cause, "--content", "The outage on Monday was caused by a bad config deploy", cwd=project)
    old = remember("Acme uses Salesforce", "--entity", "acme")
    remember("Acme moved from Salesforce to HubSpot", "--entity", "acme", "--supersedes", old)
    remember("Bob prefers short meetings", "--key", "bob-meetings")
    run("used", effect, cause, cwd=project)  # two accesses: "2 accesses" in import's summary
    remember("Acme's renewal is in March", "--entity", "acme")
    remember("Acme's renewal is not in March", "--entity", "acme")
    (project / "notes.md").write_text("# Plan\n\n## Launch\nWe launch the parser rewrite in May.\n")
    run("index", str(project))

    lines = run("export", cwd=project).stdout.splitlines()
    header, records = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header == {"record": "header", "format": "hebbs-export", "version": 2}
    kinds = {r["record"] for r in records}
    assert {"memory", "edge", "access", "file", "original"} <= kinds
    assert sum(r["record"] == "edge" and r["edge_type"] == "CAUSED_BY" for r in records) == 1
    assert any(r["record"] == "memory" and r.get("key") == "bob-meetings" for r in records)
    assert any(r["record"] == "memory" and r.get("superseded_by") for r in records)
    assert any(r["record"] == "memory" and r.get("kind") == "REVISION" for r in records)
    dump = project / "dump.jsonl"
    memories = sum(r["record"] == "memory" for r in records)
    revisions = sum(r["record"] == "memory" and r.get("kind") == "REVISION" for r in records)
    counted = int(run("count", cwd=project).stdout)
    # Issue 44: export counted earlier versions as memories ("exported 6" where count said 4).
    assert counted == memories - revisions
    assert _json(run("export", "-o", str(dump), "--format", "json", cwd=project)) == {
        "exported": counted, "revisions": revisions, "file": str(dump)}
    assert run("export", "-o", str(dump), cwd=project).stdout == (
        f"exported {counted} memories (and {revisions} earlier version{'s' if revisions > 1 else ''}) to {dump}\n")
    other = shared_daemon.project()
    summary = _json(run("import", str(dump), "--format", "json", cwd=other))
    assert summary["memories"] == summary["stored"] == memories and summary["already_there"] == 0
    assert summary["revisions"] == revisions
    said = run("import", str(dump), cwd=shared_daemon.project()).stdout
    assert said.startswith(f"imported {counted} memories (and {revisions} earlier version")
    assert summary["accesses"] >= 2 and f"{summary['accesses']} accesses" in said and "accesss" not in said
    assert summary["edges"] == sum(r["record"] == "edge" for r in records) and summary["originals"] >= 1
    copied = run("export", cwd=other).stdout.splitlines()
    assert _renamed(copied) == _renamed(lines)

    note = next(json.loads(x) for x in copied if '"original"' in x and "notes.md" in x)
    assert "parser rewrite in May" in run("source", note["memory"], cwd=other).stdout
    again = _json(run("import", str(dump), "--format", "json", cwd=other))
    assert again["stored"] == 0 and again["already_there"] == memories
    assert _renamed(run("export", cwd=other).stdout.splitlines()) == _renamed(lines)

    version_1 = "\n".join(json.dumps({k: v for k, v in r.items() if k != "record"}) for r in records
                          if r["record"] == "memory" and r.get("kind") != "REVISION" and r.get("entity_id") == "acme")
    third = shared_daemon.project()
    assert _json(run("import", "-", "--format", "json", cwd=third, stdin=version_1))["stored"] == 4


def test_remember_with_a_used_key_says_so_and_refuses_a_different_text(shared_daemon: "DaemonHome",
                                                                       project: Path) -> None:
    """Tried: `remember --key k1` three times: the first stores; the same text again says the key was
    already used and what it names (`"existing": true` in JSON); a different text is refused (exit 1,
    nothing stored, the memory unchanged) unless `--replace`, which revises that memory."""
    run = shared_daemon.hebbs
    first = _json(run("remember", "Dana owns the deploy keys", "--key", "k1", "--format", "json", cwd=project))
    assert "existing" not in first
    same = _json(run("remember", "Dana owns the deploy keys", "--key", "k1", "--format", "json", cwd=project))
    assert same["existing"] is True and same["id"] == first["id"]
    said = run("remember", "Dana owns the deploy keys", "--key", "k1", cwd=project).stdout
    assert "already used" in said and first["id"] in said
    refused = run("remember", "Eve owns the deploy keys", "--key", "k1", cwd=project, check=False)
    assert refused.returncode == 1 and "already used" in refused.stderr and "--replace" in refused.stderr
    assert "Traceback" not in refused.stderr
    listed = _json(run("recall", "deploy keys", "--format", "json", cwd=project))["results"]
    assert [r["memory"]["content"] for r in listed] == ["Dana owns the deploy keys"]
    replaced = _json(run("remember", "Eve owns the deploy keys", "--key", "k1", "--replace", "--format", "json",
                         cwd=project))
    assert replaced["existing"] is True and replaced["id"] == first["id"]
    assert _json(run("get", first["id"], "--format", "json", cwd=project))["content"] == "Eve owns the deploy keys"


def test_recall_both_without_a_project_marks_superseded_and_explains_an_empty_associative_recall(
        shared_daemon: "DaemonHome", project: Path) -> None:
    """Issue 30 items 10-12. `recall --both` in a folder with no project vault searches the global brain
    with a note (as prime does) instead of failing; `--include-superseded` marks what was replaced;
    `--strategy associative` on a vault with no associations says why nothing came back, not "no
    memory in this scope"."""
    from daemon_fixtures import short_tmp

    run = shared_daemon.hebbs
    run("remember", "The global brain knows Ada prefers tea", "--global")
    nowhere = short_tmp("hbx")
    both = run("recall", "what does Ada prefer", "--both", cwd=nowhere)
    assert "project vault was skipped" in both.stdout and "Ada prefers tea" in both.stdout
    old = _json(run("remember", "Acme uses Salesforce as its CRM", "--format", "json", cwd=project))["id"]
    new = _json(run("remember", "Acme moved its CRM to HubSpot", "--supersedes", old, "--format", "json",
                    cwd=project))["id"]
    listed = run("recall", "Acme CRM", "--include-superseded", cwd=project).stdout
    marked = [line for line in listed.splitlines() if "Salesforce" in line]
    assert marked and f"[superseded by {new[-8:]}]" in marked[0]
    assert "superseded" not in next(line for line in listed.splitlines() if "HubSpot" in line)
    lonely = run("recall", "CRM", "--strategy", "associative", cwd=project).stdout
    assert "associations learnt from use" in lonely and "no memory in this scope" not in lonely


def test_remember_supersedes_by_short_id(shared_daemon: "DaemonHome", project: Path) -> None:
    run = shared_daemon.hebbs
    old = _json(run("remember", "The cache TTL is 5 minutes", "--entity", "cache", "--format", "json", cwd=project))
    new = _json(run("remember", "The cache TTL is 10 minutes", "--entity", "cache", "--supersedes", old["id"][-8:],
                    "--format", "json", cwd=project))
    assert _json(run("get", old["id"], "--format", "json", cwd=project))["superseded_by"] == new["id"]
    found = _json(run("recall", "cache TTL", "--entity", "cache", "--format", "json", cwd=project))
    assert [r["memory"]["id"] for r in found["results"]] == [new["id"]]
    missing = run("remember", "x", "--supersedes", "01J00000000000000000000000", cwd=project, check=False)
    assert missing.returncode == 1 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr


def test_init_status_and_global_brain(shared_daemon: "DaemonHome") -> None:
    """Tried: status and recall outside any project (clear error naming `hebbs init`, JSON on stderr,
    exit 1), `hebbs init`, then status showing both brains, and --global reaching HEBBS_HOME."""
    from daemon_fixtures import short_tmp

    folder = short_tmp("hbi")
    run = shared_daemon.hebbs
    failed = run("recall", "anything", "--format", "json", cwd=folder, check=False)
    assert failed.returncode == 1 and failed.stdout == ""
    error = json.loads(failed.stderr)
    assert error["status_code"] == "VAULT_NOT_INITIALIZED" and "hebbs init" in error["error"]
    failed = run("recall", "anything", cwd=folder, check=False)
    assert failed.returncode == 1 and "hebbs init" in failed.stderr
    status = _json(run("status", "--format", "json", cwd=folder))
    assert status["project"] is None and status["global"]["path"] == str(shared_daemon.home)
    assert status["daemon"]["pid"] > 0
    assert status["daemon"]["panel"] is None  # the test suite's daemons serve no panel (HEBBS_PANEL=off)

    assert _json(run("init", "--format", "json", cwd=folder)) == {"vault": str(folder / ".hebbs"), "created": True}
    assert "already exists" in run("init", str(folder)).stdout
    assert (folder / ".hebbs" / "config.toml").read_text().startswith("# hebbs vault configuration")
    status = _json(run("status", "--format", "json", cwd=folder))
    assert status["project"]["path"] == str(folder / ".hebbs") and status["project"]["memories"] == 0
    text = run("status", cwd=folder).stdout
    assert text.startswith("daemon ") and "global " in text and "project " in text and "panel " not in text

    brain = _json(run("remember", "global fact for the cli test", "--global", "--format", "json", cwd=folder))
    assert _json(run("--global", "get", brain["id"], "--format", "json"))["id"] == brain["id"]
    assert run("get", brain["id"], cwd=folder, check=False).returncode == 1  # not in the project brain
    assert _json(run("get", brain["id"], "--vault", str(shared_daemon.home), "--format", "json"))["id"] == brain["id"]

    usage = run("recall", "--top-k", "many", "--format", "json", cwd=folder, check=False)
    assert usage.returncode == 2 and json.loads(usage.stderr)["status_code"] == "INVALID_REQUEST"
    bad = run("remember", "x", "--context", "[1]", "--format", "json", cwd=folder, check=False)
    assert bad.returncode == 1 and "JSON object" in json.loads(bad.stderr)["error"]


def test_init_creates_a_missing_folder_and_every_file_is_private(shared_daemon: "DaemonHome") -> None:
    """Tried, under umask 022: `hebbs init` of a folder that does not exist yet (as the errors that
    suggest `hebbs init PATH` promise), then a memory and `export -o`: every file the CLI and the
    daemon wrote is the user's only."""
    import os
    import stat

    from daemon_fixtures import short_tmp

    folder = short_tmp("hbm") / "new" / "notes"
    run = shared_daemon.hebbs
    previous = os.umask(0o022)
    try:
        assert _json(run("init", str(folder), "--format", "json")) == {"vault": str(folder / ".hebbs"), "created": True}
        run("remember", "a private fact", cwd=folder)
        run("export", "-o", str(folder / "memories.jsonl"), cwd=folder)
    finally:
        os.umask(previous)
    loose = [str(path) for path in [folder / "memories.jsonl", *(folder / ".hebbs").rglob("*")]
             if stat.S_IMODE(path.stat().st_mode) & 0o077]
    assert loose == []
    assert "a private fact" in (folder / "memories.jsonl").read_text()


def test_values_json_cannot_carry_are_refused_before_anything_runs(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: NaN and infinity for float options (JSON carries them as null, "not given": a revise
    with --importance nan said it had revised and changed nothing), a NaN or negative daemon timeout
    (a NaN one made `hebbs status` fail for the daemon's whole life), `daemon logs -n -5`, and an
    [index] m the HNSW library cannot take. Each is a one-line error naming the value."""
    run = shared_daemon.hebbs
    memory = _json(run("remember", "a fact whose importance stays", "--importance", "0.4", "--format", "json",
                       cwd=project))
    for argv, says in ((["revise", memory["id"], "--importance", "nan"], "'nan' is not a finite number"),
                       (["recall", "fact", "--mmr", "inf"], "'inf' is not a finite number"),
                       (["daemon", "start", "--idle-timeout", "nan"], "'nan' is not a finite number"),
                       (["daemon", "start", "--vault-idle-timeout", "-1"], "0 or more; got -1.0"),
                       (["daemon", "logs", "-n", "-5"], "--lines must be 1 or more"),
                       (["recall", "x", "--vault", ""], "the vault path is empty"),
                       (["doctor", "--export", "/nonexistent/x.jsonl"], "the folder /nonexistent does not exist")):
        done = run(*argv, cwd=project, check=False)
        assert done.returncode in (1, 2) and says in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)
    assert _json(run("get", memory["id"], "--format", "json", cwd=project))["importance"] == 0.4

    fresh = shared_daemon.project()  # a vault the daemon has not opened: its config is read at the open
    config = fresh / ".hebbs" / "config.toml"
    config.write_text(config.read_text().replace("m = 16", "m = -3"))
    done = run("recall", "fact", cwd=fresh, check=False)
    assert done.returncode == 1 and "index.m must be from 2 to 128, got -3" in done.stderr
    assert "INTERNAL" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_text_output_shows_control_characters_as_escapes(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: a memory holding ESC and CR (anyone's text can), printed by get and recall in text mode:
    the terminal gets escapes, not a colour change or an overwritten line; JSON keeps the text as is."""
    run = shared_daemon.hebbs
    content = "x\x1b[31mred\rover"
    memory = _json(run("remember", content, "--format", "json", cwd=project))
    # (recall's table folds whitespace, CR included, into one line of text)
    for argv, escaped in ((["get", memory["id"]], "x\\x1b[31mred\\x0dover"),
                          (["recall", "red", "--strategy", "similarity"], "x\\x1b[31mred over")):
        shown = run(*argv, cwd=project).stdout
        assert "\x1b" not in shown and "\r" not in shown and escaped in shown
    assert _json(run("get", memory["id"], "--format", "json", cwd=project))["content"] == content


def test_prime_outside_any_project_reads_the_global_brain(shared_daemon: "DaemonHome") -> None:
    """Tried: `hebbs prime` in a folder with no project vault above it (docs/cli.md: it reads the
    global brain and a note says so); with --no-global it asks for `hebbs init`."""
    from daemon_fixtures import short_tmp

    folder = short_tmp("hbg")
    run = shared_daemon.hebbs
    run("--global", "remember", "the user prefers green tea", "--entity", "prime-fallback", cwd=folder)
    found = _json(run("prime", "--entity", "prime-fallback", "--format", "json", cwd=folder))
    assert [r["memory"]["content"] for r in found["results"]] == ["the user prefers green tea"]
    assert any("no project vault" in note for note in found["notes"])
    alone = run("prime", "--no-global", cwd=folder, check=False)
    assert alone.returncode == 1 and "hebbs init" in alone.stderr


def test_subscribe_reads_stdin(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: `hebbs subscribe --format json` fed three lines on stdin: one JSON line per fed line,
    the planted memory in the first only, nothing for unrelated text."""
    run = shared_daemon.hebbs
    planted = _json(run("remember", "The VPN certificate expires on the first of June", "--format", "json",
                        cwd=project))
    run("remember", "Lunch is served at noon", cwd=project)
    feed = "when does the VPN certificate expire\nwhen does the VPN certificate expire\nrecipes for soup\n"
    lines = [json.loads(line) for line in
             run("subscribe", "--threshold", "0.5", "--format", "json", cwd=project, stdin=feed).stdout.splitlines()]
    assert [line["text"] for line in lines] == feed.splitlines()
    assert [[m["memory"]["id"] for m in line["matches"]] for line in lines] == [[planted["id"]], [], []]


def test_subscribe_prints_memories_stored_later(shared_daemon: "DaemonHome", project: Path) -> None:
    """Issue 44 item 4: while `hebbs subscribe` reads stdin, a memory another process stores that
    matches a line fed before is printed as it comes ({"text": null, "matches": [...]}); before, only
    fed lines printed anything."""
    run = shared_daemon.hebbs
    subscriber = processes.popen([str(Path(sys.executable).with_name("hebbs")), "subscribe", "--threshold", "0.5",
                                  "--format", "json"], cwd=project, env=shared_daemon.env(), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert subscriber.stdin is not None and subscriber.stdout is not None
        subscriber.stdin.write("which port does the metrics exporter listen on\n")
        subscriber.stdin.flush()
        assert json.loads(subscriber.stdout.readline())["matches"] == []
        run("remember", "Lunch is served at noon", cwd=project)
        stored = _json(run("remember", "The metrics exporter listens on port 9464", "--format", "json", cwd=project))
        # A guard against a hang (the push never coming), not a timing assertion.
        assert select.select([subscriber.stdout], [], [], 60)[0], "nothing printed for the memory stored later"
        pushed = json.loads(subscriber.stdout.readline())
        assert pushed["text"] is None and [m["memory"]["id"] for m in pushed["matches"]] == [stored["id"]]
        subscriber.stdin.close()
        assert subscriber.wait(timeout=60) == 0
    finally:
        if subscriber.poll() is None:
            subscriber.kill()
            subscriber.wait()


def _notes(root: Path) -> None:
    (root / "acme.md").write_text("---\ntags: [crm]\n---\n# Acme\n\n## CRM\nAcme runs its sales on Salesforce.\n\n"
                                  "## Team\nBob leads the Acme account. See [[people]].\n")
    (root / "people.md").write_text("# People\n\n## Bob\nBob likes short meetings.\n")


def test_folder_commands_take_vault_as_every_command_does(shared_daemon: "DaemonHome") -> None:
    """Issue 44: `--vault` and `--global` were in the usage of init, index, watch and list, then refused.
    --vault now names the notes folder (or its .hebbs) as PATH does; --global, which has no notes folder,
    is not offered, and given before the command it is refused with a clear error, no traceback."""
    from daemon_fixtures import short_tmp

    run = shared_daemon.hebbs
    for name in ("init", "index", "watch", "list"):
        usage = run(name, "--help").stdout
        assert "--vault PATH" in usage and "--global" not in usage, name
    root = short_tmp("hbv")
    _notes(root)
    created = _json(run("init", "--vault", str(root), "--format", "json"))
    assert created == {"vault": str(root / ".hebbs"), "created": True}
    assert _json(run("index", "--vault", str(root), "--format", "json"))["sections_total"] == 3
    for where in (str(root), str(root / ".hebbs")):
        listed = _json(run("list", "--vault", where, "--format", "json"))
        assert [f["path"] for f in listed] == ["acme.md", "people.md"]
    assert _json(run("list", str(root), "--vault", str(root), "--format", "json"))[0]["path"] == "acme.md"
    for argv in (["--global", "list"], ["list", str(root / "sub"), "--vault", str(root)]):
        refused = run(*argv, check=False)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr and "[INVALID_REQUEST]" in refused.stderr


@pytest.mark.timeout(180)  # the watcher is read line by line: a missed event must fail, not hang
def test_index_list_and_watch(shared_daemon: "DaemonHome") -> None:
    """Tried: `hebbs index` on a notes folder with no vault (it initializes one and says so), the
    JSON summary, `hebbs list` with sections, a recall finding a note, then `hebbs watch`: a new
    note is indexed without another command, and Ctrl-C (SIGINT) stops it with exit code 0."""
    from daemon_fixtures import short_tmp

    root = short_tmp("hbn")
    _notes(root)
    run = shared_daemon.hebbs
    first = run("index", str(root))
    assert "initialized a new vault" in first.stderr and "3 added" in first.stdout
    again = _json(run("index", str(root), "--format", "json"))
    assert again["initialized"] is False and again["files_unchanged"] == 2 and again["sections_total"] == 3
    listed = _json(run("list", str(root), "--sections", "--format", "json"))
    assert [f["path"] for f in listed] == ["acme.md", "people.md"] and listed[0]["state"] == "synced"
    assert [s["heading_path"] for s in listed[0]["section_list"]] == [["Acme", "CRM"], ["Acme", "Team"]]
    assert "synced" in run("list", cwd=root).stdout
    hit = _json(run("recall", "which CRM does Acme use", "--top-k", "1", "--format", "json", cwd=root))
    assert hit["results"][0]["memory"]["source"]["file_path"] == "acme.md"

    watcher = processes.popen([str(Path(sys.executable).with_name("hebbs")), "watch", str(root), "--format", "json"],
                               env=shared_daemon.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(watcher.stdout.readline())["event"] == "indexed"  # the catch-up run
        assert json.loads(watcher.stdout.readline()) == {"event": "watching", "path": str(root)}
        (root / "carol.md").write_text("# Carol\n\n## Role\nCarol runs the finance team.\n")
        while True:
            event = json.loads(watcher.stdout.readline())
            if event["event"] == "indexed" and event["sections_added"]:
                break
        assert event["sections_added"] == 1 and event["sections_total"] == 4
    finally:
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=60) == 0
    hit = _json(run("recall", "who runs finance", "--top-k", "1", "--format", "json", cwd=root))
    assert hit["results"][0]["memory"]["source"]["file_path"] == "carol.md"
    refused = run("index", str(root), "--global", check=False)  # not offered: a usage error
    assert refused.returncode == 2 and "--global" in refused.stderr and "Traceback" not in refused.stderr


def _sigint_ignored() -> None:
    """What `cmd &` in a script, or `trap "" INT`, hands a command down: SIGINT ignored."""
    processes.default_signals()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_watch_stops_on_ctrl_c_and_sigterm_even_when_started_with_sigint_ignored(shared_daemon: "DaemonHome") -> None:
    """Tried: `hebbs watch` started with SIGINT ignored (as under `nohup ... &` or `trap "" INT`), then
    sent SIGINT; again, sent SIGTERM. Each time the watcher stops cleanly (exit 0, no traceback)."""
    from daemon_fixtures import short_tmp

    root = short_tmp("hbn")
    _notes(root)
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    for sig in (signal.SIGINT, signal.SIGTERM):
        with processes.started([hebbs, "watch", str(root), "--format", "json"], env=shared_daemon.env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_sigint_ignored) as watcher:
            while json.loads(watcher.stdout.readline())["event"] != "watching":
                pass
            watcher.send_signal(sig)
            try:
                # A guard against a hang, past what a stop may take by design (STOP_TIMEOUT for the
                # watches, again for a callback in progress, and the cancel call): 60 s failed at load 28.
                code = watcher.wait(timeout=4 * STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = None
            assert code == 0, f"{sig.name}: the watcher did not stop ({code})"
            assert "Traceback" not in watcher.stderr.read()


def test_the_daemon_runs_the_installed_hebbs_whatever_the_working_directory(own_home: "DaemonHome",
                                                                             tmp_path: Path) -> None:
    """A `hebbs` package in the directory the daemon is started from (a checkout, say) is not run."""
    decoy = tmp_path / "hebbs" / "daemon"
    decoy.mkdir(parents=True)
    (tmp_path / "hebbs" / "__init__.py").write_text("")
    (decoy / "__init__.py").write_text("")
    (decoy / "__main__.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    started = _json(own_home.hebbs("daemon", "start", "--idle-timeout", "0", "--format", "json", cwd=tmp_path))
    own_home.pids.add(started["pid"])
    assert started["started"] is True and not (tmp_path / "ran").exists()


def test_daemon_command(own_home: "DaemonHome") -> None:
    """Tried: `hebbs daemon status` with no daemon (exit 3), `start` (and start again: already
    running), `status` in both formats, `logs`, `stop`, and status again."""
    run = own_home.hebbs
    assert _json(run("daemon", "status", "--format", "json", check=False)) == {"running": False}
    started = _json(run("daemon", "start", "--idle-timeout", "0", "--format", "json"))
    own_home.pids.add(started["pid"])
    assert started["started"] is True
    assert run("daemon", "start").stdout.strip() == f"already running: pid {started['pid']}"
    status = _json(run("daemon", "status", "--format", "json"))
    assert status["running"] is True and status["pid"] == started["pid"] and status["idle_timeout_s"] == 0
    assert run("daemon", "status").stdout.startswith(f"running: pid {started['pid']}")
    logs = _json(run("daemon", "logs", "-n", "5", "--format", "json"))
    assert any("listening on" in line for line in logs["lines"])
    assert _json(run("daemon", "stop", "--format", "json")) == {"stopped": True, "pid": started["pid"]}
    done = run("daemon", "status", check=False)
    assert done.returncode == 3 and "no daemon running" in done.stdout


def test_tables_align_wide_characters() -> None:
    """Tried: a CJK entity in a table (each character takes two terminal columns): the columns after it
    start at the same terminal column on every line, and a long cell is cut to its display width."""
    import io

    from hebbs.cli import output

    out = io.StringIO()
    output.table(["entity", "found by", "content"], [["东京办公室", "similarity", "东京" * 200], ["berlin", "lexical", "x"]],
                 out=out)
    lines = out.getvalue().splitlines()
    starts = {output.display_width(line[:line.index(word)]) for line, word in zip(lines, ("found", "similarity", "lexical"))}
    assert len(starts) == 1
    assert output.display_width(lines[1]) <= output.width()


def test_tables_at_80_columns_give_the_content_its_room_and_edges_show_content(shared_daemon: "DaemonHome",
                                                                               project: Path) -> None:
    """Issue 30 item 14. Tried, with COLUMNS=80: a recall whose results carry a 60-character entity
    (a note path): no line is wider than 80 and the content column keeps at least 35 columns; `hebbs
    edges` lists the memory at the other end of each edge with its text, not bare ids."""
    long_entity = "projects/2024/clients/acme-corporation/renewal-negotiations"
    run = shared_daemon.hebbs
    first = _json(run("remember", "Acme's renewal is negotiated by Carol in the spring", "--entity", long_entity,
                      "--format", "json", cwd=project))["id"]
    second = _json(run("remember", "Carol asked for a discount on the Acme renewal", "--entity", long_entity,
                       "--format", "json", cwd=project))["id"]
    run("add-edge", second, "CAUSED_BY", first, cwd=project)
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    narrow = shared_daemon.env(COLUMNS="80")
    shown = processes.run([hebbs, "recall", "who negotiates the Acme renewal"], cwd=project, env=narrow,
                          capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    from hebbs.cli import output

    table = [line for line in shown if not line.startswith("note:")]
    assert table and all(output.display_width(line) <= 80 for line in table)
    header = table[0]
    assert 80 - header.index("content") >= 35, header
    edges = processes.run([hebbs, "edges", second], cwd=project, env=narrow, capture_output=True, text=True,
                          timeout=60, check=True).stdout
    assert "CAUSED_BY" in edges and "negotiated by Carol" in edges and first not in edges
