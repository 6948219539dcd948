"""Faults x verbs: every verb that writes an output folder, faced with a fault of the disk, the lock or the folder,
ends exactly as `CASES` says (its exit code; the previous published state intact byte for byte, or replaced by this
run's), and the next normal run succeeds with the same tables as an uninterrupted run.

`CASES` is the table (verb | fault | outcome | exit code | previous state), importable on its own (benchmarks print
it). The verbs run in process through the CLI (`pipelines.cli.main`) on the smallest inputs; a full disk and a
read-only folder are the OS's errors raised from the calls that write (conftest.full_disk, conftest.read_only: as root,
chmod stops no write), kills the output layer's fault hook in a child process (as test_publish_kills.py).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

VERBS = ("link", "ingest-kb", "embed", "build-index")


class Case(NamedTuple):
    verb: str
    fault: str
    outcome: str
    exit_code: int  # -9: killed (SIGKILL)
    previous: str  # the previous published state after the run: "intact" (byte for byte), "replaced" (by this run's), "none"


LOCK_FULL = "full disk at lock write"
DATA_FULL = "full disk at data write"
STALE_LOCK = "stale lock (its process gone)"
EMPTY_OLD = "empty lock, a minute old"
EMPTY_NEW = "empty lock, just created"
GARBLED = "unreadable lock (not JSON), a minute old"
LIVE_LOCK = "lock of a running run"
OTHER_HOST = "lock of a run on another host"
READ_ONLY = "read-only output folder"
REJECTED = "rejected/ report of a refused first run"
KILL_BEFORE = "killed before the pointer moves"
KILL_AFTER = "killed after the pointer moves"

OUTCOMES = {
    LOCK_FULL: ("refused before any work; no lock left", 2, "intact"),
    DATA_FULL: ("failed; new generation and lock removed", 2, "intact"),
    STALE_LOCK: ("lock taken over; published", 0, "replaced"),
    EMPTY_OLD: ("lock taken over; published", 0, "replaced"),
    EMPTY_NEW: ("refused, the lock named with its age", 2, "intact"),
    GARBLED: ("lock taken over; published", 0, "replaced"),
    LIVE_LOCK: ("refused, naming the run", 2, "intact"),
    OTHER_HOST: ("refused, naming the run and host", 2, "intact"),
    READ_ONLY: ("refused before any work", 2, "intact"),
    REJECTED: ("published; the report removed", 0, "none"),
    KILL_BEFORE: ("killed; the next run takes its lock over", -signal.SIGKILL, "intact"),
    KILL_AFTER: ("killed; the new state complete", -signal.SIGKILL, "replaced"),
}
# what each verb meets: every fault for link and ingest-kb; for embed and build-index the faults whose handling is
# their own (their data writers) or cheap to show again (the lock and folder faults are the output layer's, shared)
FAULTS = {
    "link": list(OUTCOMES),
    "ingest-kb": list(OUTCOMES),
    "embed": [LOCK_FULL, DATA_FULL, STALE_LOCK, EMPTY_OLD, READ_ONLY, REJECTED],
    "build-index": [LOCK_FULL, DATA_FULL, STALE_LOCK, EMPTY_OLD, READ_ONLY, REJECTED],
}
CASES = [Case(verb, fault, *OUTCOMES[fault]) for verb in VERBS for fault in FAULTS[verb]]

# what a refused run says on stderr, by fault
SAYS = {
    LOCK_FULL: "is not writable: [Errno 28] No space left on device",
    DATA_FULL: "No space left on device",
    EMPTY_NEW: "holds a lock that names no run (",
    LIVE_LOCK: "is being written by run r1 (pid",
    OTHER_HOST: "on another-host",
    READ_ONLY: "is not writable: [Errno 30] Read-only file system",
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Inputs of a previous and a new state for every verb, each verb's previous state (a published folder to copy)
    and the tables of its new state."""
    from bioel_core.corpora import read_pubtator, write_pubtator
    from bioel_core.models import TransformerEncoder
    from conftest import SAMPLE_DATA, table_bytes
    from test_models import make_tiny_bert

    root = tmp_path_factory.mktemp("faults")
    lines = (SAMPLE_DATA / "medic_sample.txt").read_text().splitlines(keepends=True)
    (root / "medic-old.txt").write_text("".join(lines[: len(lines) // 2]))
    (root / "medic-new.txt").write_text("".join(lines))
    docs = read_pubtator(SAMPLE_DATA / "gold_ncbi_bc5cdr_sample.pubtator")
    for version, n in (("old", 2), ("new", 3)):
        with open(root / f"docs-{version}.pubtator", "w") as fh:
            write_pubtator(docs[:n], fh)
    model = str(TransformerEncoder(make_tiny_bert(root / "bert"), pooling="mean").save(root / "model"))
    world = {"root": root, "model": model, "previous": {}, "new": {}}
    for verb in ("ingest-kb", "embed", "build-index", "link"):  # each verb's new state is the next one's input
        previous, new = commands(world, verb, root / f"{verb}-previous")[0], commands(world, verb, root / f"{verb}-new")[1]
        assert cli(previous) == 0 and cli(new) == 0
        world["previous"][verb], world["new"][verb] = root / f"{verb}-previous", table_bytes(root / f"{verb}-new")
    return world


def commands(world: dict, verb: str, out: Path, quality: bool = False) -> tuple[list[str], list[str]]:
    """(the command that makes the verb's previous state in `out`, the one that makes its new state); without the
    quality checks unless asked (they are not what these faults test, and they cost each run seconds)."""
    root, model = world["root"], world["model"]
    gate = [] if quality else ["--no-quality"]
    previous, new = {
        "ingest-kb": tuple(
            [
                "ingest-kb",
                "--input-format",
                "medic-biosyn",
                "--input",
                str(root / f"medic-{v}.txt"),
                "--output",
                str(out),
                "--num-shards",
                "1",
            ]
            for v in ("old", "new")
        ),
        "embed": tuple(
            ["embed", "--model", model, "--input", str(root / kb), "--output", str(out), "--num-shards", "1"]
            for kb in ("ingest-kb-previous", "ingest-kb-new")
        ),
        "build-index": tuple(
            ["build-index", "--input", str(root / emb), "--output", str(out), "--num-shards", "1", "--index-kind", "flat"]
            for emb in ("embed-previous", "embed-new")
        ),
        "link": tuple(
            [
                "link",
                "--model",
                model,
                "--index",
                f"Disease={root / 'build-index-new'}",
                "--input-format",
                "pubtator",
                "--input",
                str(root / f"docs-{v}.pubtator"),
                "--output",
                str(out),
                "--num-shards",
                "1",
            ]
            for v in ("old", "new")
        ),
    }[verb]
    return previous + gate, new + gate


def cli(argv: list[str]) -> int:
    from pipelines import cli as bioel

    return bioel.main([str(a) for a in argv])


def folder_bytes(out: Path) -> dict[str, bytes]:
    """Every file under `out` (tables, manifest, reports, a lock), by its path in the folder."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} if out.exists() else {}


def published_state(out: Path) -> dict[str, bytes]:
    """What readers see: the pointer and the tables of the generation it names."""
    from conftest import table_bytes

    return {"manifest.json": (out / "manifest.json").read_bytes(), **table_bytes(out)}


def _aged(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout)


def plant(fault: str, out: Path, monkeypatch) -> None:
    """Set the fault up in `out` (holding the previous state, if any) for the run about to start."""
    from bioel_core.outputs import LOCK
    from bioel_core.outputs.lock import LOCK_WRITE_GRACE_S
    from conftest import full_disk, read_only

    lock = out / LOCK
    if fault == LOCK_FULL:
        full_disk(monkeypatch, lambda path: path.endswith(LOCK))
    elif fault == DATA_FULL:  # a shard of a table, or of an index, in the new generation
        full_disk(monkeypatch, lambda path: "/gen-" in path and os.path.basename(path).startswith(("part-", "shard-")))
    elif fault == STALE_LOCK:
        lock.write_text(json.dumps({"run": "r0", "pid": _dead_pid(), "host": socket.gethostname(), "started_utc": "then"}))
    elif fault in (EMPTY_OLD, EMPTY_NEW, GARBLED):
        lock.write_bytes(b'{"run": "r0", "pi' if fault == GARBLED else b"")  # a run killed while writing it
        _aged(lock, LOCK_WRITE_GRACE_S + 1 if fault != EMPTY_NEW else 0)
    elif fault == LIVE_LOCK:
        lock.write_text(json.dumps({"run": "r1", "pid": os.getpid(), "host": socket.gethostname(), "started_utc": "now"}))
    elif fault == OTHER_HOST:
        lock.write_text(json.dumps({"run": "r2", "pid": 1, "host": "another-host", "started_utc": "now"}))
    elif fault == READ_ONLY:
        read_only(monkeypatch, out)


def clear(fault: str, out: Path) -> None:
    """What happens before the next normal run: time passes, a running run finishes, a user removes another host's lock."""
    from bioel_core.outputs import LOCK
    from bioel_core.outputs.lock import LOCK_WRITE_GRACE_S

    if fault == EMPTY_NEW:
        _aged(out / LOCK, LOCK_WRITE_GRACE_S + 1)
    elif fault in (LIVE_LOCK, OTHER_HOST):
        (out / LOCK).unlink()


def refused_first_run(argv: list[str], monkeypatch) -> None:
    """A first run into an empty folder that its quality checks refuse: nothing published, its report in rejected/."""
    report = importlib.import_module("bioel_core.quality.report")  # the package's `report` is the function
    real = report.check
    monkeypatch.setattr(report, "check", lambda *a, **k: {**real(*a, **k), "passed": False})
    assert cli(argv) == 4


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.verb}|{c.fault}")
def test_a_fault_ends_as_the_table_says_and_the_next_run_succeeds(world, case, tmp_path, monkeypatch, capsys):
    from conftest import assert_published, run_cli_child, table_bytes

    out = tmp_path / "out"
    argv = commands(world, case.verb, out, quality=case.fault == REJECTED)[1]
    if case.fault == REJECTED:
        with monkeypatch.context() as refusing:
            refused_first_run(argv, refusing)
        assert sorted(p.name for p in out.iterdir()) == ["rejected"]
    else:
        shutil.copytree(world["previous"][case.verb], out)
    previous = published_state(out) if case.previous != "none" else None
    capsys.readouterr()

    if case.fault in (KILL_BEFORE, KILL_AFTER):
        code = run_cli_child(argv, fault="built" if case.fault == KILL_BEFORE else "pointer_moved")
    else:
        with monkeypatch.context() as faulty:
            plant(case.fault, out, faulty)
            before = folder_bytes(out)
            code = cli(argv)
        if case.exit_code:
            assert folder_bytes(out) == before, "a refused or failed run changed the folder"
    err = capsys.readouterr().err
    assert code == case.exit_code, err
    assert "Traceback" not in err
    if case.fault in SAYS:
        assert SAYS[case.fault] in err, err
    if case.previous == "intact":
        assert published_state(out) == previous
    else:  # replaced by this run's state, or published into a folder that had none
        assert table_bytes(out) == world["new"][case.verb]

    clear(case.fault, out)
    assert cli(argv) == 0, capsys.readouterr().err
    assert table_bytes(out) == world["new"][case.verb]
    assert_published(out)
    assert not (out / "rejected").exists()
