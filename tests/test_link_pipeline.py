"""`bioel link` end to end on a small real chain: the committed MEDIC sample -> tiny model embeddings ->
flat FAISS shards -> link the committed gold abstracts (PubTator) with detected or given mentions."""

import gc
import gzip
import json
import os
import re
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bioel_core.corpora import Document, read_pubtator, write_bioc_xml, write_pubtator
from bioel_core.index import IndexSpec
from bioel_core.linking.annotate import AnnotatorSpec
from bioel_core.models import TransformerEncoder
from bioel_core.tables import IncompleteOutputError, data_root, read_manifest, read_table
from conftest import assert_published, table_bytes
from pipelines import build_index, embed_names, ingest_kb, link_corpus
from pipelines.options import pipeline_options
from test_models import make_tiny_bert

ROOT = Path(__file__).resolve().parent.parent
MEDIC_SAMPLE = str(ROOT / "sample_data" / "medic_sample.txt")
STOP_LIST = ROOT / "models" / "stoplists" / "disease-medic.json"
GOLD_SAMPLE = ROOT / "sample_data" / "gold_ncbi_bc5cdr_sample.pubtator"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """(model folder, index folder) built by the real pipelines."""
    root = tmp_path_factory.mktemp("chain")
    base = make_tiny_bert(root / "tiny-bert")
    model = str(TransformerEncoder(base, pooling="mean").save(root / "model"))
    ingest_kb.run("medic-biosyn", [MEDIC_SAMPLE], str(root / "kb"), pipeline_options([]), num_shards=2)
    embed_names.run(model, str(root / "kb"), str(root / "emb"), pipeline_options([]), num_shards=2)
    build_index.run(str(root / "emb"), str(root / "index"), pipeline_options([]), num_shards=2, spec=IndexSpec("flat"))
    return model, str(root / "index")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The committed gold sample split in two files, plus the documents themselves."""
    docs = read_pubtator(GOLD_SAMPLE)
    folder = tmp_path_factory.mktemp("corpus")
    with open(folder / "a.pubtator", "w") as fh:
        write_pubtator(docs[:20], fh)
    with open(folder / "b.pubtator", "w") as fh:
        write_pubtator(docs[20:], fh)
    return folder, docs


def spec(chain, detect=True, **kw) -> AnnotatorSpec:
    model, index = chain
    return AnnotatorSpec(model=model, indexes=(("Disease", index),), detect=detect, **kw)


def run(chain, inputs, out, *, beam_args=(), detect=True, **kw):
    return link_corpus.run(
        [str(p) for p in inputs], "pubtator", str(out), spec(chain, detect), pipeline_options(list(beam_args)), **kw
    )


def table(out, name):
    return read_table(out, name).to_pylist()


def test_linking_a_corpus_reconciles_and_every_span_slices_its_text(chain, corpus, tmp_path):
    folder, docs = corpus
    manifest = run(chain, [folder / "a.pubtator", folder / "b.pubtator"], tmp_path / "out", output_formats=["pubtator"])
    assert all(manifest["reconciliation"].values()), manifest["reconciliation"]
    assert manifest["counts"]["documents"]["linked"] == len(docs) == 40
    texts = {d.doc_id: d.text for d in docs}
    rows = table(tmp_path / "out", "annotations")
    assert len(rows) == manifest["counts"]["mentions"]["linked"] > 40
    assert all(texts[r["doc_id"]][r["start"] : r["end"]] == r["mention"] for r in rows)
    assert all(r["concept_id"] and not r["nil"] for r in rows)  # no threshold: nothing is NIL
    # the interchange copy holds the same annotations
    written = [d for f in sorted((data_root(tmp_path / "out") / "pubtator").iterdir()) for d in read_pubtator(f)]
    assert sorted((d.doc_id, m.start, m.end, m.concept_ids[0]) for d in written for m in d.mentions) == sorted(
        (r["doc_id"], r["start"], r["end"], r["concept_id"]) for r in rows
    )


def test_rerun_is_byte_identical_and_two_workers_agree(chain, corpus, tmp_path):
    folder, _ = corpus
    inputs = [folder / "a.pubtator", folder / "b.pubtator"]
    run(chain, inputs, tmp_path / "one")
    first = table_bytes(tmp_path / "one")
    run(chain, inputs, tmp_path / "one")
    assert table_bytes(tmp_path / "one") == first
    run(
        chain,
        inputs,
        tmp_path / "two",
        beam_args=["--runner", "DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
    )
    assert table(tmp_path / "two", "annotations") == table(tmp_path / "one", "annotations")
    assert table(tmp_path / "two", "documents") == table(tmp_path / "one", "documents")
    # linked rows reached the writers through spill files, all removed: a generation holds its tables only
    for out in ("one", "two"):
        assert sorted(p.name for p in data_root(tmp_path / out).iterdir() if p.is_dir()) == [
            "annotations",
            "dead_letter",
            "documents",
        ]


def test_a_worker_in_the_drivers_process_takes_the_models_the_driver_opened(chain, corpus, tmp_path, monkeypatch):
    from bioel_core import models

    folder, _ = corpus
    opened = Counter()
    open_model = models.open_model

    def counted(folder, *args, **kwargs):
        opened[folder] += 1
        return open_model(folder, *args, **kwargs)

    monkeypatch.setattr(models, "open_model", counted)
    run(chain, [folder / "a.pubtator"], tmp_path / "one")
    assert opened == {chain[0]: 1}  # the driver's check, then the worker's annotator: one load
    assert not link_corpus.OpenedModels._kept  # nothing held past the run
    # two workers on threads of the driver's process: one may take the driver's models, any other opens its own
    opened.clear()
    threads = ["--runner", "DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_threading"]
    run(chain, [folder / "a.pubtator"], tmp_path / "two", beam_args=threads)
    assert 1 <= opened[chain[0]] <= 2 and not link_corpus.OpenedModels._kept
    assert table(tmp_path / "two", "annotations") == table(tmp_path / "one", "annotations")


def test_incremental_links_only_new_or_changed_documents_and_honours_deletions(chain, corpus, tmp_path):
    folder, docs = corpus
    run(chain, [folder / "a.pubtator"], tmp_path / "state", incremental=True)
    # the weekly update: the second half, one changed document of the first half, one deletion
    changed = docs[3]
    changed.passages[0] = type(changed.passages[0])(changed.passages[0].kind, 0, changed.passages[0].text.replace("a", "e", 1))
    update = tmp_path / "update.pubtator"
    with open(update, "w") as fh:
        write_pubtator(docs[20:] + [changed], fh)
    deletion = tmp_path / "delete.xml"
    deletion.write_text(
        f'<PubmedArticleSet><DeleteCitation><PMID Version="1">{docs[5].doc_id}</PMID></DeleteCitation></PubmedArticleSet>'
    )
    manifest = run(chain, [update], tmp_path / "state", incremental=True)
    counts = manifest["counts"]["documents"]
    assert (counts["linked"], counts["unchanged"], counts["carried"]) == (21, 0, 19)
    assert all(manifest["reconciliation"].values())
    # deletions come from PubMed update files
    manifest = link_corpus.run(
        [str(deletion)], "pubmed-xml", str(tmp_path / "state"), spec(chain), pipeline_options([]), incremental=True
    )
    assert manifest["counts"]["documents"]["deleted"] == 1 and manifest["counts"]["documents"]["linked"] == 0
    state = {r["doc_id"]: r for r in table(tmp_path / "state", "documents")}
    assert state[docs[5].doc_id]["status"] == "deleted"
    assert docs[5].doc_id not in {r["doc_id"] for r in table(tmp_path / "state", "annotations")}
    # the same inputs again change nothing
    before = table_bytes(tmp_path / "state")
    again = run(chain, [update], tmp_path / "state", incremental=True)
    assert again["counts"]["documents"]["unchanged"] == 21 and again["counts"]["documents"]["linked"] == 0
    link_corpus.run([str(deletion)], "pubmed-xml", str(tmp_path / "state"), spec(chain), pipeline_options([]), incremental=True)
    assert table_bytes(tmp_path / "state") == before


def test_rerunning_an_unchanged_kb_embed_and_index_keeps_every_link(chain, corpus, tmp_path):
    # the KB, embeddings and index versions were their manifests' sha256, which hold each run's generation and time:
    # re-ingesting the same KB file made the embeddings refuse to load, and once re-embedded and re-indexed an
    # incremental link relinked every document
    folder, _ = corpus
    model, _ = chain
    kb, emb, index, out = (str(tmp_path / name) for name in ("kb", "emb", "index", "links"))

    def rebuild():
        ingest_kb.run("medic-biosyn", [MEDIC_SAMPLE], kb, pipeline_options([]), num_shards=1)
        embed_names.run(model, kb, emb, pipeline_options([]), num_shards=1)
        build_index.run(emb, index, pipeline_options([]), num_shards=1, spec=IndexSpec("flat"))

    def link() -> tuple[int, int]:
        counts = link_corpus.run(
            [str(folder / "a.pubtator")],
            "pubtator",
            out,
            AnnotatorSpec(model=model, indexes=(("Disease", index),)),
            pipeline_options([]),
            incremental=True,
        )["counts"]["documents"]
        return counts["linked"], counts["unchanged"]

    rebuild()
    assert link() == (20, 0)
    ingest_kb.run("medic-biosyn", [MEDIC_SAMPLE], kb, pipeline_options([]), num_shards=1)
    assert link() == (0, 20)
    rebuild()
    assert link() == (0, 20)


def test_the_same_kb_and_model_in_other_folders_link_to_the_same_bytes(chain, corpus, tmp_path):
    # the versions in the tables (kb_version, and the index's in each document's content_sha256) hashed the paths the
    # manifests record: another machine's layout, or the KB file named by a relative path, gave other bytes
    folder, _ = corpus
    model, _ = chain
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(MEDIC_SAMPLE, elsewhere / "medic.txt")
    outputs = []
    for root, kb_file, model_dir in (
        (tmp_path / "here", MEDIC_SAMPLE, model),
        (elsewhere, os.path.relpath(elsewhere / "medic.txt"), shutil.copytree(model, elsewhere / "model")),
    ):
        kb, emb, index, out = (str(root / name) for name in ("kb", "emb", "index", "links"))
        ingest_kb.run("medic-biosyn", [kb_file], kb, pipeline_options([]), num_shards=1)
        embed_names.run(str(model_dir), kb, emb, pipeline_options([]), num_shards=1)
        build_index.run(emb, index, pipeline_options([]), num_shards=1, spec=IndexSpec("flat"))
        link_corpus.run(
            [str(folder / "a.pubtator")],
            "pubtator",
            out,
            AnnotatorSpec(model=str(model_dir), indexes=(("Disease", index),)),
            pipeline_options([]),
        )
        outputs.append(table_bytes(Path(out)))
    assert outputs[0] == outputs[1]


def test_an_index_built_with_other_threads_links_to_the_same_bytes(chain, corpus, tmp_path):
    # the index's version (inside each document's content_sha256) hashed the FAISS threads it was built with: the same
    # shards built by two worker processes (one thread each) or with --faiss-threads gave another documents table
    folder, _ = corpus
    model, index = chain
    emb = read_manifest(index)["embeddings"]["path"]
    build_index.run(emb, str(tmp_path / "index"), pipeline_options([]), num_shards=2, spec=IndexSpec("flat"), faiss_threads=1)
    for out, built in (("one", index), ("other", str(tmp_path / "index"))):
        link_corpus.run(
            [str(folder / "a.pubtator")],
            "pubtator",
            str(tmp_path / out),
            AnnotatorSpec(model=model, indexes=(("Disease", built),)),
            pipeline_options([]),
        )
    assert table_bytes(tmp_path / "one") == table_bytes(tmp_path / "other")


def test_a_killed_incremental_run_resumed_ends_like_an_uninterrupted_one(chain, corpus, tmp_path, monkeypatch):
    folder, _ = corpus
    run(chain, [folder / "a.pubtator"], tmp_path / "straight", incremental=True)
    run(chain, [folder / "b.pubtator"], tmp_path / "straight", incremental=True)

    run(chain, [folder / "a.pubtator"], tmp_path / "resumed", incremental=True)
    real = link_corpus.DetectAndLinkFn.process

    def crash(self, batch):
        raise RuntimeError("worker lost")

    monkeypatch.setattr(link_corpus.DetectAndLinkFn, "process", crash)
    with pytest.raises(Exception, match="worker lost"):
        run(chain, [folder / "b.pubtator"], tmp_path / "resumed", incremental=True)
    read_manifest(tmp_path / "resumed")  # the previous state still stands, complete
    monkeypatch.setattr(link_corpus.DetectAndLinkFn, "process", real)
    run(chain, [folder / "b.pubtator"], tmp_path / "resumed", incremental=True)
    for name in ("annotations", "documents"):
        assert table(tmp_path / "resumed", name) == table(tmp_path / "straight", name)


def test_bad_documents_are_dead_lettered_and_the_run_completes(chain, tmp_path):
    bad = tmp_path / "bad.pubtator"
    bad.write_text(
        "1|t|Ataxia telangiectasia in a child.\n1|a|No more.\n1\t0\t21\tAtaxia telangiectasia\tDisease\tD001260\n\n"
        "2|t|Gout.\n2|a|\n2\t0\t90\tGout\tDisease\tD006073\n\n"  # offsets past the text
        "3|t|Gout.\n3|a|\n3\t1\t5\tGout\tDisease\tD006073\n\n"  # the slice differs from the mention
        "4|t|\n4|a|\n\n"  # empty document
        "5|t|Gout.\n5|a|\n5\tnot an annotation\n"
    )  # a malformed line: the reader dead-letters the document
    manifest = link_corpus.run([str(bad)], "pubtator", str(tmp_path / "out"), spec(chain, detect=False), pipeline_options([]))
    assert all(manifest["reconciliation"].values()), manifest
    assert manifest["counts"]["documents"]["linked"] == 1
    dead = table(tmp_path / "out", "dead_letter")
    reasons = " | ".join(sorted(d["reason"] for d in dead))
    # the PubTator reader itself catches spans outside the text and slices that differ; the annotator the rest
    for reason in ("is outside document 2", "differs from the document text", "empty document", "nor a relation line"):
        assert reason in reasons
    assert len(dead) == 4
    assert [r["mention"] for r in table(tmp_path / "out", "annotations")] == ["Ataxia telangiectasia"]


def test_a_document_refused_at_linking_is_dead_lettered_naming_its_file_and_id(chain, tmp_path):
    """A document the reader took but linking refused (whitespace only; an id PubTator cannot hold) was
    dead-lettered with source `link`: nothing said which input file held it. It now names its file, as a reader's
    dead letter does, and the document by id."""
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(json.dumps({"pmid": "11", "title": "Gout in a child.", "abstract": ""}) + "\n")
    bad.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"pmid": "12", "title": "Gout.", "abstract": "No more."},
                {"pmid": "13", "title": " ", "abstract": "\t "},
                {"pmid": "14|15", "title": "Gout.", "abstract": ""},
            )
        )
        + "\n"
    )
    manifest = link_corpus.run(
        [str(good), str(bad)], "jsonl", str(tmp_path / "out"), spec(chain), pipeline_options([]), output_formats=["pubtator"]
    )
    assert all(manifest["reconciliation"].values()), manifest["reconciliation"]
    assert manifest["counts"]["documents"]["linked"] == 2 and manifest["counts"]["documents"]["dead_lettered"] == 2
    dead = table(tmp_path / "out", "dead_letter")
    assert [(d["source"], d["location"]) for d in dead] == [(str(bad), "document 13"), (str(bad), "document 14|15")]
    assert "empty document" in dead[0]["reason"] and "cannot be written as PubTator" in dead[1]["reason"]


def test_errors_before_any_work(chain, corpus, tmp_path):
    folder, _ = corpus
    model, index = chain
    other = TransformerEncoder(make_tiny_bert(tmp_path / "other-bert"), pooling="cls").save(tmp_path / "other")
    with pytest.raises(
        ValueError, match="^types.Disease.model: the model .* is not the one the index .* was built with .*pass that model$"
    ):
        link_corpus.run(
            [str(folder / "a.pubtator")],
            "pubtator",
            str(tmp_path / "out"),
            AnnotatorSpec(model=str(other), indexes=(("Disease", index),)),
            pipeline_options([]),
        )
    with pytest.raises(FileNotFoundError, match="missing.pubtator: no such file or folder"):
        run(chain, [tmp_path / "missing.pubtator"], tmp_path / "out")
    with pytest.raises(ValueError, match=r"^types.Chemical.index: required: its nil_threshold is given"):
        AnnotatorSpec(model=model, indexes=(("Disease", index),), nil_thresholds=(("Chemical", 0.5),))
    with pytest.raises(ValueError, match=f"^{GOLD_SAMPLE}: not a bioel stop list \\(Extra data"):
        AnnotatorSpec(model=model, indexes=(("Disease", index),), stop_lists=(("Disease", str(GOLD_SAMPLE)),))
    for path, reason in ((tmp_path, "Is a directory"), (tmp_path / "none.json", "No such file or directory")):
        with pytest.raises(ValueError, match=f"^types.Disease.stop_list: {path}: {reason}$"):  # was the system's words alone
            AnnotatorSpec(model=model, indexes=(("Disease", index),), stop_lists=(("Disease", str(path)),))
    # --mentions given on a format with no mentions linked nothing and said nothing (documents linked, 0 mentions)
    (tmp_path / "docs.jsonl").write_text('{"pmid": "1", "title": "Gout.", "abstract": ""}\n')
    with pytest.raises(ValueError, match="--input-format jsonl carries none"):
        link_corpus.run(
            [str(tmp_path / "docs.jsonl")], "jsonl", str(tmp_path / "out"), spec(chain, detect=False), pipeline_options([])
        )
    unfinished = tmp_path / "index-copy"
    shutil.copytree(index, unfinished)
    (unfinished / "manifest.json").unlink()
    with pytest.raises(IncompleteOutputError):
        link_corpus.run(
            [str(folder / "a.pubtator")],
            "pubtator",
            str(tmp_path / "out"),
            AnnotatorSpec(model=model, indexes=(("Disease", str(unfinished)),)),
            pipeline_options([]),
        )
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_an_index_built_from_an_earlier_embeddings_generation_is_refused(chain, corpus, tmp_path):
    model, _ = chain
    folder, _ = corpus
    kb, emb, index, dictionary = tmp_path / "kb", tmp_path / "emb", tmp_path / "index", tmp_path / "medic.txt"
    lines = Path(MEDIC_SAMPLE).read_text().splitlines(keepends=True)
    dictionary.write_text("".join(lines[:30]))
    ingest_kb.run("medic-biosyn", [str(dictionary)], str(kb), pipeline_options([]), num_shards=1)
    embed_names.run(model, str(kb), str(emb), pipeline_options([]), num_shards=1)
    build_index.run(str(emb), str(index), pipeline_options([]), num_shards=1, spec=IndexSpec("flat"))
    dictionary.write_text("".join(lines[10:30]))  # a new release ingested and embedded into the same folders
    ingest_kb.run("medic-biosyn", [str(dictionary)], str(kb), pipeline_options([]), num_shards=1)
    embed_names.run(model, str(kb), str(emb), pipeline_options([]), num_shards=1)
    with pytest.raises(ValueError, match=f"^{index}: the embeddings at {emb} changed since this index was built"):
        link_corpus.run(
            [str(folder / "a.pubtator")],
            "pubtator",
            str(tmp_path / "out"),
            AnnotatorSpec(model=model, indexes=(("Disease", str(index)),)),
            pipeline_options([]),
        )
    assert not (tmp_path / "out").exists()


def test_nil_threshold_marks_low_scores(chain, corpus, tmp_path):
    folder, _ = corpus
    model, index = chain
    # an index typed '' takes the given mentions of every type (NCBI: SpecificDisease, Modifier, ...)
    given = AnnotatorSpec(model=model, indexes=(("", index),), detect=False, nil_thresholds=(("", 0.999),))
    manifest = link_corpus.run([str(folder / "a.pubtator")], "pubtator", str(tmp_path / "out"), given, pipeline_options([]))
    rows = table(tmp_path / "out", "annotations")
    assert manifest["counts"]["mentions"]["nil"] == sum(r["nil"] for r in rows) > 0
    assert {r["entity_type"] for r in rows} >= {"SpecificDisease", "Modifier"}
    assert all((r["score"] < 0.999) == r["nil"] and (r["concept_id"] is None) == r["nil"] for r in rows)
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["annotator"]["nil_thresholds"] == [["", 0.999]]


def test_the_summary_line_counts_a_nil_mention_once(chain, corpus, tmp_path, capsys):
    # counts.mentions.linked is every annotation row, NIL ones included (`nil` counts a part of them): the summary line
    # added the NIL mentions a second time
    from pipelines import cli

    folder, _ = corpus
    model, index = chain
    out = tmp_path / "out"
    assert (
        cli.main(
            [
                "link",
                "--model",
                model,
                "--index",
                index,
                "--mentions",
                "given",
                "--nil-threshold",
                "0.999",
                "--input",
                str(folder / "a.pubtator"),
                "--input-format",
                "pubtator",
                "--output",
                str(out),
                "--no-quality",
            ]
        )
        == 0
    )
    rows = table(out, "annotations")
    assert any(r["nil"] for r in rows)
    assert capsys.readouterr().err.startswith(f"link: 20 documents, {len(rows):,} mentions in ")


@pytest.mark.parametrize("output_format", ["pubtator", "bioc-json", "bioc-xml"])
def test_link_writes_every_interchange_format_from_plain_text_and_reads_it_back(chain, tmp_path, output_format):
    """Issue 13: bioc-json/bioc-xml crashed on every input (a StringIO given to path-only writers), and three
    ordinary text files (a trailing newline, a line break and a tab inside) aborted a PubTator job. A document
    the output format cannot hold (a `|` in its id, for PubTator) is one dead letter; the run completes."""
    from bioel_core.corpora import read_documents

    plain = sorted(str(p) for p in (ROOT / "tests" / "fixtures" / "corpora" / "plain").glob("*.txt"))
    (tmp_path / "ids.txt").write_text("ok-1\tFamotidine caused delirium.\nbad|2\tGout and delirium.\n")
    options = pipeline_options([])
    out = tmp_path / "out"
    manifest = link_corpus.run(plain, "text", str(out), spec(chain), options, output_formats=[output_format])
    assert all(manifest["reconciliation"].values()), manifest["reconciliation"]
    assert manifest["counts"]["documents"]["linked"] == 3
    per_line = link_corpus.run(
        [str(tmp_path / "ids.txt")],
        "text",
        str(tmp_path / "out2"),
        spec(chain),
        options,
        output_formats=[output_format],
        per_line=True,
    )
    assert all(per_line["reconciliation"].values()), per_line["reconciliation"]
    dead = table(tmp_path / "out2", "dead_letter")
    if output_format == "pubtator":
        assert per_line["counts"]["documents"]["linked"] == 1
        assert [d["location"] for d in dead] == ["document bad|2"] and "cannot be written as PubTator" in dead[0]["reason"]
    else:
        assert per_line["counts"]["documents"]["linked"] == 2 and not dead
    rows = table(out, "annotations")
    files = sorted(str(f) for f in (data_root(out) / output_format).iterdir())  # a shard without documents writes none
    written = [d for d in read_documents(files, output_format)]
    assert all(isinstance(d, Document) for d in written)
    texts = {d.doc_id: d.text for d in written}
    assert set(texts) == {"p1", "p2", "p3"} and texts["p1"].startswith("There is no PPI")
    assert sorted((d.doc_id, m.start, m.end, m.text) for d in written for m in d.mentions) == sorted(
        (r["doc_id"], r["start"], r["end"], r["mention"]) for r in rows
    )


# verb | input | documents linked (their ids) | outcome: text documents are named by their path below the folder or glob
# root they are listed from; two files that would still share an id are refused before any work, naming both
TEXT_ID_CASES = [
    ("one name in two subfolders, listed by one glob", ["txt/**/1.txt"], ["a/1", "b/1"]),
    ("a file given alone keeps its name", ["txt/a/1.txt"], ["1"]),
    ("a folder's files keep their names", ["txt"], ["2"]),
    ("one name in two subfolders, listed from two folders", ["txt/a", "txt/b"], "txt/a/1.txt and {tmp}/txt/b/1.txt"),
    ("one name with two extensions in one folder", ["txt/c"], "txt/c/3.md and {tmp}/txt/c/3.txt"),
]


@pytest.mark.parametrize("case, given, expected", TEXT_ID_CASES, ids=[c[0] for c in TEXT_ID_CASES])
def test_text_documents_of_one_name_in_two_folders_are_two_documents_or_refused(chain, tmp_path, case, given, expected):
    """`txt/a/1.txt` and `txt/b/1.txt` were both document `1`: one silently superseded the other. A text document is
    now named by its path below the folder or glob root it was listed from, so a file given alone or directly in a
    folder keeps its name; two files that would still be one document are refused before any work."""
    for path, text in (
        ("a/1.txt", "Gout in a child."),
        ("b/1.txt", "Delirium after famotidine."),
        ("2.txt", "Gout."),
        ("c/3.txt", "Gout."),
        ("c/3.md", "Gout again."),
    ):
        (tmp_path / "txt" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "txt" / path).write_text(text + "\n")
    inputs = [str(tmp_path / g) for g in given]
    out = tmp_path / "out"
    if isinstance(expected, str):
        with pytest.raises(
            ValueError,
            match="^input: " + re.escape(f"{tmp_path}/" + expected.format(tmp=tmp_path)) + r" would both be text document '\w'",
        ):
            link_corpus.run(inputs, "text", str(out), spec(chain), pipeline_options([]))
        assert not out.exists()
        return
    manifest = link_corpus.run(inputs, "text", str(out), spec(chain), pipeline_options([]))
    assert manifest["counts"]["documents"]["linked"] == len(expected) and not manifest["counts"]["documents"]["superseded"]
    assert sorted(r["doc_id"] for r in table(out, "documents")) == expected


def test_annotations_carry_vocabulary_and_alt_ids_and_pubtator_can_write_prefixed_ids(chain, corpus, tmp_path):
    # ids carried no vocabulary: an OMIM number and a MeSH id looked alike in every output
    folder, _ = corpus
    run(chain, [folder / "a.pubtator"], tmp_path / "out", output_formats=["pubtator"], id_prefix="vocabulary")
    kb = {r["concept_id"]: r for r in read_table(Path(chain[1]).parent / "kb", "concepts").to_pylist()}
    rows = table(tmp_path / "out", "annotations")
    assert rows and all(
        (r["vocabulary"], r["alt_ids"]) == (kb[r["concept_id"]]["vocabulary"], kb[r["concept_id"]]["alt_ids"]) for r in rows
    )
    assert {r["vocabulary"] for r in rows} <= {"MESH", "OMIM"}
    written = [d for f in sorted((data_root(tmp_path / "out") / "pubtator").iterdir()) for d in read_pubtator(f)]
    assert sorted((d.doc_id, m.start, m.concept_ids[0]) for d in written for m in d.mentions) == sorted(
        (r["doc_id"], r["start"], f"{r['vocabulary']}:{r['concept_id']}") for r in rows
    )


def test_as_linked_documents_id_prefix():
    documents = [{"doc_id": "1", "status": "annotated", "passages": [{"kind": "title", "offset": 0, "text": "Gout and AT."}]}]
    rows = [
        {
            "doc_id": "1",
            "start": 0,
            "end": 4,
            "mention": "Gout",
            "entity_type": "Disease",
            "concept_id": "D006073",
            "vocabulary": "MESH",
            "nil": False,
        },
        {
            "doc_id": "1",
            "start": 9,
            "end": 11,
            "mention": "AT",
            "entity_type": "Disease",
            "concept_id": "208900",
            "vocabulary": "OMIM",
            "nil": False,
        },
        {
            "doc_id": "1",
            "start": 0,
            "end": 4,
            "mention": "Gout",
            "entity_type": "Chemical",
            "concept_id": None,
            "vocabulary": None,
            "nil": True,
        },
    ]
    rows.append({**rows[0], "start": 5, "end": 8, "mention": "and", "concept_id": "D006470|D003556"})  # a composite concept
    ids = lambda prefix: [m.concept_ids for m in link_corpus.as_linked_documents(documents, rows, prefix)[0].mentions]  # noqa: E731
    assert ids("none") == [("D006073",), ("208900",), (), ("D006470", "D003556")]
    assert ids("vocabulary") == [("MESH:D006073",), ("OMIM:208900",), (), ("MESH:D006470", "MESH:D003556")]
    with pytest.raises(ValueError, match="--id-prefix"):
        ids("mesh")


def link_cli(chain, capsys, *argv) -> tuple[int, str]:
    """`bioel link --model M --index Disease=I --input-format pubtator --no-quality ARGV`: exit code and stderr."""
    from pipelines import cli

    model, index = chain
    code = cli.main(
        ["link", "--model", model, "--index", f"Disease={index}", "--input-format", "pubtator", "--no-quality", *map(str, argv)]
    )
    return code, capsys.readouterr().err.strip()


def test_a_misspelled_flag_is_refused_and_the_state_is_kept(chain, corpus, tmp_path, capsys):
    folder, _ = corpus
    out = tmp_path / "state"
    code, err = link_cli(chain, capsys, "--input", folder / "a.pubtator", folder / "b.pubtator", "--output", out)
    assert code == 0 and err.startswith("link: 40 documents, ") and err.endswith(" documents/s)")
    before = (out / "manifest.json").read_bytes()
    code, err = link_cli(chain, capsys, "--input", folder / "a.pubtator", "--output", out, "--incremantal")
    assert code == 2 and len(err.splitlines()) == 1 and "--incremantal; did you mean --incremental?" in err
    assert (out / "manifest.json").read_bytes() == before


def test_another_verbs_folder_is_never_an_output(chain, corpus, tmp_path, capsys):
    folder, _ = corpus
    model, index = chain
    root = Path(index).parent
    for target, says in (
        (index, "is (or holds) the --index"),
        (root / "kb", "holds a `bioel ingest-kb` output"),
        (root / "emb", "holds a `bioel embed` output"),
    ):
        before = (Path(target) / "manifest.json").read_bytes()
        code, err = link_cli(chain, capsys, "--input", folder / "a.pubtator", "--output", target)
        assert code == 2 and len(err.splitlines()) == 1 and says in err, err
        assert (Path(target) / "manifest.json").read_bytes() == before
    from pipelines import cli

    code = cli.main(["ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_SAMPLE, "--output", str(root / "emb")])
    assert code == 2 and "holds a `bioel embed` output" in capsys.readouterr().err


def test_an_output_inside_one_of_the_runs_input_folders_is_refused_naming_both(chain, corpus, tmp_path, capsys):
    # an output inside an input folder was accepted: a later run given the folder (or a `**` glob) read the links back
    # as corpus, and a republished KB, embeddings or index folder could take the output with it
    from pipelines import cli

    folder, _ = corpus
    model, index = chain
    root = Path(index).parent
    for inputs, out, says in (
        ([folder], folder / "links", f"inside the --input folder {folder} "),
        ([f"{folder}/*"], folder / "sub/links", f"inside the --input folder {folder} "),
        ([f"{folder}/**/*.pubtator"], folder / "links", f"inside the --input folder {folder} "),
        ([folder / "a.pubtator"], Path(index) / "links", f"inside the --index folder {index} "),
    ):
        code, err = link_cli(chain, capsys, "--input", *inputs, "--output", out)
        assert code == 2 and err == f"bioel link: error: --output {out} is {says}of this job; write to a folder of its own"
        assert not out.exists()
    for argv, out, says in (
        (["embed", "--model", model, "--input", root / "kb"], root / "kb/emb", f"--input folder {root / 'kb'}"),
        (["build-index", "--num-shards", "1", "--input", root / "emb"], root / "emb/index", f"--input folder {root / 'emb'}"),
        (["ingest-kb", "--input-format", "medic-biosyn", "--input", f"{folder}/*"], folder / "kb", f"--input folder {folder}"),
    ):
        assert cli.main([str(a) for a in argv] + ["--output", str(out)]) == 2
        assert f"--output {out} is inside the {says} of this job" in capsys.readouterr().err
        assert not out.exists()
    assert (
        cli.main(
            [
                "calibrate-nil",
                "--model",
                model,
                "--index",
                index,
                "--gold",
                str(folder / "a.pubtator"),
                "--json",
                f"{index}/nil.json",
            ]
        )
        == 2
    )
    assert f"--json {index}/nil.json is inside the --index folder {index} of this job" in capsys.readouterr().err
    assert link_cli(chain, capsys, "--input", folder / "a.pubtator", "--output", tmp_path / "beside")[0] == 0
    # a glob that cannot match the output (`*.pubtator` never reads `links/`) may have it in its folder
    here = tmp_path / "here"
    here.mkdir()
    shutil.copy(folder / "a.pubtator", here)
    assert link_cli(chain, capsys, "--input", f"{here}/*.pubtator", "--output", here / "links")[0] == 0


def test_a_run_whose_every_document_is_dead_lettered_exits_3_and_publishes_nothing(chain, corpus, tmp_path, capsys):
    folder, _ = corpus
    out = tmp_path / "state"
    assert link_cli(chain, capsys, "--input", folder / "a.pubtator", "--output", out)[0] == 0
    before = (out / "manifest.json").read_bytes()
    bad = tmp_path / "bad.pubtator"
    bad.write_text("4|t|\n4|a|\n\n5|t|Gout.\n5|a|\n5\tnot an annotation\n")  # an empty document, a malformed one
    code, err = link_cli(chain, capsys, "--input", bad, "--output", out, "--incremental")
    assert "Traceback" not in err
    err = [line for line in err.splitlines() if line.startswith("bioel ")]  # not transformers' progress bar
    assert code == 3 and len(err) == 1 and "no rows: 2 input records read" in err[0]
    err = err[0]
    assert "empty document" in err and "nor a relation line" in err
    assert (out / "manifest.json").read_bytes() == before
    assert_published(out)


def test_a_bad_bioc_xml_document_costs_itself_alone_and_the_run_reconciles(chain, corpus, tmp_path, capsys):
    """Issue 40: a byte that is not UTF-8 in document 2 of a BioC XML file, or a mismatched tag in document 4, ended
    the file there (one dead letter, every later document never read nor counted, exit 0). Each is now one dead
    letter naming file, ordinal, id and line; the other documents are linked and the manifest reconciles."""
    from pipelines import cli

    model, index = chain
    _, docs = corpus
    path = tmp_path / "eight.bioc.xml"
    write_bioc_xml(docs[:8], path)
    parts = path.read_bytes().split(b"<document>")
    parts[2] = parts[2].replace(b"<text>", b"<text>\xff", 1)
    parts[4] = parts[4].replace(b"</text>", b"</txt>", 1)
    path.write_bytes(b"<document>".join(parts))
    out = tmp_path / "out"
    code = cli.main(
        [
            "link",
            "--model",
            model,
            "--index",
            f"Disease={index}",
            "--input-format",
            "bioc-xml",
            "--input",
            str(path),
            "--output",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    manifest = read_manifest(out)
    assert all(manifest["reconciliation"].values()), manifest["reconciliation"]
    assert manifest["counts"]["records"] == {"documents": 6, "dead_lettered": 2, "deletions": 0}
    assert manifest["counts"]["documents"]["linked"] == 6
    assert sorted((d["source"], d["location"].split(", ")[0]) for d in table(out, "dead_letter")) == [
        (str(path), f"document 2 (id {docs[1].doc_id})"),
        (str(path), f"document 4 (id {docs[3].doc_id})"),
    ]


def test_a_misnamed_input_format_ends_each_dead_letter_and_the_no_rows_error_with_the_flag_to_pass(
    chain, corpus, tmp_path, capsys
):
    """`--input-format pubtator` given a BioC XML file dead-lettered it with "line 3: annotation or relation line
    before any title/abstract line" and failed with "no rows" and that reason: nothing said the format was wrong."""
    folder, _ = corpus
    bioc = ROOT / "tests" / "fixtures" / "corpora" / "bc5cdr_test_excerpt.bioc.xml"
    hint = " (this looks like BioC XML: pass --input-format bioc-xml)"
    code, err = link_cli(chain, capsys, "--input", bioc, "--output", tmp_path / "none")
    err = [line for line in err.splitlines() if line.startswith("bioel ")]  # not transformers' progress bar
    assert code == 3 and len(err) == 1 and "no rows: 1 input records read" in err[0] and err[0].endswith(hint)
    out = tmp_path / "mixed"
    assert link_cli(chain, capsys, "--input", folder / "a.pubtator", bioc, "--output", out)[0] == 0
    dead = table(out, "dead_letter")
    assert dead and all(d["source"] == str(bioc) and d["reason"].endswith(hint) for d in dead)
    assert read_manifest(out)["counts"]["documents"]["linked"] == 20  # the file of the format named reads as before


