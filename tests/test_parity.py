"""Every door has every capability: hebbs.Engine, hebbs.Client and hebbs.AsyncClient share one set of
public methods with the same parameters, apart from the short lists below; the new ones work over a
real daemon."""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import hebbs
from hebbs import AsyncClient, Client, Engine
from hebbs.errors import NotFound
from hebbs.schema import Edge, Memory

import processes

pytest_plugins = ["daemon_fixtures"]

# In-process only: opening a vault in this process, and maintenance or internals the daemon does itself.
ENGINE_ONLY = {
    "open": "opens a vault in this process; a client names its vault instead",
    "rebuild_lexical": "maintenance the engine runs itself when the BM25 index is stale",
    "add_pending": "the contradiction queue's internals: remember fills it, contradiction_prepare reads it",
    "pending": "the same queue, raw; contradiction_prepare is its door",
    "deferred_sync": "group commit for the daemon's write slot; every client write is durable when answered",
    "wait_durable": "the other half of deferred_sync",
    "accesses": "the clients have it in inspect (memory, edges, history and accesses in one round trip)",
}
# Client only: the daemon, subscriptions, markdown indexing and the wire itself.
CLIENT_ONLY = {
    "request": "sends one protocol command",
    "call": "sends a declared command given as its typed method's arguments (what the generated methods do)",
    "ping": "is a daemon there", "status": "the daemon's state", "shutdown": "stops the daemon",
    "subscribe": "pushes matches over a connection",
    "export": "the stream `memories` also returns (the CLI's name)",
    "index": "markdown indexing runs in the daemon", "index_cancel": "stops an index run",
    "index_follow": "follows an index run started elsewhere", "list": "a notes folder's index state",
    "panel": "serves the daemon's web panel (hebbs palace)",
    "note_read": "a note of the notes folder and its version", "note_write": "notes the agent writes, as index runs "
    "in the daemon (in process: hebbs.notes.note_write)", "note_append": "the same, at a note's end",
    "reembed": "moves a vault to another model: the daemon closes it for the switch and opens it again",
}
# Client-only keyword arguments of shared methods: an engine is one vault, the daemon searches several.
CLIENT_ONLY_PARAMETERS = {("recall", "brains"), ("prime", "brains")}


def public_methods(cls: type) -> dict[str, Any]:
    out = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        value = inspect.getattr_static(cls, name)
        if isinstance(value, property):
            continue
        if isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        if callable(value):
            out[name] = value
    return out


