"""The CLI as a new user meets it, against a real daemon: bad paths and values refused without a
traceback, file errors, Ctrl-C, cancel and follow of an index run, suggested commands that work when
pasted, help, exit codes, the SDK's errors.

Note on "unreadable" files: the tests run as root, and chmod 000 does not stop root from reading.
An unreadable input is therefore made the ways a user really meets one: a directory where a file is
expected, a file of invalid UTF-8, and a file that is not JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hebbs import Client, InsightInput
from hebbs.cli.main import EXIT_ERROR, EXIT_USAGE, build_parser, main
from hebbs.errors import VaultNotInitialized

import processes

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

NO_SUCH_ID = "01M8PMTE8Q945RNG431B00VZJV"
OTHER_ID = "01M8PMTE8Q945RNG431B00VZJW"
# What makes each command valid but for the path under test ({P}); ids name no memory.
BASE: dict[str, list[str]] = {
    "init": ["{P}"], "index": ["{P}"], "watch": ["{P}"], "list": ["{P}"],
    "remember": ["a memory"], "get": [NO_SUCH_ID], "revise": [NO_SUCH_ID, "--importance", "0.3"],
    "revise-many": ["{P}"], "history": [NO_SUCH_ID], "forget": [NO_SUCH_ID],
    "add-edge": [NO_SUCH_ID, "CAUSED_BY", OTHER_ID], "remove-edge": [NO_SUCH_ID, "CAUSED_BY", OTHER_ID],
    "edges": [NO_SUCH_ID], "neighbors": [NO_SUCH_ID], "recall": ["a cue"], "used": [NO_SUCH_ID], "prime": [],
    "subscribe": [],
    "queries": [], "inspect": [NO_SUCH_ID], "reflect-prepare": [], "reflect-commit": ["--file", "{P}"],
    "reflect": [], "insights": [], "contradictions": ["commit", "--file", "{P}"], "export": ["-o", "{P}"],
    "import": ["{P}"], "status": [], "daemon": ["status"], "doctor": ["--export", "{P}"], "migrate": ["--to", "rocksdb"], "mcp": [],
    "palace": ["--no-browser"], "unconsolidate": [NO_SUCH_ID], "consolidate": [], "source": [NO_SUCH_ID], "proxy": ["--upstream", "http://127.0.0.1:9/v1"],
    "count": [], "note": ["write", "{P}", "a note"], "team": ["list", "--store", "postgresql://hebbs@127.0.0.1:9/postgres"],
    "reembed": ["--model", "no-such-model"],
}
FOLDER_ARGS = {"init", "index", "watch", "list"}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _cases(bad: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    """(command, argv, expected exit code): bad paths of every kind, bad values of every typed option."""
    out: list[tuple[str, list[str], int]] = []
    for name, parser in _subcommands().items():
        base = BASE[name]

        def argv(path: Path | str, *extra: str) -> list[str]:
            return [name] + [str(path) if a == "{P}" else a for a in base] + list(extra)

        if "{P}" in base:
            if name == "init":
                kinds = [bad["file"]]  # a missing folder is created (test_cli.py)
            elif name in FOLDER_ARGS:
                kinds = [bad["missing"], bad["file"]]
            elif name in ("export", "doctor"):
                kinds = [bad["missing_folder"], bad["dir"]]
            else:
                kinds = [bad["missing"], bad["dir"], bad["not_utf8"], bad["not_json"]]
            out += [(name, argv(k), EXIT_ERROR) for k in kinds]
        placeholder = bad["missing"]
        options = {o for a in parser._actions for o in a.option_strings}
        if "--vault" in options and name not in FOLDER_ARGS:
            out += [(name, argv(placeholder, "--vault", str(bad["missing"])), EXIT_ERROR),
                    (name, argv(placeholder, "--vault", str(bad["file"])), EXIT_ERROR)]
        out.append((name, argv(placeholder, "--home", str(bad["file"])), EXIT_ERROR))
        out.append((name, argv(placeholder, "--no-such-flag"), EXIT_USAGE))
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            if action.type in (int, float):
                out.append((name, argv(placeholder, action.option_strings[-1], "abc"), EXIT_USAGE))
            elif action.choices is not None:
                out.append((name, argv(placeholder, action.option_strings[-1], "bogus"), EXIT_USAGE))
    return out


def _run_in_process(argv: list[str], capsys: Any, monkeypatch: Any) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_command_refuses_bad_paths_and_values_without_a_traceback(shared_daemon: "DaemonHome", project: Path,
                                                                         tmp_path: Path, capsys: Any,
                                                                         monkeypatch: Any) -> None:
    """Tried: every subcommand of the parser (the test fails if one is added without a BASE entry) with
    a missing path, a directory where a file is expected (a file where a folder is), a file of invalid
    UTF-8, a file that is not JSON, a missing or file --vault, a file as --home, an unknown flag and a
    bad value for every typed or choice option; in text and json mode. Each exits with the documented
    code (1 an error, 2 a usage error), says why on stderr (JSON in json mode), and raises nothing."""
    assert set(_subcommands()) == set(BASE), "a new command needs its BASE arguments here"
    not_utf8 = tmp_path / "latin1.jsonl"
    not_utf8.write_bytes(b'{"content": "caf\xe9"}\n')
    not_json = tmp_path / "broken.json"
    not_json.write_text("{this is not json\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("a file, not a folder\n")
    bad = {"missing": tmp_path / "nope" / "missing.jsonl", "dir": tmp_path, "file": plain, "not_utf8": not_utf8,
           "not_json": not_json, "missing_folder": tmp_path / "no-such-folder" / "x.jsonl"}
    monkeypatch.setenv("HEBBS_HOME", str(shared_daemon.home))
    monkeypatch.chdir(project)
    cases = _cases(bad)
    assert len(cases) > 150
    for _name, argv, expected in cases:
        for extra in ([], ["--format", "json"]):
            code, out, err = _run_in_process(argv + extra, capsys, monkeypatch)
            shown = f"hebbs {shlex.join(argv + extra)} -> {code}\nstdout: {out}\nstderr: {err}"
            assert code == expected, shown
            assert "Traceback" not in out + err and "INTERNAL" not in err and err.strip(), shown
            if extra and expected == EXIT_ERROR:
                assert set(json.loads(err)) == {"error", "status_code"}, shown
    assert not (project / "nope").exists() and not (tmp_path / "no-such-folder").exists()


def test_file_errors_from_a_real_process(shared_daemon: "DaemonHome", project: Path, tmp_path: Path) -> None:
    """Tried as a user types them: `hebbs import /nonexistent.jsonl`, `hebbs import <dir>`, `hebbs export
    -o /nonexistent/dir/x.jsonl`, each also with --format json: exit 1, one clear line, no traceback."""
    for args, says in ((["import", "/nonexistent.jsonl"], "/nonexistent.jsonl does not exist"),
                       (["import", str(tmp_path)], "is a directory; give a file"),
                       (["export", "-o", "/nonexistent/dir/x.jsonl"], "the folder /nonexistent/dir does not exist")):
        for extra in ([], ["--format", "json"]):
            done = shared_daemon.hebbs(*args, *extra, cwd=project, check=False)
            assert done.returncode == 1 and "Traceback" not in done.stderr and says in done.stderr
            if extra:
                assert json.loads(done.stderr)["status_code"] == "INVALID_REQUEST"
            else:
                assert len(done.stderr.strip().splitlines()) == 1


def _notes(root: Path, files: int, sections: int) -> int:
    for f in range(files):
        body = [f"# Note {f}\n"]
        for s in range(sections):
            body.append(f"## Part {s}\n\nNote {f} part {s}: the team measured {f * 97 + s} widgets in batch "
                        f"{s * 13 + f}, and logged {f + s} issues about shipping lane {f % 7}.\n")
        (root / f"note{f:04d}.md").write_text("\n".join(body))
    return files * sections


def _indexing(daemon: "DaemonHome", root: Path) -> bool:
    status = daemon.client(global_=True).status(vault=False)
    return any(v.path == str(root / ".hebbs") and v.indexing for v in status.open_vaults)


@pytest.mark.timeout(400)
def test_ctrl_c_cancels_the_index_run_in_the_daemon(shared_daemon: "DaemonHome", tmp_path: Path) -> None:
    """Tried: `hebbs index` on 800 sections, SIGINT to the CLI once the first batch is committed. The CLI
    exits 130 saying it cancelled; the daemon stops the run (no longer indexing, count stable); the
    next `hebbs index` keeps every memory the cancelled run committed (same ids) and adds the rest."""
    root = shared_daemon.project()
    total = _notes(root, 80, 10)
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    proc = processes.popen([hebbs, "index", str(root)], env=shared_daemon.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    client = shared_daemon.client(root)
    shared_daemon.wait_until(lambda: client.count() > 0, timeout=300, what="the first committed batch")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "cancelled" in err and "Traceback" not in err
    assert not _indexing(shared_daemon, root)
    kept = {m.id for m in client.memories()}
    assert 0 < len(kept) < total
    time.sleep(1.0)  # a run that went on would still be committing batches
    assert client.count() == len(kept)

    again = json.loads(processes.run([hebbs, "index", str(root), "--format", "json"], env=shared_daemon.env(),
                                      capture_output=True, text=True, check=True, timeout=300).stdout)
    assert again["sections_total"] == total and client.count() == total
    assert kept <= {m.id for m in client.memories()}, "a memory the cancelled run committed was lost"
    assert again["embedded"] <= total - len(kept) + again["reconciled"]
    assert all(f.state == "synced" for f in client.list(root))


@pytest.mark.timeout(400)
def test_cancel_and_follow_a_run_started_elsewhere(shared_daemon: "DaemonHome") -> None:
    """Tried: a run started by one `hebbs index`; a second `hebbs index` of the same folder refuses and
    suggests `hebbs index --follow ROOT` and `hebbs index --cancel ROOT`; both suggestions, pasted, work:
    the follower sees the run end as cancelled, the cancel reports it stopped, the first run's CLI says
    CANCELLED."""
    root = shared_daemon.project()
    _notes(root, 200, 10)
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    first = processes.popen([hebbs, "index", str(root), "--format", "json"], env=shared_daemon.env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    shared_daemon.wait_until(lambda: _indexing(shared_daemon, root), timeout=120, what="the run to start")
    busy = shared_daemon.hebbs("index", str(root), check=False)
    assert busy.returncode == 1 and "INDEXING_IN_PROGRESS" in busy.stderr
    suggested = re.findall(r"`(hebbs [^`]+)`", busy.stderr)
    follow_cmd = next(c for c in suggested if "--follow" in c)
    cancel_cmd = next(c for c in suggested if "--cancel" in c)
    follower = processes.popen(shlex.split(follow_cmd.replace("hebbs", hebbs, 1)) + ["--format", "json"],
                                env=shared_daemon.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # let the follower attach; if it attaches late it finds no run and says so
    cancelled = json.loads(shared_daemon.hebbs(*shlex.split(cancel_cmd)[1:], "--format", "json").stdout)
    assert cancelled == {"path": str(root), "cancelled": True}
    out, err = first.communicate(timeout=120)
    assert first.returncode == 1 and json.loads(err)["status_code"] == "CANCELLED"
    followed, ferr = follower.communicate(timeout=120)
    assert follower.returncode == 0, ferr
    assert json.loads(followed) in ({"vault": str(root / ".hebbs"), "following": True, "cancelled": True},
                                    {"vault": str(root / ".hebbs"), "following": False})
    assert not _indexing(shared_daemon, root)
    idle = json.loads(shared_daemon.hebbs("index", str(root), "--cancel", "--format", "json").stdout)
    assert idle == {"path": str(root), "cancelled": False}


def test_index_in_a_subfolder_uses_the_vault_above(shared_daemon: "DaemonHome") -> None:
    """Tried: index a notes folder, then `hebbs index` and `hebbs list` inside its subfolder: both use
    the parent's vault (as recall does), no nested .hebbs appears, the note is in one vault only.
    `hebbs init` there refuses with the reason; `hebbs init --nested` creates the vault when asked."""
    root = shared_daemon.project()
    sub = root / "projects"
    sub.mkdir()
    (sub / "plan.md").write_text("# Plan\n\nShip the parser rewrite in May.\n")
    shared_daemon.hebbs("index", str(root))
    done = shared_daemon.hebbs("index", cwd=sub)
    assert f"using its vault {root / '.hebbs'}" in done.stderr and not (sub / ".hebbs").exists()
    assert f"indexed {root} in" in done.stdout
    listed = json.loads(shared_daemon.hebbs("list", "--format", "json", cwd=sub).stdout)
    assert [f["path"] for f in listed] == ["projects/plan.md"]
    refused = shared_daemon.hebbs("init", cwd=sub, check=False)
    assert refused.returncode == 1 and "inside the notes folder" in refused.stderr and "--nested" in refused.stderr
    assert not (sub / ".hebbs").exists()
    assert "created vault" in shared_daemon.hebbs("init", "--nested", cwd=sub).stdout
    assert (sub / ".hebbs" / "config.toml").is_file()


def test_every_suggested_command_works_when_pasted(shared_daemon: "DaemonHome", tmp_path: Path) -> None:
    """Tried: each situation in which the CLI suggests a command (a folder without a vault for list,
    recall, --vault, init of a .hebbs path, status; the index-in-progress suggestions are pasted in
    test_cancel_and_follow_a_run_started_elsewhere). Each suggestion, pasted as is, exits 0, and the
    command that failed then works."""
    def suggestion(done: subprocess.CompletedProcess[str]) -> list[str]:
        found = re.findall(r"`(hebbs [^`]+)`", done.stderr + done.stdout)
        assert found, done.stderr + done.stdout
        return shlex.split(found[0])[1:]

    situations = []
    for n, failing in enumerate([["list", "."], ["recall", "anything"], ["get", NO_SUCH_ID, "--vault", "{F}"],
                                 ["init", "{F}/.hebbs"], ["status"]]):
        folder = tmp_path / f"folder {n}"  # a space: suggestions must quote paths
        folder.mkdir()
        (folder / "a.md").write_text("# A\n\nA note.\n")
        situations.append((folder, [a.replace("{F}", str(folder)) for a in failing]))
    for folder, failing in situations:
        first = shared_daemon.hebbs(*failing, cwd=folder, check=False)
        pasted = suggestion(first)
        assert shared_daemon.hebbs(*pasted, cwd=folder, check=False).returncode == 0, (failing, pasted)
        if failing[0] not in ("init", "get", "status"):
            assert shared_daemon.hebbs(*failing, cwd=folder, check=False).returncode == 0, failing


def test_init_hides_the_vault_from_git(shared_daemon: "DaemonHome", tmp_path: Path) -> None:
    """Tried: `hebbs init` writes .hebbs/.gitignore ignoring everything in it; git (when installed)
    then sees only the notes."""
    shared_daemon.hebbs("init", str(tmp_path))
    assert (tmp_path / ".hebbs" / ".gitignore").read_text().splitlines()[-1] == "*"
    if processes.run(["git", "--version"], capture_output=True).returncode == 0:
        (tmp_path / "a.md").write_text("# A\n")
        processes.run(["git", "init", "-q", str(tmp_path)], check=True)
        status = processes.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                                capture_output=True, text=True, check=True).stdout
        assert status.split() == ["??", "a.md"]


def test_insight_notes_go_where_configured_and_leave_with_their_insight(shared_daemon: "DaemonHome") -> None:
    """Tried: a markdown vault whose config.toml puts insights in `hebbs/insights`; reflect-commit writes
    the note there (and says so), index leaves that folder alone, forgetting the insight deletes it."""
    root = shared_daemon.project()
    config = root / ".hebbs" / "config.toml"
    config.write_text(config.read_text().replace('insights_dir = "insights"', 'insights_dir = "hebbs/insights"'))
    with shared_daemon.client(root) as hb:
        for text in ("Dana prefers green tea", "Dana drinks tea without sugar", "Dana dislikes coffee",
                     "Dana brews tea twice a day", "Dana buys loose-leaf tea", "Dana keeps a tea diary"):
            hb.remember(text, entity_id="dana")
        prepared = hb.reflect_prepare()
        members = [m.id for c in prepared.clusters for m in c.memories][:2] or prepared.unclustered[:2]
        committed = hb.reflect_commit(prepared.session_id, [InsightInput(
            content="Dana is a devoted tea drinker", confidence=0.9, source_memory_ids=members)])
        note = Path(committed.files[0])
        assert note.parent == root / "hebbs" / "insights" and note.is_file()
        summary = hb.index(root)
        assert summary.files_scanned == 0  # the insight note is not a note to index
        hb.forget([committed.insights[0].id])
        assert not note.exists()


def test_help_describes_every_argument_with_its_default() -> None:
    """Tried: `--help` of every command: each positional and option has a description, and each one that
    has a default shows it; `revise --importance` claims none; `daemon` refuses --global and --vault."""
    for name, parser in _subcommands().items():
        text = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name}: {action.dest} has no description"
            if action.default not in (None, False, argparse.SUPPRESS, []):
                label = parser._get_formatter()._format_action_invocation(action)
                entry = _entry(text, str(label))
                assert "default" in entry, f"{name}: {label} does not show its default"
    importance = _entry(_subcommands()["revise"].format_help(), "--importance")
    assert "default" not in importance and "unchanged" in importance
    for flag in (["--global"], ["--vault", "/tmp"]):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(["daemon", "status", *flag])
        assert exit_.value.code == EXIT_USAGE


def _entry(help_text: str, label: str) -> str:
    """The help entry of one argument: from its line in the argument list to the next argument."""
    body = help_text[help_text.index("\n\n"):]
    start = body.index("\n  " + label)
    rest = body[start + 1:]
    following = re.search(r"\n  \S", rest)
    return rest[:following.start()] if following else rest


def test_exit_codes_agree_between_the_skill_and_the_docs() -> None:
    """Tried: SKILL.md and docs/cli.md both document exit 2 for a usage error and 1 for an error."""
    repo = Path(__file__).parents[2]
    skill = (repo / "skills" / "SKILL.md").read_text()
    docs = (repo / "docs" / "cli.md").read_text()
    for text in (skill, docs):
        flat = " ".join(text.split())
        assert "2 a usage error" in flat and "1 an error" in flat


def test_the_exit_codes_the_skill_gives_are_the_cli_s(shared_daemon: "DaemonHome", project: Path) -> None:
    """Issue 44: SKILL.md said a bad value exits 2, while a value out of range (`--importance 1.5`) exits 1
    with INVALID_REQUEST; only a value of the wrong form (`--importance high`) is a usage error. SKILL.md
    and docs/cli.md now say both, with these examples, and the CLI does what they say."""
    repo = Path(__file__).parents[2]
    for page in (repo / "skills" / "SKILL.md", repo / "docs" / "cli.md"):
        flat = " ".join(page.read_text().split())
        assert "`INVALID_REQUEST`" in flat and "`--importance 1.5`" in flat and "`--importance high`" in flat, page
    out_of_range = shared_daemon.hebbs("remember", "x", "--importance", "1.5", "--format", "json", cwd=project,
                                       check=False)
    assert out_of_range.returncode == EXIT_ERROR
    assert json.loads(out_of_range.stderr)["status_code"] == "INVALID_REQUEST"
    wrong_form = shared_daemon.hebbs("remember", "x", "--importance", "high", cwd=project, check=False)
    assert wrong_form.returncode == EXIT_USAGE and "usage:" in wrong_form.stderr
    assert shared_daemon.hebbs("count", cwd=project).stdout.strip() == "0"  # neither stored anything


def test_sdk_errors_speak_python(shared_daemon: "DaemonHome", tmp_path: Path) -> None:
    """Tried: a Client in a folder without a vault: the error names vault=... and global_=True, never a
    command-line flag; the CLI's says --global."""
    with pytest.raises(VaultNotInitialized) as caught:
        Client(home=shared_daemon.home, cwd=tmp_path).recall("x")
    assert "global_=True" in str(caught.value) and "--global" not in str(caught.value)
    done = shared_daemon.hebbs("recall", "x", cwd=tmp_path, check=False)
    assert "--global" in done.stderr and "global_" not in done.stderr