_PUBMED = ROOT / "tests" / "fixtures" / "pubmed" / "pubmed25n0001_sample.xml"
_CORPORA = ROOT / "tests" / "fixtures" / "corpora"

# verb | input (a folder's files) | documents linked | dead letters | files unread | exit code: a file not of
# --input-format, or not read to its end, counts as a whole file (the run fails, --fail-on none publishes what was read);
# a bad record does not
_MIXED = {
    "a.xml": _PUBMED.read_bytes(),
    "b.jsonl": (_CORPORA / "sample.jsonl").read_bytes(),
    "c.pubtator": (_CORPORA / "sample.pubtator").read_bytes(),
}
UNREAD_FILE_CASES = [
    ("a folder mixing PubMed XML, JSONL and PubTator read as pubmed-xml", _MIXED, [], 4, 2, ["b.jsonl", "c.pubtator"], 4),
    ("the same folder with --fail-on none", _MIXED, ["--fail-on", "none"], 4, 2, ["b.jsonl", "c.pubtator"], 0),
    (
        "a truncated gzip beside a good file",
        {
            "a.xml": _PUBMED.read_bytes(),
            "b.xml.gz": gzip.compress(_PUBMED.read_bytes().replace(b">10000", b">20000"), mtime=0)[:-200],
        },
        [],
        4,
        1,
        ["b.xml.gz"],
        4,
    ),
    ("a file cut inside its last article", {"a.xml": _PUBMED.read_bytes()[:-400]}, [], 3, 1, ["a.xml"], 4),
    (
        "an article without a PMID among valid ones",
        {"a.xml": _PUBMED.read_bytes().replace(b'<PMID Version="2">1000002</PMID>', b"")},
        [],
        3,
        1,
        [],
        0,
    ),
]


