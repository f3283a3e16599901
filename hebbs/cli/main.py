"""`hebbs`: the command line. Every command is a thin shell over one or two daemon requests.

This module and everything it imports at start must stay light (no numpy, no model, no engine):
a recall through the CLI is one process start plus one socket round trip.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from hebbs.errors import HebbsError

from . import output
from .output import number

FORMATS = ("text", "json")
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = output.EXIT_OK, output.EXIT_ERROR, output.EXIT_USAGE, \
    output.EXIT_INTERRUPTED


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as JSON when the command line asked for JSON."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if _Parser.json_errors:
            output.print_error(message, "INVALID_REQUEST", json_mode=True)
            sys.exit(2)
        super().error(message)


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it has none (None, a flag that is off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default in (None, argparse.SUPPRESS, False, [])
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        return f"{text} (default: {'here' if default == '.' else '%(default)s'})"


class _Version(argparse.Action):
    """--version, reading the version only when asked: a CLI call must stay quick."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from hebbs import version

        print(f"hebbs {version()}")
        parser.exit()


def _shared() -> argparse.ArgumentParser:
    # SUPPRESS: a flag given before the command must survive the subcommand's own defaults.
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--format", choices=FORMATS, default=argparse.SUPPRESS,
                        help="text for people, json for programs (default: text)")
    shared.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS,
                        help="HEBBS_HOME: where the daemon and the global vault live (default: $HEBBS_HOME, "
                             "else ~/.hebbs)")
    return shared


def _where(shared: argparse.ArgumentParser) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False, parents=[shared])
    where = common.add_mutually_exclusive_group()
    where.add_argument("--global", dest="global_", action="store_true", default=argparse.SUPPRESS,
                       help="use the global vault ($HEBBS_HOME) (default: the nearest .hebbs/ from here upwards)")
    where.add_argument("--vault", metavar="PATH", default=argparse.SUPPRESS,
                       help="use the vault of this notes folder, or this .hebbs directory (default: the nearest "
                            ".hebbs/ from here upwards)")
    return common


