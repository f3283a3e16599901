"""Where things live: HEBBS_HOME, the daemon's files in it, and which vault a call means.

Two vaults: the global vault is HEBBS_HOME itself (default ~/.hebbs); a project vault is a notes
folder's `.hebbs/` directory. Everything here is plain path arithmetic so the CLI can use it
without loading the engine.
"""

from __future__ import annotations

import functools
import os
import secrets
import shlex
import socket
from pathlib import Path

from .config import check_author, load_config
from .errors import InvalidInput, VaultNotInitialized
from .fsutil import atomic_write

VAULT_DIR = ".hebbs"
CONFIG_FILE = "config.toml"
SOCKET_NAME = "daemon.sock"
PID_NAME = "daemon.pid"
LOCK_NAME = "daemon.lock"
SPAWN_LOCK_NAME = "spawn.lock"
LOG_NAME = "daemon.log"


def hebbs_home(home: os.PathLike | str | None = None) -> Path:
    """The explicit home, else $HEBBS_HOME, else ~/.hebbs; absolute, not necessarily existing."""
    raw = home if home is not None else os.environ.get("HEBBS_HOME") or "~/.hebbs"
    return Path(raw).expanduser().absolute()


def writer(home: os.PathLike | str | None = None) -> tuple[str, str]:
    """(author, daemon) stamped on each memory this process stores: $HEBBS_AUTHOR, else `author` in
    $HEBBS_HOME/config.toml, else user@host; and host:pid. Read again only when either source changes."""
    home_dir = hebbs_home(home)
    try:
        stamp = (home_dir / CONFIG_FILE).stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _writer(home_dir, os.environ.get("HEBBS_AUTHOR"), stamp, os.getpid())


@functools.lru_cache(maxsize=8)
def _writer(home: Path, from_env: str | None, _config_stamp: int, pid: int) -> tuple[str, str]:
    host = socket.gethostname()
    if from_env:
        try:
            return check_author(from_env, "$HEBBS_AUTHOR"), f"{host}:{pid}"
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    configured = load_config(home).author
    if configured is None:
        configured = f"{_user_name()}@{host}"
    return configured.strip(), f"{host}:{pid}"


def _user_name() -> str:
    """The login name: $USER or $LOGNAME, else this uid's line of /etc/passwd, else the uid. Never a
    passwd lookup through NSS (getpass, pwd), which may ask nscd, LDAP or another server: the daemon
    makes no network attempt (tests/reliability/test_daemon_offline.py)."""
    named = os.environ.get("USER") or os.environ.get("LOGNAME")
    if named:
        return named
    uid = str(os.getuid())
    try:
        with open("/etc/passwd", encoding="utf-8", errors="replace") as passwd:
            for line in passwd:
                fields = line.split(":")
                if len(fields) > 2 and fields[2] == uid:
                    return fields[0]
    except OSError:
        pass
    return uid


