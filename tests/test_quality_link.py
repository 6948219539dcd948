"""The quality suite of a `bioel link` output, on hand-written link tables whose annotator points at a real
ingest-kb output through hand-written embeddings and index manifests (all the KB lookup reads of them)."""

import copy
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bioel_core.corpora.records import Document, Passage
from bioel_core.embeddings import manifest_sha256
from bioel_core.normalize import Normalizer
from bioel_core.quality import format_summary, report
from bioel_core.quality.report import CHECKS
from bioel_core.tables import read_manifest, stable_shard
from conftest import FIXTURES
from pipelines import ingest_kb
from pipelines.options import pipeline_options
from schemas import ANNOTATIONS_SCHEMA, DEAD_LETTER_SCHEMA, DOCUMENTS_SCHEMA, SCHEMA_VERSION

MODEL = "model-fingerprint"
PASSAGES = {
    "101": [
        ("title", 0, "Ataxia telangiectasia in two siblings."),
        ("abstract", 39, "Louis-Bar syndrome (AT) was confirmed; a frobnication was also seen."),
    ],
    "102": [("title", 0, "Selective tooth agenesis."), ("abstract", 30, "Tooth agenesis, selective, 6 in one family.")],
}
# (doc_id, mention, concept_id or None for NIL, score); a score of 1 is an exact-name match
MENTIONS = [
    ("101", "Ataxia telangiectasia", "D001260", 1.0),
    ("101", "Louis-Bar syndrome", "D001260", 0.93),
    ("101", "frobnication", None, 0.21),
    ("102", "Selective tooth agenesis", "C567755", 0.88),
    ("102", "Tooth agenesis, selective, 6", "C567755", 1.0),
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    """An index folder whose manifest chain (index -> embeddings -> names) ends at a real ingest-kb output."""
    root = tmp_path_factory.mktemp("kb")
    kb = root / "medic"
    ingest_kb.run("medic-biosyn", [str(FIXTURES / "biosyn/medic_raw.txt")], str(kb), pipeline_options([]), num_shards=1)
    emb, index = root / "emb", root / "index"
    emb.mkdir()
    index.mkdir()
    (emb / "manifest.json").write_text(
        json.dumps(
            {
                "complete": True,
                "pipeline": "embed",
                "schema_version": SCHEMA_VERSION,
                "names": {"path": str(kb), "manifest_sha256": manifest_sha256(kb)},
            }
        )
    )
    (index / "manifest.json").write_text(
        json.dumps(
            {
                "complete": True,
                "pipeline": "build-index",
                "schema_version": SCHEMA_VERSION,
                "embeddings": {"path": str(emb), "manifest_sha256": manifest_sha256(emb)},
                "model": {"fingerprint": MODEL},
            }
        )
    )
    return index, manifest_sha256(kb)


def good_rows(kb_version):
    """(annotations, documents) of a correct link output: two annotated documents and a tombstone."""
    texts = {d: Document(d, [Passage(*p) for p in ps]).text for d, ps in PASSAGES.items()}
    annotations = []
    for doc_id, mention, concept, score in MENTIONS:
        start = texts[doc_id].index(mention)
        annotations.append(
            {
                "doc_id": doc_id,
                "start": start,
                "end": start + len(mention),
                "mention": mention,
                "link_text": mention,
                "entity_type": "Disease",
                "concept_id": concept,
                "vocabulary": None if concept is None else "MESH",
                "alt_ids": [],
                "matched_name": Normalizer()(mention) if score == 1.0 else "a nearest name",
                "score": score,
                "nil": concept is None,
                "model_version": MODEL,
                "kb_version": kb_version,
            }
        )
    documents = [
        {
            "doc_id": d,
            "content_sha256": "0" * 64,
            "status": "annotated",
            "mentions": sum(m[0] == d for m in MENTIONS),
            "passages": [{"kind": k, "offset": o, "text": t} for k, o, t in ps],
            "model_version": MODEL,
            "kb_version": kb_version,
        }
        for d, ps in PASSAGES.items()
    ]
    documents.append(
        {
            "doc_id": "103",
            "content_sha256": "",
            "status": "deleted",
            "mentions": 0,
            "passages": [],
            "model_version": MODEL,
            "kb_version": kb_version,
        }
    )
    return annotations, documents


def write_link(out, index, kb_version, annotations, documents, carried=0, types=("Disease",), stage=None):
    for table in ("annotations", "documents", "dead_letter"):
        (out / table).mkdir(parents=True)
    shard = "part-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(annotations, schema=ANNOTATIONS_SCHEMA), out / "annotations" / shard)
    pq.write_table(pa.Table.from_pylist(documents, schema=DOCUMENTS_SCHEMA), out / "documents" / shard)
    pq.write_table(DEAD_LETTER_SCHEMA.empty_table(), out / "dead_letter" / shard)
    annotator = {
        "model": None,
        "indexes": [[t, str(index)] for t in types],
        "detect": True,
        "nil_thresholds": [],
        "reranker": None,
        "generative": None,
        **(stage or {}),
    }
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "pipeline": "link",
                "complete": True,
                "annotator": annotator,
                "model_version": MODEL,
                "kb_version": kb_version,
                "counts": {
                    "documents": {
                        "linked": 2,
                        "unchanged": 0,
                        "deleted": 1,
                        "dead_lettered": 0,
                        "superseded": 0,
                        "carried": carried,
                    }
                },
            }
        )
    )
    return out


