"""The output layer on its own (bioel_core.outputs), on the local filesystem: the lock, recovery, publishing,
the typed manifest. The kill-at-every-step behaviour through the real verbs is in test_publish_kills.py."""

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bioel_core.outputs import (
    LOCK,
    MANIFEST,
    ConcurrentRunError,
    LocalFileSystem,
    Manifest,
    OutputError,
    OutputFolder,
    read_pointer,
)
from bioel_core.outputs.lock import LOCK_WRITE_GRACE_S
from bioel_core.tables import data_root, read_manifest
from conftest import full_disk


def manifest(**counts) -> Manifest:
    return Manifest(
        pipeline="ingest-kb",
        inputs=[],
        counts=counts,
        reconciliation={"rows": True},
        outputs={},
        runner="test",
        details={"kb": "medic"},
    )


def publish(out, text: str, fail: bool = False) -> OutputFolder:
    folder = OutputFolder(LocalFileSystem(), str(out), ("names",))

    def build() -> Manifest:
        (Path(folder.root) / "names" / "part-00000-of-00001.parquet").write_text(text)
        if fail:
            raise RuntimeError("worker died")
        return manifest(rows=len(text))

    folder.publish(build)
    return folder


def test_publish_moves_the_pointer_to_a_new_generation_and_removes_the_old(tmp_path):
    out = tmp_path / "out"
    first = publish(out, "one")
    assert read_manifest(out)["generation"] == first.generation
    (out / "quality").mkdir()  # a report of the first generation
    second = publish(out, "two")
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, second.generation])  # old generation, report gone
    assert (data_root(out) / "names" / "part-00000-of-00001.parquet").read_text() == "two"


def test_a_failed_build_leaves_the_previous_state_and_no_trace(tmp_path):
    out = tmp_path / "out"
    first = publish(out, "one")
    before = (out / MANIFEST).read_bytes()
    with pytest.raises(RuntimeError, match="worker died"):
        publish(out, "two", fail=True)
    assert (out / MANIFEST).read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, first.generation])


def test_counts_that_do_not_reconcile_are_not_published(tmp_path):
    # the CLI checked reconciliation after publishing: it exited 3 ("nothing is published", said the README) with the
    # unreconciled tables already the folder's state
    from bioel_core.guards import UnpublishedError, UnreconciledError

    out = tmp_path / "out"
    first = publish(out, "one")
    before = (out / MANIFEST).read_bytes()
    folder = OutputFolder(LocalFileSystem(), str(out), ("names",))
    unreconciled = manifest(rows=3)
    unreconciled.reconciliation = {"rows": False, "names": True}
    with pytest.raises(UnreconciledError, match='^counts do not reconcile: {"rows": false, "names": true}; nothing published$'):
        folder.publish(lambda: unreconciled)
    assert issubclass(UnreconciledError, UnpublishedError)  # the CLI's exit 3
    assert (out / MANIFEST).read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, first.generation])


def test_recovery_removes_what_killed_runs_left_and_keeps_the_published_generation(tmp_path):
    out = tmp_path / "out"
    first = publish(out, "one")
    for left in ("gen-20260101T000000Z-aaaaaaaaaaaa", "_staging-bbbbbbbbbbbb"):
        (out / left / "names").mkdir(parents=True)
    (out / (MANIFEST + ".next")).write_text("{half")
    (out / "notes.txt").write_text("a user's file")  # not ours: never removed
    folder = OutputFolder(LocalFileSystem(), str(out), ("names",))
    assert folder.recover()["generation"] == first.generation
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, first.generation, "notes.txt"])


def test_a_users_folders_named_like_the_layers_own_are_never_removed(tmp_path):
    out = tmp_path / "out"
    (out / "gen-2023-notes").mkdir(parents=True)
    (out / "gen-2023-notes" / "a.txt").write_text("a user's file")
    (out / "quality").mkdir()
    (out / "quality" / "notes.txt").write_text("a user's file")
    with pytest.raises(OutputError, match=f"^{out} holds quality, which no bioel run published there"):
        publish(out, "one")
    assert sorted(p.name for p in out.iterdir()) == ["gen-2023-notes", "quality"]
    (out / "quality" / "notes.txt").unlink()
    (out / "quality").rmdir()
    first = publish(out, "one")
    second = publish(out, "two")
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, second.generation, "gen-2023-notes"])
    assert first.generation != second.generation and (out / "gen-2023-notes" / "a.txt").read_text() == "a user's file"


