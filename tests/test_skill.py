"""skills/SKILL.md cannot drift from the code: every `hebbs ...` line in its bash blocks is run against
a real daemon, and where a json block follows, the real output must have the shape shown there."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

SKILL = Path(__file__).resolve().parent.parent / "skills" / "SKILL.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# The user preference every conversation starts from, and a project fact: what the skill's examples recall.
SEED_GLOBAL = ("The user prefers pytest over unittest and wants tests to use real components, not mocks",
               "user", 0.8, {"type": "preference"})
SEED_PROJECT = ("Uploads go through the upload client, which retries nothing yet", None, 0.6, {"type": "fact"})
# Enough more project memories for the skill's reflection (5 at least), and a pair it flags as a contradiction.
SEED_NOTES = ("Upload retries were removed in the March rewrite of the client",
              "Most failed uploads happen on flaky hotel and train networks",
              "Large uploads are split into 8 MB chunks by the upload client",
              "The upload client logs every failed chunk with its offset",
              "Users reported losing uploads when their laptop went to sleep",
              "The upload client is reliable.", "The upload client is unreliable.")


def skill_commands(text: str) -> list[tuple[str, Any]]:
    """(command line, documented JSON output or None) for each `hebbs` line of each bash block.

    A json block right after a bash block holding a single command documents that command's output.
    """
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]
    found: list[tuple[str, Any]] = []
    for n, (lang, body) in enumerate(blocks):
        if lang != "bash":
            continue
        lines = [line.strip() for line in body.splitlines() if line.strip().startswith("hebbs ")]
        example = None
        if len(lines) == 1 and n + 1 < len(blocks) and blocks[n + 1][0] == "json":
            example = json.loads(blocks[n + 1][1])
        found += [(line, example if len(lines) == 1 else None) for line in lines]
    return found


def shape_problems(example: Any, real: Any, where: str = "$") -> list[str]:
    """Where real lacks what the example shows: a key, or the kind of value (lists by first item)."""
    if example is None:
        return []
    if isinstance(example, dict):
        if not isinstance(real, dict):
            return [f"{where}: expected an object, got {type(real).__name__}"]
        problems = [f"{where}.{key}: missing" for key in example if key not in real]
        for key in example:
            if key in real:
                problems += shape_problems(example[key], real[key], f"{where}.{key}")
        return problems
    if isinstance(example, list):
        if not isinstance(real, list):
            return [f"{where}: expected a list, got {type(real).__name__}"]
        if example and real:
            return shape_problems(example[0], real[0], f"{where}[0]")
        return []
    numbers = (int, float)
    if isinstance(example, numbers) and not isinstance(example, bool):
        ok = isinstance(real, numbers) and not isinstance(real, bool)
    else:
        ok = isinstance(real, type(example))
    return [] if ok else [f"{where}: expected {type(example).__name__}, got {type(real).__name__}"]


def run_skill(daemon: "DaemonHome", project: Path) -> list[tuple[str, Any, Any]]:
    """Run every command of the skill in order; returns (command, real output, documented output)."""
    last_id: str | None = None
    ran = []
    for line, example in skill_commands(SKILL.read_text()):
        argv = shlex.split(line)
        if "<id>" in argv:
            assert last_id is not None, f"{line}: no memory was remembered before it"
            argv = [last_id if a == "<id>" else a for a in argv]
        done = daemon.hebbs(*argv[1:], cwd=project, check=False)
        assert done.returncode == 0, f"`{line}` exited {done.returncode}: {done.stderr}"
        real = json.loads(done.stdout) if "--format" in argv and argv[argv.index("--format") + 1] == "json" \
            else done.stdout
        if argv[1] == "remember":
            last_id = real["id"]
        _answer(argv, real, project)
        ran.append((line, real, example))
    return ran


def _answer(argv: list[str], real: Any, project: Path) -> None:
    """Play the agent between the skill's steps: the files its reflect-commit and contradictions
    commit read, written from what reflect-prepare and contradictions just returned."""
    if argv[1] == "reflect-prepare":
        members = [m for c in real["clusters"] for m in c["memories"]] + real["unclustered"]
        insight = {"content": "Uploads fail mostly on flaky networks, and nothing retries them yet.",
                   "confidence": 0.8, "source_memory_ids": [m["id"] for m in members[:2]], "tags": ["uploads"]}
        (project / "insights.json").write_text(json.dumps({"session_id": real["session_id"], "insights": [insight]}))
    elif argv[1:3] == ["contradictions", "--format"]:
        assert real["candidates"], "the skill's contradiction review found no candidate"
        verdicts = [{"pending_id": real["candidates"][0]["pending_id"], "verdict": "neutral"}]
        (project / "verdicts.json").write_text(json.dumps({"verdicts": verdicts}))


def test_skill_front_matter() -> None:
    """Tried: the skill starts with front matter naming it and saying when to use it, and shows the
    three-command minimum (recall, remember, status)."""
    text = SKILL.read_text()
    front = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert front is not None
    fields = dict(line.split(": ", 1) for line in front.group(1).splitlines())
    assert fields["name"] == "hebbs" and len(fields["description"]) > 50
    verbs = [shlex.split(line)[1] for line, _ in skill_commands(text)]
    assert verbs[:3] == ["recall", "remember", "status"]


def test_every_skill_command_runs_and_has_the_documented_shape(make_daemon) -> None:
    """Tried: a fresh daemon, a global brain holding one user preference and a project holding one
    fact; then each `hebbs` command of the skill's bash blocks, in order (`<id>` becomes the id of
    the last memory it remembered). Each must exit 0, print JSON when asked to, and where the skill
    shows an output, the real one must have every key and kind of value shown."""
    from daemon_fixtures import short_tmp

    daemon = make_daemon(idle_timeout=0)
    daemon.start()
    project = short_tmp("hbs")
    daemon.hebbs("init", str(project))
    for (content, entity, importance, context), where in ((SEED_GLOBAL, ["--global"]), (SEED_PROJECT, [])):
        argv = ["remember", content, "--importance", str(importance), "--context", json.dumps(context), *where]
        daemon.hebbs(*argv, *(["--entity", entity] if entity else []), cwd=project)
    for content in SEED_NOTES:
        daemon.hebbs("remember", content, cwd=project)
    ran = run_skill(daemon, project)
    assert len(ran) >= 8
    documented = [(line, real, example) for line, real, example in ran if example is not None]
    assert len(documented) >= 5
    for line, real, example in documented:
        assert not shape_problems(example, real), f"`{line}`: {shape_problems(example, real)}"
