"""What the benchmarks that time each mode in a process of its own share."""

from __future__ import annotations

import json
import subprocess
import sys


def run_child(code: str) -> dict:
    """Runs `code` in a fresh Python; returns the JSON object on the last line it printed."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def steady_rate(rows: int, seconds: float, start_rows: int, start_seconds: float) -> float:
    """Rows a second past start-up: a full run's extra rows over its extra seconds beyond a small run's (whose
    time stands for the start-up); NaN when the input is too small to outlast it."""
    extra = seconds - start_seconds
    return (rows - start_rows) / extra if rows > start_rows and extra > 0 else float("nan")
