"""The offline promise, checked on the real thing: the CLI and the daemon it starts index a notes
folder, remember and recall under strace, and must make no network connection, no DNS lookup, and
write nothing outside HEBBS_HOME, the notes folder and the model cache (HOME is an empty temp dir).

onnxruntime's telemetry (hebbs/offline.py) resolves its collector a few seconds after the model
loads; the daemon is kept alive past that so the trace would show it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

import processes

# Variables that would hide the defect: onnxruntime stays quiet on its own under CI or unit tests.
HIDING_ENV = ("CI", "ORT_DISABLE_TELEMETRY", "ORT_RUNNING_UNIT_TESTS", "XDG_CACHE_HOME")
# Long enough for a telemetry upload to be attempted (the first came ~5 s after the model loaded).
LINGER_SECONDS = 8.0
TRACED = "trace=%network,open,openat,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,truncate"
WRITE_FLAGS = re.compile(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC")
SYSCALL = re.compile(r"^(?P<pid>\d+)\s+(?P<name>\w+)\((?P<args>.*)")

DRIVER = r"""
import subprocess, sys, time
hebbs, notes, linger = sys.argv[1], sys.argv[2], float(sys.argv[3])
def run(*args):
    done = subprocess.run([hebbs, *args], capture_output=True, text=True, timeout=300)
    print("$ hebbs", *args, "->", done.returncode, done.stdout[-300:], done.stderr[-300:], flush=True)
    if done.returncode:
        sys.exit(done.returncode)