@pytest.mark.parametrize(
    "case, files, flags, linked, dead, unread, code", UNREAD_FILE_CASES, ids=[c[0] for c in UNREAD_FILE_CASES]
)
def test_a_file_not_read_to_its_end_fails_the_run_unless_told_otherwise(
    chain, tmp_path, capsys, case, files, flags, linked, dead, unread, code
):
    """A folder mixing PubMed XML, JSONL and PubTator read as pubmed-xml linked the XML file's documents with a warning
    and exit 0: each other file was one dead letter among the records read, though none of its records was. Such a
    file (and one whose reader could not read past a fault) is now listed in the manifest's inputs as unread, and a
    critical check fails the run: nothing is published, the rejected report names each file. --fail-on none publishes
    what was read."""
    from pipelines import cli

    model, index = chain
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    out = tmp_path / "out"
    got = cli.main(
        [
            "link",
            "--input",
            str(folder),
            "--input-format",
            "pubmed-xml",
            "--model",
            model,
            "--index",
            f"Disease={index}",
            "--output",
            str(out),
            *flags,
        ]
    )
    err = capsys.readouterr().err
    assert got == code and "Traceback" not in err, err
    unread = [str(folder / name) for name in unread]
    if code == 4:
        assert not (out / "manifest.json").exists()
        summary = json.loads((out / "rejected" / "summary.json").read_text())
        (failed,) = [c for c in summary["checks"] if not c["success"] and c["severity"] == "critical"]
        assert (failed["table"], failed["unexpected_count"]) == ("inputs", len(unread))
        observed = failed["observed"]  # "FILE: where: why", cut to the report's width
        assert len(observed) == len(unread) and all(
            u.startswith(f"{path}: ") or f"{path}: ".startswith(u.removesuffix("...")) for u, path in zip(observed, unread)
        )
        return
    manifest = read_manifest(out)
    assert manifest["counts"]["documents"]["linked"] == linked and len(table(out, "dead_letter")) == dead
    assert manifest["counts"]["files"] == {"given": len(files), "unread": len(unread)}
    assert [i["path"] for i in manifest["inputs"] if "unread" in i] == unread