def parameters(fn: Any) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) of each parameter but self; sentinels for "unchanged" compare equal."""
    out = []
    for p in list(inspect.signature(fn).parameters.values())[1:]:
        default = p.default
        if default is ... or type(default).__name__ == "UnsetType":
            default = "<unchanged>"
        elif hasattr(default, "value"):  # an enum member, given by name on the wire
            default = default.value
        out.append((p.name, p.kind, default))
    return out


def test_engine_client_and_async_client_have_the_same_methods() -> None:
    """Tried: the public method sets of Engine, Client and AsyncClient, and for each shared method its
    parameters (name, kind, default). Only the documented lists above may differ."""
    engine, client, aclient = public_methods(Engine), public_methods(Client), public_methods(AsyncClient)
    assert set(engine) - set(client) == set(ENGINE_ONLY), "an engine method has no client door"
    assert set(client) - set(engine) == set(CLIENT_ONLY), "a client method is neither shared nor listed"
    assert set(aclient) == set(client), "AsyncClient and Client differ"
    for name in sorted(set(engine) & set(client)):
        shared = [p for p in parameters(client[name]) if (name, p[0]) not in CLIENT_ONLY_PARAMETERS]
        assert shared == parameters(engine[name]), f"Client.{name} differs from Engine.{name}"
        assert parameters(aclient[name]) == parameters(client[name]), f"AsyncClient.{name} differs from Client.{name}"
        if name != "close":
            expected = inspect.isasyncgenfunction(aclient[name]) or inspect.iscoroutinefunction(aclient[name])
            assert expected or name == "memories", f"AsyncClient.{name} is not a coroutine"
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert "`hebbs.Client()` has the same methods" in readme


def test_dir_hebbs_and_version() -> None:
    """Tried: dir(hebbs) lists the three doors and the schema types; `hebbs --version` prints the
    package version without importing numpy or the engine."""
    names = dir(hebbs)
    for name in ("Engine", "Client", "AsyncClient", "Memory", "RecallResult", "Edge", "ScoringWeights"):
        assert name in names
    code = ("import sys; from hebbs.cli.main import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as exc:\n    assert exc.code == 0\n"
            "print([m for m in ('numpy', 'onnxruntime', 'hnswlib', 'hebbs.engine') if m in sys.modules])")
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    version_line, heavy = done.stdout.strip().splitlines()
    assert version_line == f"hebbs {hebbs.__version__}" and heavy == "[]"


def test_new_capabilities_over_the_daemon(shared_daemon, project: Path) -> None:
    """Tried through Client against a real daemon: remember with key (twice: one memory), edges and
    supersedes; add_edge / edges / remove_edge; neighbors; revise then history; revise_many; causal
    recall from a seed, analogical recall with alpha and an analogy; prime; count / stats / memories;
    forget frees the key."""
    with shared_daemon.client(project) as hb:
        cause = hb.remember("The deploy failed because the disk was full", key="incident-1")
        again = hb.remember("The deploy failed because the disk was full", key="incident-1")
        assert again.id == cause.id and hb.count() == 1
        fix = hb.remember("We cleaned the disk and redeployed", edges=[(cause.id, "CAUSED_BY", 0.9)])
        later = hb.remember("Disk usage is now monitored", supersedes=[cause.id])
        assert hb.get(cause.id).superseded_by == later.id
        assert any(e.edge_type == "CAUSED_BY" and e.target == cause.id for e in hb.edges(fix.id, "out"))

        edge = hb.add_edge(later.id, "RELATED_TO", fix.id, 0.4)
        assert isinstance(edge, Edge) and edge.confidence == 0.4
        assert any(e.source == later.id for e in hb.edges(fix.id, direction="in"))
        hb.remove_edge(later.id, "RELATED_TO", fix.id)
        assert not any(e.edge_type == "RELATED_TO" for e in hb.edges(fix.id))
        with pytest.raises(NotFound):
            hb.remove_edge(later.id, "RELATED_TO", fix.id)

        near = hb.neighbors(fix.id, k=5)
        assert near and all(mid != fix.id for mid, _ in near) and cause.id not in dict(near)  # superseded

        hb.revise(fix.id, content="We cleaned the disk, then redeployed on Tuesday")
        assert [m.content for m in hb.history(fix.id)] == ["We cleaned the disk and redeployed"]
        revised = hb.revise_many([{"id": later.id, "importance": 0.9}, {"id": fix.id, "entity_id": "ops"}])
        assert revised[0].importance == 0.9 and revised[1].entity_id == "ops"

        causal = hb.recall(seed=fix.id, strategies=["causal"], direction="forward", max_depth=2,
                           edge_types=["CAUSED_BY"], include_superseded=True, reinforce=False)
        reached = [r.memory.id for r in causal.results]
        assert cause.id in reached and later.id not in reached  # later is linked by FOLLOWED_BY only
        analog = hb.recall(strategies=["analogical"], analogy=(cause.id, fix.id, "the build broke"), alpha=0.3,
                           reinforce=False)
        assert analog.results and cause.id not in [r.memory.id for r in analog.results]

        primed = hb.prime(None, "disk", 5, brains=["project"])  # the shared global brain is not this test's
        assert {r.memory.id for r in primed.results} == {fix.id, later.id}
        assert hb.stats().memories == hb.count() == 3
        assert {m.id for m in hb.memories()} == {cause.id, fix.id, later.id}

        hb.forget([cause.id])
        fresh = hb.remember("The deploy failed because the disk was full", key="incident-1")
        assert fresh.id != cause.id  # the key went with the memory it named

    async def drive() -> tuple[list[Memory], list[tuple[str, float]]]:
        async with AsyncClient(project, home=shared_daemon.home) as ahb:
            one = await ahb.remember("Async memory with a key", key="async-1")
            two = await ahb.remember("Async memory with a key", key="async-1")
            return [one, two], await ahb.neighbors(one.id, 2)

    (one, two), near = asyncio.run(drive())
    assert one.id == two.id and near


# Each command declared once (hebbs/protocol.py): every door keeps its declaration's defaults --------

def _struct_defaults(cls: type) -> dict[str, Any]:
    import msgspec

    out = {}
    for field in msgspec.structs.fields(cls):
        if field.required:
            continue
        value = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
        out[field.name] = "<unchanged>" if value is msgspec.UNSET else value
    return out


def _engine_parameters(method: str) -> dict[str, Any]:
    return {name: default for name, _, default in parameters(getattr(Engine, method))}


def test_each_declared_default_is_the_engines_the_clients_and_the_panels() -> None:
    """Tried: for every command that declares an Engine method, each field's default against that
    method's parameter of the same name in Engine, Client and AsyncClient (the typed methods); the
    panel's recall form against Recall's and ScoringWeights' defaults; and the declared flags against
    what the doors derive from them (the panel's refresh list, the clients' retries)."""
    from hebbs.daemon.panel import app, changes, pages
    from hebbs.protocol import COMMAND_TYPES, Recall, RESULT_TYPES
    from hebbs.schema import ScoringWeights

    checked = 0
    for tag, cls in COMMAND_TYPES.items():
        if cls.spec.engine is None:
            continue
        engine = _engine_parameters(cls.spec.engine)
        doors = [engine, *({n: d for n, _, d in parameters(getattr(door, cls.spec.engine))}
                           for door in (Client, AsyncClient) if hasattr(door, cls.spec.engine))]
        # A field the method requires (remember_many's items): the Struct's null there means one item instead.
        required = {f for m in cls.spec.also if m.name == cls.spec.engine for f in m.required}
        for name, default in _struct_defaults(cls).items():
            if name in required:
                continue
            for door in doors:
                if name in door:
                    assert door[name] == default, f"{tag}.{name}: {door[name]!r} here, {default!r} declared"
                    checked += 1
        assert tag in RESULT_TYPES, f"{tag} declares an engine method but no result type"
    assert checked > 40
    assert pages.STRATEGIES[-1] == "associative" and "fused" not in pages.STRATEGIES
    assert dict(pages.WEIGHTS) == {"relevance": ScoringWeights().relevance, "recency": ScoringWeights().recency,
                                   "importance": ScoringWeights().importance,
                                   "reinforcement": ScoringWeights().reinforcement}
    assert app.RECALL_DEFAULTS.max_depth == Recall().max_depth == 5
    assert {"consolidate", "unconsolidate"} <= changes.CHANGE_COMMANDS and "reinforce" not in changes.CHANGE_COMMANDS


def test_the_mcp_tools_are_the_declared_ones_with_their_defaults_and_say_how_ids_are_given() -> None:
    """Tried: the MCP server lists exactly the tools the declarations ask for (`mcp=Mcp(...)` in
    hebbs/protocol.py), each with its declared text; in the schema an agent reads, every parameter that
    fills a field has the field's default (or is required), every id parameter says the daemon's rule
    (6 or more last characters), and a read-only tool is one whose command changes nothing unless
    its declaration says otherwise."""
    from hebbs.mcp_server import HebbsTools, build_server, declared_tools
    from hebbs.protocol import COMMAND_TYPES, SHORT_ID_MIN

    built = declared_tools()
    listed = {t.name: t for t in asyncio.run(build_server(HebbsTools(home="/nonexistent")).list_tools())}
    assert sorted(listed) == sorted(t.name for t in built)
    entries = [entry for cls in COMMAND_TYPES.values() for entry in cls.spec.tools]
    assert len(entries) == len(built) >= 15
    checked = 0
    for tool in built:
        agent = listed[tool.name]
        assert agent.description == tool.entry.text
        declared = _struct_defaults(tool.command)
        schema = agent.input_schema["properties"]
        for name, field in tool.fills.items():
            if name in agent.input_schema.get("required", []):
                assert not tool.entry.args[name].required or field in declared
            elif field != "time_range":
                assert schema[name]["default"] == declared[field], f"MCP {tool.name}.{name}: {schema[name]}"
                checked += 1
            if name in ("id", "ids") and tool.name != "used":
                assert f"last {SHORT_ID_MIN} or more characters" in schema[name]["description"]
        read_only = tool.command.spec.retryable if tool.entry.read_only is None else tool.entry.read_only
        assert agent.annotations.read_only_hint is read_only
    assert checked >= 12
    source = (Path(hebbs.__file__).parent / "mcp_server.py").read_text()
    assert "8 characters" not in source and SHORT_ID_MIN == 6


def test_a_command_declared_with_a_cli_name_is_a_subcommand(shared_daemon, project: Path) -> None:
    """Tried: `hebbs count` (declared in hebbs/protocol.py with cli="count", no CLI code of its own):
    its help is the Struct's docstring; text and JSON answers; the SDK's count() sends the same command."""
    with shared_daemon.client(project) as hb:
        hb.remember_many(["one fact about the project", "another fact about it"])
        assert hb.count() == 2
    helped = shared_daemon.hebbs("count", "--help", cwd=project).stdout
    assert "How many memories the vault holds (earlier versions not counted)." in helped
    assert shared_daemon.hebbs("count", cwd=project).stdout == "2\n"
    assert shared_daemon.hebbs("--format", "json", "count", cwd=project).stdout.strip() == "2"


def test_the_protocol_reference_lists_every_command() -> None:
    """Tried: docs/protocol.md's generated table has a row for every declared command (that the
    generated sections are what the code says now is tests/test_docs.py's one check)."""
    protocol_doc = (Path(__file__).parent.parent / "docs" / "protocol.md").read_text()
    from hebbs.protocol import COMMAND_TYPES

    assert all(f"| `{tag}` |" in protocol_doc for tag in COMMAND_TYPES)


