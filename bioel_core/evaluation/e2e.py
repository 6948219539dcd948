"""End-to-end linking scores: micro precision / recall / F1 over (document, span, concept) triples.

A predicted annotation is correct when a gold annotation of the same document shares a concept id with it
and has the same span (strict) or an overlapping one (partial). Precision = correct predictions /
predictions; recall = gold annotations matched by some correct prediction / gold annotations. Annotations
without a concept (PubTator `-1`) are left out on both sides and counted apart, and so are the parts of a
composite mention that BC5CDR's BioC release states as annotations of their own
(bioel_core.corpora.annotated.is_composite_part), so that both releases score the same. Ids are compared without a
known vocabulary prefix (`MESH:D003920` = `D003920`: bioel_core.kb.vocab.plain_id), so gold and predictions may
write them either way; a prediction that carries its concept's alt ids (`annotation_mentions`) is right when any of
them is gold. Spans are offsets into a document's text, so a predicted document whose text is not its gold
document's is refused (`text_mismatch`).

Duplicates. The gold annotations of one document and span are one gold annotation whose ids are the union of theirs
(`gold_annotations`, which `bioel calibrate-nil` scores its links against too): two identical lines count once, and
`D1` and `D2` stated on two lines for one span read as one line `D1|D2` does, either id right. A linker gives a span
one concept, and a corpus that states a span's ids apart (two PubTator lines, two BioC annotations) says what one
`D1|D2` line says; counted as two gold annotations, the same content would score lower than on one line, a linker
right on every span could not reach 100 recall, and NIL thresholds would be calibrated against gold no link can
match. Predictions stay one per distinct (span, ids), identical ones counted once: each is a claim, so a second
line with a wrong id for a span costs precision.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass

from bioel_core.corpora.annotated import is_composite_part
from bioel_core.corpora.pubtator import one_line
from bioel_core.corpora.records import Document, Mention
from bioel_core.kb.vocab import plain_id


def annotation_mentions(rows: Iterable[dict]) -> list[Mention]:
    """Annotations-table rows as predicted mentions whose ids are the concept id and its alt ids (NIL: none)."""
    return [
        Mention(
            text=r["mention"],
            doc_id=r["doc_id"],
            start=r["start"],
            end=r["end"],
            entity_type=r["entity_type"],
            concept_ids=() if r["nil"] or r["concept_id"] is None else (r["concept_id"], *(r.get("alt_ids") or ())),
        )
        for r in rows
    ]


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    f1: float
    n_pred: int
    n_gold: int
    correct_pred: int
    matched_gold: int


_Ann = tuple[int, int, frozenset]
Counts = tuple[int, int, int, int]  # correct predictions, predictions, matched gold annotations, gold annotations


def scored_mentions(
    items: Iterable[Document | Mention], keep: Callable[[Mention], bool], counts: dict
) -> Iterator[tuple[Mention, frozenset]]:
    """The mentions `keep` takes, with their plain ids, less those counted apart in `counts` (composite parts stated
    apart, mentions with no concept id)."""
    mentions = (m for it in items for m in (it.mentions if isinstance(it, Document) else [it]))
    for m in mentions:
        if not keep(m):
            continue
        if is_composite_part(m):
            counts["composite_parts"] += 1
            continue
        if m.start is None or m.end is None:
            raise ValueError(f"document {m.doc_id}: mention {m.text!r} has no span; end-to-end scoring needs offsets")
        ids = frozenset(plain_id(i) for i in m.concept_ids)
        if not ids:
            counts["without_concept"] += 1
            continue
        yield m, ids


def gold_annotations(
    items: Iterable[Document | Mention], keep: Callable[[Mention], bool], counts: dict | None = None
) -> dict[tuple[str, int, int], frozenset]:
    """{(document, start, end): ids} of the gold annotations `keep` takes: one per document and span, its ids the
    union of those stated for the span (see the module docstring); `counts` gets what is left out."""
    gold: dict[tuple[str, int, int], frozenset] = defaultdict(frozenset)
    for m, ids in scored_mentions(items, keep, defaultdict(int) if counts is None else counts):
        gold[m.doc_id, m.start, m.end] |= ids
    return dict(gold)


def _matches(a: _Ann, b: _Ann, strict: bool) -> bool:
    same_span = (a[0], a[1]) == (b[0], b[1]) if strict else (a[0] < b[1] and b[0] < a[1])
    return same_span and bool(a[2] & b[2])


def document_counts(gold: dict[str, set[_Ann]], pred: dict[str, set[_Ann]], strict: bool) -> dict[str, Counts]:
    """Per document of either side: (correct predictions, predictions, matched gold annotations, gold annotations)."""
    out = {}
    for doc in set(gold) | set(pred):
        g, p = gold.get(doc, set()), pred.get(doc, set())
        correct = sum(any(_matches(x, y, strict) for y in g) for x in p)
        matched = sum(any(_matches(x, y, strict) for x in p) for y in g)
        out[doc] = (correct, len(p), matched, len(g))
    return out


def micro_scores(counts: Sequence[Counts]) -> Scores:
    """Micro P/R/F1 (percent) of documents' counts summed."""
    correct, n_pred, matched, n_gold = (sum(column) for column in zip(*counts)) if counts else (0, 0, 0, 0)
    prec = correct / n_pred if n_pred else 0.0
    rec = matched / n_gold if n_gold else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return Scores(100 * prec, 100 * rec, 100 * f1, n_pred, n_gold, correct, matched)