def test_quality_reports_an_empty_annotations_table_of_linked_documents_as_a_warning(chain, corpus, tmp_path):
    from bioel_core.quality import report
    from conftest import empty_table

    folder, _ = corpus
    run(chain, [folder / "a.pubtator"], tmp_path / "out")
    empty_table(tmp_path / "out", "annotations")  # documents whose annotations went missing: their counts say so
    summary = report(tmp_path / "out")
    failed = {(c["table"], c["column"], c["expectation"]): c["severity"] for c in summary["checks"] if not c["success"]}
    assert failed == {
        ("annotations", None, "expect_table_row_count_to_be_between"): "warning",
        ("documents", "mentions_mismatch_doc_id", "expect_column_values_to_be_null"): "critical",
    }
    assert not summary["passed"]


NO_MENTION_PUBMED = """<?xml version="1.0" encoding="UTF-8"?>
<PubmedArticleSet>
<PubmedArticle>
  <MedlineCitation Status="MEDLINE" Owner="NLM">
    <PMID Version="1">2000001</PMID>
    <Article PubModel="Print">
      <ArticleTitle>Opening hours of public libraries in three cities.</ArticleTitle>
      <Abstract><AbstractText>We counted the hours each library was open in a week.</AbstractText></Abstract>
    </Article>
  </MedlineCitation>
</PubmedArticle>
</PubmedArticleSet>
"""


