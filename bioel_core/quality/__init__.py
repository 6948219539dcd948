"""Data-quality checks of pipeline outputs (great-expectations): `report` writes report.html, one page that
opens offline, and summary.json.

Importing this package is cheap; great-expectations and matplotlib are imported when `report` runs.
"""

from bioel_core.quality.report import QualityGate, format_summary, report

__all__ = ["QualityGate", "format_summary", "report"]
