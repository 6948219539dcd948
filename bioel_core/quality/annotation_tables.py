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

from pathlib import Path

import great_expectations as gx
import great_expectations.expectations as gxe
import numpy as np
import pandas as pd

from bioel_core.corpora.records import Document, Passage
from bioel_core.linking.annotate import AnnotatorSpec
from bioel_core.names import table_normalizer
from bioel_core.quality.frames import count_histogram, dead_letter_stats, distribution, histogram, read_dead_letters
from bioel_core.quality.kb_tables import CRITICAL, WARNING, _tag, dead_letter_suite, rows_from_input
from bioel_core.tables import read_manifest, read_table

ANNOTATION_COLUMNS = ["doc_id", "start", "end", "mention", "link_text", "entity_type", "concept_id", "matched_name",
                      "score", "nil", "model_version", "kb_version"]
DOCUMENT_COLUMNS = ["doc_id", "status", "mentions", "passages", "model_version", "kb_version"]
STATUSES = ["annotated", "deleted"]
SCORE_TOLERANCE = 1e-6  # cosine scores in float32: an exact match may come out a hair above 1
FLOAT32_MAX = 3.4028234663852886e38  # a bound every finite float32 score keeps and an infinite one does not
ANY_TYPE = ""  # the index of type '' links mentions of every type without an index of their own
LINK_KINDS = ("exact", "model", "NIL")
TOP_CONCEPTS = 15


def kb_sources(annotator: dict) -> dict[str, dict]:
    """Per entity type of a link manifest's "annotator": its names folder ("names") and KB version ("kb_version"),
    followed through the index -> embeddings -> names manifests the way the linker followed them."""
    return AnnotatorSpec(model=annotator["model"], indexes=tuple(tuple(p) for p in annotator["indexes"]))._sources()


def preferred_names(names_dir: str | Path) -> pd.Series:
    """concept_id -> preferred name, for the KB whose names folder (an ingest-kb output) is `names_dir`."""
    concepts = read_table(names_dir, "concepts", ["concept_id", "preferred_name"]).to_pandas()
    return concepts.drop_duplicates("concept_id").set_index("concept_id")["preferred_name"]


def link_kinds(a: pd.DataFrame, kb: pd.Series, sources: dict) -> pd.Series:
    """Per annotation: "NIL"; "exact" when the name it linked to is its link text after the KB's normalization
    (the linkers' exact-name path, score 1); else "model" (a nearest name by the encoder)."""
    normalizers = {t: table_normalizer(read_manifest(s["names"]), s["names"]) for t, s in sources.items()}
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


