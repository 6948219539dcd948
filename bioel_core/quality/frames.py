"""The concepts and names tables as pandas frames, with the derived columns the checks run on.

Cross-table facts (a name whose concept is missing, a concept without names, names per concept) are
computed here, once, and put in plain columns: a great-expectations batch sees one frame, and a
value set of every concept id inside an expectation would be copied into each result and HTML page.
The tables are read a batch of rows at a time (`KBTables`): only their key columns are held whole, in Arrow, so
checking the names of a UMLS-size KB takes memory for one batch, not for the KB.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bioel_core.outputs.fs import LOCAL, FileSystem
from bioel_core.quality.reasons import reason_kind
from bioel_core.tables import iter_batches, read_table
from schemas import TABLE_SCHEMAS

CONCEPT_COLUMNS = ["concept_id", "preferred_name"]
NAME_COLUMNS = ["name_id", "concept_id", "name", "name_norm", "name_type"]
BATCH_ROWS = 100_000  # rows of a table validated at once (read when a check starts)
STAT_QUANTILES = {"min": 0.0, "median": 0.5, "p95": 0.95, "max": 1.0}
HISTOGRAM_BINS = 25  # odd: a value at the middle of the bounds (a norm of 1) falls inside a bin, not on an edge
TOP_REASONS = 10  # dead-letter reasons are free text: the most frequent ones, the rest summed as OTHER_REASONS
OTHER_REASONS = "(other reasons)"
TOP_KINDS = 20  # reason kinds (reasons.reason_kind) shown, the rest summed as OTHER_KINDS
OTHER_KINDS = "(other kinds)"
DEAD_LETTER_SAMPLE = 10
SAMPLE_CHARS = 200


def frames_of(
    table_dir: str | Path, table: str, columns: list[str], batch_rows: int, fs: FileSystem = LOCAL
) -> Iterator[pd.DataFrame]:
    """`table`'s rows as frames of at most `batch_rows` (Arrow-backed columns); one empty frame for an empty table."""
    empty = True
    for batch in iter_batches(table_dir, table, columns, batch_rows, fs):
        empty = False
        yield batch.to_pandas(types_mapper=pd.ArrowDtype)
    if empty:
        yield pa.schema([TABLE_SCHEMAS[table].field(c) for c in columns]).empty_table().to_pandas(types_mapper=pd.ArrowDtype)


