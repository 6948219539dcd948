"""`bioel embed`: the encoder ModelHandler directly, the steps on a TestPipeline, full runs (reconciled manifest,
vectors equal to Encoder.encode, byte-identical re-runs, two worker processes), refusals before any work,
dead letters, killed runs, the embeddings quality suite and the CLI. A tiny BERT keeps it fast."""

import json
import os
import shutil

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from bioel_core.embeddings import ModelMismatchError, check_model_matches, read_embeddings, vectors_of
from bioel_core.models import Encoder, TransformerEncoder, load_encoder
from bioel_core.outputs import LOCAL, layout
from bioel_core.quality import format_summary, report
from bioel_core.tables import IncompleteOutputError, read_manifest, read_table, stable_shard, table_files
from conftest import FIXTURES, assert_published, assert_unpublished, report_figures, report_page
from pipelines import cli, embed_names, ingest_kb
from pipelines.handlers import EncodeFailure, EncoderModelHandler, ModelChangedError
from pipelines.options import pipeline_options, worker_threads
from pipelines.outputs import read_spilled
from schemas import SchemaVersionError
from schemas.tables import TABLE_KEY, VERSION_KEY
from test_models import make_tiny_bert

KB_INPUTS = [str(FIXTURES / "biosyn/medic_raw.txt"), str(FIXTURES / "biosyn/dictionary.txt")]
POISON = "louis bar syndrome"  # a name of the fixture that the failing-encoder tests refuse to encode


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    base = make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))
    return str(TransformerEncoder(base, pooling="mean").save(tmp_path_factory.mktemp("model") / "tiny"))


@pytest.fixture(scope="module")
def names_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("kb") / "kb"
    ingest_kb.run("medic-biosyn", KB_INPUTS, str(out), pipeline_options([]), num_shards=2)
    return out


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, model_dir, names_dir):
    out = tmp_path_factory.mktemp("emb") / "emb"
    manifest = embed_names.run(model_dir, str(names_dir), str(out), pipeline_options([]), batch_size=3, num_shards=2)
    return out, manifest


def names_of(names_dir):
    return read_table(names_dir, "names", ["name_id", "concept_id", "name_norm"]).to_pydict()


def by_name_id(emb_dir):
    emb = read_embeddings(emb_dir)
    return {int(i): v for i, v in zip(emb.name_ids, emb.vectors)}


def poison_encode(monkeypatch):
    """Encoder.encode fails on any batch holding POISON (in this process: the embedded runner's worker)."""
    real = Encoder.encode

    def encode(self, texts, *args, **kwargs):
        if POISON in texts:
            raise RuntimeError("cannot encode this one")
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", encode)


def test_handler_loads_the_model_and_encodes_like_the_encoder(model_dir):
    encoder = load_encoder(model_dir)
    handler = EncoderModelHandler(model_dir, fingerprint=encoder.fingerprint())
    model = handler.load_model()
    texts = ["heart attack", "", "type 2 diabetes", "   ", "x linked disease of the colon"]
    result, second = handler.run_inference([texts, ["cancer"]], model)  # two examples, each a whole batch
    assert result.example == texts and len(result.inference) == len(texts) and second.example == ["cancer"]
    assert [v for v in result.inference if isinstance(v, EncodeFailure)] == [EncodeFailure("empty text")] * 2
    got = np.stack([v for v in result.inference if not isinstance(v, EncodeFailure)])
    np.testing.assert_allclose(got, encoder.encode([texts[0], texts[2], texts[4]]), atol=1e-5)
    np.testing.assert_allclose(second.inference[0], encoder.encode(["cancer"])[0], atol=1e-5)
    assert got.dtype == np.float32 and handler.batch_elements_kwargs()["max_batch_size"] == 1
    with pytest.raises(ModelChangedError, match="changed after the job started"):
        EncoderModelHandler(model_dir, fingerprint="0" * 64).load_model()


def test_handler_retries_a_failed_batch_one_text_at_a_time(model_dir, monkeypatch):
    handler = EncoderModelHandler(model_dir)
    model = handler.load_model()
    poison_encode(monkeypatch)
    [result] = handler.run_inference([["heart attack", POISON, "cancer"]], model)
    vectors = result.inference
    assert isinstance(vectors[1], EncodeFailure) and "cannot encode this one" in vectors[1].reason
    np.testing.assert_allclose(np.stack([vectors[0], vectors[2]]), model.encode(["heart attack", "cancer"]), atol=1e-5)


