"""Data-quality checks of the KB tables (great-expectations): `report` writes HTML data docs and summary.json.

Importing this package is cheap; great-expectations is imported when `report` runs.
"""

from bioel_core.quality.report import format_summary, report

__all__ = ["format_summary", "report"]
