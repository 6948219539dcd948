"""`bioel refresh`: a tiny MEDIC KB in two versions (a synonym added, a name removed, a synonym renamed, a
preferred name changed, a display form changed, a concept added and one removed), embedded and indexed with a
tiny BERT; the refresh encodes only the new names, rewrites only the touched shards, and its outputs equal a
full embed + build-index of the new KB file for file. Batch size 1 makes the encoder batch-invariant, so
"equal" is exact. Also: the diff report, dead letters and their retry, refusals before any work, a killed
refresh, the CLI."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import bioel_core.index.spec as spec_module
import bioel_core.refresh as refresh_module
from bioel_core.embeddings import ModelMismatchError, check_names_unchanged, read_embeddings
from bioel_core.guards import EmptyOutputError
from bioel_core.index import IndexSpec, ShardedIndex, shard_of
from bioel_core.outputs.details import EmbedDetails, IndexDetails, IngestDetails
from bioel_core.models import Encoder, TransformerEncoder, load_encoder
from bioel_core.quality import format_summary, report
from bioel_core.refresh import REPORT_FILE, diff_names, refresh
from bioel_core.tables import IncompleteOutputError, data_root, read_manifest, read_table, stable_shard, table_files
from conftest import assert_published, assert_unpublished
from pipelines import build_index, cli, embed_names, ingest_kb
from pipelines.options import pipeline_options
from test_models import make_tiny_bert

# names made of the tiny BERT's vocabulary, so that they get distinct vectors
OLD_KB = """\
D000001||Heart Attack|Myocardial Infarction|Heart Infarction
D000002||Breast Cancer|Cancer of the Breast
D000003||Ovarian Cancer|Cancer of the Ovarian
D000004||Colon Cancer|Colon Disease|Cancer of the Colon
D000005||Type 2 Diabetes|Diabetes Type 2
D000006||Familial Syndrome|Familial Disease
D000007||X Linked Syndrome|X Linked Disease
D000008||Heart Disease|Diseases of the Heart
D000009||Breast Disease|Breast Diseases
D000010||Ovarian Syndrome|Ovarian Disease
D000011||Familial Breast Cancer|Familial Breast and Ovarian Cancer Syndrome
D000012||Diabetes Syndrome|Type 2 Diabetes Syndrome
"""
NEW_KB = """\
D000001||Heart Attack|Myocardial Infarction|Heart Infarction
D000002||Breast Cancer|Cancer of the Breast|Breast Cancers
D000003||Ovarian Cancer
D000004||Colon Disease|Colon Cancer|Cancer of the Colon
D000005||Type 2 Diabetes|Diabetes Type 2
D000006||Familial Syndrome|Familial Diseases
D000007||X Linked Syndrome|X Linked Disease
D000008||Heart-Disease|Diseases of the Heart
D000009||Breast Disease|Breast Diseases
D000010||Ovarian Syndromes|Ovarian Disease
D000011||Familial Breast Cancer|Familial Breast and Ovarian Cancer Syndrome
D000013||X Linked Heart Disease|X Linked Cardiac Disease
"""
ADDED = ["breast cancers", "familial diseases", "ovarian syndromes", "x linked cardiac disease", "x linked heart disease"]
REMOVED = ["cancer of the ovarian", "diabetes syndrome", "familial disease", "ovarian syndrome", "type 2 diabetes syndrome"]
EMB_SHARDS, INDEX_SHARDS = 8, 6  # with these names: some shards of each untouched, and one embeddings shard emptied
QUERIES = [
    "heart attack",
    "colon cancer",
    "x linked disease",
    "familial breast cancer",
    "ovarian syndromes",
    "breast cancers",
    "type 2 diabetes syndrome",
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def ingest(root, name, text):
    (root / f"{name}.txt").write_text(text)
    ingest_kb.run("medic-biosyn", [str(root / f"{name}.txt")], str(root / name), pipeline_options([]), num_shards=2)
    return root / name


def embed_and_index(model, names, emb, idx):
    embed_names.run(model, str(names), str(emb), pipeline_options([]), batch_size=1, num_shards=EMB_SHARDS)
    build_index.run(str(emb), str(idx), pipeline_options([]), num_shards=INDEX_SHARDS, spec=IndexSpec("flat"))
    return emb, idx


def recording_encode(monkeypatch, calls):
    real = Encoder.encode

    def encode(self, texts, *args, **kwargs):
        calls.extend(texts)
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", encode)


def run_refresh(kb, out, **kwargs):
    args = {
        "old_names": kb["old"],
        "new_names": kb["new"],
        "model": kb["model"],
        "embeddings": kb["emb"],
        "index": kb["idx"],
        "output_embeddings": out / "emb",
        "output_index": out / "idx",
        **kwargs,
    }
    return refresh(**args)


def files(folder, pattern):
    root = data_root(folder)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.glob(pattern))}


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    root = tmp_path_factory.mktemp("refresh")
    model = str(TransformerEncoder(make_tiny_bert(root / "bert"), pooling="mean").save(root / "model"))
    old, new = ingest(root, "old", OLD_KB), ingest(root, "new", NEW_KB)
    emb, idx = embed_and_index(model, old, root / "emb", root / "idx")
    full_emb, full_idx = embed_and_index(model, new, root / "full-emb", root / "full-idx")
    return {
        "root": root,
        "model": model,
        "old": old,
        "new": new,
        "emb": emb,
        "idx": idx,
        "full_emb": full_emb,
        "full_idx": full_idx,
    }


@pytest.fixture(scope="module")
def refreshed(kb):
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        recording_encode(mp, calls)
        result = run_refresh(kb, kb["root"] / "refreshed")
    return kb["root"] / "refreshed", result, calls


def test_only_new_names_are_encoded_and_only_touched_shards_rewritten(kb, refreshed):
    out, result, calls = refreshed
    assert sorted(calls) == ADDED
    old_ids = set(read_table(kb["old"], "names", ["name_id"]).column("name_id").to_pylist())
    new_ids = set(read_table(kb["new"], "names", ["name_id"]).column("name_id").to_pylist())
    moved = np.array(sorted(old_ids ^ new_ids), dtype=np.int64)
    rebuilt = sorted(set(shard_of(moved, INDEX_SHARDS).tolist()))
    rewritten = sorted({stable_shard(str(i), EMB_SHARDS) for i in moved.tolist()})
    assert result.report["refresh"]["index_shards_rebuilt"] == rebuilt and 0 < len(rebuilt) < INDEX_SHARDS
    assert result.report["refresh"]["embeddings_shards_rewritten"] == rewritten and 0 < len(rewritten) < EMB_SHARDS
    old_index, new_index = files(kb["idx"], "*/shard-*"), files(out / "idx", "*/shard-*")
    assert old_index.keys() == new_index.keys()
    for name, data in new_index.items():
        shard = int(name.split("shard-")[1][:5])
        assert (data == old_index[name]) == (shard not in rebuilt), name
    old_emb, new_emb = files(kb["emb"], "embeddings/*"), files(out / "emb", "embeddings/*")
    for shard in range(EMB_SHARDS):
        name = f"embeddings/part-{shard:05d}-of-{EMB_SHARDS:05d}.parquet"
        if shard not in rewritten:
            assert new_emb.get(name) == old_emb.get(name), name
    # a shard whose every name was removed has no file, as `bioel embed` writes none
    assert any(
        n in old_emb and n not in new_emb for n in (f"embeddings/part-{s:05d}-of-{EMB_SHARDS:05d}.parquet" for s in rewritten)
    )
    counts = result.embeddings_manifest["refresh"]["counts"]
    assert counts == {"names_added": 5, "names_removed": 5, "names_changed": 3, "carried": 21, "encoded": 5, "dead_lettered": 0}


def test_outputs_equal_a_full_embed_and_build_index(kb, refreshed):
    out, _, _ = refreshed
    assert files(out / "emb", "embeddings/*") == files(kb["full_emb"], "embeddings/*")
    assert files(out / "idx", "*/shard-*") == files(kb["full_idx"], "*/shard-*")
    queries = load_encoder(kb["model"]).encode(QUERIES)
    got, full = ShardedIndex(out / "idx").search(queries, 6), ShardedIndex(kb["full_idx"]).search(queries, 6)
    assert np.array_equal(got.name_ids, full.name_ids) and np.array_equal(got.scores, full.scores)
    assert got.concept_ids.tolist() == full.concept_ids.tolist()
    assert ShardedIndex(out / "idx").manifest["shards"] == ShardedIndex(kb["full_idx"]).manifest["shards"]


def test_ivf_pq_shards_and_their_re_ranking_stores_refresh_as_a_full_build_writes_them(kb, tmp_path, monkeypatch):
    """Shards of a handful of names are trained here (MIN_TRAINED lowered), so the refresh copies and rebuilds
    shards that have a re-ranking store of their own, file for file as build-index writes them."""
    monkeypatch.setattr(spec_module, "MIN_TRAINED", 4)
    for emb, idx in ((kb["emb"], tmp_path / "old-idx"), (kb["full_emb"], tmp_path / "full-idx")):
        build_index.run(str(emb), str(idx), pipeline_options([]), num_shards=INDEX_SHARDS, spec=IndexSpec("ivf-pq"))
    run_refresh(kb, tmp_path / "refreshed", index=tmp_path / "old-idx")
    refreshed, full = files(tmp_path / "refreshed" / "idx", "*/shard-*"), files(tmp_path / "full-idx", "*/shard-*")
    assert any(name.startswith("refine/") for name in full) and refreshed == full


def test_refreshed_folders_are_normal_outputs(kb, refreshed):
    out, result, _ = refreshed
    emb, full = read_embeddings(out / "emb"), read_embeddings(kb["full_emb"])
    assert np.array_equal(emb.name_ids, full.name_ids) and np.array_equal(emb.vectors, full.vectors)
    assert check_names_unchanged(out / "emb") == kb["new"]
    manifest = read_manifest(out / "emb")
    assert manifest == result.embeddings_manifest and manifest["pipeline"] == "embed"
    assert all(manifest["reconciliation"].values()) and manifest["counts"] == read_manifest(kb["full_emb"])["counts"]
    assert manifest["refresh"]["old_names"]["manifest_sha256"] == read_manifest(kb["emb"])["names"]["manifest_sha256"]
    assert manifest["refresh"]["new_names"]["manifest_sha256"] == manifest["names"]["manifest_sha256"]
    index = read_manifest(out / "idx")
    assert index["pipeline"] == "build-index" and all(index["reconciliation"].values())
    assert (
        index["embeddings"]["path"] == str(out / "emb")
        and index["refresh"]["shards_rebuilt"] == result.report["refresh"]["index_shards_rebuilt"]
    )
    assert index["vectors"] == read_manifest(kb["full_idx"])["vectors"] == 26
    for folder in (out / "emb", out / "idx"):
        summary = report(folder, output_dir=out / f"quality-{folder.name}")
        assert summary["passed"], format_summary(summary)
    assert_published(out / "emb") and assert_published(out / "idx")


def test_refresh_and_the_pipelines_build_the_same_manifest_details(kb, refreshed):
    """One builder per stage: the refreshed embeddings' and index's own fields are a full embed's and build-index's
    of the new KB, but for the refresh account and the embeddings folder the index names (another folder, another
    version: its manifest has that account). Read typed, written back as the very dicts on disk."""
    out, _, _ = refreshed
    manifests = {
        name: read_manifest(folder)
        for name, folder in (
            ("emb", out / "emb"),
            ("idx", out / "idx"),
            ("full_emb", kb["full_emb"]),
            ("full_idx", kb["full_idx"]),
        )
    }
    emb, full_emb = EmbedDetails.from_dict(manifests["emb"]), EmbedDetails.from_dict(manifests["full_emb"])
    idx, full_idx = IndexDetails.from_dict(manifests["idx"]), IndexDetails.from_dict(manifests["full_idx"])
    assert emb.refresh["shards_rewritten"] and idx.refresh["shards_rebuilt"] and full_emb.refresh is full_idx.refresh is None
    assert replace(emb, refresh=None) == full_emb
    assert emb.names.path == str(kb["new"]) and emb.model.fingerprint == full_emb.model.fingerprint
    assert idx.embeddings.path == str(out / "emb") and full_idx.embeddings.path == str(kb["full_emb"])
    assert replace(idx, refresh=None, embeddings=full_idx.embeddings) == full_idx
    for name in ("counts", "reconciliation"):
        assert manifests["emb"][name] == manifests["full_emb"][name] and manifests["idx"][name] == manifests["full_idx"][name]
    for name, details in (("emb", emb), ("idx", idx), ("full_emb", full_emb), ("full_idx", full_idx)):
        written = details.to_dict()
        assert written == {key: manifests[name][key] for key in written}, name
    ingested = read_manifest(kb["new"])
    written = IngestDetails.from_dict(ingested).to_dict()
    assert written == {key: ingested[key] for key in written} and written["normalizer"]["version"] == emb.names.normalizer_version


def test_diff_report_lists_exactly_the_changes(refreshed):
    out, result, _ = refreshed
    report_ = json.loads((data_root(out / "emb") / REPORT_FILE).read_text())
    assert report_ == json.loads(json.dumps(result.report))
    names, concepts = report_["names"], report_["concepts"]
    assert sorted(n["name"].lower() for n in names["added"]["examples"]) == ADDED
    assert sorted(n["name"].lower() for n in names["removed"]["examples"]) == REMOVED
    assert sorted((c["concept_id"], c["name_norm"], c["changes"]) for c in names["changed"]["examples"]) == [
        ("D000004", "colon cancer", {"name_type": ["preferred", "synonym"]}),
        ("D000004", "colon disease", {"name_type": ["synonym", "preferred"]}),
        ("D000008", "heart disease", {"name": ["Heart Disease", "Heart-Disease"]}),
    ]
    assert concepts["added"] == {"count": 1, "examples": [{"concept_id": "D000013", "preferred_name": "X Linked Heart Disease"}]}
    assert concepts["removed"] == {"count": 1, "examples": [{"concept_id": "D000012", "preferred_name": "Diabetes Syndrome"}]}
    assert concepts["renamed"]["examples"] == [
        {"concept_id": "D000004", "preferred_name": ["Colon Cancer", "Colon Disease"]},
        {"concept_id": "D000008", "preferred_name": ["Heart Disease", "Heart-Disease"]},
        {"concept_id": "D000010", "preferred_name": ["Ovarian Syndrome", "Ovarian Syndromes"]},
    ]
    by_concept = {c["concept_id"]: c for c in concepts["names_changed"]["examples"]}
    assert sorted(by_concept) == ["D000002", "D000003", "D000004", "D000006", "D000008", "D000010"]
    assert (by_concept["D000006"]["names_added"], by_concept["D000006"]["names_removed"]) == (
        ["Familial Diseases"],
        ["Familial Disease"],
    )
    assert by_concept["D000003"]["names_removed"] == ["Cancer of the Ovarian"] and not by_concept["D000003"]["names_added"]
    assert by_concept["D000008"]["names_changed"] == [{"name_norm": "heart disease", "name": ["Heart Disease", "Heart-Disease"]}]
    summary = refresh_module.format_summary(result.report)
    assert "names: +5 -5 ~3" in summary and "3 renamed, 6 with changed names" in summary
    assert "concept renamed: D000010 'Ovarian Syndrome' -> 'Ovarian Syndromes'" in summary


def test_examples_are_capped_and_an_unchanged_kb_diffs_empty(kb):
    old = read_table(kb["old"], "names")
    diff = diff_names(old, old.slice(3))
    assert len(diff.removed) == 3 and not len(diff.added) and not diff.changed.any()
    concepts = read_table(kb["old"], "concepts", ["concept_id", "preferred_name"])
    capped = refresh_module.diff_report(diff, concepts, concepts, examples=2)
    assert capped["names"]["removed"]["count"] == 3 and len(capped["names"]["removed"]["examples"]) == 2
    same = refresh_module.diff_report(diff_names(old, old), concepts, concepts, examples=2)
    assert all(
        s["count"] == 0 for s in (*[same["names"][k] for k in ("added", "removed", "changed")], *same["concepts"].values())
    )


def test_a_name_that_fails_is_dead_lettered_and_the_next_refresh_retries_it(kb, tmp_path, monkeypatch):
    real = Encoder.encode

    def encode(self, texts, *args, **kwargs):
        if "breast cancers" in texts:
            raise RuntimeError("cannot encode this one")
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", encode)
    first = run_refresh(kb, tmp_path / "first")
    assert first.report["refresh"]["dead_lettered"] == 1 and all(first.embeddings_manifest["reconciliation"].values())
    dead = read_table(tmp_path / "first/emb", "dead_letter").to_pylist()
    assert [(d["source"], d["raw"]) for d in dead] == [("encoder", "breast cancers")]
    assert first.index_manifest["vectors"] == 25 and all(first.index_manifest["reconciliation"].values())
    monkeypatch.undo()
    calls = []
    recording_encode(monkeypatch, calls)
    # a refresh of the refresh, same names: nothing differs but the dead-lettered name has no vector yet
    second = refresh(
        kb["new"],
        kb["new"],
        kb["model"],
        tmp_path / "first/emb",
        tmp_path / "first/idx",
        tmp_path / "second/emb",
        tmp_path / "second/idx",
    )
    assert calls == ["breast cancers"] and second.report["refresh"]["retried_dead_letters"] == 1
    assert second.report["names"]["added"]["count"] == second.report["names"]["removed"]["count"] == 0
    assert files(tmp_path / "second/emb", "embeddings/*") == files(kb["full_emb"], "embeddings/*")
    assert files(tmp_path / "second/idx", "*/shard-*") == files(kb["full_idx"], "*/shard-*")
    assert read_table(tmp_path / "second/emb", "dead_letter").num_rows == 0


def test_a_refresh_whose_every_name_is_dead_lettered_publishes_nothing(kb, tmp_path, monkeypatch):
    """As `bioel embed` refuses a run that embedded no name (exit 3), so does a refresh: a new release whose every
    name is new and fails to encode publishes neither an empty embeddings table nor an empty index."""
    renumbered = ingest(tmp_path, "renumbered", OLD_KB.replace("D0000", "D9990"))  # every name_id new: nothing carried

    def fail(self, texts, *args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(Encoder, "encode", fail)
    with pytest.raises(EmptyOutputError, match="no rows: 26 input records read, .* first dead letters: encoder name_id "):
        run_refresh(kb, tmp_path / "api", new_names=renumbered)
    assert_unpublished(tmp_path / "api" / "emb")
    assert_unpublished(tmp_path / "api" / "idx")
    out = tmp_path / "cli"
    code = cli.main(
        [
            "refresh",
            "--old",
            str(kb["old"]),
            "--new",
            str(renumbered),
            "--model",
            kb["model"],
            "--embeddings",
            str(kb["emb"]),
            "--index",
            str(kb["idx"]),
            "--output-embeddings",
            str(out / "emb"),
            "--output-index",
            str(out / "idx"),
            "--no-quality",
        ]
    )
    assert code == 3
    assert_unpublished(out / "emb")
    assert_unpublished(out / "idx")


@pytest.mark.parametrize(
    "breakage, error, message",
    [
        ("wrong-model", ModelMismatchError, "made with the model at"),
        ("old-is-not-the-embeddings-names", ValueError, "is not the names folder the embeddings"),
        ("embeddings-unfinished", IncompleteOutputError, "not a finished bioel output"),
        ("new-unfinished", IncompleteOutputError, "not a finished bioel output"),
        ("index-shard-missing", FileNotFoundError, "shard file\\(s\\) missing"),
        ("index-shard-damaged", ValueError, "shard-00000-of-.*: sha256 does not match the index manifest"),
        ("index-of-other-embeddings", ValueError, "^index .* was not built from embeddings "),
        ("embeddings-file-missing", ValueError, "are not the"),
        ("output-is-input", ValueError, "output_index .* is \\(or holds\\) the index "),
        ("output-inside-input", ValueError, "output_index .*/sub is inside the old folder "),
        ("outputs-nested", ValueError, "output_embeddings .*/out-emb is \\(or holds\\) the output_index .*/out-emb/idx "),
    ],
)
def test_bad_inputs_are_refused_before_any_work(kb, tmp_path, monkeypatch, breakage, error, message):
    args = {k: kb[k] for k in ("old", "new", "model", "emb", "idx")}
    out = {"emb": tmp_path / "out-emb", "idx": tmp_path / "out-idx"}
    if breakage == "wrong-model":
        other = load_encoder(kb["model"])
        with torch.no_grad():
            other.model.embeddings.word_embeddings.weight.add_(0.01)
        args["model"] = str(other.save(tmp_path / "other-model"))
    elif breakage == "old-is-not-the-embeddings-names":
        args["old"] = kb["new"]
    elif breakage in ("embeddings-unfinished", "index-shard-missing", "index-shard-damaged", "embeddings-file-missing"):
        key = "idx" if breakage.startswith("index-") else "emb"
        args[key] = tmp_path / key
        shutil.copytree(kb[key], args[key])
        shard = sorted((data_root(args["idx"]) / "shards").iterdir())[0] if key == "idx" else None
        if breakage == "index-shard-missing":  # the copied index still names the original embeddings, which are intact
            shard.unlink()
        elif breakage == "index-shard-damaged":  # refused before any work, whether the refresh would copy it or rebuild it
            shard.write_bytes(shard.read_bytes() + b"\0")
        elif breakage == "embeddings-unfinished":
            (args["emb"] / "manifest.json").unlink()
        else:
            table_files(args["emb"], "embeddings")[0].unlink()
    elif breakage == "new-unfinished":
        args["new"] = tmp_path / "new"
        shutil.copytree(kb["new"], args["new"])
        (args["new"] / "manifest.json").unlink()
    elif breakage == "index-of-other-embeddings":
        args["idx"] = kb["full_idx"]
    elif breakage == "output-is-input":
        out["idx"] = kb["idx"]
    elif breakage == "output-inside-input":
        out["idx"] = Path(kb["old"]) / "sub"
    elif breakage == "outputs-nested":
        out["idx"] = out["emb"] / "idx"
    monkeypatch.setattr(Encoder, "encode", lambda *a, **k: pytest.fail("a name was encoded"))
    monkeypatch.setattr(refresh_module, "build_shard", lambda *a, **k: pytest.fail("a shard was built"))
    with pytest.raises(error, match=message):
        refresh(args["old"], args["new"], args["model"], args["emb"], args["idx"], out["emb"], out["idx"])
    assert not out["emb"].exists() and (breakage == "output-is-input" or not Path(out["idx"]).exists())


def test_a_killed_refresh_leaves_nothing_complete_and_a_rerun_finishes(kb, tmp_path, monkeypatch):
    out = tmp_path / "out"

    def die(*_a, **_k):
        raise RuntimeError("killed")

    monkeypatch.setattr(refresh_module, "build_shard", die)  # killed building the index: it publishes nothing
    with pytest.raises(RuntimeError, match="killed"):
        run_refresh(kb, out)
    assert_unpublished(out / "idx")
    assert files(out / "emb", "embeddings/*") == files(kb["full_emb"], "embeddings/*")  # published first, and right
    monkeypatch.undo()
    monkeypatch.setattr(refresh_module, "_index_manifest", die)  # killed between the two publications
    with pytest.raises(RuntimeError, match="killed"):
        run_refresh(kb, out)
    assert read_manifest(out / "emb")["pipeline"] == "embed"  # finished, and right: the new KB's embeddings
    with pytest.raises(IncompleteOutputError):
        ShardedIndex(out / "idx")
    monkeypatch.undo()
    for _ in range(2):  # then a re-run, once more over its own finished outputs
        run_refresh(kb, out)
        assert files(out / "idx", "*/shard-*") == files(kb["full_idx"], "*/shard-*")
        assert files(out / "emb", "embeddings/*") == files(kb["full_emb"], "embeddings/*")
        assert_published(out / "emb") and assert_published(out / "idx")
        assert ShardedIndex(out / "idx").ntotal == 26


def test_cli_refresh(kb, tmp_path, capsys):
    out = tmp_path / "cli"
    code = cli.main(
        [
            "refresh",
            "--old",
            str(kb["old"]),
            "--new",
            str(kb["new"]),
            "--model",
            kb["model"],
            "--embeddings",
            str(kb["emb"]),
            "--index",
            str(kb["idx"]),
            "--output-embeddings",
            str(out / "emb"),
            "--output-index",
            str(out / "idx"),
            "--examples",
            "2",
            "--no-quality",
        ]
    )
    printed, err = capsys.readouterr()
    assert err.startswith("refresh: 5 names encoded, ") and " index shards rebuilt in " in err
    assert code == 0 and "names: +5 -5 ~3" in printed and "index shards rebuilt" in printed and REPORT_FILE in printed
    assert len(json.loads((data_root(out / "emb") / REPORT_FILE).read_text())["names"]["added"]["examples"]) == 2
    code = cli.main(
        [
            "refresh",
            "--old",
            str(kb["new"]),
            "--new",
            str(kb["new"]),
            "--model",
            kb["model"],
            "--embeddings",
            str(kb["emb"]),
            "--index",
            str(kb["idx"]),
            "--output-embeddings",
            str(out / "e2"),
            "--output-index",
            str(out / "i2"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "is not the names folder" in err
    # bioel_core names the argument; the CLI's words for it are its flags
    assert err.startswith("bioel refresh: error: --old ") and err.endswith("pass that folder as --old")
