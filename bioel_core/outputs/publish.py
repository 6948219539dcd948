"""Publishing an output folder so that a kill at any instant leaves the previous state or the new one.

Each run writes its tables into a new generation folder inside the output folder; publishing is one small
write, of `manifest.json`, which names that generation (readers follow it: bioel_core.tables). The pointer
is written beside itself and renamed over the old one: one atomic step on a POSIX disk, and on an object
store a single-object write that is either whole or absent. Only once the pointer has moved are the old
generation and the derived folders (its quality report) removed.

    lock ─ recover ─ build (new generation) ─ audit ─ stage pointer ─ move pointer ─ remove old ─ report ─ unlock

A run holds `_lock.json` while it writes (bioel_core.outputs.lock): a second run into the same folder refuses
instead of deleting the first's work, and an abandoned lock (its run killed) is taken over. Recovery (under the
lock) deletes whatever a killed run left: generations the pointer does not name, a staged pointer, pre-generation
staging.

Fault injection for tests: with BIOEL_FAULT_AT=<step> in the environment the process kills itself (SIGKILL)
when it reaches that step, so tests kill a publishing run at every step without relying on timing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from collections.abc import Callable

from bioel_core.outputs.errors import UnreconciledError
from bioel_core.outputs.fs import FileSystem
from bioel_core.outputs.layout import MANIFEST, QUALITY, REJECTED, REPORT_FILES, REPORT_SUMMARY, parquet_rows
from bioel_core.outputs.lock import FolderLock, OutputError
from bioel_core.outputs.manifest import Manifest, utc_now

STAGED_POINTER = MANIFEST + ".next"
GENERATION_PREFIX = "gen-"
GENERATION = re.compile(rf"{GENERATION_PREFIX}\d{{8}}T\d{{6}}Z-[0-9a-f]{{12}}")  # gen-<UTC time>-<run id>, as named below
LEGACY_STAGING_PREFIX = "_staging-"  # what publishing before generations left behind when killed
FAULT_ENV = "BIOEL_FAULT_AT"
STEPS = ("locked", "recovered", "built", "pointer_staged", "pointer_moved", "old_removed")


def fault_point(step: str) -> None:
    if os.environ.get(FAULT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def read_pointer(fs: FileSystem, output_dir: str) -> dict | None:
    path = fs.join(output_dir, MANIFEST)
    if not fs.exists(path):
        return None
    with fs.open(path) as fh:
        return json.loads(fh.read())


class OutputFolder:
    """One run's new generation inside `output_dir`, and the publish that makes it the folder's state.

    `tables`: the folders the run writes in its generation; `derived`: folders beside the generations that
    are computed from the tables afterwards (a quality report), stale once a new generation is published."""

    def __init__(self, fs: FileSystem, output_dir: str, tables: tuple[str, ...], derived: tuple[str, ...] = (QUALITY, REJECTED)):
        self.fs, self.output_dir = fs, str(output_dir).rstrip("/")
        self.tables, self.derived = tables, derived
        run = uuid.uuid4().hex[:12]
        self.run_id = run
        self.generation = f"{GENERATION_PREFIX}{utc_now().replace(':', '').replace('-', '')}-{run}"
        self.root = fs.join(self.output_dir, self.generation)
        self.lock = FolderLock(fs, self.output_dir, run)

    def table_dir(self, table: str) -> str:
        return self.fs.join(self.root, table)

    def files(self, table: str) -> list[str]:
        folder = self.table_dir(table)
        return [self.fs.join(folder, name) for name in self.fs.children(folder)]

    def table_outputs(self, table: str, rows: bool = True) -> dict:
        """The manifest's entry for one table: its files (relative to the generation) and, for Parquet, rows."""
        files = self.files(table)
        entry: dict[str, object] = {"files": [f"{table}/{f.rsplit('/', 1)[-1]}" for f in files]}
        if rows:
            entry["rows"] = parquet_rows(self.fs, files)
        return entry

    def publish(self, build: Callable[[], Manifest], gate=None) -> Manifest:
        """Lock, recover what a killed run left, run `build` (it writes the tables into this generation and
        returns the manifest), audit them with `gate` (a quality.QualityGate, or None), move the pointer to the new
        generation, remove the old one, write the gate's report, unlock. A failure before the pointer moves (a
        manifest whose counts do not reconcile: UnreconciledError; failed quality checks: QualityGateError) removes
        the new generation and leaves the previous state as it was."""
        self.lock.acquire()
        try:
            fault_point("locked")
            previous = self.recover()
            fault_point("recovered")
            for table in self.tables:
                self.fs.mkdirs(self.table_dir(table))
            try:
                manifest = build()
                manifest.generation = self.generation
                if not manifest.reconciled:
                    raise UnreconciledError(f"counts do not reconcile: {json.dumps(manifest.reconciliation)}; nothing published")
                if gate is not None:
                    gate.audit(self.fs, self.output_dir, self.root, manifest.to_dict())
                fault_point("built")
                self._move_pointer(manifest)
            except BaseException:
                self.fs.delete(self.root)
                raise
            fault_point("pointer_moved")
            self._remove_previous(previous)
            fault_point("old_removed")
            if gate is not None:
                gate.publish(self.fs, self.output_dir)
        finally:
            self.lock.release()
        return manifest

    def tidy(self) -> dict | None:
        """Lock, recover what killed runs left, unlock, publishing nothing; returns the pointer in force. For a run
        that finds the folder's state up to date: it leaves the folder as a finished publish does (no generation or
        lock of a killed run behind), and refuses as `publish` does while another run writes there."""
        self.lock.acquire()
        try:
            return self.recover()
        finally:
            self.lock.release()

    def recover(self) -> dict | None:
        """Delete what killed runs left (the lock must be held); returns the pointer in force, if any. Only what
        a run names as its own goes: a user's `gen-notes/` stays, and a folder with a derived folder's name
        (`quality/`) where nothing was published is refused, since publishing would remove it, unless it is a
        report a run wrote there (`rejected/`: the report of a run its quality checks refused)."""
        pointer = read_pointer(self.fs, self.output_dir)
        current = (pointer or {}).get("generation", "")
        children = self.fs.children(self.output_dir)
        foreign = [name for name in self.derived if name in children and not self._is_report(name)] if pointer is None else []
        if foreign:
            raise OutputError(
                f"{self.output_dir} holds {', '.join(foreign)}, which no bioel run published there and "
                "publishing would remove: choose another output folder, or move it away"
            )
        for name in children:
            stale_generation = GENERATION.fullmatch(name) and name != current and name != self.generation
            if stale_generation or name.startswith(LEGACY_STAGING_PREFIX) or name == STAGED_POINTER:
                self.fs.delete(self.fs.join(self.output_dir, name))
        return pointer

    def _is_report(self, name: str) -> bool:
        """Whether the folder `name` holds a quality report of a run here and nothing else: its files are a report's,
        and its summary names a generation as a run names it."""
        folder = self.fs.join(self.output_dir, name)
        if not set(self.fs.children(folder)) <= set(REPORT_FILES) or REPORT_SUMMARY not in self.fs.children(folder):
            return False
        try:
            with self.fs.open(self.fs.join(folder, REPORT_SUMMARY)) as fh:
                summary = json.loads(fh.read())
        except (OSError, ValueError):
            return False
        return isinstance(summary, dict) and bool(GENERATION.fullmatch(str(summary.get("generation"))))

    def _move_pointer(self, manifest: Manifest) -> None:
        staged = self.fs.join(self.output_dir, STAGED_POINTER)
        self.fs.write(staged, manifest.to_json())
        fault_point("pointer_staged")
        self.fs.rename(staged, self.fs.join(self.output_dir, MANIFEST))

    def _remove_previous(self, previous: dict | None) -> None:
        stale = list(self.derived)
        if previous is not None:
            if previous.get("generation"):
                stale.append(previous["generation"])
            else:  # a folder published before generations: its tables sat beside the manifest
                stale.extend(t for t in self.tables if t not in self.derived)
        for name in stale:
            self.fs.delete(self.fs.join(self.output_dir, name))
