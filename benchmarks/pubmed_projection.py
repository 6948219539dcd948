"""The PubMed baseline projected from measured per-worker rates: wall time on N workers and the workers a deadline
needs, for each detector and device measured (issue 43).

    python benchmarks/pubmed_projection.py --bulk BULK.json [BULK.json ...] [--gpu GPU.json]
        [--abstracts 36000000] [--daily 4000] [--workers 1 8 32 128] [--deadline-hours 24] [--json OUT]

Rates come from the benchmarks' own JSON, never typed in: `benchmarks/bulk_link.py --json` (the steady-state
abstracts/s of `bioel link` with 1 worker, and its start-up seconds and peak RSS), `benchmarks/gpu_workers.py --json`
(the link rate of each device; no start-up figure, so none is added). A row per measured run.

The projection assumes what a Beam runner gives a document-parallel job: each worker links its own documents with its
own model, dictionaries and indexes, so N workers link N times as fast after each has started once. The 2-worker
figure on this 2-core machine is no test of that (one worker already uses both cores, bulk_link.py's section in
RESULTS.md): the rate is per worker of the measured size (cores, threads), and a worker on other hardware is
measured again rather than scaled.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

BASELINE_ABSTRACTS = 36_000_000  # the PubMed baseline's citations, about (issue 43)
DAILY_ABSTRACTS = 4_000  # a daily update file holds a few thousand new or revised citations


def bulk_rows(path: Path) -> list[dict]:
    """The 1-worker `bioel link` run of a bulk_link.py JSON (the in-process run when there is none)."""
    report = json.loads(path.read_text())
    runs = {r["mode"]: r for r in report["runs"]}
    run = next((r for mode, r in runs.items() if "1 worker" in mode), None) or next(iter(runs.values()))
    runtime = f" on {report['document_runtime']}" if report.get("document_runtime") and report["detector"] != "dictionary" else ""
    return [
        {
            "label": f"{report['detector']} detector, {Path(report['model']).name}{runtime}, CPU ({run['mode']})",
            "abstracts_per_s": run["steady_abstracts_per_s"],
            "start_up_seconds": run["start_up_seconds"],
            "peak_rss_mb": run["peak_rss_mb"],
            "source": str(path),
        }
    ]


def gpu_rows(path: Path) -> list[dict]:
    """One row per device of a gpu_workers.py JSON's link figures (a run of several processes at once on a device:
    one row for them together, a worker being that machine)."""
    report = json.loads(path.read_text())
    machine = f"{report['environment'].get('gpu', 'no GPU')}, {report['environment']['cpu_count']} CPUs"

    def runs(device: str, figures: dict) -> str:
        if "processes" not in figures:
            return f"{device.split()[0]}, 1 process"
        return f"{device.split()[0]}, {figures['processes']} processes"

    return [
        {
            "label": f"{report['detector']} detector, {Path(report['model']).name}, {runs(device, figures)} ({machine})",
            "abstracts_per_s": figures["abstracts_per_s"],
            "start_up_seconds": 0.0,
            "peak_rss_mb": None,
            "source": str(path),
        }
        for device, figures in report["link"].items()
    ]


def project(row: dict, abstracts: int, daily: int, workers: list[int], deadline_hours: float) -> dict:
    """Hours for the baseline on each worker count, the workers the deadline needs and a daily file's minutes."""
    rate, start = row["abstracts_per_s"], row["start_up_seconds"]
    hours = {n: (start + abstracts / (rate * n)) / 3600 for n in workers}
    work_s = deadline_hours * 3600 - start
    needed = math.ceil(abstracts / (rate * work_s)) if work_s > 0 else None
    return {
        **row,
        "baseline_hours": hours,
        "workers_for_deadline": needed,
        "worker_hours": abstracts / rate / 3600,
        "daily_minutes_one_worker": (start + daily / rate) / 60,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bulk", nargs="*", default=[], help="benchmarks/bulk_link.py --json outputs")
    parser.add_argument("--gpu", nargs="*", default=[], help="benchmarks/gpu_workers.py --json outputs")
    parser.add_argument("--abstracts", type=int, default=BASELINE_ABSTRACTS, help="abstracts in the baseline")
    parser.add_argument("--daily", type=int, default=DAILY_ABSTRACTS, help="abstracts in one daily update file")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 8, 32, 128], help="worker counts to project")
    parser.add_argument("--deadline-hours", type=float, default=24.0, help="the baseline's wall-time target")
    parser.add_argument("--json", help="write the projection here")
    args = parser.parse_args()
    rows = [r for p in args.bulk for r in bulk_rows(Path(p))] + [r for p in args.gpu for r in gpu_rows(Path(p))]
    if not rows:
        parser.error("give at least one --bulk or --gpu measurement")
    projected = [project(r, args.abstracts, args.daily, args.workers, args.deadline_hours) for r in rows]
    print(f"PubMed baseline: {args.abstracts:,} abstracts; a daily file: {args.daily:,}; deadline {args.deadline_hours:g} h")
    head = "".join(f"{f'{n} worker(s) h':>16}" for n in args.workers)
    print(f"{'measured run':<96}{'abstracts/s':>12}{'worker-h':>10}{head}{'workers/deadline':>18}{'daily min':>11}")
    for p in projected:
        hours = "".join(f"{p['baseline_hours'][n]:>16.1f}" for n in args.workers)
        print(
            f"{p['label']:<96}{p['abstracts_per_s']:>12.1f}{p['worker_hours']:>10.0f}{hours}"
            f"{p['workers_for_deadline'] or '-':>18}{p['daily_minutes_one_worker']:>11.1f}"
        )
    print("N workers: start-up once, then N times the measured per-worker rate (see the module docstring)")
    if args.json:
        Path(args.json).write_text(json.dumps(projected, indent=2))


if __name__ == "__main__":
    main()
