"""The concepts and names tables as pandas frames, with the derived columns the checks run on.

Cross-table facts (a name whose concept is missing, a concept without names, names per concept) are
computed here, once, and put in plain columns: a great-expectations batch sees one frame, and a
value set of every concept id inside an expectation would be copied into each result and HTML page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bioel_core.tables import read_table

CONCEPT_COLUMNS = ["concept_id", "preferred_name"]
NAME_COLUMNS = ["name_id", "concept_id", "name", "name_norm", "name_type"]
STAT_QUANTILES = {"min": 0.0, "median": 0.5, "p95": 0.95, "max": 1.0}


@dataclass
class KBFrames:
    concepts: pd.DataFrame  # + name_count, unnamed_concept_id (the id when the concept has no name, else null)
    names: pd.DataFrame  # + name_length, orphan_concept_id (the id when it is not in the concepts table, else null)


def load_frames(table_dir: str | Path) -> KBFrames:
    concepts = read_table(table_dir, "concepts", columns=CONCEPT_COLUMNS).to_pandas()
    names = read_table(table_dir, "names", columns=NAME_COLUMNS).to_pandas()

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


def table_stats(frames: KBFrames) -> dict:
    return {
        "concepts": len(frames.concepts),
        "names": len(frames.names),
        "names_per_concept": distribution(frames.concepts["name_count"]),
        "name_length": distribution(frames.names["name_length"].dropna()),
    }