# The CLI subcommands that send one command, and the option names that differ from the field's.
CLI_SENDS = {"remember": "remember", "get": "get", "revise": "revise", "history": "history", "forget": "forget",
             "add-edge": "add_edge", "remove-edge": "remove_edge", "edges": "edges", "neighbors": "neighbors",
             "recall": "recall", "used": "reinforce", "prime": "prime", "subscribe": "subscribe",
             "queries": "queries", "inspect": "inspect", "source": "source", "reflect-prepare": "reflect_prepare",
             "reflect": "reflect", "insights": "insights", "contradictions": "contradiction_prepare",
             "consolidate": "consolidate", "unconsolidate": "unconsolidate", "count": "count"}
CLI_RENAMED = {("insights", "limit"): "max_results", ("contradictions", "limit"): "max_results",
               ("subscribe", "threshold"): "confidence_threshold", ("recall", "mmr"): "mmr_lambda",
               ("recall", "entity"): "entity_id", ("prime", "entity"): "entity_id", ("insights", "entity"): "entity_id",
               ("reflect-prepare", "entity"): "entity_id", ("reflect", "entity"): "entity_id",
               ("remember", "entity"): "entity_id", ("subscribe", "entity"): "entity_id"}


def test_the_cli_keeps_the_declared_defaults() -> None:
    """Tried: every option of a CLI subcommand that sends one protocol command, against the default of
    the field it fills (same name, or the renaming above); a subcommand the CLI builds from a
    declaration (cli=NAME) is in CLI_SENDS too, and every declared CLI name is a subcommand."""
    import argparse

    from hebbs.cli.main import build_parser
    from hebbs.protocol import COMMAND_TYPES

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for name, tag in CLI_SENDS.items():
        declared = _struct_defaults(COMMAND_TYPES[tag])
        for action in sub.choices[name]._actions:
            field = CLI_RENAMED.get((name, action.dest), action.dest)
            if field in declared and action.default not in (None, False, argparse.SUPPRESS):
                assert action.default == declared[field], \
                    f"hebbs {name} {action.option_strings}: {action.default!r}, declared {declared[field]!r}"
                checked += 1
    assert checked >= 10
    assert {name.split()[0] for cls in COMMAND_TYPES.values() for name in cls.spec.cli_names} <= set(sub.choices)


