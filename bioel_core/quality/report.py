"""The quality report of an ingest output folder: HTML data docs plus a summary.json a program can gate on."""

from __future__ import annotations

import json
import math
from pathlib import Path

from bioel_core.quality.frames import load_frames, table_stats
from bioel_core.tables import read_manifest

FAIL_ON = ("critical", "warning", "none")
SUMMARY = "summary.json"
DOCS = "data_docs"
OBSERVED_ITEMS = 5
OBSERVED_CHARS = 80
TERMINAL_OBSERVED_CHARS = 100


def _short(value):
    """A JSON-safe, bounded rendering of a GE observed value (numpy scalars, long names, long lists)."""
    if isinstance(value, dict):
        return {str(k): _short(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_short(v) for v in value[:OBSERVED_ITEMS]]
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str) and len(value) > OBSERVED_CHARS:
        return value[:OBSERVED_CHARS - 3] + "..."
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _check(table: str, result) -> dict:
    config = result.expectation_config
    info = result.exception_info or {}
    found = result.result or {}
    if info.get("raised_exception"):
        observed = "error: " + _short(info.get("exception_message") or "")
    elif "observed_value" in found:
        observed = _short(found["observed_value"])
    else:
        observed = _short(found.get("partial_unexpected_list", []))
    return {
        "table": table,
        "expectation": config.type,
        "column": config.kwargs.get("column"),
        "severity": config.meta["severity"],
        "success": bool(result.success),
        "observed": observed,
        "unexpected_count": found.get("unexpected_count"),
    }


def report(table_dir: str | Path, output_dir: str | Path | None = None, fail_on: str = "critical", *,
           max_names_per_concept: int = 1000, max_name_length: int = 500) -> dict:
    """Check the concepts and names tables of `table_dir`; write data docs and summary.json; return the summary.

    `passed` is False when a check of severity `fail_on` or above failed ("none": never). The two maxima are
    warning thresholds: beyond them a KB is suspicious (a parsing slip, merged dumps) but still usable.
    """
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {FAIL_ON}, not {fail_on!r}")
    # great-expectations takes seconds to import: only pay for it when a report is actually made
    from bioel_core.quality.kb_tables import concepts_suite, names_suite
    from bioel_core.quality.validation import validate

    table_dir = Path(table_dir)
    output_dir = Path(output_dir) if output_dir is not None else table_dir / "quality"
    manifest = read_manifest(table_dir)
    if not manifest.get("id_pattern"):
        raise ValueError(f"{table_dir}: the manifest has no id_pattern; re-run the ingest with this bioel version")

    frames = load_frames(table_dir)
    results = validate({
        "concepts": (frames.concepts, concepts_suite(manifest["id_pattern"], max_names_per_concept)),
        "names": (frames.names, names_suite(manifest["id_pattern"], max_name_length)),
    }, output_dir / DOCS)

    checks = [_check(table, r) for table, suite_result in results.items() for r in suite_result.results]
    failed = [c["severity"] for c in checks if not c["success"]]
    critical, warnings = failed.count("critical"), failed.count("warning")
    summary = {
        "table_dir": str(table_dir),
        "kb": manifest.get("kb"),
        "fail_on": fail_on,
        "passed": fail_on == "none" or (critical == 0 and (fail_on == "critical" or warnings == 0)),
        "critical_failures": critical,
        "warnings": warnings,
        "checks": checks,
        "stats": table_stats(frames),
        "html": str(output_dir / DOCS / "index.html"),
        "summary_json": str(output_dir / SUMMARY),
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _dist(d: dict) -> str:
    return " ".join(f"{k} {v}" for k, v in d.items())


def format_summary(summary: dict) -> str:
    """A few lines for the terminal: verdict, table sizes, the failed checks, where the full report is."""
    verdict = "PASSED" if summary["passed"] else "FAILED"
    stats = summary["stats"]
    lines = [
        f"quality {verdict} (fail on {summary['fail_on']}): {summary['table_dir']}",
        f"  {stats['concepts']:,} concepts, {stats['names']:,} names; "
        f"names/concept: {_dist(stats['names_per_concept'])}; name length: {_dist(stats['name_length'])}",
        f"  {summary['critical_failures']} critical failures, {summary['warnings']} warnings, "
        f"{sum(c['success'] for c in summary['checks'])}/{len(summary['checks'])} checks passed",
    ]
    for c in summary["checks"]:
        if not c["success"]:
            where = f"{c['table']}.{c['column']}"
            count = "" if c["unexpected_count"] is None else f" ({c['unexpected_count']:,} rows)"
            observed = json.dumps(c["observed"])
            if len(observed) > TERMINAL_OBSERVED_CHARS:
                observed = observed[:TERMINAL_OBSERVED_CHARS - 3] + "..."
            lines.append(f"  {c['severity'].upper():8} {where:28} {c['expectation']}{count}: {observed}")
    lines += [f"  HTML report:  {summary['html']}", f"  summary.json: {summary['summary_json']}"]
    return "\n".join(lines)
