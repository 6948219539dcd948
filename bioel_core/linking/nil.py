"""NIL: a detected mention whose best score is below a threshold is left unlinked instead of being forced
onto its nearest concept.

The threshold is calibrated on a development corpus with gold spans: every detected mention there is
linked, and marked correct when its span and concept match a gold annotation. Keeping the mentions
scored at or above t gives precision = correct kept / kept and recall = correct kept / gold; the chosen cut
maximizes that F1 (the lowest such cut on ties, so as little as possible is thrown away), and t lies midway between
the lowest score kept and the highest cut (ROUNDING_MARGIN below the lowest when all are kept): a score computed
with other rounding (a GPU, another thread count, FAISS's float32 vectors: within about 1e-7) is not tipped across
it, as the mentions calibrated on would be if t were one of their scores (a name encoder scores a mention's text
alike in every document).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

# the rule placing the threshold between the scores kept and cut (part of a bundle's calibration record)
THRESHOLD_RULE = "midway/1"
# where every prediction is kept, the threshold lies this far below the lowest score: ten times the largest
# difference measured between scores of one mention on a GPU and a CPU, or from FAISS's float32 and exact search
ROUNDING_MARGIN = 1e-6


@dataclass(frozen=True)
class NilThreshold:
    threshold: float
    precision: float
    recall: float
    f1: float
    kept: int
    predictions: int
    gold: int
    f1_without_threshold: float

    def to_dict(self) -> dict:
        return asdict(self)


def calibrate_threshold(scores: Sequence[float], correct: Sequence[bool], gold: int) -> NilThreshold:
    """The score threshold maximizing span-and-concept F1 on a corpus with `gold` gold annotations."""
    if len(scores) != len(correct):
        raise ValueError(f"{len(scores)} scores but {len(correct)} correctness flags")
    if gold < 1 or not len(scores):
        raise ValueError("calibration needs at least one gold annotation and one prediction")
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    s, hits = s[order], np.asarray(correct, dtype=np.float64)[order]
    kept = np.arange(1, len(s) + 1)
    tp = np.cumsum(hits)
    precision = tp / kept
    recall = tp / gold
    f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0.0)
    # a threshold can only cut between distinct scores: evaluate at the last position of each score value
    candidates = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
    # later position = lower threshold, on equal F1 (rounded: 2/3 computed two ways must tie)
    best = max(candidates, key=lambda i: (round(float(f1[i]), 12), i))
    if best + 1 < len(s):
        midway = s[best + 1] + (s[best] - s[best + 1]) / 2
        threshold = midway if midway > s[best + 1] else s[best]  # two adjacent floats have nothing between
    else:  # every prediction kept: a margin below the lowest (probabilities stay at or above 0)
        threshold = s[best] - ROUNDING_MARGIN
        if s[best] >= 0:
            threshold = max(threshold, 0.0)
    return NilThreshold(
        threshold=float(threshold),
        precision=float(precision[best]),
        recall=float(recall[best]),
        f1=float(f1[best]),
        kept=int(kept[best]),
        predictions=len(s),
        gold=gold,
        f1_without_threshold=float(f1[-1]),
    )