def ensure_home(home: Path) -> Path:
    """Create the home directory, private to its user (it holds the socket and every memory)."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if home.stat().st_mode & 0o777 != 0o700:
        os.chmod(home, 0o700)
    return home


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


def pid_path(home: Path) -> Path:
    return home / PID_NAME


def lock_path(home: Path) -> Path:
    return home / LOCK_NAME


def spawn_lock_path(home: Path) -> Path:
    return home / SPAWN_LOCK_NAME


def log_path(home: Path) -> Path:
    return home / LOG_NAME


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def find_project_vault(start: Path, home: Path) -> Path | None:
    """The nearest `.hebbs/` directory from start upwards, never HEBBS_HOME itself."""
    here = start.absolute()
    for folder in (here, *here.parents):
        candidate = folder / VAULT_DIR
        if candidate.is_dir() and not _same(candidate, home):
            return candidate
    return None


def is_vault_dir(path: Path, home: Path) -> bool:
    """HEBBS_HOME is always a vault; any other directory is one once `hebbs init` (or an engine) wrote to it."""
    if _same(path, home):
        return True
    return path.is_dir() and ((path / CONFIG_FILE).is_file() or (path / "db").is_dir())


def notes_folder(path: Path) -> Path:
    """The notes folder a vault path stands for: ROOT for ROOT/.hebbs, else the path itself."""
    return path.parent if path.name == VAULT_DIR else path


def init_command(path: Path) -> str:
    """The `hebbs init` command line that creates the vault for path, ready to paste."""
    return f"hebbs init {shlex.quote(str(notes_folder(path)))}"


def vault_for_path(path: os.PathLike | str, home: Path) -> Path:
    """`--vault PATH`: PATH may be the notes folder (holding .hebbs/) or the vault directory itself."""
    if not str(path).strip():
        raise InvalidInput("the vault path is empty (give a notes folder or a vault directory)")
    path = Path(path).expanduser().absolute()
    if (path / VAULT_DIR).is_dir() and not _same(path / VAULT_DIR, home):
        return path / VAULT_DIR
    if is_vault_dir(path, home):
        return path
    raise VaultNotInitialized(f"no hebbs vault at {path}; run `{init_command(path)}` to create one")


def resolve_vault(vault: os.PathLike | str | None = None, global_: bool = False, home: Path | None = None,
                  cwd: Path | None = None, *, sdk: bool = False) -> Path:
    """The vault directory a call means: --global, --vault PATH, or the nearest project vault.

    `sdk` words the error for a Python caller (`global_=True`) rather than a shell user (`--global`)."""
    home = hebbs_home(home)
    if global_:
        if vault is not None:
            raise InvalidInput("pass either a vault path or global_=True, not both" if sdk
                               else "--global and --vault exclude each other")
        return home
    if vault is not None:
        return vault_for_path(vault, home)
    cwd = Path.cwd() if cwd is None else cwd
    found = find_project_vault(cwd, home)
    if found is None:
        if sdk:
            raise VaultNotInitialized(
                f"no hebbs vault in {cwd} or any folder above it; pass vault=PATH (a notes folder with a .hebbs "
                f"vault), or global_=True for the global vault, or create a project vault with "
                f"`{init_command(cwd)}`")
        raise VaultNotInitialized(
            f"no hebbs vault in {cwd} or any folder above it; run `{init_command(cwd)}` to create a project "
            "vault, or add --global to use the global vault")
    return found


def enclosing_vault(folder: Path, home: Path) -> Path | None:
    """The vault of a notes folder above folder (never folder's own, never HEBBS_HOME), or None."""
    here = folder.absolute()
    for parent in here.parents:
        candidate = parent / VAULT_DIR
        if candidate.is_dir() and not _same(candidate, home) and is_vault_dir(candidate, home):
            return candidate
    return None


def init_vault(root: os.PathLike | str, home: Path | None = None, *, nested: bool = True,
               store: str | None = None, name: str | None = None) -> tuple[Path, bool]:
    """Create ROOT/.hebbs with a default config.toml and a .gitignore (a vault is derived data and
    private: it never belongs in the notes' repository). Returns (vault dir, whether it was created now).

    With nested=False, refuse to create a vault inside the notes folder of another vault: its notes
    are that vault's already, and would end up in two vaults.

    With store (a PostgreSQL URL), the vault's records live there under `name` (default: ROOT's folder
    name): two folders, on two machines, attached to the same store and name are one vault."""
    from .config import DEFAULT_CONFIG_TEXT, load_config, with_store_location  # only here: hebbs.config pulls in the index module

    home = hebbs_home(home)
    root = Path(root).expanduser().absolute()
    if root.name == VAULT_DIR and not (root / VAULT_DIR).exists():
        raise InvalidInput(f"{root} is a vault directory's name: give the notes folder, `{init_command(root)}`")
    if not root.is_dir():
        raise InvalidInput(f"{root} is not a directory")
    vault = root / VAULT_DIR
    if _same(vault, home):
        return home, False
    if not nested and not vault.is_dir():
        outer = enclosing_vault(root, home)
        if outer is not None:
            raise InvalidInput(
                f"{root} is inside the notes folder {outer.parent}, whose vault {outer} already holds its notes; "
                f"a vault here would hold them twice. Use that vault (commands run here find it), or pass "
                f"--nested to create a separate vault anyway")
    config_text = DEFAULT_CONFIG_TEXT
    if store is not None:
        config_text = with_store_location(config_text, store, name or root.name)
        if vault.is_dir():
            had = load_config(vault).store
            if (had.url, had.name) != (store, name or root.name):
                where = f"{had.url} as {had.name!r}" if had.url else "its own RocksDB database"
                raise InvalidInput(f"{vault} is already a vault, kept in {where}; `hebbs migrate` moves a vault "
                                   "between stores")
    created = not vault.is_dir()
    vault.mkdir(mode=0o700, exist_ok=True)
    if _write_new_private(vault / CONFIG_FILE, config_text):
        created = True
    _write_new_private(vault / ".gitignore", "# hebbs vault: derived from the notes, private to this machine\n*\n")
    return vault, created


def _write_new_private(path: Path, text: str) -> bool:
    """Create path with text, readable by the user only (whatever the umask); False if it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return True


def kept_token(home: Path, name: str) -> tuple[str, Path, bool]:
    """The key an HTTP server of hebbs wants from its clients, its file (home/name, mode 0600) and whether
    it was made now. It lasts until the file is removed, so a client configured once keeps working."""
    path = ensure_home(home) / name
    try:
        token = path.read_text(encoding="utf-8").strip()
        if token:
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
            return token, path, False
    except FileNotFoundError:
        pass
    token = "hebbs-" + secrets.token_urlsafe(32)
    atomic_write(path, token.encode() + b"\n", mode=0o600)
    return token, path, True