def test_workers_open_their_own_copy_of_the_default_model(model_dir, names_dir, tmp_path, monkeypatch):
    """The launcher's default model is its checkout's models/disease-default; a worker installed from --setup_file
    or an image has its own copy elsewhere and nothing at the launcher's path (it failed: model folder not found)."""
    import bioel_core.models as models

    launcher, worker = tmp_path / "launcher", tmp_path / "worker"
    shutil.copytree(model_dir, launcher)
    shutil.copytree(model_dir, worker)
    monkeypatch.setattr(models, "DEFAULT_MODEL", launcher)
    checked_here = embed_names.open_checked_model

    def then_on_a_worker(*args):
        checked = checked_here(*args)
        shutil.rmtree(launcher)
        monkeypatch.setattr(models, "DEFAULT_MODEL", worker)
        return checked

    monkeypatch.setattr(embed_names, "open_checked_model", then_on_a_worker)
    manifest = embed_names.run(None, str(names_dir), str(tmp_path / "emb"), pipeline_options([]), num_shards=1)
    assert manifest["outputs"]["embeddings"]["rows"] == len(names_of(names_dir)["name_id"])


def test_read_encode_route_steps_on_a_test_pipeline(model_dir, names_dir, monkeypatch, tmp_path):
    poison_encode(monkeypatch)
    names = names_of(names_dir)
    poison_id = names["name_id"][names["name_norm"].index(POISON)]
    files = [str(f) for f in table_files(names_dir, "names")]
    with BeamTestPipeline(runner="FnApiRunner") as p:
        monkeypatch.setattr(layout, "BATCHES_PER_CHUNK", 2)  # chunks of 2 batches of 1 name
        chunks = p | beam.Create(files) | beam.ParDo(embed_names.ReadNameChunksFn(1)).with_outputs("stats", main="chunks")
        routed = (
            chunks.chunks
            | RunInference(KeyedModelHandler(EncoderModelHandler(model_dir, batch_size=1)))
            | beam.ParDo(embed_names.RouteChunkFn(2, 32, str(tmp_path / "spill"))).with_outputs("dead", "stats", main="runs")
        )
        assert_that(chunks.chunks | beam.Map(lambda b: len(b[1])) | beam.CombineGlobally(max), equal_to([2]), label="chunk size")
        assert_that(
            chunks.stats | beam.Map(lambda kv: kv[1]) | beam.CombineGlobally(sum),
            equal_to([len(names["name_id"])]),
            label="names read",
        )
        # every name but the poisoned one, once, in a run file of the shard its name_id hashes to, with 32 floats
        assert_that(
            routed.runs
            | beam.FlatMap(
                lambda kv: [
                    (kv[0], i, c, len(v))
                    for i, c, v in zip(*(read_spilled(kv[1]).column(k).to_pylist() for k in ("name_id", "concept_id", "vector")))
                ]
            ),
            equal_to(
                [(stable_shard(str(i), 2), i, c, 32) for i, c in zip(names["name_id"], names["concept_id"]) if i != poison_id]
            ),
            label="vectors",
        )
        assert_that(
            routed.stats | "EmbeddedCounts" >> beam.Map(lambda kv: kv[1]) | "Embedded" >> beam.CombineGlobally(sum),
            equal_to([len(names["name_id"]) - 1]),
            label="embedded",
        )
        assert_that(
            routed.dead | beam.Map(lambda d: (d["location"], d["raw"])),
            equal_to([(f"name_id {poison_id}", POISON)]),
            label="dead letters",
        )


