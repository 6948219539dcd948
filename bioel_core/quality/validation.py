"""Running the suites with great-expectations, in memory, and writing the HTML data docs."""

from __future__ import annotations

import shutil
from pathlib import Path

import great_expectations as gx
import pandas as pd
from great_expectations.core import ExpectationSuiteValidationResult
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)

SITE = "bioel_quality"
# SUMMARY keeps a few unexpected values per check, enough to find the bad rows without bloating the pages
RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": 20}


def _context(docs_dir: Path):
    # Ephemeral: suites and results live in memory, so nothing is written outside docs_dir (no gx/ folder);
    # analytics off and no progress bars (tqdm would print one per expectation batch to stderr).
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        data_docs_sites={SITE: {
            "class_name": "SiteBuilder",
            "show_how_to_buttons": False,
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir.resolve())},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        }},
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(mode="ephemeral", project_config=config)


def validate(batches: dict[str, tuple[pd.DataFrame, gx.ExpectationSuite]],
             docs_dir: Path) -> dict[str, ExpectationSuiteValidationResult]:
    """Validate each (frame, suite) under its table name; rebuild the data docs in docs_dir from these runs only."""
    # the site index lists every page under docs_dir: pages of an earlier report would show as current
    shutil.rmtree(docs_dir, ignore_errors=True)
    context = _context(docs_dir)
    source = context.data_sources.add_pandas("bioel")
    results = {}
    for table, (frame, suite) in batches.items():
        batch = source.add_dataframe_asset(table).add_batch_definition_whole_dataframe("all")
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=table, data=batch, suite=context.suites.add(suite)))
        results[table] = definition.run(batch_parameters={"dataframe": frame}, result_format=RESULT_FORMAT)
    context.build_data_docs(site_names=[SITE])
    return results