def _folder_where(shared: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of a command that works on a notes folder (init, index, watch, list): --vault names
    the folder as every other command's --vault does; --global has no notes folder, so it is not offered."""
    folder = argparse.ArgumentParser(add_help=False, parents=[shared])
    folder.add_argument("--vault", metavar="PATH", default=argparse.SUPPRESS,
                        help="the notes folder, or its .hebbs directory: the same as PATH (default: here)")
    return folder


# The commands that take a notes folder (PATH or --vault) rather than a vault to send to.
FOLDER_COMMANDS = frozenset({"init", "index", "watch", "list"})


class _Unbuilt:
    """Stands in for the parser of a command this call does not run: its arguments are never built.
    Building all forty parsers took a good part of a `hebbs recall`'s own time."""

    def add_argument(self, *args: Any, **kwargs: Any) -> None:
        pass

    def add_mutually_exclusive_group(self, *args: Any, **kwargs: Any) -> "_Unbuilt":
        return self

    def add_argument_group(self, *args: Any, **kwargs: Any) -> "_Unbuilt":
        return self

    def set_defaults(self, **kwargs: Any) -> None:
        pass


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (`only`) the top level plus that one command: what a call that
    names its command needs. `parser.only_built` says whether `only` was a command."""
    shared = _shared()
    common = _where(shared)
    folder = _folder_where(shared)
    parser = _Parser(prog="hebbs", parents=[common], formatter_class=_HelpFormatter,
                     description="A local-first memory engine for AI agents: remember, recall, reflect.")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.only_built = False  # type: ignore[attr-defined]

    def command(name: str, help_text: str, parents: Sequence[argparse.ArgumentParser] = (common,),
                run: str | None = None, raw_output: bool = False) -> Any:
        """A subcommand's parser; `run` ("module:function" in hebbs.cli) serves it, by default
        commands.cmd_NAME. raw_output: its stdout is data kept byte for byte (JSON lines, a note's
        original text) even in text mode, where every other output shows control characters as escapes."""
        if only is not None and name != only:
            return _Unbuilt()
        parser.only_built = True  # type: ignore[attr-defined]
        if name in FOLDER_COMMANDS:
            parents = (folder,)
        p = sub.add_parser(name, parents=list(parents), help=help_text, description=help_text,
                           formatter_class=_HelpFormatter)
        p.set_defaults(run=run or f"commands:cmd_{name.replace('-', '_')}", raw_output=raw_output)
        return p

    # The memory and recall commands, export, import and status are declared (cli/declared.py).
    for group in (_vault_commands, _reflect_commands, _other_commands):
        group(command, common, shared)
    if only is None or only and not parser.only_built:  # type: ignore[attr-defined]
        from .argtypes import add
        from .declared_options import COMMANDS

        for name, (tag, summary, entries, raw_output) in COMMANDS.items():
            # Built from the command's declaration (cli/declared.py), as generated into declared_options.py.
            p = command(name, summary, run="declared:run", raw_output=raw_output)
            if not isinstance(p, _Unbuilt):
                add(p, entries)
                p.set_defaults(declared=tag)
    return parser


def _vault_commands(command: Any, common: argparse.ArgumentParser, shared: argparse.ArgumentParser) -> None:
    """init, index, watch: a notes folder and its vault (list is declared)."""
    nested_help = ("create a vault here even inside another vault's notes folder (its notes would be in "
                   "both vaults)")
    p = command("init", "create a project vault, PATH/.hebbs")
    p.add_argument("path", nargs="?", default=".", help="the notes folder")
    p.add_argument("--nested", action="store_true", help=nested_help)
    p.add_argument("--store", metavar="URL", help="keep the vault in this PostgreSQL (postgresql://HOST/DB), "
                   "shared by every folder attached with the same name; credentials from libpq (docs/scale.md)")
    p.add_argument("--name", help="the vault's name in the --store (default: the folder's name)")

    p = command("index", "index a markdown notes folder into its vault (creating the vault if needed); "
                         "in a subfolder of an indexed folder, that folder's vault", run="vaultcmds:run")
    p.add_argument("path", nargs="?", default=".", help="the notes folder")
    p.add_argument("--nested", action="store_true", help=nested_help)
    run = p.add_mutually_exclusive_group()
    run.add_argument("--cancel", action="store_true", help="stop the run going on this folder, wherever it started")
    run.add_argument("--follow", action="store_true", help="follow the run going on this folder (started elsewhere)")
    p.add_argument("--ray", metavar="ADDRESS", help="embed the sections on the Ray cluster at ADDRESS (HOST:PORT; "
                   "needs hebbs[ray]; docs/scale.md)")
    p.add_argument("--full", action="store_true", help="write again every section the vault does not hold, even "
                   "forgotten ones (rebuilds this checkout's share of a shared vault; docs/scale.md)")

    p = command("watch", "keep a notes folder's vault current as its files change (Ctrl-C stops)",
                run="vaultcmds:run")
    p.add_argument("path", nargs="?", default=".", help="the notes folder")
    p.add_argument("--nested", action="store_true", help=nested_help)


def _reflect_commands(command: Any, common: argparse.ArgumentParser, shared: argparse.ArgumentParser) -> None:
    """Reflection and contradiction review."""
    p = command("contradictions", "list pending contradiction candidates; `commit --file` applies verdicts (a "
                                  "notes folder also gets a report in its contradictions folder), `auto` asks "
                                  "the configured LLM", run="reflectcmds:cmd_contradictions")
    if not isinstance(p, _Unbuilt):
        from .declared_actions import ACTIONS  # each action sends the command declared with its name

        p.add_argument("action", nargs="?", choices=ACTIONS["contradictions"], default=ACTIONS["contradictions"][0],
                       help="what to do")
    p.add_argument("--file", help='commit: {"verdicts": [{"pending_id", "verdict"}]} (- reads stdin)')
    # The dests are the fields of the command each action sends (cli/declared.run_named).
    p.add_argument("--limit", type=int, default=100, dest="max_results", metavar="LIMIT", help="how many candidates")
    p.add_argument("--min-confidence", type=number, default=0.7, help="auto: commit only verdicts at least this sure")


def _other_commands(command: Any, common: argparse.ArgumentParser, shared: argparse.ArgumentParser) -> None:
    """Moving memories, the daemon, and the servers (MCP, the panel, the proxy)."""
    # A note goes into a project vault's notes folder: --global, which has none, is not offered.
    p = command("note", "read a note of the notes folder with its version, write one (replacing the version read), "
                        "or append to one; indexed at once (docs/notes.md)", parents=(shared,), run="notecmds:cmd_note")
    if not isinstance(p, _Unbuilt):
        from .declared_actions import ACTIONS  # each action sends the command declared with its name

        p.add_argument("action", choices=ACTIONS["note"], help="what to do")
    p.add_argument("--vault", metavar="PATH", default=argparse.SUPPRESS,
                   help="the notes folder, or its .hebbs directory (default: the nearest .hebbs/ from here upwards)")
    # The dests are the fields of the command each action sends (cli/declared.run_named).
    p.add_argument("path", help="the note, relative to the notes folder, ending in .md (e.g. agent/deploy.md)")
    p.add_argument("text", nargs="*", help="write, append: the markdown ('-' reads it from stdin)")
    p.add_argument("--file", help="write, append: read the markdown from this file (- is stdin)")
    p.add_argument("--title", help="the note's title (default: the one it has, else its file name)")
    p.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="a tag for its front matter (repeatable)")
    p.add_argument("--link", action="append", dest="links", metavar="NOTE",
                   help="a note it relates to, linked as [[NOTE]] (repeatable)")
    p.add_argument("--author", help="who writes it, for its front matter")
    p.add_argument("--expect", dest="expected_version", metavar="VERSION",
                   help="write: the version it replaces (required when the note exists); append: only if still this "
                        "version")

    p = command("mcp", "serve hebbs to an MCP-speaking agent over stdio, or to many over HTTP with --http "
                       "(docs/mcp.md); --vault/--global pick the default vault", run="dispatch:serve_mcp")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp instead of "
                   "stdio; clients give $HEBBS_HOME/mcp.token as a bearer token")
    p.add_argument("--host", help="--http: the address to listen on (default 127.0.0.1; "
                   "only a loopback address unless --allow-remote)")
    p.add_argument("--port", type=int, help="--http: the port (default 6383)")
    p.add_argument("--allow-remote", action="store_true", help="--http: listen on a --host that is not loopback "
                   "(plain HTTP: the token travels in clear)")

    # The panel shows every vault the daemon knows: --global and --vault mean nothing to it.
    p = command("palace", "open the Memory Palace: the daemon's web panel on 127.0.0.1", parents=(shared,),
                run="palacecmd:run")
    p.add_argument("--port", type=int, help="serve it on this port (default: [panel] port, 6381)")
    p.add_argument("--no-browser", action="store_true", help="only print the address")

    p = command("proxy", "serve an OpenAI-compatible chat endpoint on 127.0.0.1 that adds recalled memories",
                run="proxycmd:run")
    p.add_argument("--upstream", required=True, metavar="URL",
                   help="the OpenAI-compatible server's base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--port", type=int, default=6382, help="port on 127.0.0.1 (default 6382)")
    p.add_argument("--api-key-env", metavar="NAME", help="environment variable holding the upstream's API key")
    p.add_argument("--remember", action="store_true", help="remember each question and answer in the project vault")
    p.add_argument("--top-k", type=int, default=5, help="at most this many memories per request (default 5)")
    p.add_argument("--exchanges", choices=["after", "first", "off"], default="after",
                   help="what the user asked in earlier remembered exchanges: added after the sources "
                        "(default), first, or not at all")
    p.add_argument("--stall-seconds", type=float, default=120.0,
                   help="end a streamed answer silent this long mid-stream (default 120)")
    p.add_argument("--no-client-token", action="store_true",
                   help="serve without the client token ($HEBBS_HOME/proxy.token): any local user may use it")
    p.add_argument("--agent", help="the agent remembered exchanges are stored by; a request's X-Hebbs-Agent header "
                                   "overrides it (default: $HEBBS_AGENT, else none)")

    p = command("doctor", "check every file of a vault (read-only), say what is readable, and save it")
    p.add_argument("--export", metavar="FILE", help="write every readable memory here as JSON lines")

    p = command("migrate", "move a vault between its own RocksDB database and PostgreSQL, every record, "
                           "with counts (stop the daemon first: `hebbs daemon stop`)")
    p.add_argument("--to", required=True, metavar="URL|rocksdb",
                   help="a PostgreSQL URL (postgresql://HOST/DB; credentials from libpq), or rocksdb to come back")
    p.add_argument("--name", help="the vault's name in PostgreSQL (default: the notes folder's name)")

    p = command("team", "who may use which vault of a PostgreSQL store: a login role per teammate, a role per "
                        "vault (run as the store's owner; docs/scale.md)", run="teamcmd:run")
    p.add_argument("action", choices=["list", "add-role", "grant", "revoke", "drop-vault"],
                   help="list the vaults and who may use each; add-role ROLE makes a login with a generated password; "
                        "grant/revoke ROLE a vault; drop-vault removes a vault from the store")
    p.add_argument("role", nargs="?", help="the teammate's login role (add-role, grant, revoke)")
    p.add_argument("--store", metavar="URL", help="the store, with its owner's credentials from libpq "
                   "(default: store.url of the vault here)")
    p.add_argument("--name", help="the vault's name in the store (default: store.name of the vault here; "
                   "drop-vault needs it given)")
    p.add_argument("--passfile", metavar="FILE", help="add-role: where the new role's password is written "
                   "(libpq's password file format, 0600; default: ./ROLE.pgpass)")

    # The daemon serves every vault: --global and --vault mean nothing to it.
    p = command("daemon", "control the background daemon", parents=(shared,), run="daemoncmds:run")
    if not isinstance(p, _Unbuilt):
        from .declared_actions import ACTIONS  # status sends the command declared with its name

        p.add_argument("action", choices=[*ACTIONS["daemon"], "start", "stop", "logs"], help="what to do")
    p.add_argument("--idle-timeout", type=number,
                   help="start: stop after this many idle seconds, 0 = never (default: 300)")
    p.add_argument("--vault-idle-timeout", type=number,
                   help="start: close vaults unused for this many seconds, 0 = never (default: 300)")
    p.add_argument("-n", "--lines", type=int, default=40, help="logs: how many lines")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _Parser.json_errors = _wants_json(argv)
    named = _command_named(argv)
    if argv == ["--version"]:
        named = ""  # the top level alone: no command is built, and no declaration loaded
    parser = build_parser(only=named) if named is not None else None
    if parser is None or not parser.only_built and named:  # type: ignore[attr-defined]
        parser = build_parser()  # help, a mistyped command, or none: the whole command line
    args = parser.parse_args(argv)
    args.format = getattr(args, "format", "text")
    args.global_ = getattr(args, "global_", False)
    args.vault = getattr(args, "vault", None)
    args.home = getattr(args, "home", None)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    json_mode = args.format == "json"
    from . import dispatch

    stdout = sys.stdout
    if not json_mode and not args.raw_output:
        sys.stdout = output.Printable(stdout)  # type: ignore[assignment]
    try:
        return dispatch.run(args)
    except HebbsError as exc:
        output.print_error(str(exc), exc.status_code, json_mode)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK  # `hebbs export | head`: the reader has all it wanted
    except OSError as exc:
        # A file or folder the user named that cannot be used (the commands name theirs; this is the net).
        where = f": {exc.filename}" if exc.filename else ""
        output.print_error(f"{exc.strerror or exc}{where}", "IO_ERROR", json_mode)
        return EXIT_ERROR
    except Exception as exc:
        if os.environ.get("HEBBS_DEBUG"):
            raise
        output.print_error(f"unexpected {type(exc).__name__}: {exc} (this is a bug in hebbs; HEBBS_DEBUG=1 shows "
                           "the traceback)", "INTERNAL", json_mode)
        return EXIT_ERROR
    finally:
        sys.stdout = stdout


# The top-level options that take a value (in the next word unless written --opt=value).
_VALUED = frozenset({"--format", "--home", "--vault"})


def _command_named(argv: list[str]) -> str | None:
    """The command word of argv when it can be told without parsing; None when help or the
    version is asked for before it, or when the words before it are not plain top-level options."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in _VALUED:
            skip = True
        elif word.startswith("-"):
            if word in ("-h", "--help", "--version", "--") or not word.startswith("--"):
                return None
        else:
            return word
    return None


def _wants_json(argv: list[str]) -> bool:
    return any(a == "--format=json" for a in argv) or any(
        a == "--format" and i + 1 < len(argv) and argv[i + 1] == "json" for i, a in enumerate(argv))


def entry() -> Any:
    sys.exit(main())


if __name__ == "__main__":
    entry()
