"""A remote output (gs://, s3://: here objstore://, in memory, through Beam) passes the same quality checks as a local
one before it is published: its report is written under the remote folder, and a run that fails them publishes
nothing there."""

import json

from bioel_core.outputs.publish import GENERATION_PREFIX
from conftest import FIXTURES
from objstore import ObjectStore, objects_under
from pipelines import cli
from test_index import kb_folders, sign_vectors

DICTIONARY = str(FIXTURES / "biosyn/dictionary.txt")
REMOTE = "objstore://bucket/kb"
PATHS = ("table_dir", "generation", "html", "summary_json", "run_finished_utc")  # where and when, not what it found


def _cli(capsys, *argv) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `bioel ...`."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err.strip()


def _ingest(capsys, source, output, *flags) -> tuple[int, str, str]:
    return _cli(
        capsys, "ingest-kb", "--input-format", "medic-biosyn", "--input", source, "--output", output, "--num-shards", "1", *flags
    )


def _published(folder: str) -> dict[str, bytes]:
    """The remote folder's objects, checked to hold only a published output: its pointer, the generation it names
    and the reports (no other generation, no staged pointer, no lock)."""
    objects = objects_under(folder)
    manifest = json.loads(objects["manifest.json"])
    tops = {key.split("/", 1)[0] for key in objects}
    assert tops - {"quality", "rejected"} == {"manifest.json", manifest["generation"]}, sorted(tops)
    return objects


def _findings(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in PATHS}


def test_a_remote_output_is_checked_and_its_report_written_beside_it_as_a_local_ones(tmp_path, capsys):
    ObjectStore.objects = {}
    code, out, err = _ingest(capsys, DICTIONARY, REMOTE)
    assert code == 0 and f"quality PASSED (fail on critical): {REMOTE}" in out, err
    assert "not a local folder" not in err
    objects = _published(REMOTE)
    remote = json.loads(objects["quality/summary.json"])
    assert remote["generation"] == json.loads(objects["manifest.json"])["generation"]
    assert (remote["table_dir"], remote["html"]) == (REMOTE, f"{REMOTE}/quality/report.html")
    assert objects["quality/report.html"].startswith(b"<!DOCTYPE html>")

    assert _ingest(capsys, DICTIONARY, tmp_path / "kb")[0] == 0
    local = json.loads((tmp_path / "kb" / "quality" / "summary.json").read_text())
    assert _findings(remote) == _findings(local) and remote["checks"] and remote["stats"]["names"] > 0

    # `bioel report` reads the remote folder, and rewrites its report there
    del ObjectStore.objects[f"{REMOTE}/quality/summary.json"]
    code, out, _ = _cli(capsys, "report", "--input", REMOTE)
    assert code == 0 and f"report:       {REMOTE}/quality/report.html" in out
    assert _findings(json.loads(objects_under(REMOTE)["quality/summary.json"])) == _findings(local)


def test_a_remote_output_that_fails_its_checks_publishes_nothing(tmp_path, capsys):
    ObjectStore.objects = {}
    assert _ingest(capsys, DICTIONARY, REMOTE)[0] == 0
    before = _published(REMOTE)
    good = open(DICTIONARY).read().splitlines()[0]
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join([good] + [f"not an id {i}||name {i}" for i in range(5)]) + "\n")  # 5 of 6 dead letters

    code, _, err = _ingest(capsys, bad, REMOTE)
    assert code == 4 and "nothing published" in err and f"{REMOTE}/rejected/report.html" in err, err
    after = _published(REMOTE)
    assert {k: v for k, v in after.items() if not k.startswith("rejected/")} == before  # pointer, tables, report
    rejected = json.loads(after["rejected/summary.json"])
    assert not rejected["passed"] and rejected["critical_failures"] > 0 and rejected["table_dir"] == REMOTE
    assert rejected["generation"].startswith(GENERATION_PREFIX)
    assert rejected["generation"] != json.loads(after["manifest.json"])["generation"]
    assert after["rejected/report.html"].startswith(b"<!DOCTYPE html>")


def test_a_remote_index_is_checked_against_the_local_folders_its_manifest_names(tmp_path, capsys):
    # the checks map each FAISS shard (copied from the store) and follow the manifest to local embeddings and names
    ObjectStore.objects = {}
    emb, _ = kb_folders(tmp_path, sign_vectors(60, 16, seed=3))
    flags = ("--input", emb, "--num-shards", "2", "--faiss-threads", "1")
    code, out, err = _cli(capsys, "build-index", "--output", "objstore://bucket/index", *flags)
    assert code == 0 and "quality PASSED" in out, err
    remote = json.loads(_published("objstore://bucket/index")["quality/summary.json"])
    assert _cli(capsys, "build-index", "--output", tmp_path / "index", *flags)[0] == 0
    local = json.loads((tmp_path / "index" / "quality" / "summary.json").read_text())
    assert _findings(remote) == _findings(local) and remote["stats"]["vectors"] == 60
    assert all(c["success"] for c in remote["checks"])