def test_recall_table_shows_rank_and_uses_the_width(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: a 176-character memory recalled in a 110-column terminal: the table's first column is the
    rank, no line is wider than the terminal, and the whole text is shown (wrapped), not 40 characters."""
    text = ("The quarterly planning meeting moved from Tuesday to Thursday because the finance team needs "
            "Monday and Tuesday to close the books, and the product leads asked for the extra days.")
    shared_daemon.hebbs("remember", text, cwd=project)
    done = processes.run([str(Path(sys.executable).with_name("hebbs")), "recall", "planning meeting moved"],
                          cwd=project, env=shared_daemon.env(COLUMNS="110"), capture_output=True, text=True,
                          check=True)
    lines = done.stdout.splitlines()
    assert lines[0].split()[0] == "rank" and lines[1].split()[0] == "1"
    assert max(map(len, lines)) <= 110
    body = [line for line in lines if not line.startswith("note:")]
    assert " ".join(" ".join(body).split()).endswith(text)


def test_remember_key_through_the_cli(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: `hebbs remember ... --key K` twice prints the same id; the vault holds one memory."""
    first = json.loads(shared_daemon.hebbs("remember", "Deploys happen on Thursdays", "--key", "deploy-day",
                                           "--format", "json", cwd=project).stdout)
    second = json.loads(shared_daemon.hebbs("remember", "Deploys happen on Thursdays", "--key", "deploy-day",
                                            "--format", "json", cwd=project).stdout)
    assert first["id"] == second["id"]
    assert shared_daemon.client(project).count() == 1