def gold_contents(documents: list[Document]) -> str:
    """What a corpus (gold or predictions) holds, for a refusal that found nothing in it to score or calibrate against."""
    mentions = [m for d in documents for m in d.mentions]
    types = sorted({m.entity_type for m in mentions})
    return (
        f"{len(documents):,} documents, {sum(not m.concept_ids for m in mentions):,} annotations without a concept "
        f"id; types in the file: {', '.join(types) or 'none'}"
    )


def document_coverage(gold_docs: set[str], pred_docs: set[str], gold: dict[str, set[_Ann]]) -> dict:
    """The documents of each side and those of one absent from the other. A gold document absent from the
    predictions counts as all missed (the standard scoring), so a wrong predictions file, or a run that lost documents,
    reads as a weak linker unless these counts are shown beside the scores."""
    missing = gold_docs - pred_docs
    return {
        "gold": len(gold_docs),
        "pred": len(pred_docs),
        "gold_not_in_pred": len(missing),
        "pred_not_in_gold": len(pred_docs - gold_docs),
        "gold_not_in_pred_annotations": sum(len(gold.get(d, ())) for d in missing),
    }


def _comparable_text(doc: Document) -> str:
    # as PubTator writes it (a line break or tab is one space): same length, so the same offsets
    return one_line(doc.text).rstrip()


def text_mismatch(
    gold: Iterable[Document | Mention],
    pred: Iterable[Document | Mention],
    names: tuple[str, str] = ("the gold", "the predictions"),
) -> str | None:
    """Why the predictions cannot be scored against the gold when a document given on both sides as a Document
    has another text on each (a prediction's span would name other characters than the gold's), else None.
    Texts that differ only by line breaks or tabs written as spaces, or by trailing whitespace, are the same."""
    gold_texts = {d.doc_id: _comparable_text(d) for d in gold if isinstance(d, Document)}
    shared = [
        (d.doc_id, gold_texts[d.doc_id], _comparable_text(d))
        for d in {d.doc_id: d for d in pred if isinstance(d, Document)}.values()
        if d.doc_id in gold_texts
    ]
    differ = [(doc_id, g, p) for doc_id, g, p in shared if g != p]
    if not differ:
        return None
    doc_id, g, p = differ[0]
    at = next((i for i, (a, b) in enumerate(zip(g, p)) if a != b), min(len(g), len(p)))
    return (
        f"{names[1]}: {len(differ):,} of its {len(shared):,} documents in {names[0]} {'has' if len(differ) == 1 else 'have'} "
        f"another text than the gold's (document {doc_id} at offset {at}: gold {g[at : at + 20]!r}, pred {p[at : at + 20]!r}): "
        "its spans do not point into the gold text; predict on the gold documents' own text"
    )


def annotations_by_document(
    gold: Iterable[Document | Mention],
    pred: Iterable[Document | Mention],
    entity_types: Iterable[str] | None = None,
    gold_counts: dict | None = None,
    pred_counts: dict | None = None,
) -> tuple[dict[str, set[_Ann]], dict[str, set[_Ann]]]:
    """The scored annotations of each side by document, (start, end, plain ids) each: the gold's one per span
    (`gold_annotations`), the predictions' one per distinct (span, ids); `*_counts` get what is left out."""
    types = set(entity_types) if entity_types else None
    keep = lambda m: not types or not m.entity_type or m.entity_type in types  # noqa: E731 (an untyped mention is kept)
    g: dict[str, set[_Ann]] = defaultdict(set)
    for (doc, start, end), ids in gold_annotations(gold, keep, gold_counts).items():
        g[doc].add((start, end, ids))
    p: dict[str, set[_Ann]] = defaultdict(set)
    for m, ids in scored_mentions(pred, keep, defaultdict(int) if pred_counts is None else pred_counts):
        p[m.doc_id].add((m.start, m.end, ids))
    return g, p


def e2e_scores(
    gold: Iterable[Document | Mention],
    pred: Iterable[Document | Mention],
    entity_types: Iterable[str] | None = None,
    names: tuple[str, str] = ("the gold", "the predictions"),
) -> dict:
    """{"strict": {...}, "partial": {...}, "gold_without_concept": n, "pred_without_concept": n,
    "gold_composite_parts": n, "pred_composite_parts": n, "documents": {...} (document_coverage)}; P/R/F1 in
    percent. A side given as mentions has the documents its mentions are in.
    ValueError (`text_mismatch`, naming the sides by `names`) for a document with another text on each side."""
    gold, pred = list(gold), list(pred)
    mismatch = text_mismatch(gold, pred, names)
    if mismatch:
        raise ValueError(mismatch)
    gcounts, pcounts = defaultdict(int), defaultdict(int)
    g, p = annotations_by_document(gold, pred, entity_types, gcounts, pcounts)
    return {
        "strict": asdict(micro_scores(list(document_counts(g, p, strict=True).values()))),
        "partial": asdict(micro_scores(list(document_counts(g, p, strict=False).values()))),
        "gold_without_concept": gcounts["without_concept"],
        "pred_without_concept": pcounts["without_concept"],
        "gold_composite_parts": gcounts["composite_parts"],
        "pred_composite_parts": pcounts["composite_parts"],
        "documents": document_coverage({d.doc_id for d in gold}, {d.doc_id for d in pred}, g),
    }
