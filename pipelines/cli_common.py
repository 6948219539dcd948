"""What every pipeline verb does once its job has run: refuse counts that do not reconcile, then run the
quality report on the output (exit codes 3 and 4)."""

from __future__ import annotations

import json
import sys


def quality(table_dir: str, output: str | None, fail_on: str) -> int:
    from bioel_core.quality import format_summary, report

    summary = report(table_dir, output_dir=output, fail_on=fail_on)
    print(format_summary(summary))
    return 0 if summary["passed"] else 4


def finish(manifest: dict, output: str, no_quality: bool, fail_on: str) -> int:
    if not all(manifest["reconciliation"].values()):
        print(f"error: counts do not reconcile: {json.dumps(manifest['reconciliation'])}", file=sys.stderr)
        return 3
    return 0 if no_quality else quality(output, None, fail_on)
