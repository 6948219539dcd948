"""Running the suites with great-expectations, in memory (the report page is html.py's, not GE's data docs).

The tables come as a stream of (table, frame) pairs, a batch of rows each, in any order (a link output's documents
and annotations shard by shard, so each shard's texts are read once), and each table's batches' results are merged
into one per expectation, what one run over the whole table would have found: row-wise expectations add up their
counts and keep the first unexpected values; a row count is the sum of the batches', a column maximum their maximum;
uniqueness is decided over the whole column (a duplicate may sit in two batches). A table small enough to hold is
one batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import great_expectations as gx
import pandas as pd
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


def _merge(results: list, column: pd.Series | None) -> MergedResult:
    """The batches' results of one expectation as one result over the table; `column`: the whole column, for
    uniqueness."""
    first = results[0]
    config, kwargs = first.expectation_config, first.expectation_config.kwargs
    failed = next((r for r in results if (r.exception_info or {}).get("raised_exception")), None)
    if failed is not None:
        return MergedResult(config, False, {}, failed.exception_info)
    kind = config.type
    if kind in ROW_COUNT:
        total = sum(r.result["observed_value"] for r in results)
        return MergedResult(config, _in_bounds(total, kwargs), {"observed_value": total})
    if kind == COLUMN_MAX:
        found = [r.result["observed_value"] for r in results if r.result.get("observed_value") is not None]
        highest = max(found) if found else None
        return MergedResult(config, highest is not None and _in_bounds(highest, kwargs), {"observed_value": highest})
    if kind == UNIQUE:
        duplicated = column[column.notna() & column.duplicated(keep=False)]
        return MergedResult(config, duplicated.empty, {"unexpected_count": len(duplicated),
                                                       "partial_unexpected_list": duplicated.head(PARTIAL_UNEXPECTED).tolist()})
    unexpected = sum(r.result.get("unexpected_count", 0) for r in results)
    counted = sum(r.result.get("element_count", 0) - r.result.get("missing_count", 0) for r in results)
    mostly = kwargs.get("mostly", 1.0)
    success = counted == 0 or (counted - unexpected) / counted >= mostly
    partial = [v for r in results for v in r.result.get("partial_unexpected_list", [])][:PARTIAL_UNEXPECTED]
    return MergedResult(config, success, {"unexpected_count": unexpected, "partial_unexpected_list": partial})


def validate(suites: dict[str, gx.ExpectationSuite], frames: Iterable[tuple[str, pd.DataFrame]]) -> dict[str, list[MergedResult]]:
    """Validate each (table, frame) of `frames` with its table's suite in `suites`; per table, the merged result of
    each expectation over all its frames (every table needs one, an empty frame for an empty table)."""
    context = _context()
    source = context.data_sources.add_pandas("bioel")
    definitions = {}
    for table, suite in suites.items():
        batch = source.add_dataframe_asset(table).add_batch_definition_whole_dataframe("all")
        definitions[table] = context.validation_definitions.add(
            gx.ValidationDefinition(name=table, data=batch, suite=context.suites.add(suite)))
    unique = {table: {e.column for e in suite.expectations if e.expectation_type == UNIQUE} for table, suite in suites.items()}
    per_batch: dict[str, list] = {table: [] for table in suites}
    columns: dict[str, dict[str, list[pd.Series]]] = {table: {c: [] for c in unique[table]} for table in suites}
    for table, frame in frames:
        per_batch[table].append(definitions[table].run(batch_parameters={"dataframe": frame}, result_format=RESULT_FORMAT).results)
        for c in unique[table]:
            columns[table][c].append(frame[c])
    results = {}
    for table, batches in per_batch.items():
        if not batches:
            raise ValueError(f"{table}: no batch of rows to validate (an empty table is one empty frame)")
        results[table] = [_merge(list(rs), pd.concat(columns[table][rs[0].expectation_config.kwargs["column"]], ignore_index=True)
                                 if rs[0].expectation_config.type == UNIQUE else None)
                          for rs in zip(*batches)]
    return results