def test_a_corpus_with_no_mention_is_published_with_a_warning_and_a_refusal_never_blocks_the_next_run(chain, tmp_path, capsys):
    """A valid PubMed file with no disease mention (a daily update with nothing to link) exited 4, "critical:
    annotations row count 0", and published nothing; after that refusal `--fail-on none` was refused too ("holds
    rejected, which no bioel run published there")."""
    from pipelines import cli

    model, index = chain
    update, out = tmp_path / "pubmed25n1400.xml", tmp_path / "daily"
    update.write_text(NO_MENTION_PUBMED)
    argv = [
        "link",
        "--model",
        model,
        "--index",
        f"Disease={index}",
        "--input",
        str(update),
        "--input-format",
        "pubmed-xml",
        "--output",
        str(out),
    ]
    assert cli.main(argv + ["--fail-on", "warning"]) == 4  # told to fail on warnings: refused, its report in rejected/
    assert sorted(p.name for p in out.iterdir()) == ["rejected"]
    capsys.readouterr()
    assert cli.main(argv + ["--fail-on", "none"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.name != "quality") == sorted(
        ["manifest.json", read_manifest(out)["generation"]]
    )
    assert cli.main(argv) == 0  # the default, --fail-on critical
    stdout, stderr = capsys.readouterr()
    manifest = assert_published(out)
    assert all(manifest["reconciliation"].values()) and manifest["outputs"]["annotations"]["rows"] == 0
    assert manifest["counts"]["documents"]["linked"] == 1 and [r["doc_id"] for r in table(out, "documents")] == ["2000001"]
    assert "quality PASSED (fail on critical)" in stdout and "WARNING  annotations" in stdout
    assert "bioel link: warning: not one mention in the 1 documents linked; they are published without annotations" in stderr
    # a brat text (one document, no annotation file) alike
    brat = tmp_path / "brat" / "hours.txt"
    brat.parent.mkdir()
    brat.write_text("Opening hours of public libraries in three cities.\n")
    assert cli.main(argv[:5] + ["--input", str(brat), "--input-format", "text", "--output", str(tmp_path / "brat-out")]) == 0
    assert read_manifest(tmp_path / "brat-out")["counts"]["documents"]["linked"] == 1


def test_given_mentions_of_a_type_without_an_index_are_kept_nil_counted_and_in_the_pubtator_copy(chain, corpus, tmp_path, capsys):
    """Given mentions of a type with no --index (Chemical when only Disease is indexed) vanished from the Parquet and
    PubTator outputs, counted nowhere, exit 0."""
    from pipelines import cli

    folder, docs = corpus
    model, index = chain
    out = tmp_path / "out"
    assert (
        cli.main(
            [
                "link",
                "--model",
                model,
                "--index",
                f"Disease={index}",
                "--mentions",
                "given",
                "--input",
                str(folder / "b.pubtator"),
                "--input-format",
                "pubtator",
                "--output",
                str(out),
                "--output-format",
                "pubtator",
            ]
        )
        == 0
    )  # BC5CDR abstracts: Disease and Chemical mentions
    stdout, stderr = capsys.readouterr()
    given = [m for d in docs[20:] for m in d.mentions]
    unindexed = Counter(m.entity_type for m in given if m.entity_type != "Disease")
    manifest = read_manifest(out)
    assert manifest["counts"]["mentions"]["no_index"] == dict(sorted(unindexed.items())) and unindexed["Chemical"] > 0
    rows = table(out, "annotations")
    assert sorted((r["doc_id"], r["start"], r["end"], r["entity_type"]) for r in rows) == sorted(
        (m.doc_id, m.start, m.end, m.entity_type) for m in given
    )  # every given mention is there
    assert all(r["nil"] and r["concept_id"] is None and r["kb_version"] == "" for r in rows if r["entity_type"] != "Disease")
    written = [m for f in sorted((data_root(out) / "pubtator").iterdir()) for d in read_pubtator(f) for m in d.mentions]
    assert Counter(m.entity_type for m in written if not m.concept_ids) >= unindexed
    assert len(written) == len(given)
    assert "quality PASSED" in stdout and "WARNING  annotations.entity_type" in stdout
    assert f"bioel link: warning: {sum(unindexed.values()):,} given mentions kept NIL, unlinked (" in stderr
    assert f"no index for type Chemical: {unindexed['Chemical']:,}" in stderr


def _article_versions(tmp_path, long_text: str):
    """The committed PubMed sample's first article twice: version 1 as is, version 2 with `long_text` as abstract."""
    xml = (ROOT / "tests" / "fixtures" / "pubmed" / "pubmed25n0001_sample.xml").read_text()
    article = xml[xml.index("<PubmedArticle>") : xml.index("</PubmedArticle>") + len("</PubmedArticle>")]
    v2 = article.replace('<PMID Version="1">1000001</PMID>', '<PMID Version="2">1000001</PMID>', 1)
    v2 = v2[: v2.index("<AbstractText>") + 14] + long_text + v2[v2.index("</AbstractText>") :]
    path = tmp_path / "versions.xml"
    path.write_text(f"<PubmedArticleSet>{article}{v2}</PubmedArticleSet>")
    return path


def test_among_copies_of_a_document_a_valid_one_wins(chain, tmp_path):
    # version 2 is the newer, but longer than the limit: it is dead-lettered and version 1 is linked
    path = _article_versions(tmp_path, "Gout and delirium. " * 40)
    manifest = link_corpus.run([str(path)], "pubmed-xml", str(tmp_path / "out"), spec(chain, max_chars=300), pipeline_options([]))
    docs = manifest["counts"]["documents"]
    assert (docs["linked"], docs["superseded"], docs["dead_lettered"]) == (1, 0, 1)
    assert all(manifest["reconciliation"].values()), manifest["reconciliation"]
    (row,) = table(tmp_path / "out", "documents")
    assert row["doc_id"] == "1000001" and "Famotidine caused delirium" in "".join(p["text"] for p in row["passages"])
    (dead,) = table(tmp_path / "out", "dead_letter")
    assert dead["location"] == "document 1000001" and "exceeds the limit of 300" in dead["reason"]


def _retitled_articles(**titles) -> tuple[str, dict[str, str]]:
    """(the committed PubMed sample's prolog up to <PubmedArticleSet>, its first article (PMID 1000001, version 1)
    under each of `titles`)."""
    xml = (ROOT / "tests" / "fixtures" / "pubmed" / "pubmed25n0001_sample.xml").read_text()
    head = xml[: xml.index("<PubmedArticle>")]
    article = xml[xml.index("<PubmedArticle>") : xml.index("</PubmedArticle>") + len("</PubmedArticle>")]
    title = article[article.index("<ArticleTitle>") : article.index("</ArticleTitle>")]
    return head, {name: article.replace(title, f"<ArticleTitle>{t}") for name, t in titles.items()}


def test_a_pmid_in_several_input_files_keeps_the_record_of_the_file_given_last(chain, tmp_path, monkeypatch):
    """PubMed's baseline and update files are applied in order: a later file's record of a PMID replaces the
    earlier one, a later DeleteCitation deletes it. The record kept was the one whose content hash sorted last
    (and the files were read in sorted order whatever the order given), so one order kept the earlier record."""
    from bioel_core.kb import io as kb_io

    titles = {"baseline": "Gout in an invented patient.", "update": "Delirium in an invented patient."}
    head, articles = _retitled_articles(**titles)
    paths = {}
    for name, article in articles.items():
        paths[name] = tmp_path / f"{name}.xml"
        paths[name].write_text(f"{head}{article}\n</PubmedArticleSet>\n")
    paths["deletion"] = tmp_path / "deletion.xml"
    paths["deletion"].write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<PubmedArticleSet>\n<DeleteCitation>\n'
        '<PMID Version="1">1000001</PMID>\n</DeleteCitation>\n</PubmedArticleSet>\n'
    )
    for first, last in (("baseline", "update"), ("update", "baseline")):  # one file holding both, in either order
        paths[f"{first}-{last}"] = tmp_path / f"{first}-{last}.xml"
        paths[f"{first}-{last}"].write_text(f"{head}{articles[first]}\n{articles[last]}\n</PubmedArticleSet>\n")
    two_workers = ["--runner", "DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    runs = iter(range(100))

    def kept(*names, beam_args=()) -> str:
        out = tmp_path / f"out{next(runs)}"
        manifest = link_corpus.run(
            [str(paths[n]) for n in names], "pubmed-xml", str(out), spec(chain), pipeline_options(list(beam_args))
        )
        assert all(manifest["reconciliation"].values()), manifest["reconciliation"]
        assert manifest["counts"]["documents"]["superseded"] == 1 and table(out, "dead_letter") == []
        (row,) = table(out, "documents")
        return row["passages"][0]["text"] if row["status"] == "annotated" else row["status"]

    assert kept("baseline", "update") == titles["update"]
    assert kept("update", "baseline") == kept("update", "baseline", beam_args=two_workers) == titles["baseline"]
    assert kept("baseline", "deletion") == "deleted"
    assert kept("deletion", "update") == titles["update"]  # applied in order: a record after its deletion stands
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 1000)  # one file cut in ranges, its second article in the second one
    assert kept("baseline-update") == titles["update"] and kept("update-baseline") == titles["baseline"]


def test_a_blank_redelivery_keeps_the_previous_document_and_its_annotations(chain, corpus, tmp_path):
    folder, docs = corpus
    out = tmp_path / "state"
    run(chain, [folder / "a.pubtator"], out, incremental=True)
    kept = docs[2].doc_id
    before_docs = {r["doc_id"]: r for r in table(out, "documents")}
    before_rows = [r for r in table(out, "annotations") if r["doc_id"] == kept]
    assert before_rows
    update = tmp_path / "update.pubtator"
    with open(update, "w") as fh:
        write_pubtator([docs[25]], fh)
        fh.write(f"\n{kept}|t|\n{kept}|a|\n")  # the same id re-delivered blank
    manifest = run(chain, [update], out, incremental=True)
    counts = manifest["counts"]["documents"]
    assert (counts["linked"], counts["kept_previous"], counts["dead_lettered"], counts["carried"]) == (1, 1, 1, 19)
    assert all(manifest["reconciliation"].values()), manifest["reconciliation"]
    assert {r["doc_id"]: r for r in table(out, "documents")}[kept] == before_docs[kept]
    assert [r for r in table(out, "annotations") if r["doc_id"] == kept] == before_rows
    assert [d["location"] for d in table(out, "dead_letter")] == [f"document {kept}"]


