"""NIL thresholds from a gold corpus (`bioel calibrate-nil`): link the gold documents as `bioel link` would, then
pick per entity type the score below which mentions are better left NIL (strict span + concept F1). The gold is
counted as evaluate-e2e counts it (bioel_core.evaluation.e2e.gold_annotations: one annotation per span, composite
parts stated apart and annotations with no concept id left out): thresholds are chosen on the gold evaluate-e2e
scores against."""

from __future__ import annotations

from collections.abc import Mapping

from bioel_core.corpora import read_annotated
from bioel_core.evaluation.e2e import gold_annotations, gold_contents
from bioel_core.kb.vocab import plain_id
from bioel_core.linking.annotate import AnnotatorSpec
from bioel_core.linking.nil import calibrate_threshold


def calibrate_on_gold(
    spec: AnnotatorSpec, gold_path: str, fmt: str = "pubtator", batch_size: int = 64, labels: Mapping[str, str] | None = None
) -> dict:
    """Per entity type, the NIL threshold maximizing strict span+concept F1 on a gold corpus in `fmt` (read_annotated).
    `labels`: what refusals call the gold, its format and the index (CalibrateSettings' and LinkTarget's field names,
    unless the caller names them in its own words: the CLI's flags)."""
    label = {name: (labels or {}).get(name, name) for name in ("gold", "gold_format", "index")}
    documents = read_annotated(gold_path, fmt, label["gold"], label["gold_format"])
    annotator = spec.open()
    # per entity type, the gold mentions its index links
    gold = {
        t: gold_annotations(documents, lambda m, target=target: annotator.target_of(m) is target)
        for t, target in annotator.targets.items()
    }
    for t in annotator.targets:
        if not gold[t]:
            raise ValueError(
                f"{label['gold']} {gold_path}: no annotation with a concept id {f'of entity type {t} ' if t else ''}"
                f"to calibrate against ({gold_contents(documents)})"
            )
    scores: dict[str, list[float]] = {t: [] for t in annotator.targets}
    correct: dict[str, list[bool]] = {t: [] for t in annotator.targets}
    for start in range(0, len(documents), batch_size):
        batch = documents[start : start + batch_size]
        for rows in annotator.annotate(batch):
            for r in rows:
                entity_type = annotator.target_for(r["entity_type"]).entity_type  # '' for an untyped index
                ids = gold[entity_type].get((r["doc_id"], r["start"], r["end"]), frozenset())
                scores[entity_type].append(r["score"])
                correct[entity_type].append(not r["nil"] and any(plain_id(i) in ids for i in (r["concept_id"], *r["alt_ids"])))
    for t, index in spec.indexes:
        # with no right link every threshold scores F1 0, and the lowest (cut nothing) would be offered as calibrated
        if not any(correct[t]):
            raise ValueError(
                f"{label['gold']} {gold_path}: none of the {len(scores[t]):,} mentions detected and linked "
                f"with {label['index']} {t + '=' if t else ''}{index} has a gold annotation's span and concept id: no threshold "
                "to calibrate (is the index's KB the one the gold's ids come from?)"
            )
    return {t: calibrate_threshold(scores[t], correct[t], len(gold[t])) for t in annotator.targets}