def failures(summary):
    return {(c["table"], c["column"], c["expectation"]): c for c in summary["checks"] if not c["success"]}


def test_a_good_link_output_passes(index_dir, tmp_path):
    index, kb_version = index_dir
    summary = report(write_link(tmp_path / "link", index, kb_version, *good_rows(kb_version)))

    assert failures(summary) == {}
    assert summary["passed"] and summary["pipeline"] == "link"
    # which published tables were checked: a later run's report replaces this one
    kb = index.parent / "medic"
    generation = read_manifest(kb)["generation"]
    assert generation.startswith("gen-") and report(kb, output_dir=tmp_path / "kb-quality")["generation"] == generation
    assert summary["stats"] == {
        "documents": 3,
        "annotated": 2,
        "tombstones": 1,
        "mentions": 5,
        "nil_share": 0.2,
        "mentions_per_entity_type": {"Disease": 5},
        "mentions_per_document": {"min": 2, "median": 2, "p95": 2, "max": 3},
        "kbs": {"Disease": str(index.parent / "medic")},
        "nil_share_per_entity_type": {"Disease": 0.2},
        # scores 0.21 (NIL), 0.88 (float32, a hair below), 0.93, 1.0 twice in 25 bins of 0.04 over [0, 1]
        "score_histogram_per_entity_type": {
            "Disease": {
                "edges": [pytest.approx(0.04 * i) for i in range(26)],
                "counts": [0, 0, 0, 0, 0, 1] + [0] * 15 + [1, 0, 1, 2],
            }
        },
        "mentions_by_link_kind": {"exact": {"Disease": 2}, "model": {"Disease": 2}, "NIL": {"Disease": 1}},
        "mentions_per_document_histogram": {"edges": [1.5, 2.5, 3.5], "counts": [1, 1]},
        # ties in mentions by concept id; names from the KB's concepts table
        "top_concepts": [
            {"entity_type": "Disease", "concept_id": "C567755", "name": "Tooth Agenesis, Selective, 6", "mentions": 2},
            {"entity_type": "Disease", "concept_id": "D001260", "name": "Ataxia Telangiectasia", "mentions": 2},
        ],
        "dead_letters": 0,
        "dead_letter_reasons": [],
        "dead_letter_kinds": [],
        "dead_letter_sample": [],
    }
    text = format_summary(summary)
    assert "quality PASSED" in text
    assert "3 documents (2 annotated, 1 tombstones), 5 mentions, 20.0% NIL; by type: Disease 5" in text


