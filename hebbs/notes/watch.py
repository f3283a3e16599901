"""The watcher: file events -> phase 1 (cheap) after a short quiet period -> phase 2 (embedding) after a longer one.

    event ... event  (each restarts the phase-1 timer, 500 ms)
        -> on_phase1(paths)         parse, checksum, manifest
        -> (3 s quiet, or 10 s when the burst had more than 20 events: a git checkout, a bulk copy)
        -> on_phase2()              embed and index

New events during the wait run phase 1 again and restart the phase-2 wait, so a burst of saves costs
one embedding pass. Callbacks run one at a time on the watcher's own thread; phase 1 and phase 2
never overlap. The machine knows nothing about transports: `NotesWatcher` takes two callables, and
`watch_notes` wires them to `scan_notes` / `apply_plan` for an open engine.

Events are judged by path, never by kind: whatever happened (an editor's save through a temp file and
a rename, a move, a delete), phase 1 looks at each named path as it is on disk when it runs. A move
names both paths, so the note's sections keep their memory ids (matched by content hash).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from .indexer import IndexSummary, Plan, ProgressFn, apply_plan, resolve_root, scan_notes
from .walk import IGNORE_FILE, VaultFilter

__all__ = ["NotesWatcher", "watch_notes"]

log = logging.getLogger("hebbs.notes")

_IGNORED_KINDS = {"opened", "closed_no_write"}


class NotesWatcher:
    """Debounces file events of one vault into phase-1 and phase-2 calls (see the module docstring).

    `on_phase1(paths)` gets the absolute paths named by events since the last call (root itself to
    mean "look at everything"). `on_error(exc)` sees exceptions from either callback; the watcher
    keeps running. `observe=False` skips watchdog entirely: events then come only from `notify`.
    """

    def __init__(self, root: os.PathLike | str, on_phase1: Callable[[set[Path]], Any],
                 on_phase2: Callable[[], Any], *, phase1_delay: float = 0.5, phase2_delay: float = 3.0,
                 bulk_delay: float = 10.0, bulk_events: int = 20,
                 on_error: Callable[[BaseException], Any] | None = None, observe: bool = True) -> None:
        self.root = resolve_root(root)
        self.on_phase1 = on_phase1
        self.on_phase2 = on_phase2
        self.phase1_delay = phase1_delay
        self.phase2_delay = phase2_delay
        self.bulk_delay = bulk_delay
        self.bulk_events = bulk_events
        self.on_error = on_error
        self._observe = observe
        self._filter = VaultFilter(self.root)
        self._cond = threading.Condition()
        self._paths: set[Path] = set()
        self._events = 0
        self._phase1_at: float | None = None
        self._phase2_at: float | None = None
        self._stopping = False
        self._drain = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self._observer: Any = None
        self.phase1_runs = 0
        self.phase2_runs = 0
        self.last_phase2_delay: float | None = None  # the wait chosen after the latest phase 1

    # Lifecycle ----------------------------------------------------------------------------------

    def start(self) -> "NotesWatcher":
        if self._thread is not None:
            raise RuntimeError("watcher already started")
        self._thread = threading.Thread(target=self._loop, name=f"hebbs-watch:{self.root.name}", daemon=True)
        self._thread.start()
        if self._observe:
            observer = Observer()
            observer.schedule(_Handler(self), str(self.root), recursive=True)
            observer.daemon = True
            observer.start()
            self._observer = observer
        return self

    def stop(self, *, drain: bool = False, timeout: float | None = None) -> None:
        """Stop watching. A callback in progress always finishes first (each leaves the manifest
        consistent). Without drain, pending events are dropped: the next full scan (`hebbs index`,
        or a watcher's initial scan) finds those changes anyway. With drain, the index is brought up
        to date before stop returns: phase 1 over the whole vault (the root is passed to on_phase1),
        since the OS may not have delivered the latest events yet, then phase 2."""
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout)
            self._observer = None
        with self._cond:
            self._stopping = True
            self._drain = drain
            if drain:
                self._paths.add(self.root)
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> "NotesWatcher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def idle(self) -> bool:
        """No events waiting, no phase scheduled, no callback running."""
        with self._cond:
            return not self._busy and self._phase1_at is None and self._phase2_at is None

    # Events -------------------------------------------------------------------------------------

    def notify(self, path: os.PathLike | str) -> None:
        """Report a change at path (what the watchdog handler calls; also usable by any other source)."""
        p = _utf8_folder(Path(os.path.abspath(path)))
        with self._cond:
            if self._stopping:
                return
            self._paths.add(p)
            self._events += 1
            self._phase1_at = time.monotonic() + self.phase1_delay
            self._cond.notify_all()

    def relevant(self, path: str, is_dir: bool) -> bool:
        """Whether an event at this path can matter to the index (a note, a folder, the ignore file)."""
        try:
            rel = Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return False
        if rel in (".", ""):
            return False
        if rel == IGNORE_FILE:
            self._filter = VaultFilter(self.root)  # new rules from now on; phase 1 rescans everything
            return True
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self._filter.ignored("/".join(parts[:i]), is_dir=True):
                return False
        if is_dir:
            return not self._filter.ignored(rel, is_dir=True)
        return rel.lower().endswith(".md") and not self._filter.ignored(rel)

    # The machine --------------------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                action = self._next_action()
                if action is None:
                    break
                if action == "phase1":
                    paths, events = self._paths, self._events
                    self._paths, self._events = set(), 0
                    self._phase1_at = None
                self._busy = True
            try:
                if action == "phase1":
                    self._call(self.on_phase1, paths)
                    self.phase1_runs += 1
                    delay = self.bulk_delay if events > self.bulk_events else self.phase2_delay
                    self.last_phase2_delay = delay
                    with self._cond:
                        due = time.monotonic() + delay
                        self._phase2_at = max(self._phase2_at or 0.0, due)
                else:
                    self._call(self.on_phase2)
                    self.phase2_runs += 1
            finally:
                with self._cond:
                    self._busy = False

    def _next_action(self) -> str | None:
        """Wait (holding the condition) for the next phase to run; None when stopping."""
        while True:
            now = time.monotonic()
            if self._stopping:
                if not self._drain:
                    return None
                if self._paths:
                    return "phase1"
                if self._phase2_at is not None:
                    self._phase2_at = None
                    return "phase2"
                return None
            if self._phase1_at is not None and now >= self._phase1_at:
                return "phase1"
            if self._phase1_at is None and self._phase2_at is not None and now >= self._phase2_at:
                self._phase2_at = None
                return "phase2"
            deadlines = [t for t in (self._phase1_at, self._phase2_at) if t is not None]
            self._cond.wait(max(0.0, min(deadlines) - now) if deadlines else None)

    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - a failed pass must not kill the watcher
            if self.on_error is not None:
                self.on_error(exc)
            else:
                log.exception("vault watcher %s: %s failed", self.root, getattr(fn, "__name__", "callback"))


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: NotesWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in _IGNORED_KINDS:
            return
        if event.is_directory and event.event_type in ("modified", "closed"):
            return  # a folder is "modified" whenever a child changes; the child has its own event
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if not raw:
                continue
            path = os.fsdecode(raw)
            if self.watcher.relevant(path, event.is_directory):
                self.watcher.notify(path)


def watch_notes(engine: Any, root: os.PathLike | str, *, progress: ProgressFn | None = None,
                on_plan: Callable[[Plan], Any] | None = None,
                on_summary: Callable[[IndexSummary], Any] | None = None,
                initial_scan: bool = True, **timings: Any) -> NotesWatcher:
    """A started NotesWatcher that keeps `engine` in step with the vault at `root`.

    With initial_scan (the default) the whole vault is scanned once at start, in the watcher's
    thread, which catches up on whatever changed while nothing was watching. `timings` are
    NotesWatcher's keyword arguments (phase1_delay, phase2_delay, bulk_delay, bulk_events, on_error).
    """
    root = resolve_root(root)

    def phase1(paths: set[Path]) -> None:
        plan = scan_notes(engine, root, paths=paths, progress=progress)
        if on_plan is not None:
            on_plan(plan)

    def phase2() -> None:
        summary = apply_plan(engine, root, progress=progress)
        if on_summary is not None:
            on_summary(summary)

    watcher = NotesWatcher(root, phase1, phase2, **timings).start()
    if initial_scan:
        watcher.notify(root)
    return watcher


def _utf8_folder(path: Path) -> Path:
    """The path itself, or, when its name is not UTF-8, the nearest folder above it whose name is: the
    change is then looked at by walking that folder, which names the odd file in its warnings (a path
    that is not UTF-8 cannot be sent to the daemon, and would fail the whole batch of changes)."""
    while True:
        try:
            str(path).encode("utf-8")
            return path
        except UnicodeEncodeError:
            path = path.parent