def load_frames(link_dir: str | Path, manifest: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(annotations, documents) with their derived columns, and the KB sources per entity type."""
    a = read_table(link_dir, "annotations", ANNOTATION_COLUMNS).to_pandas()
    d = read_table(link_dir, "documents", DOCUMENT_COLUMNS).to_pandas()
    sources = kb_sources(manifest["annotator"])

    texts = pd.Series([document_text(i, p) for i, p in zip(d["doc_id"], d["passages"])], index=d.index, dtype=object)
    annotated = d["status"] == "annotated"
    text_of = pd.Series(texts[annotated].to_numpy(), index=d.loc[annotated, "doc_id"], dtype=object)
    # a duplicated doc_id is its own failed check; here its first row stands for the id
    text_of = text_of[~text_of.index.duplicated()]

    # annotations
    a["span_length"] = a["end"] - a["start"]
    a["unannotated_doc_id"] = a["doc_id"].where(~a["doc_id"].isin(text_of.index))
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
    names_by_kb = {source["names"]: preferred_names(source["names"]) for source in sources.values()}
    known = pd.Series(False, index=a.index)
    a["preferred_name"] = pd.Series(None, index=a.index, dtype=object)
    for entity_type, source in sources.items():
        mine = kb == entity_type
        known |= mine & a["concept_id"].isin(names_by_kb[source["names"]].index)
        a.loc[mine, "preferred_name"] = a.loc[mine, "concept_id"].map(names_by_kb[source["names"]])
    a["unknown_concept_id"] = a["concept_id"].where(~a["nil"] & a["concept_id"].notna() & kb.notna() & ~known)
    a["link_kind"] = link_kinds(a, kb, sources)
    expected_kb = kb.map({t: source["kb_version"] for t, source in sources.items()})
    stale = (a["model_version"] != manifest["model_version"]) | (expected_kb.notna() & (a["kb_version"] != expected_kb))
    a["version_mismatch_doc_id"] = a["doc_id"].where(stale)
    a["nil_mention"] = a["mention"].where(a["nil"])

    # documents
    d["annotation_count"] = d["doc_id"].map(a["doc_id"].value_counts()).fillna(0).astype("int64")
    d["mentions_mismatch_doc_id"] = d["doc_id"].where(d["mentions"] != d["annotation_count"])
    d["overlapping_passages_doc_id"] = d["doc_id"].where(texts.isna())
    has_content = (d["passages"].map(len) > 0) | (d["annotation_count"] > 0)
    d["tombstone_content_doc_id"] = d["doc_id"].where((d["status"] == "deleted") & has_content)
    d["version_mismatch_doc_id"] = d["doc_id"].where(
        (d["model_version"] != manifest["model_version"]) | (d["kb_version"] != manifest["kb_version"]))
    return a, d.drop(columns=["passages"]), sources


# documents carried from an earlier run (not in this run's inputs) keep the versions they were linked under
_CARRIED = " A warning, not critical, when the manifest counts documents carried from an earlier run."


def _null(column: str, description: str, severity: str = CRITICAL, **kwargs) -> gxe.Expectation:
    return _tag(gxe.ExpectColumnValuesToBeNull(column=column, description=description, **kwargs), severity)


def score_range(annotator: dict) -> tuple[float, float, str]:
    """(low, high, what the scores are) of a link output's scores, by the stage that linked it (the manifest's
    annotator): the retriever's cosines; a reranker's fused scores (its logits plus the weighted cosine, any finite
    value); a generative model's mean token log-probabilities (<= 0), an exact name 1."""
    if annotator.get("reranker"):
        return -FLOAT32_MAX, FLOAT32_MAX, "the rerank stage's (reranker + weighted retriever), finite"
    if annotator.get("generative"):
        return -FLOAT32_MAX, 1.0 + SCORE_TOLERANCE, "mean log-probabilities of the written names (<= 0), 1 for an exact name"
    return -1.0 - SCORE_TOLERANCE, 1.0 + SCORE_TOLERANCE, "cosine similarities, in [-1, 1]"


def annotations_suite(entity_types: list[str], max_nil_share: float, version_severity: str,
                      linked_documents: int = 0, annotator: dict | None = None) -> gx.ExpectationSuite:
    """`linked_documents`: documents this run linked; not one mention in all of them means a broken detector,
    dictionary or threshold (link a larger batch, or pass --fail-on none, when that is really so). `annotator`: the
    manifest's, which says how the scores were made (`score_range`)."""
    low, high, scores = score_range(annotator or {})
    expectations = [
        _tag(gxe.ExpectColumnValuesToBeBetween(column="start", min_value=0), CRITICAL),
        _tag(gxe.ExpectColumnValuesToBeBetween(
            column="span_length", min_value=1, description="Every span is non-empty (end > start)."), CRITICAL),
        _null("unannotated_doc_id", "Every annotation's document is in the documents table as annotated "
                                    "(listed: ids missing there or tombstones)."),
        _null("outside_text_doc_id", "Every span ends inside its document's text "
                                     "(listed: documents of spans past the end)."),
        _null("mention_mismatch_doc_id", "The text slice [start, end) of each span is its mention "
                                         "(listed: documents where it is not)."),
        _null("nil_concept_id", "NIL annotations have no concept_id (listed: those they have)."),
        _null("unlinked_doc_id", "Annotations that are not NIL have a concept_id "
                                 "(listed: documents of those without)."),
        _null("unknown_concept_id", "Every concept_id is a concept of the KB of its entity type "
                                    "(listed: ids missing from it)."),
        _tag(gxe.ExpectColumnValuesToBeBetween(
            column="score", min_value=low, max_value=high, description=f"Scores are {scores}."),
             CRITICAL),
        _null("version_mismatch_doc_id", "Annotations carry the manifest's model_version and the KB version of their "
                                         "type's index as it is on disk (listed: documents of those that do not)."
                                         + _CARRIED, version_severity),
        _null("nil_mention", f"At most {max_nil_share:.0%} of mentions are NIL (listed: NIL mentions).", WARNING,
              mostly=1.0 - max_nil_share),
        rows_from_input("annotations", linked_documents),
    ]
    if ANY_TYPE not in entity_types:  # else every type has a KB
        expectations.append(_tag(gxe.ExpectColumnValuesToBeInSet(
            column="entity_type", value_set=entity_types,
            description="Every entity type has an index in the manifest's annotator."), CRITICAL))
    return gx.ExpectationSuite(name="annotations", expectations=expectations)