def _set(table, i, **changes):
    def tamper(annotations, documents):
        rows = annotations if table == "annotations" else documents
        rows[i].update(changes)

    return tamper


def _past_text(annotations, documents):
    annotations[2].update(start=200, end=212)


def _duplicate_document(annotations, documents):
    documents.append(copy.deepcopy(documents[1]))


@pytest.mark.parametrize(
    "tamper, failed, observed",
    [
        pytest.param(
            _past_text,
            ("annotations", "outside_text_doc_id", "expect_column_values_to_be_null"),
            ["101"],
            id="offset-past-the-text",
        ),
        pytest.param(
            _set("annotations", 1, mention="Louis-Bar Syndrome"),
            ("annotations", "mention_mismatch_doc_id", "expect_column_values_to_be_null"),
            ["101"],
            id="slice-differs-from-mention",
        ),
        pytest.param(
            _set("annotations", 3, concept_id="D999999"),
            ("annotations", "unknown_concept_id", "expect_column_values_to_be_null"),
            ["D999999"],
            id="unknown-concept-id",
        ),
        pytest.param(
            _set("annotations", 2, concept_id="D001260"),
            ("annotations", "nil_concept_id", "expect_column_values_to_be_null"),
            ["D001260"],
            id="nil-row-with-a-concept",
        ),
        pytest.param(
            _set("annotations", 0, concept_id=None),
            ("annotations", "unlinked_doc_id", "expect_column_values_to_be_null"),
            ["101"],
            id="linked-row-without-a-concept",
        ),
        pytest.param(
            _duplicate_document,
            ("documents", "duplicate_doc_id", "expect_column_values_to_be_null"),
            ["102", "102"],
            id="duplicate-doc-id",
        ),
        pytest.param(
            _set("documents", 0, mentions=4),
            ("documents", "mentions_mismatch_doc_id", "expect_column_values_to_be_null"),
            ["101"],
            id="mentions-count-off",
        ),
        pytest.param(
            _set("documents", 2, passages=[{"kind": "title", "offset": 0, "text": "Withdrawn."}]),
            ("documents", "tombstone_content_doc_id", "expect_column_values_to_be_null"),
            ["103"],
            id="tombstone-with-passages",
        ),
    ],
)
def test_each_tampering_fails_its_one_critical_check(index_dir, tmp_path, tamper, failed, observed):
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    tamper(annotations, documents)
    summary = report(write_link(tmp_path / "link", index, kb_version, annotations, documents))

    found = failures(summary)
    assert list(found) == [failed]
    assert found[failed]["severity"] == "critical" and found[failed]["observed"] == pytest.approx(observed)
    assert not summary["passed"]


@pytest.mark.parametrize(
    "stage, scores, failing",
    [
        pytest.param(None, [1.0, 0.93, -1.0], [], id="cosines"),
        pytest.param(None, [1.0, 35.2, -2.5], [35.2, -2.5], id="no-cosine"),
        pytest.param({"reranker": "/models/disease-reranker"}, [54.9, 21.5, -3.0], [], id="reranked"),
        pytest.param({"reranker": "/models/disease-reranker"}, [54.9, float("inf"), -3.0], [float("inf")], id="reranked-inf"),
        pytest.param({"generative": "/models/generative-disease"}, [1.0, 0.077, 0.74], [], id="probabilities"),
        pytest.param({"generative": "/models/generative-disease"}, [1.0, -2.57, 0.74], [-2.57], id="log-probabilities"),
        pytest.param({"generative": "/models/generative-disease"}, [1.0, 1.5, 0.74], [1.5], id="above-an-exact-name"),
    ],
)
def test_the_score_range_is_the_linking_stages(index_dir, tmp_path, stage, scores, failing):
    """A reranker's fused scores are not cosines: checked against [-1, 1], every `bioel link --reranker` run failed its
    critical check and published nothing. The generative linker's are probabilities in [0, 1]."""
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    for row, score in zip(annotations[:3], scores):
        row["score"] = score
    summary = report(write_link(tmp_path / "link", index, kb_version, annotations, documents, stage=stage))

    key = ("annotations", "score", "expect_column_values_to_be_between")
    assert summary["passed"] == (not failing)
    assert (failures(summary)[key]["observed"] if failing else list(failures(summary))) == pytest.approx(failing)