run("index", notes)
run("--vault", notes, "remember", "The deploy key rotates every ninety days", "--entity", "ops")
run("--vault", notes, "recall", "how often does the deploy key rotate", "--top-k", "3")
time.sleep(linger)
run("--vault", notes, "recall", "tea or coffee", "--top-k", "1")
run("daemon", "stop")
"""


def _notes(root: Path) -> None:
    root.mkdir()
    (root / "ops.md").write_text("# Operations\n\n## Keys\n\nThe deploy key lives in the vault.\n\n"
                                 "## On call\n\nDana is on call this week; escalate to [[people]].\n")
    (root / "people.md").write_text("# People\n\nDana prefers tea over coffee.\n\nLee owns the CI runners.\n")


def _trace_lines(trace_dir: Path) -> list[str]:
    lines: list[str] = []
    for path in sorted(trace_dir.iterdir()):  # strace -ff: one file per process, named trace.<pid>
        pid = path.suffix.lstrip(".")
        lines += [f"{pid} {line}" for line in path.read_text(errors="replace").splitlines()]
    return lines


def network_attempts(lines: list[str]) -> list[str]:
    """Every syscall that opens, reaches or asks for a name on a network: non-Unix sockets, DNS."""
    found = []
    for line in lines:
        m = SYSCALL.match(line)
        if not m:
            continue
        name, args = m["name"], m["args"]
        if name == "socket" and not args.startswith(("AF_UNIX", "AF_LOCAL")):
            found.append(line)
        elif name in ("connect", "sendto", "sendmsg", "bind") and ("AF_INET" in args or "nscd" in args):
            found.append(line)
        elif name in ("open", "openat") and re.search(r'"/etc/(resolv\.conf|hosts|nsswitch\.conf|gai\.conf)"', args):
            found.append(line)  # the resolver reading its configuration: a lookup is under way
    return found


def _written_paths(lines: list[str]) -> list[tuple[str, str]]:
    """(path, line) for every file or directory a traced process created, changed or removed."""
    written = []
    for line in lines:
        m = SYSCALL.match(line)
        if not m or "= -1" in line.rsplit(")", 1)[-1]:
            continue  # failed calls changed nothing
        name, args = m["name"], m["args"]
        if name in ("open", "openat") and not WRITE_FLAGS.search(args):
            continue
        if name not in ("open", "openat", "creat", "mkdir", "mkdirat", "rename", "renameat", "renameat2",
                        "unlink", "unlinkat", "truncate"):
            continue
        written += [(p, line) for p in re.findall(r'"(/[^"]*)"', args)]
    return written


def outside(written: list[tuple[str, str]], allowed: list[Path]) -> list[str]:
    roots = [str(p.resolve()) for p in allowed]
    bad = []
    for path, line in written:
        real = os.path.realpath(path) if os.path.exists(os.path.dirname(path) or "/") else path
        if path.startswith(("/dev/", "/proc/")) or "/__pycache__/" in path:
            continue  # devices and the interpreter's own bytecode cache are not hebbs' files
        if not any(real == r or real.startswith(r + os.sep) or path.startswith(r + os.sep) for r in roots):
            bad.append(line)
    return bad


@pytest.fixture
def offline_run():
    strace = shutil.which("strace")
    if strace is None:
        pytest.fail("strace is needed for the offline check: apt-get install -y strace (.ci/run does it)")
    base = Path(tempfile.mkdtemp(prefix="hbo", dir="/tmp"))
    home, hebbs_home, notes, traces = base / "h", base / "hh", base / "notes", base / "t"
    for d in (home, traces):
        d.mkdir()
    _notes(notes)
    model_cache = Path(os.environ["HEBBS_MODEL_CACHE"])
    env = {k: v for k, v in os.environ.items() if k not in HIDING_ENV}
    env.update(HOME=str(home), HEBBS_HOME=str(hebbs_home), HEBBS_IDLE_TIMEOUT="120", PYTHONDONTWRITEBYTECODE="1")
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    started = time.monotonic()
    done = processes.run([strace, "-ff", "-qq", "-e", TRACED, "-o", str(traces / "trace"), sys.executable, "-c",
                           DRIVER, hebbs, str(notes), str(LINGER_SECONDS)],
                          cwd=notes, env=env, capture_output=True, text=True, timeout=600)
    yield {"done": done, "lines": _trace_lines(traces), "home": home, "allowed": [hebbs_home, notes, model_cache],
           "seconds": time.monotonic() - started}
    shutil.rmtree(base, ignore_errors=True)


def test_index_remember_recall_make_no_network_attempt_and_write_only_their_own_dirs(offline_run):
    done, lines = offline_run["done"], offline_run["lines"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deploy key" in done.stdout  # the recall really ran, and found the memory
    assert len(lines) > 100, "the trace is nearly empty: strace did not follow the daemon"
    assert any("daemon.sock" in line for line in lines), "the daemon's socket never shows in the trace"
    attempts = network_attempts(lines)
    assert not attempts, f"{len(attempts)} network attempts, the first:\n" + "\n".join(attempts[:10])
    bad = outside(_written_paths(lines), offline_run["allowed"])
    assert not bad, f"{len(bad)} writes outside HEBBS_HOME, the notes and the model cache:\n" + "\n".join(bad[:10])
    leftovers = [str(p) for p in offline_run["home"].rglob("*")]
    assert not leftovers, f"written under HOME: {leftovers[:10]}"


def test_the_checks_see_what_a_lookup_and_a_stray_write_look_like():
    """The detectors themselves, on lines as strace prints them (so a silent pass means something)."""
    lines = [
        '12 socket(AF_INET, SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK, IPPROTO_IP) = 7',
        '12 connect(7, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.53")}, 16) = 0',
        '12 connect(5, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT (No such file)',
        '12 connect(5, {sa_family=AF_UNIX, sun_path="/tmp/hb1/daemon.sock"}, 110) = 0',
        '12 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = 5',
        '13 openat(AT_FDCWD, "/root/.cache/Microsoft/DeveloperTools/.onnxruntime/deviceid", O_WRONLY|O_CREAT) = 9',
        '13 openat(AT_FDCWD, "/tmp/hh/db/000001.log", O_RDWR|O_CREAT, 0644) = 9',
        '13 openat(AT_FDCWD, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 9',
    ]
    assert len(network_attempts(lines)) == 3
    assert outside(_written_paths(lines), [Path("/tmp/hh")]) == [lines[5]]