class KBTables:
    """An ingest-kb output's concepts and names, each a batch of rows at a time (`concept_frames`, `name_frames`)
    with its derived columns: a concept's name_count and unnamed_concept_id (its id when it has no name, else
    null); a name's name_length and orphan_concept_id (its concept id when that is not in the concepts table)."""

    def __init__(self, table_dir: str | Path, fs: FileSystem = LOCAL):
        self.table_dir, self.fs, self.batch_rows = table_dir, fs, BATCH_ROWS
        self.concept_ids = read_table(table_dir, "concepts", ["concept_id"], fs).column("concept_id").combine_chunks()
        counted = pc.value_counts(read_table(table_dir, "names", ["concept_id"], fs).column("concept_id"))
        at = pc.index_in(self.concept_ids, value_set=counted.field("values"), skip_nulls=True)  # names of no concept: none
        # names per concept, row for row with the concepts table
        self.name_count = pc.fill_null(pc.take(counted.field("counts"), at), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        self.names, self.name_lengths = 0, Tally()  # of the names read so far, for the figures

    def concept_frames(self) -> Iterator[pd.DataFrame]:
        start = 0
        for frame in frames_of(self.table_dir, "concepts", CONCEPT_COLUMNS, self.batch_rows, self.fs):
            frame["name_count"] = self.name_count[start : start + len(frame)]
            frame["unnamed_concept_id"] = frame["concept_id"].where(frame["name_count"] == 0)
            start += len(frame)
            yield frame

    def name_frames(self) -> Iterator[pd.DataFrame]:
        for frame in frames_of(self.table_dir, "names", NAME_COLUMNS, self.batch_rows, self.fs):
            frame["name_length"] = frame["name"].str.len()
            self.names += len(frame)
            self.name_lengths.add(frame["name_length"])
            known = pc.is_in(pa.array(frame["concept_id"]), value_set=self.concept_ids).to_numpy(zero_copy_only=False)
            frame["orphan_concept_id"] = frame["concept_id"].where(~known)
            yield frame


class Tally:
    """Whole numbers (annotations per document, name lengths, names per concept) kept as how many times each value
    occurred: their distribution and histogram are exact, in memory for the distinct values only, and tallies of
    batches add up."""

    def __init__(self):
        self.counts: dict[int, int] = {}

    @classmethod
    def of(cls, values) -> Tally:
        tally = cls()
        tally.add(values)
        return tally

    def add(self, values) -> None:
        """Counts `values` (array-like; missing values are left out)."""
        found = pd.Series(values).dropna().astype("int64").value_counts(sort=False)
        for value, n in found.items():
            self.counts[int(value)] = self.counts.get(int(value), 0) + int(n)

    def sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """(distinct values ascending, how many times each)."""
        values = np.array(sorted(self.counts), dtype=np.int64)
        return values, np.array([self.counts[v] for v in values.tolist()], dtype=np.int64)

    def __len__(self) -> int:
        return sum(self.counts.values())


def distribution(tally: Tally) -> dict:
    """min/median/p95/max of the tallied values (pandas' and numpy's "lower" quantile: the value at rank
    floor((n - 1) q) in sorted order); None for no values."""
    values, times = tally.sorted()
    n = int(times.sum())
    if not n:
        return {k: None for k in STAT_QUANTILES}
    ranks = [math.floor((n - 1) * q) for q in STAT_QUANTILES.values()]
    # the value at rank r is the first whose occurrences end past r
    return {k: int(values[i]) for k, i in zip(STAT_QUANTILES, np.searchsorted(np.cumsum(times), ranks, side="right"))}


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


def count_histogram(tally: Tally) -> dict:
    """A histogram of whole numbers (names per concept, name lengths): bins of whole width centred on whole
    numbers, so no bin splits a value, at most HISTOGRAM_BINS of them."""
    values, times = tally.sorted()
    if not len(values):
        return {"edges": [], "counts": []}
    low, high = int(values[0]), int(values[-1])
    width = max(1, math.ceil((high - low + 1) / HISTOGRAM_BINS))
    edges = np.arange(low, high + width + 1, width) - 0.5
    counts, _ = np.histogram(values, bins=edges, weights=times)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def read_dead_letters(output_dir: str | Path, fs: FileSystem = LOCAL) -> pd.DataFrame:
    return read_table(output_dir, "dead_letter", fs=fs).to_pandas()


def _most_frequent(values: pd.Series) -> pd.Series:
    """Counts of `values`, most frequent first, ties in value order."""
    return values.value_counts(sort=False).sort_index().sort_values(ascending=False, kind="stable")


def dead_letter_kinds(rows: pd.DataFrame) -> list[dict]:
    """The dead letters by reason kind (reasons.reason_kind), most frequent first: each kind's count and its first
    dead letter as an example (source, location, reason, raw input shortened); past TOP_KINDS, one OTHER_KINDS row
    sums the rest."""
    kinds = rows["reason"].map(reason_kind)
    counts = _most_frequent(kinds)
    first = rows.groupby(kinds, sort=False).head(1).assign(raw=rows["raw"].str.slice(0, SAMPLE_CHARS))
    examples = dict(zip(kinds[first.index], first[["source", "location", "reason", "raw"]].to_dict("records")))
    by_kind = [{"kind": str(k), "dead_letters": int(n), "example": examples[k]} for k, n in counts.head(TOP_KINDS).items()]
    if len(counts) > TOP_KINDS:
        by_kind.append({"kind": OTHER_KINDS, "dead_letters": int(counts.iloc[TOP_KINDS:].sum()), "example": None})
    return by_kind


def dead_letter_stats(rows: pd.DataFrame) -> dict:
    """Of an output's dead_letter table (`read_dead_letters`): its row count, its reasons grouped by kind
    (`dead_letter_kinds`), the most frequent reasons as written with their counts (kept for readers of earlier
    summaries), and the first rows (raw input shortened) to show as examples."""
    reasons = _most_frequent(rows["reason"])
    by_reason = [{"reason": str(r), "dead_letters": int(n)} for r, n in reasons.head(TOP_REASONS).items()]
    if len(reasons) > TOP_REASONS:
        by_reason.append({"reason": OTHER_REASONS, "dead_letters": int(reasons.iloc[TOP_REASONS:].sum())})
    sample = rows.head(DEAD_LETTER_SAMPLE).assign(raw=rows["raw"].str.slice(0, SAMPLE_CHARS))
    return {
        "dead_letters": len(rows),
        "dead_letter_reasons": by_reason,
        "dead_letter_kinds": dead_letter_kinds(rows),
        "dead_letter_sample": sample[["source", "location", "reason", "raw"]].to_dict("records"),
    }


def table_stats(tables: KBTables) -> dict:
    """Of the tables, once their frames have been read."""
    names_per_concept = Tally.of(tables.name_count)
    return {
        "concepts": len(tables.concept_ids),
        "names": tables.names,
        "names_per_concept": distribution(names_per_concept),
        "name_length": distribution(tables.name_lengths),
        "names_per_concept_histogram": count_histogram(names_per_concept),
        "name_length_histogram": count_histogram(tables.name_lengths),
    }