def write_two_shards(out, annotations, documents, misplaced=()):
    """The link output's tables as two shards, each row in its doc_id's shard as `bioel link` writes them (documents
    101 and the tombstone 103 in one, 102 in the other); the annotations at the indexes `misplaced` in the other."""
    rows_of = {"annotations": annotations, "documents": documents}
    assert [stable_shard(d, 2) for d in ("101", "102", "103")] == [0, 1, 0]
    for table, schema in (("annotations", ANNOTATIONS_SCHEMA), ("documents", DOCUMENTS_SCHEMA)):
        (out / table / "part-00000-of-00001.parquet").unlink()
        for shard in range(2):
            rows = [
                r
                for i, r in enumerate(rows_of[table])
                if (stable_shard(r["doc_id"], 2) == shard) != (table == "annotations" and i in misplaced)
            ]
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / table / f"part-{shard:05d}-of-00002.parquet")
    return out


def test_an_annotation_in_another_shard_than_its_document_fails(index_dir, tmp_path):
    """Its span is checked against the texts of its own shard only, and its document's mention count against its own
    shard's annotations only (memory holds one shard's): in another shard it went unchecked."""
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    annotations[0] = {**annotations[0], "start": 200, "end": 212}  # past its text too, which no check could see
    out = write_two_shards(
        write_link(tmp_path / "link", index, kb_version, annotations, documents), annotations, documents, misplaced={0}
    )
    summary = report(out)

    found = failures(summary)
    assert list(found) == [
        ("annotations", "other_shard_doc_id", "expect_column_values_to_be_null"),
        ("documents", "mentions_mismatch_doc_id", "expect_column_values_to_be_null"),
    ]
    assert [check["observed"] for check in found.values()] == [["101"], ["101"]] and not summary["passed"]


def write_shards(
    out,
    annotations,
    documents,
    names=("part-00000-of-00002.parquet", "part-00001-of-00002.parquet"),
    shard_of=lambda doc_id: stable_shard(doc_id, 2),
):
    """The link output's tables as shard files `names`, each row in the file `shard_of(its doc_id)` says (a list:
    a row in each of those files)."""
    rows_of = {"annotations": annotations, "documents": documents}
    for table, schema in (("annotations", ANNOTATIONS_SCHEMA), ("documents", DOCUMENTS_SCHEMA)):
        (out / table / "part-00000-of-00001.parquet").unlink()
        for shard, name in enumerate(names):
            rows = [
                r
                for r in rows_of[table]
                if shard in ([shard_of(r["doc_id"])] if isinstance(shard_of(r["doc_id"]), int) else shard_of(r["doc_id"]))
            ]
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / table / name)
    return out


@pytest.mark.parametrize(
    "names, shard_of, expected",
    [
        pytest.param(
            None,
            lambda d: 0,
            {("documents", "misplaced_doc_id"): ["102"], ("annotations", "other_shard_doc_id"): ["102", "102"]},
            id="a-document-and-its-annotations-in-another-shard",
        ),
        pytest.param(
            None,
            lambda d: [0, 1] if d == "102" else stable_shard(d, 2),
            {("documents", "misplaced_doc_id"): ["102"], ("annotations", "other_shard_doc_id"): ["102", "102"]},
            id="a-document-and-its-annotations-in-two-shards",
        ),
        pytest.param(
            ("links.parquet",),
            lambda d: 0,
            {
                ("documents", "misplaced_doc_id"): ["101", "102", "103"],
                ("annotations", "other_shard_doc_id"): ["101", "101", "101", "102", "102"],
            },
            id="a-file-whose-name-says-no-shard",
        ),
    ],
)
def test_every_row_is_checked_to_lie_in_its_doc_ids_shard(index_dir, tmp_path, names, shard_of, expected):
    """The checks hold one shard at a time, so each fact is checked inside a shard: that needs every row in the shard
    its doc_id gives it (`stable_shard`, as `bioel link` writes), which makes a doc_id unique in its shard unique in
    the output. A row elsewhere is a critical failure, listed by its doc_id."""
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    out = write_link(tmp_path / "link", index, kb_version, annotations, documents)
    summary = report(write_shards(out, annotations, documents, **({"names": names} if names else {}), shard_of=shard_of))

    found = failures(summary)
    assert {(table, column): c["observed"] for (table, column, _), c in found.items()} == expected
    assert {c["severity"] for c in found.values()} == {"critical"} and not summary["passed"]


