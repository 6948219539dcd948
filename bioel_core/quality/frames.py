"""The concepts and names tables as pandas frames, with the derived columns the checks run on.

Cross-table facts (a name whose concept is missing, a concept without names, names per concept) are
computed here, once, and put in plain columns: a great-expectations batch sees one frame, and a
value set of every concept id inside an expectation would be copied into each result and HTML page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bioel_core.tables import read_table

CONCEPT_COLUMNS = ["concept_id", "preferred_name"]
NAME_COLUMNS = ["name_id", "concept_id", "name", "name_norm", "name_type"]
STAT_QUANTILES = {"min": 0.0, "median": 0.5, "p95": 0.95, "max": 1.0}
HISTOGRAM_BINS = 25  # odd: a value at the middle of the bounds (a norm of 1) falls inside a bin, not on an edge
TOP_REASONS = 10  # dead-letter reasons are free text: the most frequent ones, the rest summed as OTHER_REASONS
OTHER_REASONS = "(other reasons)"
DEAD_LETTER_SAMPLE = 10
SAMPLE_CHARS = 200


@dataclass
class KBFrames:
    concepts: pd.DataFrame  # + name_count, unnamed_concept_id (the id when the concept has no name, else null)
    names: pd.DataFrame  # + name_length, orphan_concept_id (the id when it is not in the concepts table, else null)


def load_frames(table_dir: str | Path) -> KBFrames:
    concepts = read_table(table_dir, "concepts", columns=CONCEPT_COLUMNS).to_pandas(types_mapper=pd.ArrowDtype)
    names = read_table(table_dir, "names", columns=NAME_COLUMNS).to_pandas(types_mapper=pd.ArrowDtype)

    concepts["name_count"] = concepts["concept_id"].map(names["concept_id"].value_counts()).fillna(0).astype("int64")
    concepts["unnamed_concept_id"] = concepts["concept_id"].where(concepts["name_count"] == 0)
    names["name_length"] = names["name"].str.len()
    names["orphan_concept_id"] = names["concept_id"].where(~names["concept_id"].isin(concepts["concept_id"]))
    return KBFrames(concepts=concepts, names=names)


def distribution(values: pd.Series) -> dict:
    """min/median/p95/max of a count column; None for an empty table."""
    if values.empty:
        return {k: None for k in STAT_QUANTILES}
    found = values.quantile(list(STAT_QUANTILES.values()), interpolation="lower")
    return {k: int(v) for k, v in zip(STAT_QUANTILES, found)}


def histogram(values: pd.Series, bounds: tuple[float, float] | None = None) -> dict:
    """{"edges": [...], "counts": [...]} of `values` in HISTOGRAM_BINS equal bins over `bounds` (default: their
    range); empty lists for no values. Give histograms meant to be drawn together the same bounds."""
    values = values.to_numpy(dtype=np.float64)
    values = values[np.isfinite(values)]  # NaN and inf are their own failed checks; they have no bin
    if bounds is None:
        if not len(values):
            return {"edges": [], "counts": []}
        bounds = (float(values.min()), float(values.max()))
    counts, edges = np.histogram(values, bins=HISTOGRAM_BINS, range=bounds)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def count_histogram(values: pd.Series) -> dict:
    """A histogram of whole numbers (names per concept, name lengths): bins of whole width centred on whole
    numbers, so no bin splits a value, at most HISTOGRAM_BINS of them."""
    values = values.dropna().astype("int64")
    if values.empty:
        return {"edges": [], "counts": []}
    low, high = int(values.min()), int(values.max())
    width = max(1, math.ceil((high - low + 1) / HISTOGRAM_BINS))
    edges = np.arange(low, high + width + 1, width) - 0.5
    counts, _ = np.histogram(values.to_numpy(), bins=edges)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def read_dead_letters(output_dir: str | Path) -> pd.DataFrame:
    return read_table(output_dir, "dead_letter").to_pandas()


def dead_letter_stats(rows: pd.DataFrame) -> dict:
    """Of an output's dead_letter table (`read_dead_letters`): its row count, the most frequent reasons with their
    counts, and the first rows (raw input shortened) to show as examples."""
    reasons = rows["reason"].value_counts(sort=False).sort_index().sort_values(ascending=False, kind="stable")
    by_reason = [{"reason": str(r), "dead_letters": int(n)} for r, n in reasons.head(TOP_REASONS).items()]
    if len(reasons) > TOP_REASONS:
        by_reason.append({"reason": OTHER_REASONS, "dead_letters": int(reasons.iloc[TOP_REASONS:].sum())})
    sample = rows.head(DEAD_LETTER_SAMPLE).assign(raw=rows["raw"].str.slice(0, SAMPLE_CHARS))
    return {"dead_letters": len(rows), "dead_letter_reasons": by_reason,
            "dead_letter_sample": sample[["source", "location", "reason", "raw"]].to_dict("records")}


def table_stats(frames: KBFrames) -> dict:
    return {
        "concepts": len(frames.concepts),
        "names": len(frames.names),
        "names_per_concept": distribution(frames.concepts["name_count"]),
        "name_length": distribution(frames.names["name_length"].dropna()),
        "names_per_concept_histogram": count_histogram(frames.concepts["name_count"]),
        "name_length_histogram": count_histogram(frames.names["name_length"]),
    }