def test_run_writes_reconciled_vectors_equal_to_encoder_encode(embedded, model_dir, names_dir):
    out, manifest = embedded
    names = names_of(names_dir)
    n = len(names["name_id"])
    assert manifest["pipeline"] == "embed" and all(manifest["reconciliation"].values())
    assert manifest["counts"] == {"names_read": n, "embedded": n, "dead_lettered": 0}
    assert manifest["outputs"]["embeddings"]["rows"] == n and manifest["outputs"]["dead_letter"]["rows"] == 0
    encoder = load_encoder(model_dir)
    assert manifest["model"] == {
        "path": model_dir,
        "fingerprint": encoder.fingerprint(),
        "vectors_fingerprint": encoder.vectors_fingerprint(),  # a plain name encoder's vectors: its own
        "config": encoder.config(),
        "dim": 32,
        "pooling": None,
    }
    assert encoder.vectors_fingerprint() == encoder.fingerprint()
    assert manifest["names"]["path"] == str(names_dir) and manifest["names"]["column"] == "name_norm"
    assert manifest["names"]["normalizer_version"] == read_manifest(names_dir)["normalizer"]["version"]
    assert len(manifest["names"]["manifest_sha256"]) == 64 and manifest["kb"] == "medic"
    for f in table_files(out, "embeddings"):
        ids = pq.read_table(f).column("name_id").to_pylist()
        assert ids == sorted(ids)
    emb = read_embeddings(out)
    assert emb.vectors.shape == (n, 32) and emb.vectors.dtype == np.float32
    assert dict(zip(emb.name_ids.tolist(), emb.concept_ids)) == dict(zip(names["name_id"], names["concept_id"]))
    expected = dict(zip(names["name_id"], encoder.encode(names["name_norm"])))
    np.testing.assert_allclose(emb.vectors, np.stack([expected[i] for i in emb.name_ids.tolist()]), atol=1e-5)
    check_model_matches(out, encoder)
    assert_published(out)


def test_rerun_gives_identical_files(embedded, model_dir, names_dir, tmp_path):
    out, _ = embedded
    again = tmp_path / "again"
    for _ in range(2):  # a fresh folder, then over its own finished output
        embed_names.run(model_dir, str(names_dir), str(again), pipeline_options([]), batch_size=3, num_shards=2)
        for table in ("embeddings", "dead_letter"):
            first, second = table_files(out, table), table_files(again, table)
            assert [f.name for f in first] == [f.name for f in second]
            assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second))


