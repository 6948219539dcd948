"""Running the suites with great-expectations, in memory (the report page is html.py's, not GE's data docs)."""

from __future__ import annotations

import great_expectations as gx
import pandas as pd
from great_expectations.core import ExpectationSuiteValidationResult
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)

# SUMMARY keeps a few unexpected values per check, enough to find the bad rows without bloating the report
RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": 20}


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


def validate(batches: dict[str, tuple[pd.DataFrame, gx.ExpectationSuite]]) -> dict[str, ExpectationSuiteValidationResult]:
    """Validate each (frame, suite) under its table name."""
    context = _context()
    source = context.data_sources.add_pandas("bioel")
    results = {}
    for table, (frame, suite) in batches.items():
        batch = source.add_dataframe_asset(table).add_batch_definition_whole_dataframe("all")
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=table, data=batch, suite=context.suites.add(suite)))
        results[table] = definition.run(batch_parameters={"dataframe": frame}, result_format=RESULT_FORMAT)
    return results
