"""Running the suites with great-expectations, in memory (the report page is html.py's, not GE's data docs).

The tables come as a stream of (table, frame) pairs, a batch of rows each, in any order (a link output's documents
and annotations shard by shard, so each shard's texts are read once), and each table's batches' results are merged
into one per expectation, what one run over the whole table would have found: row-wise expectations add up their
counts and keep the first unexpected values; a row count is the sum of the batches', a column maximum their maximum;
uniqueness is decided over the whole column (a duplicate may sit in two batches). A table small enough to hold is
one batch.

A row-wise result keeps GE's SUMMARY keys (element_count, missing_count, unexpected_count, unexpected_percent: of the
non-missing values, or of all for the null checks, as GE reports it; partial_unexpected_list). The "between" checks of
values and lengths add what GE does not report, the column's observed range (OBSERVED_MIN, OBSERVED_MAX; missing
values left out), so a passing check still says what it saw.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import great_expectations as gx
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)

# SUMMARY keeps a few unexpected values per check, enough to find the bad rows without bloating the report
PARTIAL_UNEXPECTED = 20
RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": PARTIAL_UNEXPECTED}
ROW_COUNT = ("expect_table_row_count_to_be_between", "expect_table_row_count_to_equal")
COLUMN_MAX = "expect_column_max_to_be_between"
UNIQUE = "expect_column_values_to_be_unique"
VALUES_BETWEEN = "expect_column_values_to_be_between"
LENGTHS_BETWEEN = "expect_column_value_lengths_to_be_between"
OBSERVED_MIN, OBSERVED_MAX = "observed_min", "observed_max"


def _context():
    # Ephemeral: suites and results live in memory, nothing is written (no gx/ folder, no data docs);
    # analytics off and no progress bars (tqdm would print one per expectation batch to stderr).
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        data_docs_sites={},
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(mode="ephemeral", project_config=config)


@dataclass
class MergedResult:
    """One expectation's result over every batch of a table, with the fields of GE's ExpectationValidationResult
    that the report reads."""

    expectation_config: object
    success: bool = True
    result: dict = field(default_factory=dict)
    exception_info: dict = field(default_factory=dict)


def _in_bounds(value, kwargs: dict) -> bool:
    if value is None:
        return False
    if "value" in kwargs:
        return value == kwargs["value"]
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    return (low is None or value >= low) and (high is None or value <= high)


class _Merge:
    """One expectation's results batch by batch, merged as they come (nothing held per batch): `result()` is what one
    run over the whole table would have found. Uniqueness keeps the column, in Arrow, and is decided at the end (a
    duplicate may sit in two batches)."""

    def __init__(self, config):
        self.config, self.kind, self.kwargs = config, config.type, config.kwargs
        self.failed = None  # the first batch's exception_info, when one raised
        self.total, self.highest, self.unexpected, self.elements, self.missing, self.partial = 0, None, 0, 0, 0, []
        self.low = self.high = None  # the observed range of a "between" check's values (or lengths)
        self.column: list[pa.Array] = []

    def add(self, result, frame: pd.DataFrame) -> None:
        if self.failed is not None:
            return
        if (result.exception_info or {}).get("raised_exception"):
            self.failed = result.exception_info
        elif self.kind in ROW_COUNT:
            self.total += result.result["observed_value"]
        elif self.kind == COLUMN_MAX:
            found = result.result.get("observed_value")
            if found is not None and (self.highest is None or found > self.highest):
                self.highest = found
        elif self.kind == UNIQUE:
            values = pa.array(frame[self.kwargs["column"]])  # an Arrow-backed column comes as a ChunkedArray
            self.column += values.chunks if isinstance(values, pa.ChunkedArray) else [values]
            self.elements += len(values)
            self.missing += values.null_count
        else:
            self.unexpected += result.result.get("unexpected_count", 0)
            self.elements += result.result.get("element_count", 0)
            self.missing += result.result.get("missing_count", 0)
            self.partial += result.result.get("partial_unexpected_list", [])[: PARTIAL_UNEXPECTED - len(self.partial)]
            if self.kind in (VALUES_BETWEEN, LENGTHS_BETWEEN):
                self._observe_range(frame[self.kwargs["column"]])

    def _observe_range(self, column: pd.Series) -> None:
        values = (column.str.len() if self.kind == LENGTHS_BETWEEN else column).dropna()
        if len(values):
            low, high = _plain(values.min()), _plain(values.max())
            self.low = low if self.low is None else min(self.low, low)
            self.high = high if self.high is None else max(self.high, high)

    def _counts(self, unexpected: int, partial: list) -> dict:
        """GE's SUMMARY keys of a row-wise result over every batch."""
        counted = self.elements - self.missing
        found = {
            "element_count": self.elements,
            "missing_count": self.missing,
            "unexpected_count": unexpected,
            "unexpected_percent": 100 * unexpected / counted if counted else None,
            "partial_unexpected_list": partial,
        }
        if self.kind in (VALUES_BETWEEN, LENGTHS_BETWEEN):
            found.update({OBSERVED_MIN: self.low, OBSERVED_MAX: self.high})
        return found

    def result(self) -> MergedResult:
        config, kwargs = self.config, self.kwargs
        if self.failed is not None:
            return MergedResult(config, False, {}, self.failed)
        if self.kind in ROW_COUNT:
            return MergedResult(config, _in_bounds(self.total, kwargs), {"observed_value": self.total})
        if self.kind == COLUMN_MAX:
            return MergedResult(config, _in_bounds(self.highest, kwargs), {"observed_value": self.highest})
        if self.kind == UNIQUE:
            count, first = _duplicated(self.column)
            return MergedResult(config, not count, self._counts(count, first))
        counted = self.elements - self.missing
        success = counted == 0 or (counted - self.unexpected) / counted >= kwargs.get("mostly", 1.0)
        return MergedResult(config, success, self._counts(self.unexpected, self.partial))


