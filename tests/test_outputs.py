"""The output layer on its own (bioel_core.outputs), on the local filesystem: the lock, recovery, publishing,
the typed manifest. The kill-at-every-step behaviour through the real verbs is in test_publish_kills.py."""

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bioel_core.outputs import (LOCK, MANIFEST, ConcurrentRunError, LocalFileSystem, Manifest, OutputError, OutputFolder,
                                read_pointer)
from bioel_core.tables import data_root, read_manifest


def manifest(**counts) -> Manifest:
    return Manifest(pipeline="ingest-kb", inputs=[], counts=counts, reconciliation={"rows": True}, outputs={},
                    runner="test", details={"kb": "medic"})


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
