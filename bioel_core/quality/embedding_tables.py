"""Checks of an embed output: every name of its names table has one finite unit vector of the model's width
(or a dead letter).

The vectors themselves never enter the pandas frame: per row it carries the facts the expectations test
(width, norm, non-finite values, whether the name is in the names table with that concept), computed here
with numpy, as frames.py does for the KB tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import great_expectations as gx
import great_expectations.expectations as gxe
import numpy as np
import pandas as pd
import pyarrow.compute as pc

from bioel_core.embeddings import check_names_unchanged, read_embeddings_details, vectors_of
from bioel_core.outputs.fs import LOCAL, FileSystem
from bioel_core.quality import frames as table_frames
from bioel_core.quality.frames import histogram, read_dead_letters
from bioel_core.quality.kb_tables import CRITICAL, _tag, dead_letter_suite, rows_from_input
from bioel_core.tables import iter_batches, read_table
from schemas import TABLE_SCHEMAS

NORM_TOLERANCE = 1e-3


class EmbeddingTables:
    """An embed output's vectors a batch at a time (`frames`), each row with the facts the expectations test (width,
    norm, non-finite values, whether the name is in the names table with that concept), computed with numpy and
    Arrow: the checks run before every embed publishes, and the vectors of a UMLS-size KB (12 GB at 10M names of 300
    dims) do not fit in memory. The names table's name_id -> concept_id is held whole, in Arrow."""

    def __init__(self, emb_dir: str | Path, fs: FileSystem = LOCAL):
        self.emb_dir, self.fs, self.batch_rows = emb_dir, fs, table_frames.BATCH_ROWS
        self.details = read_embeddings_details(emb_dir, fs=fs)
        self.names_dir = check_names_unchanged(emb_dir, fs)
        names = read_table(self.names_dir, "names", ["name_id", "concept_id"], fs)
        self.name_ids, self.name_concepts = names.column("name_id").combine_chunks(), names.column("concept_id").combine_chunks()
        self.norms: list[np.ndarray] = []  # of every vector read, for the figures

    def frames(self) -> Iterator[pd.DataFrame]:
        empty = True
        for batch in iter_batches(self.emb_dir, "embeddings", ["name_id", "concept_id", "vector"], self.batch_rows, self.fs):
            empty = False
            yield self._facts(batch)
        if empty:
            yield self._facts(TABLE_SCHEMAS["embeddings"].empty_table().select(["name_id", "concept_id", "vector"]))

    def _facts(self, batch) -> pd.DataFrame:
        # read as written: a width other than the manifest's is a failed check here, not an error
        dim = batch.schema.field("vector").type.list_size
        vectors = vectors_of(batch.column("vector"), dim)
        frame = pd.DataFrame(
            {
                "name_id": batch.column("name_id").to_numpy(zero_copy_only=False),
                "concept_id": batch.column("concept_id").to_pandas(),
            }
        )
        frame["dim"] = dim
        frame["norm"] = np.linalg.norm(vectors, axis=1).astype(np.float64)
        self.norms.append(frame["norm"].to_numpy())
        frame["nonfinite_name_id"] = frame["name_id"].where(~np.isfinite(vectors).all(axis=1))
        at = pc.index_in(batch.column("name_id"), value_set=self.name_ids)
        known = pc.is_valid(at).to_numpy(zero_copy_only=False)
        frame["unknown_name_id"] = frame["name_id"].where(~known)
        name_concept = pc.take(self.name_concepts, at).to_pandas()
        frame["concept_mismatch_name_id"] = frame["name_id"].where(known & (name_concept != frame["concept_id"]).to_numpy())
        return frame


def embeddings_suite(dim: int, expected_rows: int, names: int = 0) -> gx.ExpectationSuite:
    low, high = 1.0 - NORM_TOLERANCE, 1.0 + NORM_TOLERANCE
    return gx.ExpectationSuite(
        name="embeddings",
        expectations=[
            rows_from_input("embeddings", names),
            _tag(gxe.ExpectColumnValuesToBeUnique(column="name_id"), CRITICAL),
            _tag(
                gxe.ExpectColumnValuesToBeBetween(
                    column="dim",
                    min_value=dim,
                    max_value=dim,
                    description=f"Vectors have the model's dimension in the manifest ({dim}).",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="nonfinite_name_id", description="Every vector value is finite (listed: name ids with NaN/inf)."
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeBetween(
                    column="norm",
                    min_value=low,
                    max_value=high,
                    description=f"Vectors are L2-normalized (norm within {NORM_TOLERANCE} of 1).",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="unknown_name_id", description="Every name_id is in the names table (listed: ids missing from it)."
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="concept_mismatch_name_id",
                    description="Each vector's concept_id is its name's concept_id in the names table.",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectTableRowCountToEqual(
                    value=expected_rows, description="One vector per name: vectors + dead letters = rows of the names table."
                ),
                CRITICAL,
            ),
        ],
    )


def _norm_bounds(norms: pd.Series) -> tuple[float, float]:
    """At least the window the norm check allows, so a failing norm stands apart from the rest."""
    low, high = 1.0 - NORM_TOLERANCE, 1.0 + NORM_TOLERANCE
    finite = norms[np.isfinite(norms)]
    return (min(low, float(finite.min())), max(high, float(finite.max()))) if len(finite) else (low, high)


def checks(emb_dir: str | Path, fs: FileSystem = LOCAL) -> tuple[dict, Iterator, dict]:
    """({table: suite}, (table, frame) pairs, stats) for the report; the stats complete once the frames are read."""
    tables, dead = EmbeddingTables(emb_dir, fs), read_dead_letters(emb_dir, fs)
    names = len(tables.name_ids)
    suites = {
        "embeddings": embeddings_suite(tables.details.model.dim, names - len(dead), names),
        "dead_letter": dead_letter_suite(names),
    }
    stats: dict = {}  # filled once the vectors have been read (their norms)

    def frames():
        yield from (("embeddings", frame) for frame in tables.frames())
        norms = pd.Series(np.concatenate(tables.norms) if tables.norms else np.empty(0))
        finite = norms.dropna()
        stats.update(
            {
                "embeddings": len(norms),
                "dead_letters": len(dead),
                "names": names,
                "dim": tables.details.model.dim,
                "names_dir": str(tables.names_dir),
                "norm": {
                    "min": round(float(finite.min()), 6) if len(finite) else None,
                    "max": round(float(finite.max()), 6) if len(finite) else None,
                },
                "norm_histogram": histogram(finite, _norm_bounds(finite)),
            }
        )
        yield "dead_letter", dead

    return suites, frames(), stats