def test_changed_annotation_settings_relink_every_document(chain, corpus, tmp_path):
    folder, _ = corpus
    model, index = chain
    out = tmp_path / "state"
    run(chain, [folder / "a.pubtator"], out, incremental=True)
    again = run(chain, [folder / "a.pubtator"], out, incremental=True)
    assert again["counts"]["documents"]["unchanged"] == 20  # same settings: nothing to do
    for changed in ({"nil_thresholds": (("Disease", 0.999),)}, {"detect": False}):
        manifest = link_corpus.run(
            [str(folder / "a.pubtator")],
            "pubtator",
            str(out),
            AnnotatorSpec(model=model, indexes=(("Disease", index),), **changed),
            pipeline_options([]),
            incremental=True,
        )
        docs = manifest["counts"]["documents"]
        assert (docs["linked"], docs["unchanged"]) == (20, 0), changed
    stop, shipped = tmp_path / "stop.json", json.loads((ROOT / "models" / "stoplists" / "disease-medic.json").read_text())
    stop.write_text(json.dumps(shipped))
    with_stop = AnnotatorSpec(model=model, indexes=(("Disease", index),), stop_lists=(("Disease", str(stop)),))
    first = with_stop.settings_sha256()
    assert first != spec(chain).settings_sha256()
    shipped["names"]["gout"] = {"matched": 9, "gold": 0}
    stop.write_text(json.dumps(shipped))  # the same path with other contents is another setting
    assert with_stop.settings_sha256() != first


def test_a_stop_list_learned_under_another_normalizer_is_refused_before_any_work(chain, tmp_path):
    # a KB ingested before Unicode punctuation counted, with the shipped stop lists (learned under the current
    # normalizer): the workers refused it one by one, each logging a traceback; now the run is refused up front
    from bioel_core.normalize import Normalizer, NormalizerConfig
    from bioel_core.text.detect import StopList

    stop = tmp_path / "stop.json"
    StopList({"gout": (5, 0)}, normalizer=Normalizer(NormalizerConfig(punctuation="remove")).to_dict()).save(stop)
    with pytest.raises(ValueError, match=rf"^types.Disease.stop_list: {stop}: the stop list was learned under normalizer norm-"):
        link_corpus.run(
            [str(GOLD_SAMPLE)],
            "pubtator",
            str(tmp_path / "out"),
            spec(chain, stop_lists=(("Disease", str(stop)),)),
            pipeline_options([]),
        )
    assert not (tmp_path / "out").exists()


def test_link_reads_a_glob_or_a_folder_of_gzipped_pubmed_xml(chain, tmp_path, capsys):
    """A baseline folder as NCBI serves it (`*.xml.gz` with `.md5` sidecars): the glob and the folder name the
    same sorted files, the manifest lists them, and no sidecar is read as a document."""
    from bioel_core.corpora import read_documents
    from pipelines import cli
    from test_inputs import baseline_folder

    model, index = chain
    folder = baseline_folder(tmp_path / "baseline")
    files = [str(folder / "pubmed25n0001.xml.gz"), str(folder / "pubmed25n0002.xml.gz")]
    expected = sorted(d.doc_id for d in read_documents(files, "pubmed-xml") if isinstance(d, Document))
    outputs = []
    for name, given in (("glob", f"{folder}/*.xml.gz"), ("folder", str(folder))):
        out = tmp_path / name
        code = cli.main(
            [
                "link",
                "--input",
                given,
                "--input-format",
                "pubmed-xml",
                "--model",
                model,
                "--index",
                f"Disease={index}",
                "--output",
                str(out),
                "--no-quality",
            ]
        )
        assert code == 0, capsys.readouterr().err
        manifest = read_manifest(out)
        assert [i["path"] for i in manifest["inputs"]] == files
        assert sorted(r["doc_id"] for r in table(out, "documents")) == expected and len(expected) > 4
        assert table(out, "dead_letter") == []
        outputs.append(table_bytes(out))
    assert outputs[0] == outputs[1]