def test_a_second_run_into_a_folder_being_written_refuses_and_touches_nothing(tmp_path):
    out = tmp_path / "out"
    publish(out, "one")
    holder = {"run": "r1", "pid": os.getpid(), "host": socket.gethostname(), "started_utc": "now"}
    (out / LOCK).write_text(json.dumps(holder))  # a live run: this very process
    (out / "gen-20990101T000000Z-inprogress00" / "names").mkdir(parents=True)  # its generation, being written
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(ConcurrentRunError, match=f"pid {os.getpid()}"):
        publish(out, "two")
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_lock_left_by_a_dead_process_on_this_host_is_taken_over(tmp_path):
    out = tmp_path / "out"
    publish(out, "one")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / LOCK).write_text(json.dumps({"run": "r0", "pid": int(dead.stdout), "host": socket.gethostname()}))
    second = publish(out, "two")
    assert read_manifest(out)["generation"] == second.generation and not (out / LOCK).exists()
    (out / LOCK).write_text(json.dumps({"run": "r9", "pid": 1, "host": "another-host"}))  # may still be running
    with pytest.raises(ConcurrentRunError, match="another-host"):
        publish(out, "three")


def _aged(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_lock_whose_write_failed_on_a_full_disk_is_not_left_behind(tmp_path, monkeypatch):
    # on a full disk the lock file was created but not written: the run exited 2 leaving an empty _lock.json, and every
    # later run was refused as "being written by another run" until it was deleted by hand
    out = tmp_path / "out"
    publish(out, "one")
    before = sorted(p.name for p in out.iterdir())
    with monkeypatch.context() as disk:
        full_disk(disk, lambda path: path.endswith(LOCK))
        with pytest.raises(OutputError, match=f"^output folder {out} is not writable: .*No space left on device"):
            publish(out, "two")
    assert sorted(p.name for p in out.iterdir()) == before  # no lock, nothing else
    second = publish(out, "two")  # space freed: the next run publishes
    assert read_manifest(out)["generation"] == second.generation and not (out / LOCK).exists()


@pytest.mark.parametrize(
    "content",
    [b"", b'{"run": "r0", "pid"', b"\xff\xfe not json", b'{"run": "r0"}'],
    ids=["empty", "cut short", "not JSON", "no pid"],
)
def test_a_lock_that_names_no_run_is_named_with_its_age_and_taken_over_once_old(tmp_path, content):
    out = tmp_path / "out"
    publish(out, "one")
    (out / LOCK).write_bytes(content)  # left by a run killed while writing it, or by an older bioel's failed write
    _aged(out / LOCK, 5)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(
        ConcurrentRunError, match=f"holds a lock that names no run \\({out / LOCK}: .*, written 5 s ago\\)"
    ) as refused:
        publish(out, "two")  # a run may be writing it this instant
    assert ("empty" if not content else f"{len(content)} bytes that name no run") in str(refused.value)
    assert sorted(p.name for p in out.iterdir()) == before and (out / LOCK).read_bytes() == content
    _aged(out / LOCK, LOCK_WRITE_GRACE_S)
    second = publish(out, "two")
    assert read_manifest(out)["generation"] == second.generation and not (out / LOCK).exists()


def test_a_lock_that_cannot_be_read_is_named_with_its_age_and_kept(tmp_path, monkeypatch):
    out = tmp_path / "out"
    publish(out, "one")
    (out / LOCK).write_text(json.dumps({"run": "r1", "pid": 1, "host": "another-host"}))
    _aged(out / LOCK, 120)
    real_open = LocalFileSystem.open

    def denied(self, path):
        if path.endswith(LOCK):
            raise PermissionError(13, "Permission denied", path)  # another user's lock, written under umask 077
        return real_open(self, path)

    monkeypatch.setattr(LocalFileSystem, "open", denied)
    with pytest.raises(
        ConcurrentRunError,
        match=f"^{out}: its lock {out / LOCK} cannot be read \\(.*Permission denied.*\\), written 120 s ago: a run may hold it",
    ):
        publish(out, "two")
    assert (out / LOCK).exists()


@pytest.mark.parametrize("abandoned", ["dead process", "names no run"])
def test_of_two_runs_taking_over_one_abandoned_lock_one_wins(tmp_path, monkeypatch, abandoned):
    out = tmp_path / "out"
    publish(out, "one")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    content = (
        json.dumps({"run": "r0", "pid": int(dead.stdout), "host": socket.gethostname()}) if abandoned == "dead process" else ""
    )
    (out / LOCK).write_text(content)
    _aged(out / LOCK, LOCK_WRITE_GRACE_S)
    first, second = (OutputFolder(LocalFileSystem(), str(out), ("names",)) for _ in range(2))
    found, reads = second.lock._found, []

    def first_takes_it_over_meanwhile(path):  # `second` has read the abandoned lock; `first` takes it over before it moves it
        lock = found(path)
        reads.append(path)
        if len(reads) == 1:
            first.lock.acquire()
        return lock

    monkeypatch.setattr(second.lock, "_found", first_takes_it_over_meanwhile)
    with pytest.raises(ConcurrentRunError, match="another run took over its abandoned lock"):
        second.lock.acquire()
    assert json.loads((out / LOCK).read_text())["run"] == first.run_id  # the winner's lock stands
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, LOCK, read_manifest(out)["generation"]])
    first.lock.release()