def test_two_worker_processes_give_the_same_vectors(embedded, model_dir, names_dir, tmp_path):
    out, _ = embedded
    multi = tmp_path / "multi"
    manifest = embed_names.run(
        model_dir,
        str(names_dir),
        str(multi),
        pipeline_options(["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]),
        batch_size=3,
        num_shards=2,
    )
    assert all(manifest["reconciliation"].values()) and manifest["options"]["direct_num_workers"] == 2
    single, two = by_name_id(out), by_name_id(multi)
    assert single.keys() == two.keys()
    np.testing.assert_allclose(np.stack([two[i] for i in single]), np.stack(list(single.values())), atol=1e-5)


def _retag(path, version: bytes):
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({VERSION_KEY: version, TABLE_KEY: b"names"}), path)


@pytest.mark.parametrize(
    "breakage, error, message",
    [
        ("schema", SchemaVersionError, "schema version 0.9"),
        ("manifest", IncompleteOutputError, "not a finished bioel output"),
        ("no-model", FileNotFoundError, "model folder not found"),
        ("not-a-model", FileNotFoundError, "no \\*.safetensors weights"),
        ("default-model", FileNotFoundError, "not shipped in this checkout"),
        ("output-is-names", ValueError, r"is \(or holds\) the --input"),
    ],
)
def test_bad_inputs_are_refused_before_any_work(names_dir, model_dir, tmp_path, monkeypatch, breakage, error, message):
    names, model, out = tmp_path / "kb", model_dir, tmp_path / "emb"
    shutil.copytree(names_dir, names)
    if breakage == "schema":
        _retag(table_files(names, "names")[0], b"0.9")
    elif breakage == "manifest":
        (names / "manifest.json").unlink()
    elif breakage == "no-model":
        model = str(tmp_path / "nope")
    elif breakage == "not-a-model":
        model = str(FIXTURES / "biosyn")
    elif breakage == "default-model":
        monkeypatch.setattr("bioel_core.models.DEFAULT_MODEL", tmp_path / "models" / "disease-default")
        model = None
    elif breakage == "output-is-names":
        out = names
    monkeypatch.setattr(beam, "Pipeline", lambda *a, **k: pytest.fail("the pipeline started"))
    with pytest.raises(error, match=message):
        embed_names.run(model, str(names), str(out), pipeline_options([]))
    assert breakage == "output-is-names" or not out.exists()


def test_a_name_that_fails_to_encode_is_dead_lettered_and_reconciles(model_dir, names_dir, tmp_path, monkeypatch):
    poison_encode(monkeypatch)
    out = tmp_path / "emb"
    manifest = embed_names.run(model_dir, str(names_dir), str(out), pipeline_options([]), batch_size=3, num_shards=2)
    n = len(names_of(names_dir)["name_id"])
    assert manifest["counts"] == {"names_read": n, "embedded": n - 1, "dead_lettered": 1}
    assert all(manifest["reconciliation"].values())
    dead = read_table(out, "dead_letter").to_pylist()
    assert [(d["source"], d["raw"]) for d in dead] == [("encoder", POISON)] and "cannot encode" in dead[0]["reason"]
    summary = report(out)  # a dead letter still accounts for its name
    assert summary["passed"], format_summary(summary)


def test_a_killed_run_leaves_nothing_complete_and_a_rerun_finishes(model_dir, names_dir, tmp_path, monkeypatch):
    out = tmp_path / "emb"

    def die(*_a, **_k):
        raise RuntimeError("worker killed")

    monkeypatch.setattr(embed_names, "write_parquet", die)
    with pytest.raises(Exception, match="worker killed"):
        embed_names.run(model_dir, str(names_dir), str(out), pipeline_options([]))
    assert_unpublished(out)
    with pytest.raises(IncompleteOutputError):
        read_embeddings(out)
    monkeypatch.undo()
    assert all(embed_names.run(model_dir, str(names_dir), str(out), pipeline_options([]))["reconciliation"].values())
    assert read_manifest(out)["complete"]


def test_quality_flags_tampered_vectors_and_another_model_is_refused(embedded, tmp_path, model_dir):
    out = tmp_path / "emb"
    shutil.copytree(embedded[0], out)
    shard = max(table_files(out, "embeddings"), key=lambda f: pq.read_metadata(f).num_rows)
    table = pq.read_table(shard)
    assert table.num_rows >= 3
    vectors = vectors_of(table.column("vector"), 32)
    vectors[0] *= 2.0
    vectors[1, 3] = np.nan
    tampered = table.set_column(2, table.schema.field("vector"), pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 32))
    pq.write_table(tampered.slice(0, table.num_rows - 1), shard)  # and one name lost its vector
    summary = report(out)
    failed = {(c["column"], c["expectation"]): c for c in summary["checks"] if not c["success"]}
    assert not summary["passed"] and summary["pipeline"] == "embed"
    assert set(failed) == {
        ("norm", "expect_column_values_to_be_between"),
        ("nonfinite_name_id", "expect_column_values_to_be_null"),
        (None, "expect_table_row_count_to_equal"),
    }
    assert failed[("norm", "expect_column_values_to_be_between")]["observed"][0] == pytest.approx(2.0)
    assert failed[("nonfinite_name_id", "expect_column_values_to_be_null")]["unexpected_count"] == 1
    # the doubled vector stands alone in the last bin of the norm plot; the NaN one has no bin
    norms = summary["stats"]["norm_histogram"]
    assert norms["edges"][0] == pytest.approx(0.999) and norms["edges"][-1] == pytest.approx(2.0)
    assert norms["counts"][-1] == 1 and sum(norms["counts"]) == summary["stats"]["embeddings"] - 1
    assert report_page(summary).count("<svg") == 1
    text = format_summary(summary)
    assert "embeddings.norm" in text and "embeddings " in text and "expect_table_row_count_to_equal" in text
    other = load_encoder(model_dir)
    with torch.no_grad():
        other.model.embeddings.word_embeddings.weight.add_(0.01)
    with pytest.raises(ModelMismatchError, match="made with the model at"):
        check_model_matches(out, other)