def test_single_file_is_one_ordered_file_whatever_the_shards_and_workers(chain, corpus, tmp_path, capsys):
    from pipelines import cli

    folder, docs = corpus
    inputs = [folder / "b.pubtator", folder / "a.pubtator"]
    two_workers = ["--runner", "DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    run(chain, inputs, tmp_path / "one", output_formats=["pubtator"], single_file=True, num_shards=2)
    run(chain, inputs, tmp_path / "two", output_formats=["pubtator"], single_file=True, num_shards=3, beam_args=two_workers)
    run(chain, inputs, tmp_path / "parts", output_formats=["pubtator"], num_shards=3)
    manifest = read_manifest(tmp_path / "one")
    assert manifest["outputs"]["pubtator"]["files"] == ["pubtator/linked.pubtator"] and manifest["single_file"]
    merged = data_root(tmp_path / "one") / "pubtator" / "linked.pubtator"
    assert sorted(p.name for p in merged.parent.iterdir()) == ["linked.pubtator"]
    assert (data_root(tmp_path / "two") / "pubtator" / "linked.pubtator").read_bytes() == merged.read_bytes()
    written = read_pubtator(merged)
    assert [d.doc_id for d in written] == sorted(d.doc_id for d in docs)
    # the parts hold the same documents and annotations, in shard order
    parts_folder = data_root(tmp_path / "parts") / "pubtator"
    assert len(list(parts_folder.iterdir())) == 3
    assert sorted(read_pubtator(parts_folder), key=lambda d: d.doc_id) == written
    # evaluate-e2e scores the single file, the parts folder and the link output folders alike
    scores = []
    for pred in (merged, parts_folder, tmp_path / "parts", tmp_path / "one"):
        assert (
            cli.main(["evaluate-e2e", "--gold", str(GOLD_SAMPLE), "--pred", str(pred), "--json", str(tmp_path / "s.json")]) == 0
        )
        scores.append({k: v for k, v in json.loads((tmp_path / "s.json").read_text()).items() if k != "pred"})
    capsys.readouterr()
    assert scores[0]["strict"]["n_pred"] > 0 and all(s == scores[0] for s in scores)
    # a link output is a PubTator --input too (its gold-free copy: the annotations as mentions)
    again = link_corpus.run(
        [str(tmp_path / "one")], "pubtator", str(tmp_path / "relinked"), spec(chain, detect=False), pipeline_options([])
    )
    assert [i["path"] for i in again["inputs"]] == [str(merged)]
    assert again["counts"]["documents"]["linked"] == len(docs)


@pytest.mark.parametrize("output_format", ["bioc-json", "bioc-xml"])
def test_single_file_bioc_reads_back_as_the_parts(chain, corpus, tmp_path, output_format):
    from bioel_core.corpora import read_documents

    folder, docs = corpus
    inputs = [folder / "a.pubtator", folder / "b.pubtator"]
    run(chain, inputs, tmp_path / "one", output_formats=[output_format], single_file=True, num_shards=2)
    run(chain, inputs, tmp_path / "parts", output_formats=[output_format], num_shards=2)
    [merged] = sorted((data_root(tmp_path / "one") / output_format).iterdir())
    assert merged.name == "linked" + link_corpus.INTERCHANGE_SUFFIX[output_format]
    read = lambda paths: list(read_documents(paths, output_format))  # noqa: E731
    merged_docs = read([merged])
    parts = sorted((data_root(tmp_path / "parts") / output_format).iterdir())
    assert [d.doc_id for d in merged_docs] == sorted(d.doc_id for d in docs)
    assert merged_docs == sorted(read(parts), key=lambda d: d.doc_id)


def test_single_file_needs_an_interchange_format(chain, corpus, tmp_path):
    folder, _ = corpus
    with pytest.raises(ValueError, match="--single-file needs an interchange --output-format"):
        run(chain, [folder / "a.pubtator"], tmp_path / "out", single_file=True)
    assert not (tmp_path / "out").exists()


def test_text_per_line_needs_the_text_format(chain, corpus, tmp_path):
    folder, _ = corpus
    with pytest.raises(ValueError, match="^--text-per-line applies to --input-format text, not pubtator$"):
        run(chain, [folder / "a.pubtator"], tmp_path / "out", per_line=True)
    assert not (tmp_path / "out").exists()


def test_an_index_given_without_a_type_labels_detected_mentions_entity(chain, corpus, tmp_path, capsys):
    """`--index DIR` without TYPE= wrote detected mentions with an empty type column in PubTator; calibrate-nil
    reports such an index's threshold as (any)."""
    from bioel_core.linking.annotate import UNTYPED
    from pipelines import cli

    folder, _ = corpus
    model, index = chain
    out = tmp_path / "out"
    assert (
        cli.main(
            [
                "link",
                "--model",
                model,
                "--index",
                index,
                "--input",
                str(folder / "a.pubtator"),
                "--input-format",
                "pubtator",
                "--output",
                str(out),
                "--output-format",
                "pubtator",
                "--no-quality",
            ]
        )
        == 0
    )
    rows = table(out, "annotations")
    assert rows and {r["entity_type"] for r in rows} == {UNTYPED} == {"Entity"}
    written = [m for f in sorted((data_root(out) / "pubtator").iterdir()) for d in read_pubtator(f) for m in d.mentions]
    assert len(written) == len(rows) and {m.entity_type for m in written} == {"Entity"}
    # given mentions keep their own type under an untyped index
    given = link_corpus.run(
        [str(folder / "a.pubtator")],
        "pubtator",
        str(tmp_path / "given"),
        AnnotatorSpec(model=model, indexes=(("", index),), detect=False),
        pipeline_options([]),
    )
    assert given["counts"]["mentions"]["linked"] > 0
    assert {r["entity_type"] for r in table(tmp_path / "given", "annotations")} == {
        m.entity_type for d in read_pubtator(folder / "a.pubtator") for m in d.mentions
    }
    capsys.readouterr()
    assert cli.main(["calibrate-nil", "--model", model, "--index", index, "--gold", str(folder / "a.pubtator")]) == 0
    out, err = capsys.readouterr()
    any_type = next(line.split() for line in out.splitlines() if line.startswith("(any)"))
    assert float(any_type[4]) > 0 and int(any_type[7]) > 0  # F1 and predictions of the untyped index
    assert err.startswith("calibrate-nil: ") and " mentions in " in err


def test_calibrate_nil_refuses_a_gold_with_no_annotation_of_an_index_type(chain, corpus, tmp_path, capsys):
    """A gold whose every annotation is NIL, or with no annotation of an --index's type, failed after linking every
    document with 'calibration needs at least one gold annotation and one prediction', naming no file nor type."""
    from pipelines import cli

    folder, docs = corpus
    model, index = chain
    nil = tmp_path / "nil.pubtator"
    write_pubtator(
        [Document(d.doc_id, d.passages, [replace(m, concept_ids=(), id_field="-1") for m in d.mentions]) for d in docs[:2]], nil
    )
    disease = tmp_path / "disease.pubtator"
    write_pubtator(
        [Document(d.doc_id, d.passages, [replace(m, entity_type="Disease") for m in d.mentions]) for d in docs[:2]], disease
    )
    mentions = [m for d in docs[:2] for m in d.mentions]
    types = ", ".join(sorted({m.entity_type for m in mentions}))
    for gold, index_flag, reason in [
        (
            nil,
            index,
            f"to calibrate against (2 documents, {len(mentions)} annotations without a concept id; types in the file: {types})",
        ),
        (
            disease,
            f"Chemical={index}",
            f"of entity type Chemical to calibrate against (2 documents, "
            f"{sum(not m.concept_ids for m in mentions)} annotations without a concept id; "
            f"types in the file: Disease)",
        ),
    ]:
        capsys.readouterr()
        assert cli.main(["calibrate-nil", "--model", model, "--index", index_flag, "--gold", str(gold)]) == 2
        assert capsys.readouterr().err == f"bioel calibrate-nil: error: --gold {gold}: no annotation with a concept id {reason}\n"


def test_calibrate_nil_refuses_when_no_linked_mention_is_right(chain, corpus, tmp_path, capsys):
    # a gold whose ids no linked mention has (another KB's vocabulary) scored F1 0 at every threshold, and the lowest
    # was printed as the calibrated one, with exit 0
    from pipelines import cli

    folder, docs = corpus
    model, index = chain
    gold = tmp_path / "other-ids.pubtator"
    write_pubtator(
        [
            Document(
                d.doc_id, d.passages, [replace(m, entity_type="Disease", concept_ids=("X1",), id_field="X1") for m in d.mentions]
            )
            for d in docs[:2]
        ],
        gold,
    )
    capsys.readouterr()
    assert cli.main(["calibrate-nil", "--model", model, "--index", f"Disease={index}", "--gold", str(gold)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bioel calibrate-nil: error: --gold {gold}: none of the ") and len(err.splitlines()) == 1
    assert f" mentions detected and linked with --index Disease={index} has a gold annotation's span and concept id" in err


def test_calibrate_nil_reads_bc5cdr_bioc_release_as_its_pubtator_release(chain, tmp_path, capsys):
    """calibrate-nil read PubTator only: a BioC gold failed on its first line. With --gold-format it is read as
    evaluate-e2e reads it, so the composite parts BC5CDR's BioC release states apart (CompositeRole
    IndividualMention) are no gold spans of their own: 3 more Disease gold annotations than its PubTator release."""
    from pipelines import cli

    model, index = chain
    corpora = ROOT / "tests" / "fixtures" / "corpora"
    out = {}
    for fmt, gold in (("pubtator", "bc5cdr_test_excerpt.pubtator"), ("bioc-xml", "bc5cdr_test_excerpt.bioc.xml")):
        assert (
            cli.main(
                [
                    "calibrate-nil",
                    "--model",
                    model,
                    "--index",
                    f"Disease={index}",
                    "--gold",
                    str(corpora / gold),
                    "--gold-format",
                    fmt,
                    "--json",
                    str(tmp_path / f"{fmt}.json"),
                ]
            )
            == 0
        )
        out[fmt] = json.loads((tmp_path / f"{fmt}.json").read_text())["thresholds"]
    assert out["bioc-xml"] == out["pubtator"] and out["pubtator"]["Disease"]["gold"] > 0


def test_calibrate_nil_counts_the_gold_as_evaluate_e2e_does(chain, corpus, tmp_path, capsys):
    """A gold that states a span twice (once with another id, once identically): calibrate-nil counted the span's
    gold once with both ids, evaluate-e2e counted each (span, ids) apart. Both now take the gold from
    e2e.gold_annotations: one annotation per span."""
    from pipelines import cli

    _, docs = corpus
    model, index = chain
    documents = [Document(d.doc_id, d.passages, [replace(m, entity_type="Disease") for m in d.mentions]) for d in docs[:2]]
    first = next(m for m in documents[0].mentions if m.concept_ids)
    documents[0].mentions += [replace(first, concept_ids=("D999999",), id_field="D999999"), first]
    gold = tmp_path / "duplicates.pubtator"
    write_pubtator(documents, gold)
    spans = {(d.doc_id, m.start, m.end) for d in documents for m in d.mentions if m.concept_ids}
    assert (
        cli.main(
            [
                "calibrate-nil",
                "--model",
                model,
                "--index",
                f"Disease={index}",
                "--gold",
                str(gold),
                "--json",
                str(tmp_path / "nil.json"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "nil.json").read_text())["thresholds"]["Disease"]["gold"] == len(spans)
    assert cli.main(["evaluate-e2e", "--gold", str(gold), "--pred", str(gold), "--json", str(tmp_path / "e2e.json")]) == 0
    scores = json.loads((tmp_path / "e2e.json").read_text())["strict"]
    assert scores["n_gold"] == len(spans) and scores["recall"] == 100.0


def test_a_reranker_links_every_mention_among_the_index_top_concepts_whatever_the_batching(chain, corpus, tmp_path, capsys):
    from bioel_core.linking.rerank import CrossEncoderReranker, RerankLinker
    from bioel_core.models import CrossEncoder

    folder, _ = corpus
    model, index = chain
    torch.manual_seed(0)
    reranker = str(CrossEncoder(Path(model), max_length=24).save(tmp_path / "reranker"))
    reranked = AnnotatorSpec(model=model, indexes=(("Disease", index),), reranker=reranker, rerank_depth=4)
    assert reranked.settings_sha256() != spec(chain).settings_sha256()  # a reranked state is another state
    manifest = link_corpus.run([str(folder / "a.pubtator")], "pubtator", str(tmp_path / "out"), reranked, pipeline_options([]))
    assert all(manifest["reconciliation"].values())
    rows = table(tmp_path / "out", "annotations")
    annotator = reranked.open()
    linker = annotator.targets["Disease"].linker
    assert isinstance(linker, RerankLinker) and isinstance(linker.reranker, CrossEncoderReranker)
    top = linker.candidates([linker.normalize(r["link_text"]) for r in rows])
    assert all(r["concept_id"] in {c.concept_ids[0] for c in pool} for r, pool in zip(rows, top))
    link_corpus.run(
        [str(folder / "a.pubtator")], "pubtator", str(tmp_path / "again"), reranked, pipeline_options([]), batch_size=3
    )
    assert table(tmp_path / "again", "annotations") == rows
    code, _ = link_cli(
        chain,
        capsys,
        "--input",
        folder / "a.pubtator",
        "--output",
        tmp_path / "cli",
        "--reranker",
        reranker,
        "--rerank-depth",
        "4",
        "--batch-size",
        "5",
    )
    assert code == 0 and table(tmp_path / "cli", "annotations") == rows
    code, err = link_cli(chain, capsys, "--input", folder / "a.pubtator", "--output", tmp_path / "x", "--reranker", model)
    assert code == 2 and "a transformer model; a reranker is a cross-encoder" in err


def test_scores_recorded_in_a_rerankers_card_change_no_linked_table(chain, corpus, tmp_path):
    # the settings digest inside each document's content_sha256 hashed the reranker folder's card.json, which
    # `bioel evaluate --record-in-card` rewrites: a re-run after an evaluation wrote another documents table, and
    # --incremental relinked every document
    from bioel_core.models import CrossEncoder
    from bioel_core.models.cards import CARD_JSON

    folder, _ = corpus
    model, index = chain
    torch.manual_seed(0)
    reranker = CrossEncoder(Path(model), max_length=24).save(tmp_path / "reranker")
    reranked = AnnotatorSpec(model=model, indexes=(("Disease", index),), reranker=str(reranker), rerank_depth=4)
    found = []
    for scores in ({}, {"ncbi-disease/dev": {"acc@1": 90.0}}):
        (reranker / CARD_JSON).write_text(json.dumps({"scores": scores}))
        link_corpus.run([str(folder / "a.pubtator")], "pubtator", str(tmp_path / "out"), reranked, pipeline_options([]))
        found.append(table_bytes(tmp_path / "out"))
    assert found[0] == found[1]


def test_an_ensemble_of_rerankers_links_among_the_index_top_concepts_whatever_the_batching(chain, corpus, tmp_path):
    from bioel_core.linking.rerank_ensemble import RerankerEnsemble, make_reranker_ensemble
    from bioel_core.models import CrossEncoder

    folder, _ = corpus
    model, index = chain
    members = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        members.append((CrossEncoder(Path(model), max_length=24).save(tmp_path / f"reranker{seed}"), 1.0 + seed))
    make_reranker_ensemble(members, 2.0, tmp_path / "ensemble")
    reranked = AnnotatorSpec(model=model, indexes=(("Disease", index),), reranker=str(tmp_path / "ensemble"), rerank_depth=4)
    link_corpus.run([str(folder / "a.pubtator")], "pubtator", str(tmp_path / "out"), reranked, pipeline_options([]))
    rows = table(tmp_path / "out", "annotations")
    linker = reranked.open().targets["Disease"].linker
    assert isinstance(linker.reranker, RerankerEnsemble) and all(m.reproducible for m in linker.reranker.members)
    top = linker.candidates([linker.normalize(r["link_text"]) for r in rows])
    assert rows and all(r["concept_id"] in {c.concept_ids[0] for c in pool} for r, pool in zip(rows, top))
    link_corpus.run(
        [str(folder / "a.pubtator")], "pubtator", str(tmp_path / "again"), reranked, pipeline_options([]), batch_size=3
    )
    assert table(tmp_path / "again", "annotations") == rows


def test_each_entity_type_links_with_its_own_model(chain, corpus, tmp_path, capsys):
    """`--model DIR Chemical=OTHER`: chemicals are embedded by the model their index was built with, diseases by the
    default one; each type's annotations are the ones a run with that type's model alone gives."""
    folder, _ = corpus
    model, index = chain
    other = str(TransformerEncoder(make_tiny_bert(tmp_path / "other-bert"), pooling="cls").save(tmp_path / "other"))
    embed_names.run(other, str(Path(index).parent / "kb"), str(tmp_path / "emb"), pipeline_options([]), num_shards=2)
    build_index.run(str(tmp_path / "emb"), str(tmp_path / "index"), pipeline_options([]), num_shards=2, spec=IndexSpec("flat"))
    other_index = str(tmp_path / "index")
    inputs = [str(folder / "a.pubtator"), str(folder / "b.pubtator")]

    def given(out, **kw):
        link_corpus.run(inputs, "pubtator", str(tmp_path / out), AnnotatorSpec(detect=False, **kw), pipeline_options([]))
        return table(tmp_path / out, "annotations")

    both = given("both", model=model, type_models=(("Chemical", other),), indexes=(("Disease", index), ("Chemical", other_index)))
    assert {r["entity_type"] for r in both if not r["nil"]} == {"Disease", "Chemical"}  # NCBI's types kept NIL, no index
    keep = ["doc_id", "start", "end", "concept_id", "score", "matched_name"]
    for entity_type, alone in (
        ("Disease", given("d", model=model, indexes=(("Disease", index),))),
        ("Chemical", given("c", model=other, indexes=(("Chemical", other_index),))),
    ):
        assert [{k: r[k] for k in keep} for r in both if r["entity_type"] == entity_type] == [
            {k: r[k] for k in keep} for r in alone if r["entity_type"] == entity_type
        ]
        assert {r["model_version"] for r in alone} != {r["model_version"] for r in both}  # both models make the version
    with pytest.raises(ValueError, match="^types.Chemical.model: .*pass that model$"):
        AnnotatorSpec(model=model, indexes=(("Disease", index), ("Chemical", other_index))).versions()
    with pytest.raises(ValueError, match=r"^types.Gene.index: required: its model is given; entity types \['Gene'\] have no"):
        AnnotatorSpec(model=model, indexes=(("Disease", index),), type_models=(("Gene", other),))
    code, _ = link_cli(
        chain,
        capsys,
        "--input",
        *inputs,
        "--output",
        tmp_path / "cli",
        "--mentions",
        "given",
        "--model",
        model,
        f"Chemical={other}",
        "--index",
        f"Disease={index}",
        f"Chemical={other_index}",
    )
    assert code == 0 and table(tmp_path / "cli", "annotations") == both


def test_a_generative_model_links_reproducibly_as_reranker_and_alone(chain, corpus, tmp_path):
    from bioel_core.linking.generative import GenerativeReranker
    from bioel_core.models import GenerativeModel
    from test_generative import GENERATIVE_VOCAB

    folder, _ = corpus
    model, index = chain
    torch.manual_seed(0)
    generative = str(
        GenerativeModel(make_tiny_bert(tmp_path / "gen-bert", GENERATIVE_VOCAB), max_length=24).save(tmp_path / "gen")
    )
    reranked = AnnotatorSpec(model=model, indexes=(("Disease", index),), reranker=generative, rerank_depth=3)
    link_corpus.run([str(folder / "a.pubtator")], "pubtator", str(tmp_path / "out"), reranked, pipeline_options([]))
    rows = table(tmp_path / "out", "annotations")
    linker = reranked.open().targets["Disease"].linker
    assert isinstance(linker.reranker, GenerativeReranker) and linker.reranker.reproducible
    top = linker.candidates([linker.normalize(r["link_text"]) for r in rows])
    assert rows and all(r["concept_id"] in {c.concept_ids[0] for c in pool} for r, pool in zip(rows, top))
    link_corpus.run(
        [str(folder / "a.pubtator")], "pubtator", str(tmp_path / "again"), reranked, pipeline_options([]), batch_size=3
    )
    assert table(tmp_path / "again", "annotations") == rows
    with pytest.raises(ValueError, match="has no \\[unused0\\] and \\[unused1\\] tokens"):
        GenerativeModel(make_tiny_bert(tmp_path / "plain-bert"))
    # whole-tree generative linking: every concept is one of the written names', the same whatever the batching
    spec_gen = AnnotatorSpec(model=model, indexes=(("", index),), generative=generative, detect=False)
    assert spec_gen.settings_sha256() != reranked.settings_sha256()
    link_corpus.run([str(folder / "a.pubtator")], "pubtator", str(tmp_path / "gen-out"), spec_gen, pipeline_options([]))
    written = table(tmp_path / "gen-out", "annotations")
    names = spec_gen.open().targets[""].linker.names
    assert written and all(r["matched_name"] in names.names for r in written if not r["nil"])
    assert all(0.0 < r["score"] <= 1.0 for r in written) and any(r["score"] < 1.0 for r in written)  # probabilities
    link_corpus.run(
        [str(folder / "a.pubtator")], "pubtator", str(tmp_path / "gen-again"), spec_gen, pipeline_options([]), batch_size=2
    )
    assert table(tmp_path / "gen-again", "annotations") == written
    with pytest.raises(ValueError, match="choose one"):
        AnnotatorSpec(model=model, indexes=(("Disease", index),), generative=generative, reranker=generative)
    with pytest.raises(ValueError, match=r"^types..nil_threshold: -0.5: with a generative model, scores are probabilities"):
        AnnotatorSpec(
            model=model, indexes=(("", index),), generative=generative, detect=False, nil_thresholds=(("", -0.5),)
        )  # a log-probability, the scale these scores had before
    with pytest.raises(ValueError, match="a transformer model; generative linking needs a generative model"):
        AnnotatorSpec(model=model, indexes=(("Disease", index),), generative=model)


def test_a_large_corpus_file_read_in_ranges_links_to_the_same_bytes(chain, corpus, tmp_path, monkeypatch):
    from bioel_core.kb import io as kb_io

    folder, _ = corpus
    inputs = [folder / "a.pubtator", folder / "b.pubtator"]
    whole = run(chain, inputs, tmp_path / "whole")
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 4000)  # each file in several ranges, cut between documents
    ranged = run(chain, inputs, tmp_path / "ranged")
    assert ranged["counts"] == whole["counts"] and all(ranged["reconciliation"].values())
    assert table_bytes(tmp_path / "ranged") == table_bytes(tmp_path / "whole")


def test_a_large_pubmed_xml_file_read_in_article_ranges_links_to_the_same_bytes(chain, tmp_path, monkeypatch):
    from bioel_core.kb import io as kb_io
    from conftest import FIXTURES

    sample = (FIXTURES / "pubmed" / "pubmed_damaged_sample.xml").read_bytes()  # a malformed and an unclosed article
    head, body = sample.split(b"<PubmedArticleSet>")
    records = body[: body.rindex(b"</PubmedArticleSet>")]
    path = tmp_path / "large.xml"
    path.write_bytes(head + b"<PubmedArticleSet>" + records * 10 + b"</PubmedArticleSet>\n")

    def linked(out):
        return link_corpus.run([str(path)], "pubmed-xml", str(out), spec(chain, True), pipeline_options([]))

    whole = linked(tmp_path / "whole")
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 3000)
    ranged = linked(tmp_path / "ranged")
    assert table(tmp_path / "whole", "dead_letter") and ranged["counts"] == whole["counts"]
    assert table_bytes(tmp_path / "ranged") == table_bytes(tmp_path / "whole")


def test_a_shard_without_documents_writes_no_empty_pubtator_part(chain, corpus, tmp_path):
    """Two documents over four shards leave shards with no document. Their PubTator part was an empty file, which
    every PubTator reader refuses ("empty file"): --single-file crashed merging the parts ("cannot merge a part
    that does not read back as documents"), and a link output given as PubTator --input dead-lettered each empty
    part. A job whose every document is dead-lettered hit the same crash instead of the "no rows" refusal."""
    from bioel_core.guards import EmptyOutputError

    _, docs = corpus
    two = tmp_path / "two.pubtator"
    with open(two, "w") as fh:
        write_pubtator(docs[:2], fh)
    manifest = run(chain, [two], tmp_path / "one", output_formats=["pubtator"], single_file=True, num_shards=4)
    assert manifest["counts"]["documents"]["linked"] == 2
    merged = data_root(tmp_path / "one") / "pubtator" / "linked.pubtator"
    assert [d.doc_id for d in read_pubtator(merged)] == sorted(d.doc_id for d in docs[:2])
    parts = run(chain, [two], tmp_path / "parts", output_formats=["pubtator"], num_shards=4)
    files = sorted((data_root(tmp_path / "parts") / "pubtator").iterdir())
    assert parts["outputs"]["pubtator"]["files"] == [f"pubtator/{f.name}" for f in files]
    assert 1 <= len(files) <= 2 and all(f.stat().st_size for f in files)
    again = link_corpus.run(
        [str(tmp_path / "parts")], "pubtator", str(tmp_path / "relinked"), spec(chain, detect=False), pipeline_options([])
    )
    assert again["counts"]["records"]["dead_lettered"] == 0 and again["counts"]["documents"]["linked"] == 2
    bad = tmp_path / "bad.pubtator"
    bad.write_text("1|t|Gout.\n1\t0\t9\tnot there\tDisease\tD1\n\n")
    with pytest.raises(EmptyOutputError, match="no rows"):
        run(chain, [bad], tmp_path / "none", output_formats=["pubtator"], single_file=True, num_shards=2)


def test_an_opened_annotator_leaves_the_collector_on_and_its_kb_tables_out_of_it(chain):
    # built with the collector paused, then frozen (bioel_core.heap): a UMLS-size KB is not walked by every collection
    gc.unfreeze()
    try:
        concept_ids = spec(chain).open().targets["Disease"].linker.names.concept_ids
        assert gc.isenabled() and gc.is_tracked(concept_ids) and all(o is not concept_ids for o in gc.get_objects())
    finally:
        gc.unfreeze()


def test_the_spec_names_its_folders_absolutely_for_workers_started_elsewhere(chain, corpus, tmp_path, monkeypatch):
    # a relative --index/--model reached the workers as given: one started in another folder read it against its own
    model, index = (Path(p) for p in chain)
    monkeypatch.chdir(index.parent)
    relative = AnnotatorSpec(
        model=os.path.relpath(model), indexes=(("Disease", index.name),), stop_lists=(("Disease", os.path.relpath(STOP_LIST)),)
    )
    assert relative.model == str(model) and relative.indexes == (("Disease", str(index)),)
    assert relative.stop_lists == (("Disease", str(STOP_LIST)),)
    monkeypatch.chdir(tmp_path)  # where a worker may start
    docs = corpus[1][:3]
    assert relative.open().annotate(docs) == spec(chain, stop_lists=(("Disease", str(STOP_LIST)),)).open().annotate(docs)
