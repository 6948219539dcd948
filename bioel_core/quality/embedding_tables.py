"""Checks of an embed output: every name of its names table has one finite unit vector of the model's width
(or a dead letter).

The vectors themselves never enter the pandas frame: per row it carries the facts the expectations test
(width, norm, non-finite values, whether the name is in the names table with that concept), computed here
with numpy, as frames.py does for the KB tables.
"""

from __future__ import annotations

from pathlib import Path

import great_expectations as gx
import great_expectations.expectations as gxe
import numpy as np
import pandas as pd

from bioel_core.embeddings import check_names_unchanged, read_embeddings_manifest, vectors_of
from bioel_core.quality.frames import histogram, read_dead_letters
from bioel_core.quality.kb_tables import CRITICAL, _tag, dead_letter_suite, rows_from_input
from bioel_core.tables import iter_batches, read_table

NORM_TOLERANCE = 1e-3


def load_frame(emb_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The embeddings as one row per vector with its derived columns, the dead letters, and the counts the suite
    compares. The vectors are read a batch at a time and only their facts kept (a few bytes a row): the checks run
    before every embed publishes, and the vectors of a UMLS-size KB do not fit in memory."""
    manifest = read_embeddings_manifest(emb_dir)
    names_dir = check_names_unchanged(emb_dir)
    names = read_table(names_dir, "names", ["name_id", "concept_id"]).to_pandas().set_index("name_id")["concept_id"]
    frame = read_table(emb_dir, "embeddings", ["name_id", "concept_id"]).to_pandas()
    dims, norms, finite = [np.empty(0, dtype=np.int64)], [np.empty(0)], [np.empty(0, dtype=bool)]
    for batch in iter_batches(emb_dir, "embeddings", ["vector"]):
        # read as written: a width other than the manifest's is a failed check here, not an error
        dim = batch.schema.field("vector").type.list_size
        vectors = vectors_of(batch.column("vector"), dim)
        dims.append(np.full(len(vectors), dim, dtype=np.int64))
        norms.append(np.linalg.norm(vectors, axis=1).astype(np.float64))
        finite.append(np.isfinite(vectors).all(axis=1))
    frame["dim"], frame["norm"] = np.concatenate(dims), np.concatenate(norms)
    frame["nonfinite_name_id"] = frame["name_id"].where(~np.concatenate(finite))
    known = frame["name_id"].isin(names.index)
    frame["unknown_name_id"] = frame["name_id"].where(~known)
    name_concept = frame["name_id"].map(names)
    frame["concept_mismatch_name_id"] = frame["name_id"].where(known & (name_concept != frame["concept_id"]))
    dead = read_dead_letters(emb_dir)
    counts = {"embeddings": len(frame), "dead_letters": len(dead),
              "names": len(names), "dim": manifest["model"]["dim"], "names_dir": str(names_dir)}
    return frame, dead, counts


def embeddings_suite(dim: int, expected_rows: int, names: int = 0) -> gx.ExpectationSuite:
    low, high = 1.0 - NORM_TOLERANCE, 1.0 + NORM_TOLERANCE
    return gx.ExpectationSuite(name="embeddings", expectations=[
        rows_from_input("embeddings", names),
        _tag(gxe.ExpectColumnValuesToBeUnique(column="name_id"), CRITICAL),
        _tag(gxe.ExpectColumnValuesToBeBetween(
            column="dim", min_value=dim, max_value=dim,
            description=f"Vectors have the model's dimension in the manifest ({dim})."), CRITICAL),
        _tag(gxe.ExpectColumnValuesToBeNull(
            column="nonfinite_name_id",
            description="Every vector value is finite (listed: name ids with NaN/inf)."), CRITICAL),
        _tag(gxe.ExpectColumnValuesToBeBetween(
            column="norm", min_value=low, max_value=high,
            description=f"Vectors are L2-normalized (norm within {NORM_TOLERANCE} of 1)."), CRITICAL),
        _tag(gxe.ExpectColumnValuesToBeNull(
            column="unknown_name_id", description="Every name_id is in the names table (listed: ids missing from it)."),
             CRITICAL),
        _tag(gxe.ExpectColumnValuesToBeNull(
            column="concept_mismatch_name_id",
            description="Each vector's concept_id is its name's concept_id in the names table."), CRITICAL),
        _tag(gxe.ExpectTableRowCountToEqual(
            value=expected_rows, description="One vector per name: vectors + dead letters = rows of the names table."),
             CRITICAL),
    ])


def _norm_bounds(norms: pd.Series) -> tuple[float, float]:
    """At least the window the norm check allows, so a failing norm stands apart from the rest."""
    low, high = 1.0 - NORM_TOLERANCE, 1.0 + NORM_TOLERANCE
    finite = norms[np.isfinite(norms)]
    return (min(low, float(finite.min())), max(high, float(finite.max()))) if len(finite) else (low, high)


def checks(emb_dir: str | Path) -> tuple[dict, dict]:
    """({table: (frame, suite)}, stats) for the report."""
    frame, dead, counts = load_frame(emb_dir)
    suite = embeddings_suite(counts["dim"], counts["names"] - counts["dead_letters"], counts["names"])
    norms = frame["norm"].dropna()
    stats = {**counts, "norm": {"min": round(float(norms.min()), 6) if len(norms) else None,
                                "max": round(float(norms.max()), 6) if len(norms) else None},
             "norm_histogram": histogram(norms, _norm_bounds(norms))}
    return {"embeddings": (frame, suite), "dead_letter": (dead, dead_letter_suite(counts["names"]))}, stats