def test_the_quality_checks_read_the_vectors_a_batch_at_a_time(embedded, tmp_path, monkeypatch):
    """The checks run before every embed publishes: the vectors of a UMLS-size KB (12 GB at 10M names) must never
    be read whole, and reading them in small batches finds what reading them whole found."""
    from bioel_core.quality import embedding_tables, frames

    out = tmp_path / "emb"
    shutil.copytree(embedded[0], out)
    shard = table_files(out, "embeddings")[-1]
    table = pq.read_table(shard)
    vectors = vectors_of(table.column("vector"), 32)
    vectors[-1] *= 3.0  # in the last batch read
    pq.write_table(
        table.set_column(2, table.schema.field("vector"), pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 32)), shard
    )
    whole = report(out, tmp_path / "whole")

    read_table, iter_batches, batches = embedding_tables.read_table, embedding_tables.iter_batches, []

    def no_vectors(folder, table, columns=None, fs=LOCAL):
        assert columns is not None and "vector" not in columns, "the vector column read whole"
        return read_table(folder, table, columns, fs)

    def counted(folder, table, columns=None, batch_rows=None, fs=LOCAL):
        for batch in iter_batches(folder, table, columns, batch_rows, fs):
            batches.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(embedding_tables, "read_table", no_vectors)
    monkeypatch.setattr(embedding_tables, "iter_batches", counted)
    monkeypatch.setattr(frames, "BATCH_ROWS", 3)
    batched = report(out, tmp_path / "batched")
    assert max(batches) == 3 and sum(batches) == whole["stats"]["embeddings"]
    assert not batched["passed"] and batched["checks"] == whole["checks"] and batched["stats"] == whole["stats"]
    assert batched["stats"]["norm"]["max"] == pytest.approx(3.0, abs=1e-5)


def test_cli_embed_with_a_plain_checkpoint_then_report(names_dir, model_dir, tmp_path, capsys):
    base = make_tiny_bert(tmp_path / "bert")
    out = tmp_path / "emb"
    capsys.readouterr()  # what saving the checkpoint printed
    assert (
        cli.main(
            [
                "embed",
                "--model",
                str(base),
                "--pooling",
                "cls",
                "--input",
                str(names_dir),
                "--output",
                str(out),
                "--batch-size",
                "4",
                "--num-shards",
                "1",
                "--runner",
                "DirectRunner",
            ]
        )
        == 0
    )
    printed, err = capsys.readouterr()
    assert "dim 32" in printed and "quality PASSED" in printed
    assert err.startswith("embed: ") and err.endswith(" names/s)\n")
    assert read_manifest(out)["model"]["config"]["pooling"] == "cls"
    assert json.loads((out / "quality/summary.json").read_text())["passed"]
    page = report_page(json.loads((out / "quality/summary.json").read_text()))
    assert report_figures(page)["dim"] == "32" and page.count("<svg") == 1 and "Vector L2 norms" in page
    assert cli.main(["report", "--input", str(out), "--fail-on", "warning"]) == 0
    assert capsys.readouterr().err.startswith("report: done in ")
    code = cli.main(["embed", "--model", str(tmp_path / "nope"), "--input", str(names_dir), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "model folder not found" in err


def test_a_pickle_renamed_to_safetensors_and_zero_shards_are_one_line_errors(names_dir, model_dir, tmp_path, capsys):
    import pickle

    fake = tmp_path / "fake-model"
    shutil.copytree(model_dir, fake)
    weights = sorted(fake.glob("*.safetensors"))[0]
    weights.write_bytes(pickle.dumps({"weight": [0.0] * 64}))
    code = cli.main(["embed", "--model", str(fake), "--input", str(names_dir), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"{weights}: not a safetensors file" in err
    code = cli.main(["embed", "--input", str(names_dir), "--output", str(tmp_path / "o"), "--num-shards", "0"])
    assert code == 2 and capsys.readouterr().err.strip() == "bioel embed: error: --num-shards: must be at least 1, got 0"
    assert not (tmp_path / "o").exists()


def test_quality_reports_an_empty_embeddings_table_as_critical(embedded, tmp_path):
    from bioel_core.quality import report
    from conftest import empty_table

    out = tmp_path / "emb"
    shutil.copytree(embedded[0], out)
    empty_table(out, "embeddings")
    summary = report(out)
    assert [
        (c["table"], c["severity"])
        for c in summary["checks"]
        if c["expectation"] == "expect_table_row_count_to_be_between" and not c["success"]
    ] == [("embeddings", "critical")]
    assert not summary["passed"]


def test_threads_per_worker_is_the_option_else_the_cores_shared_by_local_processes():
    assert worker_threads(pipeline_options(["--threads_per_worker=3"])) == 3
    assert worker_threads(pipeline_options([])) is None  # in process: torch's own default
    shared = worker_threads(pipeline_options(["--direct_num_workers=2", "--direct_running_mode=multi_processing"]))
    assert shared == max(1, len(os.sched_getaffinity(0)) // 2)
    with pytest.raises(ValueError, match="--threads_per_worker must be at least 1"):
        worker_threads(pipeline_options(["--threads_per_worker=0"]))