def test_a_refused_runs_report_never_blocks_the_next_run(tmp_path):
    # a first run refused by its quality checks left rejected/ and no manifest; the next run, even with --fail-on none,
    # was refused: "holds rejected, which no bioel run published there"
    from bioel_core.guards import QualityGateError

    out = tmp_path / "out"

    class Refusing:
        def audit(self, fs, output_dir, root, manifest):
            fs.mkdirs(fs.join(output_dir, "rejected"))
            fs.write(fs.join(output_dir, "rejected", "summary.json"), json.dumps({"generation": manifest["generation"]}).encode())
            fs.write(fs.join(output_dir, "rejected", "report.html"), b"<!DOCTYPE html>")
            raise QualityGateError("refused", {})

    folder = OutputFolder(LocalFileSystem(), str(out), ("names",))
    with pytest.raises(QualityGateError):
        folder.publish(lambda: manifest(rows=1), Refusing())
    assert sorted(p.name for p in out.iterdir()) == ["rejected"]
    second = publish(out, "two")
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, second.generation])  # the old report removed
    # a folder named so that is not a report of a run here is still the user's
    (out / "rejected").mkdir()
    (out / "rejected" / "summary.json").write_text(json.dumps({"generation": "my notes"}))
    (out / MANIFEST).unlink()
    with pytest.raises(OutputError, match="holds rejected, which no bioel run published there"):
        publish(out, "three")


def test_an_unwritable_output_is_one_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputError, match="not writable"):
        publish(blocker / "sub", "one")


def test_a_folder_published_before_generations_is_read_and_replaced(tmp_path):
    out = tmp_path / "out"
    (out / "names").mkdir(parents=True)
    (out / "names" / "part-00000-of-00001.parquet").write_text("legacy")
    (out / MANIFEST).write_text(manifest().to_json().decode())  # no generation: tables beside the manifest
    assert data_root(out) == out
    new = publish(out, "new")
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, new.generation])


def test_the_manifest_round_trips_and_refuses_clashing_or_unknown_fields():
    m = manifest(rows=3)
    m.generation = "gen-x"
    flat = json.loads(m.to_json())
    assert flat["kb"] == "medic" and flat["counts"] == {"rows": 3} and flat["pipeline"] == "ingest-kb"
    assert Manifest.from_dict(flat) == m and m.reconciled
    with pytest.raises(ValueError, match="redefine"):
        Manifest(pipeline="embed", inputs=[], counts={}, reconciliation={}, outputs={}, runner="x", details={"counts": 1})
    with pytest.raises(ValueError, match="unknown pipeline"):
        Manifest(pipeline="ingest", inputs=[], counts={}, reconciliation={}, outputs={}, runner="x")


def test_a_rerun_of_the_same_inputs_keeps_the_folders_version_and_older_records_still_match(tmp_path):
    # the version later stages record (embed of its names, build-index of its embeddings, link's kb_version) was the
    # sha256 of the whole manifest.json, whose generation and time change with every run: re-ingesting an unchanged
    # KB made its embeddings refuse to load and an incremental link relink every document
    from bioel_core.embeddings import is_version_of, manifest_sha256

    out = tmp_path / "out"
    publish(out, "same")
    before, whole_file = manifest_sha256(out), hashlib.sha256((out / MANIFEST).read_bytes()).hexdigest()
    publish(out, "same")  # a new generation, perhaps another second
    pointer = json.loads((out / MANIFEST).read_text())
    (out / MANIFEST).write_text(json.dumps({**pointer, "runner": "DataflowRunner", "options": {"direct_num_workers": 2}}))
    assert manifest_sha256(out) == before
    assert is_version_of(before, out) and not is_version_of(whole_file, out)
    assert is_version_of(hashlib.sha256((out / MANIFEST).read_bytes()).hexdigest(), out)  # recorded before versions
    publish(out, "other")  # other rows: another version
    assert manifest_sha256(out) != before and not is_version_of(before, out)


