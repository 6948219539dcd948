"""The lock a run holds on an output folder while it writes there: `OUTPUT/_lock.json`, naming the run (its id, pid,
host and start).

A run creates the lock only if no file is at its path (`FileSystem.create_new`): of two runs racing into one folder,
one creates it and the other refuses (ConcurrentRunError) before any work. Creating the lock is also the probe that the
folder can be written: a read-only folder or a full disk is one OutputError, and a lock whose write failed is removed
(`create_new`), so it never blocks a later run.

A lock is abandoned, and taken over, when
- it names a run on this host whose process is gone (a killed run); one from another host may still be running, and
  is removed by hand;
- it names no run (empty, cut short, not bioel's JSON) and was last written LOCK_WRITE_GRACE_S or more ago: a run
  writes its lock whole as it creates it, so such a file is what a run killed while writing it left (or a failed
  write of an older bioel).
A refusal names the lock's path, what it holds and its age. Taking over moves the abandoned lock aside and checks that
the file moved is the one judged abandoned (its bytes; for one that names no run, its time too): of two runs taking
over one lock, the one that moved the other's new lock gives it back and refuses.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

from bioel_core.outputs.fs import FileSystem
from bioel_core.outputs.manifest import utc_now

LOCK = "_lock.json"
LOCK_WRITE_GRACE_S = 60.0  # far longer than a run takes to write its lock once created
TRIES = 3  # attempts to take an abandoned lock that keeps changing hands


class OutputError(RuntimeError):
    """An output folder that cannot be written, or not published to as asked."""


class ConcurrentRunError(OutputError):
    """Another run holds, or may hold, the output folder's lock."""


@dataclass(frozen=True)
class LockFile:
    """A lock file as found: its path, bytes and last write (seconds since the epoch; None: unknown)."""

    path: str
    raw: bytes
    modified: float | None

    @property
    def owner(self) -> dict | None:
        """The run the lock names; None when it names none."""
        try:
            owner = json.loads(self.raw)
        except ValueError:
            return None
        valid = isinstance(owner, dict) and isinstance(owner.get("pid"), int) and owner["pid"] > 0
        return owner if valid else None

    def abandoned(self, now: float) -> bool:
        owner = self.owner
        if owner is None:
            return self.modified is not None and now - self.modified >= LOCK_WRITE_GRACE_S
        return owner.get("host") == socket.gethostname() and not _process_exists(owner["pid"])

    def refusal(self, output_dir: str, now: float) -> str:
        owner = self.owner
        if owner is not None:
            return (
                f"{output_dir} is being written by run {owner.get('run')} (pid {owner['pid']} on {owner.get('host')}, "
                f"since {owner.get('started_utc')}; lock {self.path} written {_ago(self.modified, now)}); wait for it to finish, "
                f"or delete {self.path} if that run is gone"
            )
        what = "empty" if not self.raw.strip() else f"{len(self.raw):,} bytes that name no run"
        return (
            f"{output_dir} holds a lock that names no run ({self.path}: {what}, written {_ago(self.modified, now)}): a run may "
            f"be writing it; it is taken over once {LOCK_WRITE_GRACE_S:.0f} s old, or delete it if no run is"
        )


def _ago(modified: float | None, now: float) -> str:
    return "at an unknown time" if modified is None else f"{max(0.0, now - modified):,.0f} s ago"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class FolderLock:
    """`acquire` before writing into `output_dir`, `release` once done (the lock names the run `run_id`)."""

    def __init__(self, fs: FileSystem, output_dir: str, run_id: str):
        self.fs, self.output_dir, self.run_id = fs, output_dir, run_id
        self.path = fs.join(output_dir, LOCK)

    def acquire(self) -> None:
        """Create the lock, or take over an abandoned one; ConcurrentRunError when another run holds it, OutputError
        when the folder cannot be written."""
        mine = json.dumps(
            {"run": self.run_id, "pid": os.getpid(), "host": socket.gethostname(), "started_utc": utc_now()}
        ).encode()
        for _ in range(TRIES):
            try:
                self.fs.mkdirs(self.output_dir)
                if self.fs.create_new(self.path, mine):
                    return
            except OSError as err:
                raise OutputError(f"output folder {self.output_dir} is not writable: {err}") from None
            found = self._found(self.path)
            if found is None:  # released meanwhile
                continue
            now = time.time()
            if not found.abandoned(now):
                raise ConcurrentRunError(found.refusal(self.output_dir, now))
            if not self._take_over(found):
                raise ConcurrentRunError(f"{self.output_dir}: another run took over its abandoned lock {self.path} first")
        raise ConcurrentRunError(
            f"{self.output_dir}: its lock {self.path} changed hands {TRIES} times while this run tried to take it; run again"
        )

    def release(self) -> None:
        self.fs.delete(self.path)

    def _found(self, path: str) -> LockFile | None:
        """The lock file at `path`; None when there is none. One that cannot be read is a refusal naming it."""
        if not self.fs.exists(path):
            return None
        try:
            modified = self.fs.modified(path)
        except OSError:
            modified = None
        try:
            with self.fs.open(path) as fh:
                return LockFile(path, fh.read(), modified)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise ConcurrentRunError(
                f"{self.output_dir}: its lock {path} cannot be read ({err}), written "
                f"{_ago(modified, time.time())}: a run may hold it; delete {path} if none does"
            ) from None

    def _take_over(self, abandoned: LockFile) -> bool:
        """Move the abandoned lock aside and remove it; False when the file moved was another run's new lock (which
        took the abandoned one over first), given back."""
        aside = f"{self.path}.{self.run_id}.abandoned"
        try:
            self.fs.rename(self.path, aside)
        except OSError:  # gone: taken over or released meanwhile; creating the lock decides
            return True
        moved = self._found(aside)
        same_time = abandoned.owner is not None or (moved is not None and moved.modified == abandoned.modified)
        if moved is not None and moved.raw == abandoned.raw and same_time:
            self.fs.delete(aside)
            return True
        if moved is not None:
            self.fs.create_new(self.path, moved.raw)
        self.fs.delete(aside)
        return False