def test_the_clients_describe_each_command_as_its_declaration_does() -> None:
    """Tried: every typed method of Client and AsyncClient that sends one command: its docstring opens
    with the request Struct's (the one description), the same on both clients; the CLI's declared
    subcommands show it as their help."""
    from hebbs.cli import declared
    from hebbs.protocol import COMMAND_TYPES

    described = {cls.spec.client_method: cls for cls in COMMAND_TYPES.values() if cls.spec.client_method}
    assert len(described) >= 35
    for name, command in described.items():
        own = inspect.cleandoc(command.__doc__)
        for door in (Client, AsyncClient):
            assert (inspect.getdoc(getattr(door, name)) or "").startswith(own), f"{door.__name__}.{name}"
    own_words = set()
    for name, command in declared.declared().items():
        shell = declared.shell(command)
        if hasattr(shell, "summary"):
            # Only a command line that is more than the one request says what it does in its own words
            # (status reads both vaults, export writes a file, subscribe reads stdin).
            assert hasattr(shell, "send"), f"hebbs {name} sends its request, so its help is the declaration's"
            own_words.add(name)
            continue
        # The declaration's words, as the command line says them: without the protocol's reply type
        # ("; data is RecallResults"), a command named by its subcommand (reflect-prepare, not reflect_prepare).
        expected = re.sub(r";? data is .*$", ".", inspect.cleandoc(command.__doc__).split("\n\n")[0].replace("\n", " "))
        for tag, cls in COMMAND_TYPES.items():
            cli = [n for n in cls.spec.cli_names if " " not in n]
            expected = re.sub(rf"\b{tag}\b", cli[0], expected) if cli and "_" in tag else expected
        assert declared.summary(command) == expected, name
    assert own_words <= {"status", "export", "import", "subscribe"}