def test_a_folders_version_leaves_out_where_its_inputs_lie_and_older_records_still_match(tmp_path):
    from bioel_core.embeddings import is_version_of, manifest_sha256
    from bioel_core.outputs.manifest import content_sha256

    out = tmp_path / "out"
    publish(out, "same")
    pointer = json.loads((out / MANIFEST).read_text())

    def located(file: str, model: str, sha: str = "ab") -> dict:
        return {**pointer, "inputs": [{"path": file, "sha256": sha}], "model": {"path": model, "fingerprint": "cd"}}

    (out / MANIFEST).write_text(json.dumps(located("/data/medic.txt", "/models/m")))
    version = manifest_sha256(out)
    recorded_with_paths = content_sha256(located("/data/medic.txt", "/models/m"), with_locations=True)
    assert is_version_of(recorded_with_paths, out)  # recorded before locations were left out
    (out / MANIFEST).write_text(json.dumps(located("medic.txt", "/elsewhere/m")))  # the same inputs, elsewhere
    assert manifest_sha256(out) == version
    (out / MANIFEST).write_text(json.dumps(located("/data/medic.txt", "/models/m", sha="ef")))  # another file's content
    assert manifest_sha256(out) != version


def test_read_pointer_of_an_empty_folder_is_none(tmp_path):
    assert read_pointer(LocalFileSystem(), str(tmp_path)) is None


@pytest.mark.parametrize("text", ["{half", "[1, 2]", "null", "\udcff"])
def test_a_manifest_that_is_not_a_json_object_is_one_error_naming_it(tmp_path, text):
    (tmp_path / MANIFEST).write_text(text, errors="surrogateescape")  # a crash mid-write by hand, another tool's file
    with pytest.raises(ValueError, match=f"^{tmp_path / MANIFEST}: not a readable bioel manifest"):
        read_manifest(tmp_path)


def test_stage_details_read_an_older_manifest_that_lacks_newer_keys():
    """An embed manifest written before the model's pooling, the names' normalizer or a refresh account existed, and
    an index manifest before its metric was recorded, still read: the missing keys are None (or their default)."""
    from bioel_core.outputs.details import EmbedDetails, IndexDetails

    older_embed = {
        "pipeline": "embed",
        "kb": "medic",
        "device": "cpu",
        "batch_size": 8,
        "num_shards": 2,
        "model": {"path": "/m", "fingerprint": "f" * 64, "config": {}, "dim": 4},
        "names": {"path": "/names", "manifest_sha256": "a" * 64, "column": "name_norm", "rows": 3},
    }
    embedded = EmbedDetails.from_dict(older_embed)
    assert embedded.model.dim == 4 and embedded.model.pooling is None and embedded.names.normalizer_version is None
    assert embedded.refresh is None and "refresh" not in embedded.to_dict()
    older_index = {
        "pipeline": "build-index",
        "kb": "medic",
        "num_shards": 1,
        "vectors": 3,
        "shards": [],
        "index": {"kind": "flat", "dimension": 4, "requested": {"kind": "flat"}},
        "embeddings": {"path": "/emb", "manifest_sha256": "b" * 64, "rows": 3},
        "model": older_embed["model"],
        "model_fingerprint": "f" * 64,
        "names": older_embed["names"],
    }
    indexed = IndexDetails.from_dict(older_index)
    assert (indexed.index.metric, indexed.index.normalized, indexed.index.faiss_threads) == ("inner_product", True, None)
    assert indexed.embeddings.files is None and indexed.model == embedded.model and indexed.names == embedded.names


def test_importing_the_output_layer_imports_no_guards_and_its_rules_no_pyarrow():
    """outputs/ owns the folder rules: no import circle with bioel_core.guards, and the CLI's input-vs-output check
    (imported at `bioel --help`) loads nothing heavy."""
    code = (
        "import sys, bioel_core.outputs, bioel_core.outputs.rules; from bioel_core.guards import check_not_an_input; "
        "print('bioel_core.guards' in sys.modules and 'guards', 'pyarrow' in sys.modules and 'pyarrow'); "
        "from bioel_core.outputs import Manifest, OutputFolder; print('bioel_core.guards' in sys.modules and 'guards')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code.replace("from bioel_core.guards import check_not_an_input; ", "")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["False", "False", "False"]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["guards", "False", "guards"]
