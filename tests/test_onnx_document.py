"""The collective model's document encoder on ONNX Runtime (bioel_core.models.onnx_document; LinkSettings.document_runtime):
the graphs' export and cache, their states against torch's, thread and batch invariance, and `bioel link`'s annotations
with the shipped model's graphs against its float (torch) annotations on the committed sample."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from bioel_core.corpora import read_pubtator, write_pubtator
from bioel_core.index import IndexSpec
from bioel_core.linking.annotate import AnnotatorSpec
from bioel_core.models import CollectiveEncoder, TransformerEncoder, open_model
from bioel_core.models.onnx_document import CACHE_ENV, GRAPH_FILES, RECIPE, DocumentSession, export_document, graph_path
from bioel_core.settings import LinkSettings, LinkTarget, SettingsError
from conftest import REPO, SAMPLE_DATA, table_bytes
from pipelines import build_index, embed_names, ingest_kb, link_corpus
from pipelines.options import pipeline_options
from test_models import make_tiny_bert

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SHIPPED = REPO / "models" / "bc5cdr-collective-small"
# longer than the tiny model's 64-piece window: several overlapping windows per document
TEXT = " ".join(["Familial breast and ovarian cancer syndrome of the colon. Heart attack, myocardial infarction."] * 6)
TWO_WORKERS = ["--runner", "DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """The graph cache in a folder of this module's own (workers started by Beam inherit the variable)."""
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("graph-cache"))
    yield Path(os.environ[CACHE_ENV])
    if before is None:
        del os.environ[CACHE_ENV]
    else:
        os.environ[CACHE_ENV] = before


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A 2-layer 32-wide collective model, untrained (every span a candidate), saved as `bioel train` saves one."""
    root = tmp_path_factory.mktemp("onnx-collective")
    bert = make_tiny_bert(root / "bert")
    names = TransformerEncoder(bert, pooling="mean").save(root / "names")
    torch.manual_seed(0)
    model = CollectiveEncoder(bert, open_model(str(names)), ["Chemical", "Disease"]).eval()
    model.decoding = {"thresholds": {"Chemical": 0.0, "Disease": 0.0}, "link_with": "both"}
    return str(model.save(root / "model"))


def states(model: CollectiveEncoder, text: str = TEXT) -> np.ndarray:
    with torch.no_grad():
        return model.encode_document(text).states.numpy()


def test_the_graphs_are_exported_once_per_model_fingerprint_the_same_bytes_each_time(cache, tiny_folder, tmp_path):
    model = CollectiveEncoder.load(tiny_folder)
    float_graph, int8_graph = graph_path(model, "onnx"), graph_path(model, "onnx-int8")
    assert float_graph.parent == cache / "document-graphs" / f"v{RECIPE}" / model.fingerprint()
    assert (float_graph.name, int8_graph.name) == (GRAPH_FILES["onnx"], GRAPH_FILES["onnx-int8"])
    assert sorted(p.name for p in float_graph.parent.iterdir()) == sorted(GRAPH_FILES.values())  # nothing staged left
    written = float_graph.stat().st_mtime_ns, int8_graph.stat().st_mtime_ns
    assert (graph_path(model, "onnx").stat().st_mtime_ns, graph_path(model, "onnx-int8").stat().st_mtime_ns) == written
    export_document(model, tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == float_graph.read_bytes()
    with pytest.raises(ValueError, match="has no graph"):
        graph_path(model, "torch")


def test_onnx_float_states_are_torchs_and_int8_states_stay_close(cache, tiny_folder):
    """Several windows merged as the torch path merges them; int8 within the stated bound of the float states."""
    model = CollectiveEncoder.load(tiny_folder)
    reference = states(model)
    assert reference.shape[0] > model.window  # the text spans more than one window
    assert np.abs(states(model.use_runtime("onnx")) - reference).max() < 1e-4
    int8 = states(model.use_runtime("onnx-int8"))
    cosine = np.sum(int8 * reference, -1) / (np.linalg.norm(int8, axis=-1) * np.linalg.norm(reference, axis=-1))
    assert cosine.min() > 0.98 and not np.array_equal(int8, reference)
    assert np.array_equal(states(model.use_runtime("torch")), reference)


@pytest.mark.parametrize("runtime", ["onnx", "onnx-int8"])
def test_a_sessions_states_are_the_same_bytes_on_one_or_two_threads_and_alone_or_after_other_windows(cache, tiny_folder, runtime):
    model = CollectiveEncoder.load(tiny_folder)
    path = graph_path(model, runtime)
    ids, _ = model.pieces(TEXT)
    window = torch.tensor([[model.tokenizer.cls_token_id, *ids[:40], model.tokenizer.sep_token_id]])
    other = torch.tensor([[model.tokenizer.cls_token_id, *ids[7:30], model.tokenizer.sep_token_id]])
    one, two = DocumentSession(path, threads=1), DocumentSession(path, threads=2)
    alone = one(window).numpy()
    two(other)
    assert np.array_equal(two(window).numpy(), alone)
    assert np.array_equal(one(window).numpy(), alone)


@pytest.fixture(scope="module")
def tiny_chain(cache, tiny_folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx-chain")
    options = pipeline_options([])
    ingest_kb.run("medic-biosyn", [str(SAMPLE_DATA / "medic_sample.txt")], str(root / "kb"), options, num_shards=2)
    embed_names.run(tiny_folder, str(root / "kb"), str(root / "emb"), options, num_shards=2)
    build_index.run(str(root / "emb"), str(root / "index"), options, num_shards=2, spec=IndexSpec("flat"))
    docs = read_pubtator(SAMPLE_DATA / "gold_ncbi_bc5cdr_sample.pubtator")[:8]
    corpus = root / "corpus.pubtator"
    with open(corpus, "w") as fh:
        write_pubtator(docs, fh)
    return str(root / "index"), corpus, docs


def test_int8_annotations_are_the_same_bytes_for_one_and_two_workers_and_alone_or_batched(tiny_folder, tiny_chain, tmp_path):
    index, corpus, docs = tiny_chain
    spec = AnnotatorSpec(model=tiny_folder, indexes=(("Disease", index),), detector="both", document_runtime="onnx-int8")
    one = link_corpus.run([str(corpus)], "pubtator", str(tmp_path / "one"), spec, pipeline_options([]))
    assert all(one["reconciliation"].values()) and one["counts"]["documents"]["linked"] == len(docs)
    two = link_corpus.run([str(corpus)], "pubtator", str(tmp_path / "two"), spec, pipeline_options(TWO_WORKERS), batch_size=3)
    assert all(two["reconciliation"].values())
    assert table_bytes(tmp_path / "one") == table_bytes(tmp_path / "two")
    annotator = spec.open()
    assert annotator.document_model.runtime == "onnx-int8"
    batched = annotator.annotate(docs)
    assert [annotator.annotate([d])[0] for d in docs] == batched
    float_rows = AnnotatorSpec(model=tiny_folder, indexes=(("Disease", index),), detector="both").open().annotate(docs)
    assert batched != float_rows  # the int8 graph did run: an untrained model's spans move with its states


def test_the_runtime_is_a_link_setting_part_of_each_documents_key_and_refused_where_it_cannot_run(tiny_folder, tiny_chain):
    index, _, _ = tiny_chain
    link = LinkSettings(model=tiny_folder, document_runtime="onnx", types={"Disease": LinkTarget(index=index)})
    spec = link.annotator_spec()
    assert spec.document_runtime == "onnx"
    torch_spec = LinkSettings(model=tiny_folder, types={"Disease": LinkTarget(index=index)}).annotator_spec()
    assert torch_spec.document_runtime == "torch"
    assert spec.settings_sha256() != torch_spec.settings_sha256()
    with pytest.raises(SettingsError, match="document_runtime: 'tensorrt' is not one of torch, onnx, onnx-int8"):
        AnnotatorSpec(model=tiny_folder, indexes=(("Disease", index),), document_runtime="tensorrt")
    with pytest.raises(SettingsError, match="document_runtime: onnx-int8 runs on the CPU"):
        AnnotatorSpec(model=tiny_folder, indexes=(("Disease", index),), document_runtime="onnx-int8", device="cuda")
    names_model = str(Path(tiny_folder).parent / "names")  # a name encoder, not a collective model
    with pytest.raises(SettingsError, match="document_runtime: onnx runs a collective model's document encoder"):
        AnnotatorSpec(model=names_model, indexes=(("Disease", index),), document_runtime="onnx").open_models()


@pytest.fixture(scope="module")
def shipped_chain(cache, tmp_path_factory):
    """The shipped 2-layer collective model with the committed MEDIC sample as its Disease KB."""
    root = tmp_path_factory.mktemp("onnx-shipped")
    options = pipeline_options([])
    ingest_kb.run("medic-biosyn", [str(SAMPLE_DATA / "medic_sample.txt")], str(root / "kb"), options, num_shards=1)
    embed_names.run(str(SHIPPED), str(root / "kb"), str(root / "emb"), options, num_shards=1)
    build_index.run(str(root / "emb"), str(root / "index"), options, num_shards=1, spec=IndexSpec("flat"))
    return str(root / "index"), read_pubtator(SAMPLE_DATA / "gold_ncbi_bc5cdr_sample.pubtator")


def annotated(spec: AnnotatorSpec, docs) -> dict[tuple, tuple]:
    """(doc, start, end) -> (type, concept) of every annotation."""
    rows = [r for rs in spec.open().annotate(docs) for r in rs]
    return {(r["doc_id"], r["start"], r["end"]): (r["entity_type"], r["concept_id"]) for r in rows}


def test_the_shipped_models_graphs_annotate_the_sample_as_its_float_model_does_within_the_bound(shipped_chain):
    """The committed 40 abstracts, detector `both`: the ONNX float graph gives the float model's annotations
    (all but at most 1 in 200: a span scored at its threshold's edge may flip), int8 at least 93% of them the same
    (span, type and concept) and no more than 7% of its own that the float model lacks (measured on an AVX2 CPU:
    357 of 357 for the float graph; 344 of 357 and 13 more for int8, whose integer kernels differ by CPU)."""
    index, docs = shipped_chain

    def spec(runtime: str) -> AnnotatorSpec:
        return AnnotatorSpec(model=str(SHIPPED), indexes=(("Disease", index),), detector="both", document_runtime=runtime)

    reference = annotated(spec("torch"), docs)
    assert len(reference) > 300
    for runtime, bound in (("onnx", 0.995), ("onnx-int8", 0.93)):
        found = annotated(spec(runtime), docs)
        same = sum(found.get(key) == value for key, value in reference.items())
        assert same >= bound * len(reference), (runtime, same, len(reference))
        assert len(found.keys() - reference.keys()) <= (1 - bound) * len(reference), runtime
