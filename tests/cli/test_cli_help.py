"""Every command's --help speaks the command line's language (issue 44, "Help text"): no protocol
tags (reflect_prepare) nor the protocol's reply types (RecallResults, Edge) in it, the edge types
listed where one is asked for, no option shown that changes nothing, and each option's default."""

from __future__ import annotations

import argparse
import inspect
import os
import re

import msgspec
import pytest

from hebbs import protocol, schema
from hebbs.cli.main import build_parser
from hebbs.schema import EdgeType


def _helps() -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """{command (and action): (its parser, its --help)}, the whole command line built as `hebbs` builds it."""
    parser = build_parser()
    out = {"hebbs": (parser, parser.format_help())}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        out[name] = (p, p.format_help())
    return out


@pytest.fixture(scope="module")
def helps(monkeypatch_module=None) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return _helps()
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _reply_types() -> set[str]:
    """The names of the Structs the protocol answers with (not its commands, named as verbs: Count, Revise)."""
    names = set()
    for module in (protocol, schema):
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, msgspec.Struct) and obj.__module__ == module.__name__
                    and not name.startswith("_") and not issubclass(obj, protocol._Command)):
                names.add(name)
    return names


def test_no_protocol_tag_nor_reply_type_in_any_help(helps) -> None:
    """Tried: `hebbs reflect --help` said "reflect_prepare then reflect_commit", and a dozen commands
    ended their help with "; data is RecallResults", "a list of Edge", "ReflectPrepared"."""
    tags = {tag for tag in protocol.COMMAND_TYPES if "_" in tag}
    types = _reply_types()
    assert {"RecallResults", "ReflectPrepared", "Edge", "Memory"} <= types
    found = []
    for name, (_, text) in helps.items():
        flat = " ".join(text.split()).replace("Memory Palace", "")
        found += [(name, word) for word in re.findall(r"\b[A-Za-z_]+\b", flat) if word in tags or word in types]
    assert found == []


def test_add_edge_lists_its_types(helps) -> None:
    text = " ".join(helps["add-edge"][1].split())
    assert all(kind in text for kind in EdgeType.__members__), text


def test_no_option_shown_that_changes_nothing(helps) -> None:
    """Tried: `recall --no-reinforce`, "the default": recall reinforces nothing unless asked. Still
    accepted, so that the scripts that pass it run, but not offered."""
    assert "--no-reinforce" not in helps["recall"][1]
    assert build_parser().parse_args(["recall", "x", "--no-reinforce"]).command == "recall"


def test_every_option_with_a_default_shows_it(helps) -> None:
    missing = []
    for name, (parser, _text) in helps.items():
        for action in parser._actions:
            if (not action.option_strings or action.help == argparse.SUPPRESS or action.nargs == 0
                    or action.default in (None, argparse.SUPPRESS, False, [])):
                continue
            shown = parser._get_formatter()._format_action(action)
            if "default" not in shown:
                missing.append((name, action.option_strings[0]))
    assert missing == []