def _plain(value):
    """A numpy or Arrow scalar as the Python number it holds."""
    return value.item() if hasattr(value, "item") else value


def _duplicated(chunks: list[pa.Array]) -> tuple[int, list]:
    """(how many, the first PARTIAL_UNEXPECTED) of the column's non-null values that occur more than once, each
    occurrence counted, in row order."""
    typed = [c.type for c in chunks if c.type != pa.null()]
    if not typed:  # no values, or nulls only
        return 0, []
    column = pa.chunked_array([c.cast(typed[0]) for c in chunks], type=typed[0])  # an all-null batch is null-typed
    counted = pc.value_counts(column)
    repeated = pc.filter(counted.field("values"), pc.greater(counted.field("counts"), 1)).drop_null()
    duplicated = pc.filter(column, pc.is_in(column, value_set=repeated))
    return len(duplicated), duplicated.slice(0, PARTIAL_UNEXPECTED).to_pylist()


def validate(suites: dict[str, gx.ExpectationSuite], frames: Iterable[tuple[str, pd.DataFrame]]) -> dict[str, list[MergedResult]]:
    """Validate each (table, frame) of `frames` with its table's suite in `suites`; per table, the merged result of
    each expectation over all its frames (every table needs one, an empty frame for an empty table)."""
    context = _context()
    source = context.data_sources.add_pandas("bioel")
    definitions = {}
    for table, suite in suites.items():
        batch = source.add_dataframe_asset(table).add_batch_definition_whole_dataframe("all")
        definitions[table] = context.validation_definitions.add(
            gx.ValidationDefinition(name=table, data=batch, suite=context.suites.add(suite))
        )
    merged: dict[str, list[_Merge]] = {}
    for table, frame in frames:
        results = definitions[table].run(batch_parameters={"dataframe": frame}, result_format=RESULT_FORMAT).results
        for merge, result in zip(merged.setdefault(table, [_Merge(r.expectation_config) for r in results]), results):
            merge.add(result, frame)
    missing = [table for table in suites if table not in merged]
    if missing:
        raise ValueError(f"{missing[0]}: no batch of rows to validate (an empty table is one empty frame)")
    return {table: [m.result() for m in merged[table]] for table in suites}