def documents_suite(version_severity: str, records_in: int = 0) -> gx.ExpectationSuite:
    return gx.ExpectationSuite(name="documents", expectations=[
        rows_from_input("documents", records_in),
        _tag(gxe.ExpectColumnValuesToBeUnique(column="doc_id"), CRITICAL),
        _tag(gxe.ExpectColumnValuesToBeInSet(column="status", value_set=STATUSES), CRITICAL),
        _null("mentions_mismatch_doc_id", "Each document's mentions is its number of annotation rows "
                                          "(listed: documents where it is not)."),
        _null("overlapping_passages_doc_id", "Passages lay out without overlap "
                                             "(listed: documents whose passages overlap)."),
        _null("tombstone_content_doc_id", "Deleted documents have no passages and no annotations."),
        _null("version_mismatch_doc_id", "Documents carry the manifest's model_version and kb_version."
                                         + _CARRIED, version_severity),
    ])


def link_figures(annotations: pd.DataFrame, mentions_per_document: pd.Series) -> dict:
    """What the report plots: scores, NIL share and mentions by link kind (LINK_KINDS) per entity type, mentions
    per document, the most linked concepts."""
    by_type = annotations.groupby("entity_type", sort=True)
    scores = annotations["score"].astype("float64")
    scores = scores[np.isfinite(scores)]  # NaN and inf fail the score check; they have no bin
    # one range for every type, so their histograms share bins; cosine scores may fall below 0
    bounds = (min(0.0, scores.min()), max(1.0, scores.max())) if len(scores) else (0.0, 1.0)
    kinds = annotations.groupby(["entity_type", "link_kind"]).size()
    linked = annotations[~annotations["nil"] & annotations["concept_id"].notna()]  # no concept: a failed check
    top = (linked.groupby(["entity_type", "concept_id"])
           .agg(name=("preferred_name", "first"), mentions=("doc_id", "size")).reset_index()
           .sort_values(["mentions", "entity_type", "concept_id"], ascending=[False, True, True]).head(TOP_CONCEPTS))
    return {
        "nil_share_per_entity_type": {str(t): round(float(g["nil"].mean()), 4) for t, g in by_type},
        "score_histogram_per_entity_type": {str(t): histogram(g["score"], bounds) for t, g in by_type},
        "mentions_by_link_kind": {k: {str(t): int(kinds.get((t, k), 0)) for t, _ in by_type} for k in LINK_KINDS},
        "mentions_per_document_histogram": count_histogram(mentions_per_document),
        "top_concepts": [{"entity_type": r.entity_type, "concept_id": r.concept_id,
                          "name": None if pd.isna(r.name) else r.name, "mentions": int(r.mentions)}
                         for r in top.itertuples(index=False)],
    }


def checks(link_dir: str | Path, manifest: dict, *, max_nil_share: float = 0.5) -> tuple[dict, dict]:
    """({table: (frame, suite)}, stats) for the report. `max_nil_share`: above it the NIL share is a warning."""
    annotations, documents, sources = load_frames(link_dir, manifest)
    dead = read_dead_letters(link_dir)
    counts = manifest.get("counts", {})
    carried = counts.get("documents", {}).get("carried", 0)
    records_in = counts.get("records", {}).get("documents", 0) + counts.get("records", {}).get("deletions", 0)
    version_severity = WARNING if carried else CRITICAL
    annotated = documents["status"] == "annotated"
    stats = {
        "documents": len(documents),
        "annotated": int(annotated.sum()),
        "tombstones": int((documents["status"] == "deleted").sum()),
        "mentions": len(annotations),
        "nil_share": round(float(annotations["nil"].mean()), 4) if len(annotations) else None,
        "mentions_per_entity_type": {str(t): int(n)
                                     for t, n in annotations["entity_type"].value_counts().sort_index().items()},
        "mentions_per_document": distribution(documents.loc[annotated, "annotation_count"]),
        "kbs": {t: s["names"] for t, s in sources.items()},
        **link_figures(annotations, documents.loc[annotated, "annotation_count"]),
        **dead_letter_stats(dead),
    }
    return {
        "annotations": (annotations, annotations_suite(sorted(sources), max_nil_share, version_severity,
                                                       counts.get("documents", {}).get("linked", 0), manifest["annotator"])),
        "documents": (documents, documents_suite(version_severity, records_in)),
        "dead_letter": (dead, dead_letter_suite(records_in)),
    }, stats