@pytest.mark.parametrize("batch_rows", [1, 2])
def test_checks_a_shard_and_a_batch_at_a_time_find_what_one_pass_finds(index_dir, tmp_path, monkeypatch, batch_rows):
    """The link checks read a shard's document texts and a batch of its annotations at a time (a PubMed-scale output
    does not fit in memory) and merge: the same failures, counts, values and figures as one frame per table."""
    from bioel_core.quality import frames

    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    annotations[1] = {**annotations[1], "mention": "Louis-Bar syndrom"}  # not what its span says
    annotations[3] = {**annotations[3], "concept_id": "D999999"}  # not in the KB
    annotations.append({**annotations[0], "doc_id": "103"})  # an annotation of a tombstone
    documents[1] = {**documents[1], "mentions": 3}  # a count that is off
    out = write_two_shards(write_link(tmp_path / "link", index, kb_version, annotations, documents), annotations, documents)
    whole = report(out, tmp_path / "whole")
    monkeypatch.setattr(frames, "BATCH_ROWS", batch_rows)
    batched = report(out, tmp_path / "batched")

    assert set(failures(whole)) == {
        ("annotations", "mention_mismatch_doc_id", "expect_column_values_to_be_null"),
        ("annotations", "unknown_concept_id", "expect_column_values_to_be_null"),
        ("annotations", "unannotated_doc_id", "expect_column_values_to_be_null"),
        ("documents", "mentions_mismatch_doc_id", "expect_column_values_to_be_null"),
        ("documents", "tombstone_content_doc_id", "expect_column_values_to_be_null"),
    }
    assert batched["checks"] == whole["checks"] and batched["stats"] == whole["stats"]
    assert list(batched["stats"]) == list(whole["stats"]) and whole["stats"]["mentions"] == 6


def test_too_many_nils_is_a_warning_only(index_dir, tmp_path):
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    for row in annotations[:3]:
        row.update(concept_id=None, nil=True, score=0.1)
    summary = report(write_link(tmp_path / "link", index, kb_version, annotations, documents))

    assert list(failures(summary)) == [("annotations", "nil_mention", "expect_column_values_to_be_null")]
    assert summary["warnings"] == 1 and summary["critical_failures"] == 0 and summary["passed"]
    assert summary["stats"]["nil_share"] == 0.6
    # the limit reaches the suite through the report's dispatcher
    suites, _, _ = CHECKS["link"].build(tmp_path / "link", read_manifest(tmp_path / "link"), max_nil_share=0.7)
    nil_check = next(e for e in suites["annotations"].expectations if e.column == "nil_mention")
    assert nil_check.mostly == pytest.approx(0.3)


def test_an_annotation_of_a_tombstone_fails_on_both_tables(index_dir, tmp_path):
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    annotations.append({**annotations[0], "doc_id": "103"})
    summary = report(write_link(tmp_path / "link", index, kb_version, annotations, documents))

    assert {k: c["observed"] for k, c in failures(summary).items()} == {
        ("annotations", "unannotated_doc_id", "expect_column_values_to_be_null"): ["103"],
        ("documents", "tombstone_content_doc_id", "expect_column_values_to_be_null"): ["103"],
        ("documents", "mentions_mismatch_doc_id", "expect_column_values_to_be_null"): ["103"],
    }


