"""Checks of a link output: every annotation's span lies in its document's text and says its mention, its
concept exists in the KB of its entity type, and the documents table counts the annotations it holds.

As in frames.py, the cross-table facts are computed here with pandas, once, into plain derived columns: such
a column holds the row's doc_id (or concept id) where the fact fails and null where it holds, so a "to be null"
expectation lists the offending ids without a value set of every id inside the suite.

Versions: documents linked or found unchanged this run carry the manifest's model and KB versions, but an
incremental run carries documents absent from its inputs forward as they were, under the versions of the run
that linked them. So a version mismatch is critical only when the manifest counts no carried documents.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import great_expectations as gx
import great_expectations.expectations as gxe
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bioel_core.corpora.records import Document, Passage
from bioel_core.linking.annotate import AnnotatorSpec
from bioel_core.names import table_normalizer
from bioel_core.outputs.fs import LOCAL, FileSystem
from bioel_core.outputs.layout import shard_of_name
from bioel_core.quality import frames as table_frames
from bioel_core.quality.frames import Tally, count_histogram, dead_letter_stats, distribution, histogram, read_dead_letters
from bioel_core.quality.kb_tables import (
    CRITICAL,
    WARNING,
    _tag,
    dead_letter_suite,
    rows_from_input,
    unread_files,
    unread_files_suite,
)
from bioel_core.tables import file_batches, read_manifest, read_table, stable_shard, table_files
from schemas import TABLE_SCHEMAS

ANNOTATION_COLUMNS = [
    "doc_id",
    "start",
    "end",
    "mention",
    "link_text",
    "entity_type",
    "concept_id",
    "matched_name",
    "score",
    "nil",
    "model_version",
    "kb_version",
]
DOCUMENT_COLUMNS = ["doc_id", "status", "mentions", "passages", "model_version", "kb_version"]
STATUSES = ["annotated", "deleted"]
SCORE_TOLERANCE = 1e-6  # cosine scores in float32: an exact match may come out a hair above 1
FLOAT32_MAX = 3.4028234663852886e38  # a bound every finite float32 score keeps and an infinite one does not
ANY_TYPE = ""  # the index of type '' links mentions of every type without an index of their own
LINK_KINDS = ("exact", "model", "NIL")
TOP_CONCEPTS = 15


def kb_sources(annotator: dict, fs: FileSystem = LOCAL) -> dict[str, dict]:
    """Per entity type of a link manifest's "annotator": its names folder ("names") and KB version ("kb_version"),
    followed through the index -> embeddings -> names manifests the way the linker followed them."""
    return AnnotatorSpec(model=annotator["model"], indexes=tuple(tuple(p) for p in annotator["indexes"]))._sources(fs)


def preferred_names(names_dir: str | Path, fs: FileSystem = LOCAL) -> pd.Series:
    """concept_id -> preferred name, for the KB whose names folder (an ingest-kb output) is `names_dir`."""
    concepts = read_table(names_dir, "concepts", ["concept_id", "preferred_name"], fs).to_pandas()
    return concepts.drop_duplicates("concept_id").set_index("concept_id")["preferred_name"]


def link_kinds(a: pd.DataFrame, kb: pd.Series, normalizers: dict) -> pd.Series:
    """Per annotation: "NIL"; "exact" when the name it linked to is its link text after the KB's normalization
    (the linkers' exact-name path, score 1); else "model" (a nearest name by the encoder). `normalizers`: per entity
    type of the sources, its KB's normalizer."""
    query = [normalizers[k](text) if isinstance(k, str) else None for k, text in zip(kb, a["link_text"])]
    exact = pd.Series(query, index=a.index, dtype=object).eq(a["matched_name"])
    return pd.Series("model", index=a.index).mask(exact, "exact").mask(a["nil"], "NIL")


def document_text(doc_id: str, passages) -> str | None:
    """The text the offsets point into, built as the linker built it; None when passages overlap."""
    try:
        return Document(doc_id, [Passage(p["kind"], p["offset"], p["text"]) for p in passages]).text
    except ValueError:
        return None


def _kb_of(entity_type: str, sources: dict) -> str | None:
    return entity_type if entity_type in sources else ANY_TYPE if ANY_TYPE in sources else None


class LinkTables:
    """A link output's documents and annotations a shard and a batch of rows at a time (`frames`), each row with its
    derived columns, and the report's figures accumulated as the annotations are read (`figures`, complete once
    `frames` has been read). Both tables are sharded by doc_id (`stable_shard`, the shard's index and count in its file
    name), so every fact is checked inside one shard: a row outside its doc_id's shard is a failed check, a shard's
    documents are checked against its own annotations (their counts), its annotations against its own documents
    (their texts), and a doc_id unique in its shard is unique in the output. Memory holds one shard's document ids and
    texts; nothing per annotation, nothing for the whole output."""

    def __init__(self, link_dir: str | Path, manifest: dict, fs: FileSystem = LOCAL):
        self.link_dir, self.manifest, self.fs, self.batch_rows = link_dir, manifest, fs, table_frames.BATCH_ROWS
        # a document row carries its text (an abstract: ~1.5 KB, read into Python twice), ten annotation rows' worth
        self.document_rows = max(1, self.batch_rows // 10)
        self.sources = kb_sources(manifest["annotator"], fs)
        self.names_by_kb = {source["names"]: preferred_names(source["names"], fs) for source in self.sources.values()}
        self.normalizers = {t: table_normalizer(read_manifest(s["names"], fs), s["names"]) for t, s in self.sources.items()}
        self.shards = self._shards()  # listed once: on an object store each listing is a request
        self.figures = LinkFigures(score_bounds([f for _, f, _ in self.shards if f], self.batch_rows, fs))
        self.statuses = Counter()  # documents by status, as they are read

    def _doc_id_counts(self, path: Path | str | None, table: str):
        """Rows per doc_id of one shard file of `table` (Arrow value counts)."""
        doc_ids = [b.column(0) for b in file_batches(path, table, ["doc_id"], self.batch_rows, self.fs)] if path else []
        return pc.value_counts(pa.chunked_array(doc_ids, type=TABLE_SCHEMAS[table].field("doc_id").type))

    def _shards(self) -> list[tuple[Path | str | None, Path | str | None, tuple[int, int] | None]]:
        """(documents file, annotations file, (index, num_shards) from the name) of each shard, paired by file name."""
        documents = {os.path.basename(f): f for f in table_files(self.link_dir, "documents", self.fs)}
        annotations = {os.path.basename(f): f for f in table_files(self.link_dir, "annotations", self.fs)}
        return [
            (documents.get(name), annotations.get(name), shard_of_name(name))
            for name in sorted(documents.keys() | annotations.keys())
        ]

    def frames(self) -> Iterator[tuple[str, pd.DataFrame]]:
        """("documents", frame) and ("annotations", frame) pairs, shard by shard, a batch of rows each: a shard's
        documents (their texts built once, for both tables' checks) before its annotations."""
        read = set()
        for documents_file, annotations_file, shard in self.shards:
            text_of: dict[str, str | None] = {}
            counted = self._doc_id_counts(annotations_file, "annotations")
            rows_per_id = self._doc_id_counts(documents_file, "documents")
            for batch in (
                file_batches(documents_file, "documents", DOCUMENT_COLUMNS, self.document_rows, self.fs) if documents_file else ()
            ):
                d = batch.to_pandas()
                texts = pd.Series([document_text(i, p) for i, p in zip(d["doc_id"], d["passages"])], index=d.index, dtype=object)
                for doc_id, status, text in zip(d["doc_id"], d["status"], texts):
                    if status == "annotated":
                        text_of.setdefault(doc_id, text)  # a duplicated doc_id is its own failed check; its first row stands
                read.add("documents")
                yield "documents", self._documents(batch, d, texts, counted, rows_per_id, shard)
            for batch in (
                file_batches(annotations_file, "annotations", ANNOTATION_COLUMNS, self.batch_rows, self.fs)
                if annotations_file
                else ()
            ):
                read.add("annotations")
                yield "annotations", self._annotations(batch, text_of, shard)
        if "documents" not in read:
            empty = TABLE_SCHEMAS["documents"].empty_table().select(DOCUMENT_COLUMNS)
            none = self._doc_id_counts(None, "documents")
            yield "documents", self._documents(empty, empty.to_pandas(), pd.Series([], dtype=object), none, none, (0, 1))
        if "annotations" not in read:
            yield (
                "annotations",
                self._annotations(TABLE_SCHEMAS["annotations"].empty_table().select(ANNOTATION_COLUMNS), {}, (0, 1)),
            )

    def _annotations(self, batch, text_of: dict, shard: tuple[int, int] | None) -> pd.DataFrame:
        """`text_of`: the texts of the shard's annotated documents, by doc_id."""
        a, sources = batch.to_pandas(), self.sources
        a["span_length"] = a["end"] - a["start"]
        outside = outside_shard(a["doc_id"], shard)
        a["other_shard_doc_id"] = a["doc_id"].where(outside)
        # in its shard, the document must be there, annotated (not missing, not a tombstone)
        a["unannotated_doc_id"] = a["doc_id"].where(~outside & ~a["doc_id"].isin(text_of.keys()))
        text = a["doc_id"].map(text_of)
        has_text = text.notna()
        length = text.map(len, na_action="ignore").astype("float64")
        a["outside_text_doc_id"] = a["doc_id"].where(has_text & (a["end"] > length))
        in_text = has_text & (a["start"] >= 0) & (a["span_length"] > 0) & (a["end"] <= length)
        sliced = [t[s:e] if ok else m for t, s, e, m, ok in zip(text, a["start"], a["end"], a["mention"], in_text)]
        a["mention_mismatch_doc_id"] = a["doc_id"].where(pd.Series(sliced, index=a.index) != a["mention"])
        a["nil_concept_id"] = a["concept_id"].where(a["nil"])
        a["unlinked_doc_id"] = a["doc_id"].where(~a["nil"] & a["concept_id"].isna())
        kb = a["entity_type"].map({t: _kb_of(t, sources) for t in a["entity_type"].unique()})
        known = pd.Series(False, index=a.index)
        a["preferred_name"] = pd.Series(None, index=a.index, dtype=object)
        for entity_type, source in sources.items():
            mine = kb == entity_type
            known |= mine & a["concept_id"].isin(self.names_by_kb[source["names"]].index)
            a.loc[mine, "preferred_name"] = a.loc[mine, "concept_id"].map(self.names_by_kb[source["names"]])
        a["unknown_concept_id"] = a["concept_id"].where(~a["nil"] & a["concept_id"].notna() & kb.notna() & ~known)
        a["unindexed_linked_doc_id"] = a["doc_id"].where(kb.isna() & ~a["nil"])
        a["link_kind"] = link_kinds(a, kb, self.normalizers)
        expected_kb = kb.map({t: source["kb_version"] for t, source in sources.items()})
        stale = (a["model_version"] != self.manifest["model_version"]) | (expected_kb.notna() & (a["kb_version"] != expected_kb))
        a["version_mismatch_doc_id"] = a["doc_id"].where(stale)
        a["nil_mention"] = a["mention"].where(a["nil"])
        self.figures.add(a)
        return a

    def _documents(
        self, batch, d: pd.DataFrame, texts: pd.Series, counted, rows_per_id, shard: tuple[int, int] | None
    ) -> pd.DataFrame:
        """`counted`: annotation rows per doc_id in the batch's shard; `rows_per_id`: document rows per doc_id there."""
        manifest = self.manifest
        self.statuses.update(d["status"].tolist())
        d["annotation_count"] = _counts_of(batch.column("doc_id"), counted)
        self.figures.mentions_per_document.add(d["annotation_count"][d["status"] == "annotated"])
        d["duplicate_doc_id"] = d["doc_id"].where(_counts_of(batch.column("doc_id"), rows_per_id) > 1)
        d["misplaced_doc_id"] = d["doc_id"].where(outside_shard(d["doc_id"], shard))
        d["mentions_mismatch_doc_id"] = d["doc_id"].where(d["mentions"] != d["annotation_count"])
        d["overlapping_passages_doc_id"] = d["doc_id"].where(texts.isna())
        has_content = (d["passages"].map(len) > 0) | (d["annotation_count"] > 0)
        d["tombstone_content_doc_id"] = d["doc_id"].where((d["status"] == "deleted") & has_content)
        d["version_mismatch_doc_id"] = d["doc_id"].where(
            (d["model_version"] != manifest["model_version"]) | (d["kb_version"] != manifest["kb_version"])
        )
        return d.drop(columns=["passages"])


def _counts_of(doc_ids: pa.Array, counted) -> np.ndarray:
    """Per doc_id, its count in `counted` (Arrow value counts), 0 where it has none."""
    at = pc.index_in(doc_ids, value_set=counted.field("values"), skip_nulls=True)
    return pc.fill_null(pc.take(counted.field("counts"), at), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def outside_shard(doc_ids: pd.Series, shard: tuple[int, int] | None) -> pd.Series:
    """Per row, True where its doc_id is not in the shard (index, num_shards) that `stable_shard` gives it, the rule
    `bioel link` writes by; every row of a file whose name says no shard is outside."""
    if shard is None:
        return pd.Series(True, index=doc_ids.index)
    index, count = shard
    home = {i: stable_shard(i, count) == index for i in doc_ids.unique() if isinstance(i, str)}
    return pd.Series([not home.get(i, False) for i in doc_ids], index=doc_ids.index, dtype=bool)


# documents carried from an earlier run (not in this run's inputs) keep the versions they were linked under
_CARRIED = " A warning, not critical, when the manifest counts documents carried from an earlier run."


def _null(column: str, description: str, severity: str = CRITICAL, **kwargs) -> gxe.Expectation:
    return _tag(gxe.ExpectColumnValuesToBeNull(column=column, description=description, **kwargs), severity)


def score_range(annotator: dict) -> tuple[float, float, str]:
    """(low, high, what the scores are) of a link output's scores, by the stage that linked it (the manifest's
    annotator): the retriever's cosines; a reranker's fused scores (its logits plus the weighted cosine, any finite
    value); a generative linker's probabilities of the written names (exp of their mean token log-probability), an
    exact name 1."""
    if annotator.get("reranker"):
        return -FLOAT32_MAX, FLOAT32_MAX, "the rerank stage's (reranker + weighted retriever), finite"
    if annotator.get("generative"):
        return (
            -SCORE_TOLERANCE,
            1.0 + SCORE_TOLERANCE,
            "per-token geometric-mean probabilities of the written names, in [0, 1] (1 for an exact name)",
        )
    return -1.0 - SCORE_TOLERANCE, 1.0 + SCORE_TOLERANCE, "cosine similarities, in [-1, 1]"


def annotations_suite(
    entity_types: list[str], max_nil_share: float, version_severity: str, linked_documents: int = 0, annotator: dict | None = None
) -> gx.ExpectationSuite:
    """`linked_documents`: documents this run linked; not one mention in all of them is a warning: a valid corpus
    may mention nothing of the indexed types (a daily update of a few abstracts), or the detector, dictionary or
    threshold is broken. `annotator`: the manifest's, which says how the scores were made (`score_range`)."""
    low, high, scores = score_range(annotator or {})
    expectations = [
        _tag(gxe.ExpectColumnValuesToBeBetween(column="start", min_value=0), CRITICAL),
        _tag(
            gxe.ExpectColumnValuesToBeBetween(
                column="span_length", min_value=1, description="Every span is non-empty (end > start)."
            ),
            CRITICAL,
        ),
        _null(
            "unannotated_doc_id",
            "Every annotation's document is in the documents table as annotated (listed: ids missing there or tombstones).",
        ),
        _null(
            "other_shard_doc_id",
            "Every annotation lies in its doc_id's shard, where its document and text are "
            "(listed: documents whose annotations sit in another shard).",
        ),
        _null("outside_text_doc_id", "Every span ends inside its document's text (listed: documents of spans past the end)."),
        _null(
            "mention_mismatch_doc_id",
            "The text slice [start, end) of each span is its mention (listed: documents where it is not).",
        ),
        _null("nil_concept_id", "NIL annotations have no concept_id (listed: those they have)."),
        _null("unlinked_doc_id", "Annotations that are not NIL have a concept_id (listed: documents of those without)."),
        _null("unknown_concept_id", "Every concept_id is a concept of the KB of its entity type (listed: ids missing from it)."),
        _null(
            "unindexed_linked_doc_id",
            "Annotations of an entity type without an index are NIL (listed: documents of those linked).",
        ),
        _tag(
            gxe.ExpectColumnValuesToBeBetween(column="score", min_value=low, max_value=high, description=f"Scores are {scores}."),
            CRITICAL,
        ),
        _null(
            "version_mismatch_doc_id",
            "Annotations carry the manifest's model_version and the KB version of their "
            "type's index as it is on disk (listed: documents of those that do not)." + _CARRIED,
            version_severity,
        ),
        _null(
            "nil_mention",
            f"At most {max_nil_share:.0%} of mentions are NIL (listed: NIL mentions).",
            WARNING,
            mostly=1.0 - max_nil_share,
        ),
        rows_from_input("annotations", linked_documents, WARNING, "documents linked"),
    ]
    if ANY_TYPE not in entity_types:  # else every type has a KB
        # given mentions of another type are kept, NIL: the run was not told to link them (the manifest counts them)
        expectations.append(
            _tag(
                gxe.ExpectColumnValuesToBeInSet(
                    column="entity_type",
                    value_set=entity_types,
                    description="Every entity type has an index in the manifest's annotator (listed: types of given mentions "
                    "kept NIL, unlinked, for want of one).",
                ),
                WARNING,
            )
        )
    return gx.ExpectationSuite(name="annotations", expectations=expectations)


def documents_suite(version_severity: str, records_in: int = 0) -> gx.ExpectationSuite:
    return gx.ExpectationSuite(
        name="documents",
        expectations=[
            rows_from_input("documents", records_in),
            _null(
                "duplicate_doc_id",
                "Each doc_id is one row (listed: every row of a repeated one; a doc_id lies in "
                "one shard, so a repeat across shards is a misplaced row).",
            ),
            _null(
                "misplaced_doc_id",
                "Each document lies in its doc_id's shard, the one `bioel link` writes it to (listed: documents elsewhere).",
            ),
            _tag(gxe.ExpectColumnValuesToBeInSet(column="status", value_set=STATUSES), CRITICAL),
            _null(
                "mentions_mismatch_doc_id",
                "Each document's mentions is its number of annotation rows in its shard (listed: documents where it is not).",
            ),
            _null("overlapping_passages_doc_id", "Passages lay out without overlap (listed: documents whose passages overlap)."),
            _null("tombstone_content_doc_id", "Deleted documents have no passages and no annotations."),
            _null(
                "version_mismatch_doc_id",
                "Documents carry the manifest's model_version and kb_version." + _CARRIED,
                version_severity,
            ),
        ],
    )


def score_bounds(annotation_files: list[Path | str], batch_rows: int, fs: FileSystem = LOCAL) -> tuple[float, float]:
    """The range the score histograms share: [0, 1] widened to every finite score (cosines may fall below 0), read
    before the annotations are, so that each batch's scores are binned as they come."""
    low, high = 0.0, 1.0
    for path in annotation_files:
        for batch in file_batches(path, "annotations", ["score"], batch_rows, fs):
            scores = batch.column(0).to_numpy(zero_copy_only=False).astype(np.float64)
            scores = scores[np.isfinite(scores)]
            if len(scores):
                low, high = min(low, float(scores.min())), max(high, float(scores.max()))
    return low, high


class LinkFigures:
    """What the report plots, accumulated over batches of documents and annotations: per entity type the score
    histogram (over `bounds`, see `score_bounds`), NIL share and mentions by link kind (LINK_KINDS); mentions per
    entity type and per document, the most linked concepts."""

    def __init__(self, bounds: tuple[float, float]):
        self.bounds, self.score_counts = bounds, {}  # entity type -> scores per bin
        self.mentions_per_document = Tally()  # of the annotated documents
        self.nil, self.mentions, self.kinds = Counter(), Counter(), Counter()
        self.linked: dict[tuple[str, str], list] = {}  # (entity type, concept id) -> [mentions, first preferred name]

    def add(self, a: pd.DataFrame) -> None:
        for t, g in a.groupby("entity_type", sort=True):
            self.score_counts[t] = self.score_counts.get(t, 0) + np.array(histogram(g["score"], self.bounds)["counts"])
            self.nil[t] += int(g["nil"].sum())
            self.mentions[t] += len(g)
        self.kinds.update({key: int(n) for key, n in a.groupby(["entity_type", "link_kind"]).size().items()})
        linked = a[~a["nil"] & a["concept_id"].notna()]  # no concept: a failed check
        counts = linked.groupby(["entity_type", "concept_id"]).agg(name=("preferred_name", "first"), mentions=("doc_id", "size"))
        for (t, concept), name, n in zip(counts.index, counts["name"], counts["mentions"]):
            entry = self.linked.setdefault((t, concept), [0, None])
            entry[0] += int(n)
            if entry[1] is None and not pd.isna(name):
                entry[1] = name

    def result(self) -> dict:
        types = sorted(self.mentions)
        edges = histogram(pd.Series([], dtype="float64"), self.bounds)["edges"]
        top = sorted(self.linked.items(), key=lambda item: (-item[1][0], item[0][0], item[0][1]))[:TOP_CONCEPTS]
        return {
            "nil_share_per_entity_type": {str(t): round(self.nil[t] / self.mentions[t], 4) for t in types},
            "score_histogram_per_entity_type": {str(t): {"edges": edges, "counts": self.score_counts[t].tolist()} for t in types},
            "mentions_by_link_kind": {k: {str(t): self.kinds.get((t, k), 0) for t in types} for k in LINK_KINDS},
            "mentions_per_document_histogram": count_histogram(self.mentions_per_document),
            "top_concepts": [{"entity_type": t, "concept_id": c, "name": name, "mentions": n} for (t, c), (n, name) in top],
        }


def checks(
    link_dir: str | Path, manifest: dict, fs: FileSystem = LOCAL, *, max_nil_share: float = 0.5
) -> tuple[dict, Iterator, dict]:
    """({table: suite}, (table, frame) pairs, stats) for the report; the stats complete once the frames are read.
    `max_nil_share`: above it the NIL share is a warning."""
    tables, dead = LinkTables(link_dir, manifest, fs), read_dead_letters(link_dir, fs)
    counts = manifest.get("counts", {})
    carried = counts.get("documents", {}).get("carried", 0)
    records_in = counts.get("records", {}).get("documents", 0) + counts.get("records", {}).get("deletions", 0)
    version_severity = WARNING if carried else CRITICAL
    stats: dict = {}  # filled once the annotations have been read (the figures)

    def frames():
        yield from tables.frames()
        figures, statuses = tables.figures, tables.statuses
        mentions = sum(figures.mentions.values())
        stats.update(
            {
                "documents": statuses.total(),
                "annotated": statuses["annotated"],
                "tombstones": statuses["deleted"],
                "mentions": mentions,
                "nil_share": round(sum(figures.nil.values()) / mentions, 4) if mentions else None,
                "mentions_per_entity_type": {str(t): n for t, n in sorted(figures.mentions.items())},
                "mentions_per_document": distribution(figures.mentions_per_document),
                "kbs": {t: s["names"] for t, s in tables.sources.items()},
                **figures.result(),
                **dead_letter_stats(dead),
            }
        )
        yield "dead_letter", dead
        yield "inputs", unread_files(manifest)

    suites = {
        "annotations": annotations_suite(
            sorted(tables.sources),
            max_nil_share,
            version_severity,
            counts.get("documents", {}).get("linked", 0),
            manifest["annotator"],
        ),
        "documents": documents_suite(version_severity, records_in),
        "dead_letter": dead_letter_suite(records_in),
        "inputs": unread_files_suite(),
    }
    return suites, frames(), stats
