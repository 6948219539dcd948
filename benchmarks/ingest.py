"""Ingest speed and memory: the MeSH 2024 thesaurus (263,936 name rows), or a synthetic UMLS MRCONSO of any size,
through `ingest-kb`.

    python benchmarks/ingest.py [--input ../shared/data/mesh/data_mesh_thesaurus.tsv.gz] [--json OUT]
    python benchmarks/ingest.py --synthetic-rows 10000000 [--json OUT]    (benchmarks/synthetic_mrconso.py, format umls)

Each mode runs in its own child process so peak RSS (the child and its workers) is measured per mode.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.children import run_child  # noqa: E402

DEFAULT_INPUT = REPO.parent / "shared/data/mesh/data_mesh_thesaurus.tsv.gz"
MODES = {
    "in process (FnApiRunner, 1 worker)": [],
    "DirectRunner 2 workers (multi_processing)": ["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
}
WORKERS = dict(zip(MODES, (1, 2)))

CHILD = """
import json, sys, time
sys.path.insert(0, {repo!r})
from pipelines import ingest_kb
from pipelines.options import pipeline_options
t0 = time.perf_counter()
m = ingest_kb.run({fmt!r}, [{inp!r}], {out!r}, pipeline_options({flags!r}))
dt = time.perf_counter() - t0
peak = peak_rss_kb()
print(json.dumps({{"seconds": dt, "records": m["counts"]["records_read"], "concepts": m["outputs"]["concepts"]["rows"],
                  "names": m["outputs"]["names"]["rows"], "reconciled": all(m["reconciliation"].values()), "peak_rss_kb": peak}}))
"""


def run_mode(flags: list[str], inp: str, fmt: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        code = CHILD.format(repo=str(REPO), fmt=fmt, inp=inp, out=str(Path(tmp) / "out"), flags=flags)
        return run_child(code)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(DEFAULT_INPUT), help="a MeSH thesaurus TSV")
    ap.add_argument("--synthetic-rows", type=int, help="instead: a synthetic MRCONSO.RRF of this many rows (format umls)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    fmt, inp = "mesh-tsv", args.input
    if args.synthetic_rows:
        from benchmarks.synthetic_mrconso import write_mrconso

        folder = Path(tempfile.gettempdir()) / f"bioel-bench-mrconso-{args.synthetic_rows}"
        fmt, inp = "umls", str(folder / "MRCONSO.RRF")
        if not Path(inp).exists():
            print(f"writing a synthetic MRCONSO of {args.synthetic_rows:,} rows to {inp} ...", flush=True)
            write_mrconso(folder, args.synthetic_rows)
    if not Path(inp).exists():
        print(f"input not found: {inp}", file=sys.stderr)
        return 2
    results = {}
    for label, flags in MODES.items():
        print(f"{label} ...", flush=True)
        results[label] = run_mode(flags, inp, fmt)
    base = next(iter(results.values()))["seconds"]
    print(
        f"{'mode':45} {'seconds':>8} {'rows/s':>9} {'per worker':>10} {'concepts':>9} {'names':>9} {'peak RSS MB':>11} {'vs first':>8}"
    )
    for label, r in results.items():
        rate = r["records"] / r["seconds"]
        print(
            f"{label:45} {r['seconds']:8.1f} {rate:9,.0f} {rate / WORKERS[label]:10,.0f} {r['concepts']:9,} {r['names']:9,} "
            f"{r['peak_rss_kb'] / 1024:11,.0f} {base / r['seconds']:7.2f}x"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"format": fmt, "input": inp, "modes": results}, indent=2))
    return 0 if all(r["reconciled"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