@pytest.mark.parametrize("carried, severity", [(0, "critical"), (1, "warning")])
def test_rows_of_another_model_are_critical_unless_documents_were_carried(index_dir, tmp_path, carried, severity):
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    documents[1]["model_version"] = "older-model"
    for row in annotations[3:]:
        row["model_version"] = "older-model"
    summary = report(write_link(tmp_path / "link", index, kb_version, annotations, documents, carried=carried))

    found = failures(summary)
    assert set(found) == {
        ("annotations", "version_mismatch_doc_id", "expect_column_values_to_be_null"),
        ("documents", "version_mismatch_doc_id", "expect_column_values_to_be_null"),
    }
    assert {c["severity"] for c in found.values()} == {severity}
    assert {tuple(c["observed"]) for c in found.values()} == {("102", "102"), ("102",)}


def test_a_type_without_an_index_is_a_warning_kept_nil_critical_linked_and_fine_with_an_any_type_index(index_dir, tmp_path):
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    annotations[3]["entity_type"] = "Chemical"

    typed = report(write_link(tmp_path / "typed", index, kb_version, annotations, documents))  # linked, with no KB
    assert {k: (c["severity"], c["observed"]) for k, c in failures(typed).items()} == {
        ("annotations", "entity_type", "expect_column_values_to_be_in_set"): ("warning", ["Chemical"]),
        ("annotations", "unindexed_linked_doc_id", "expect_column_values_to_be_null"): ("critical", ["102"]),
    }
    # a given mention of a type without an index, as `bioel link` keeps it: NIL, no KB version
    kept = [
        {**r, "concept_id": None, "vocabulary": None, "matched_name": None, "score": 0.0, "nil": True, "kb_version": ""}
        if r["entity_type"] == "Chemical"
        else r
        for r in annotations
    ]
    nil = report(write_link(tmp_path / "kept", index, kb_version, kept, documents))
    assert {k: (c["severity"], c["observed"]) for k, c in failures(nil).items()} == {
        ("annotations", "entity_type", "expect_column_values_to_be_in_set"): ("warning", ["Chemical"])
    }
    assert nil["passed"] and nil["stats"]["nil_share_per_entity_type"] == {"Chemical": 1.0, "Disease": 0.25}

    annotations[3]["concept_id"] = "D999999"  # the Chemical row, looked up in the KB of the '' index
    any_type = report(write_link(tmp_path / "any", index, kb_version, annotations, documents, types=("Disease", "")))
    assert {k: c["observed"] for k, c in failures(any_type).items()} == {
        ("annotations", "unknown_concept_id", "expect_column_values_to_be_null"): ["D999999"]
    }


def test_the_link_checks_hold_nothing_per_annotation(index_dir, tmp_path, monkeypatch):
    """A PubMed-scale output has tens of millions of documents and hundreds of millions of annotations: the checks read
    both tables shard by shard and batch by batch (never a whole table, not even one column of it) and keep figures
    whose size does not grow with them (score histograms, a tally of annotations per document)."""
    from bioel_core.quality import annotation_tables, frames

    index, kb_version = index_dir
    out = write_link(tmp_path / "link", index, kb_version, *good_rows(kb_version))
    whole = report(out, tmp_path / "whole")
    read_table = annotation_tables.read_table

    def no_whole_link_table(output_dir, table, *args, **kwargs):
        assert table not in ("annotations", "documents"), f"the {table} table read whole"
        return read_table(output_dir, table, *args, **kwargs)

    monkeypatch.setattr(annotation_tables, "read_table", no_whole_link_table)
    monkeypatch.setattr(frames, "BATCH_ROWS", 1)
    tables = annotation_tables.LinkTables(out, read_manifest(out))
    for _ in tables.frames():
        pass
    figures = tables.figures
    assert [len(c) for c in figures.score_counts.values()] == [frames.HISTOGRAM_BINS]
    assert figures.mentions_per_document.counts == {3: 1, 2: 1}  # the two annotated documents' 3 and 2 mentions
    assert report(out, tmp_path / "batched")["stats"] == whole["stats"]
