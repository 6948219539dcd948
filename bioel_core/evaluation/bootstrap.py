"""How sure a score is: confidence intervals for the end-to-end scores by resampling documents, and the paired
difference of two runs on one gold corpus.

Every score here is micro-averaged over documents, and documents are what a corpus samples, so the interval resamples
documents with replacement and sums their counts (the bootstrap over test items, Koehn 2004; paired, for two
systems, Berg-Kirkpatrick et al. 2012): one score's interval from one run's counts, and a difference's from both runs'
counts of the same resampled documents, which is what tells a change from the corpus's noise (a +0.2 on 500
abstracts often is noise). scipy.stats.bootstrap does the resampling (percentile intervals: defined for any score,
degenerate ones included), with a fixed seed, so the same inputs give the same intervals.

Counts per document come from the scorers themselves (`bioel_core.evaluation.e2e.document_counts`,
`bioel_core.evaluation.concepts.document_concept_counts`): the interval is of the very score they report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bioel_core.corpora.records import Document, Mention
from bioel_core.evaluation.concepts import ALL_TYPES, document_concept_counts
from bioel_core.evaluation.e2e import annotations_by_document, document_counts

CONFIDENCE = 0.95
SEED = 0  # the resampling's: intervals are part of a report that re-runs reproduce
BATCH_CELLS = 8_000_000  # resampled counts held at once (64 MB of int64): a corpus of 100,000 documents resamples in batches


@dataclass(frozen=True)
class Interval:
    f1: float  # the score on the corpus as it is (percent)
    low: float
    high: float


@dataclass(frozen=True)
class Difference:
    delta: float  # F1 of the run less the baseline's, on the corpus as it is (points)
    low: float
    high: float

    @property
    def clear(self) -> bool:
        """Whether the interval leaves 0 out: a difference the corpus's sampling of documents hardly explains."""
        return self.low > 0 or self.high < 0


def scored_counts(
    gold: Iterable[Document | Mention],
    pred: Iterable[Document | Mention],
    documents: Sequence[str],
    entity_types: Iterable[str] | None = None,
) -> dict[str, np.ndarray]:
    """Per score ("strict", "partial", "concepts TYPE" for each type and "concepts all"), the counts of `documents` in
    that order, a row (correct, predicted, matched, gold) each: a document absent from both sides is a row of zeros."""
    gold, pred = list(gold), list(pred)
    g, p = annotations_by_document(gold, pred, entity_types)
    out = {}
    for mode, strict in (("strict", True), ("partial", False)):
        out[mode] = _rows(documents, document_counts(g, p, strict))
    concepts = document_concept_counts(gold, pred, entity_types)
    types = sorted({t for by_type in concepts.values() for t in by_type})
    for etype in types:
        out[f"concepts {etype}"] = _rows(documents, {d: c[etype] for d, c in concepts.items() if etype in c})
    out[f"concepts {ALL_TYPES}"] = sum((out[f"concepts {t}"] for t in types), np.zeros((len(documents), 4), np.int64))
    return out


def _rows(documents: Sequence[str], counts: Mapping[str, Sequence[int]]) -> np.ndarray:
    return np.array([counts.get(d, (0, 0, 0, 0)) for d in documents], dtype=np.int64).reshape(len(documents), 4)


def _f1(correct, n_pred, matched, n_gold, axis=-1):
    """Micro F1 (percent) of the rows summed along `axis`, for arrays of resampled rows too."""
    c, p, m, g = (np.sum(x, axis=axis, dtype=np.float64) for x in (correct, n_pred, matched, n_gold))
    prec = np.divide(c, p, out=np.zeros_like(c), where=p > 0)
    rec = np.divide(m, g, out=np.zeros_like(m), where=g > 0)
    total = prec + rec
    return 100 * np.divide(2 * prec * rec, total, out=np.zeros_like(total), where=total > 0)


def _batch(columns: Sequence[np.ndarray]) -> int:
    """Resamplings scored at once: as many as BATCH_CELLS resampled counts hold."""
    return max(1, BATCH_CELLS // (len(columns) * len(columns[0])))


def interval(counts: np.ndarray, resamples: int, confidence: float = CONFIDENCE) -> Interval:
    """The micro F1 of `counts` (a row per document) and its `confidence` interval over `resamples` resamplings."""
    from scipy.stats import bootstrap

    columns = tuple(counts.T)
    found = bootstrap(
        columns, _f1, n_resamples=resamples, batch=_batch(columns), paired=True, vectorized=True,
        confidence_level=confidence, method="percentile", rng=np.random.default_rng(SEED),
    )  # fmt: skip
    return Interval(float(_f1(*columns)), *(float(x) for x in found.confidence_interval))


def difference(counts: np.ndarray, baseline: np.ndarray, resamples: int, confidence: float = CONFIDENCE) -> Difference:
    """F1 of `counts` less F1 of `baseline` (rows of the same documents, in one order) and its `confidence` interval,
    both runs scored on each resampling of the documents."""
    from scipy.stats import bootstrap

    if counts.shape != baseline.shape:
        raise ValueError(f"counts of {len(counts)} and {len(baseline)} documents: a paired difference needs the same ones")

    def delta(*columns, axis=-1):
        return _f1(*columns[:4], axis=axis) - _f1(*columns[4:], axis=axis)

    columns = (*counts.T, *baseline.T)
    found = bootstrap(
        columns, delta, n_resamples=resamples, batch=_batch(columns), paired=True, vectorized=True,
        confidence_level=confidence, method="percentile", rng=np.random.default_rng(SEED),
    )  # fmt: skip
    return Difference(float(delta(*columns)), *(float(x) for x in found.confidence_interval))
