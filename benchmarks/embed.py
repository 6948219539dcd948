"""Embedding speed and memory: MeSH thesaurus names encoded in process vs by `bioel embed` (1 and 2 workers).

    python benchmarks/embed.py [--model DIR [--pooling cls|mean]] [--names KB_DIR] [--limit N] [--threads N] [--json OUT]

Without --names, the MeSH 2024 thesaurus TSV is ingested once with `bioel ingest-kb --input-format mesh-tsv` into a cache
folder (reused while the input's sha256 is unchanged). --limit N (default 40,000; 0 = all) keeps the N names
with the smallest name_id, a hash, so a uniform sample, written as a names folder of its own. Three modes, each
in its own child process so peak RSS is per mode: a plain `Encoder.encode` loop (batch 256, length-sorted),
the Beam pipeline with one worker (FnApiRunner in process) and with two worker processes. Times are end to
end after imports: model load, reading, encoding (and for the pipeline, writing). The pipeline's vectors are
compared with the in-process ones. Each mode also runs on the START_UP_NAMES smallest name_ids first: that run's
time is its start-up (model load, worker processes), and the full run's extra names over its extra seconds its
steady-state rate. Every process encodes with --threads torch threads (default 1:
in process, each pipeline worker, `--threads_per_worker`), so 2 workers vs 1 compares workers, not threads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from benchmarks.children import run_child, steady_rate  # noqa: E402
from bioel_core.embeddings import read_embeddings  # noqa: E402
from bioel_core.models import DEFAULT_MODEL  # noqa: E402
from bioel_core.models import default_base_checkpoint  # noqa: E402
from bioel_core.tables import read_manifest, read_table  # noqa: E402
from schemas import NAMES_SCHEMA  # noqa: E402

DEFAULT_INPUT = REPO.parent / "shared/data/mesh/data_mesh_thesaurus.tsv.gz"
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "bioel-bench-mesh-names"
DEFAULT_LIMIT = 40_000  # ~3 x 70 s of MiniLM at ~600 names/s on 2 CPU cores, plus the one-off ingest
BATCH_SIZE = 256
PIPELINE_MODES = {
    "Beam pipeline, 1 worker (FnApiRunner)": [],
    "Beam pipeline, 2 worker processes": ["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
}
IN_PROCESS = "in process (Encoder.encode loop)"
START_UP_NAMES = 2048

CHILD_IN_PROCESS = """
import json, sys, time
import numpy as np
import torch
torch.set_num_threads({threads})
sys.path.insert(0, {repo!r})
from bioel_core.models import open_model
from bioel_core.tables import read_table
t0 = time.perf_counter()
names = read_table({names!r}, "names", ["name_id", "name_norm"])
encoder = open_model({model!r}, {pooling!r}, {device!r})
t1 = time.perf_counter()
vectors = encoder.encode(names.column("name_norm").to_pylist(), batch_size={batch_size})
t2 = time.perf_counter()
np.save({out!r} + "/ids.npy", names.column("name_id").to_numpy())
np.save({out!r} + "/vectors.npy", vectors)
print(json.dumps({{"seconds": t2 - t0, "encode_seconds": t2 - t1, "names": len(vectors), "embedded": len(vectors),
                  "reconciled": True, "peak_rss_kb": {peak}}}))
"""
CHILD_PIPELINE = """
import json, sys, time
sys.path.insert(0, {repo!r})
from pipelines import embed_names
from pipelines.options import pipeline_options
t0 = time.perf_counter()
m = embed_names.run({model!r}, {names!r}, {out!r}, pipeline_options({flags!r} + ["--threads_per_worker={threads}"]),
                    pooling={pooling!r}, device={device!r}, batch_size={batch_size})
dt = time.perf_counter() - t0
print(json.dumps({{"seconds": dt, "names": m["counts"]["names_read"], "embedded": m["counts"]["embedded"],
                  "reconciled": all(m["reconciliation"].values()), "peak_rss_kb": {peak}}}))
"""


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ingested_mesh(input_path: Path, cache: Path) -> Path:
    """The cached ingest of the thesaurus, ingested again when missing or made from another input file."""
    try:
        if read_manifest(cache)["inputs"][0]["sha256"] == sha256_file(input_path):
            print(f"reusing the ingested thesaurus in {cache}")
            return cache
    except (RuntimeError, FileNotFoundError, KeyError, IndexError):
        pass
    print(f"ingesting {input_path} -> {cache} (bioel ingest-kb --input-format mesh-tsv) ...", flush=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "ingest-kb",
            "--input-format",
            "mesh-tsv",
            "--input",
            str(input_path),
            "--output",
            str(cache),
            "--no-quality",
        ],
        check=True,
        cwd=REPO,
    )
    return cache


def names_subset(names_dir: Path, limit: int, folder: Path) -> Path:
    """A names folder holding the `limit` names with the smallest name_id, its manifest saying what it is."""
    table = read_table(names_dir, "names").sort_by("name_id").slice(0, limit)
    (folder / "names").mkdir(parents=True)
    pq.write_table(table.cast(NAMES_SCHEMA), folder / "names" / "part-00000-of-00001.parquet")
    manifest = read_manifest(names_dir)
    manifest["outputs"] = {"names": {"files": ["names/part-00000-of-00001.parquet"], "rows": table.num_rows}}
    manifest.pop("generation", None)  # the subset's table is in the folder itself, not in a generation of it
    manifest["benchmark_subset"] = {"of": str(names_dir), "rule": f"the {limit} smallest name_ids"}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return folder


def max_difference(reference: dict[int, np.ndarray], emb_dir: Path) -> float:
    emb = read_embeddings(emb_dir)
    if not len(emb.name_ids):
        return 0.0
    expected = np.stack([reference[i] for i in emb.name_ids.tolist()])
    return float(np.abs(emb.vectors - expected).max())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help=f"model folder (default {DEFAULT_MODEL}, else the packaged MiniLM, mean pooling)")
    ap.add_argument("--pooling", choices=["cls", "mean"], help="pooling of a plain HF checkpoint given with --model")
    ap.add_argument("--names", help="an ingest-kb output to encode instead of the MeSH thesaurus")
    ap.add_argument("--input", default=str(DEFAULT_INPUT), help="MeSH thesaurus TSV to ingest when --names is not given")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="where the ingested thesaurus is kept between runs")
    ap.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"names to encode (default {DEFAULT_LIMIT:,}; 0 = all)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]: where every mode encodes (`bioel embed --device`)")
    ap.add_argument("--batch-size", type=int, default=BATCH_SIZE, help=f"names per encoder call (default {BATCH_SIZE})")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    model, pooling, model_note = args.model, args.pooling, args.model
    if model is None and DEFAULT_MODEL.is_dir():
        model_note = str(DEFAULT_MODEL)
    elif model is None:
        model, pooling = str(default_base_checkpoint()), "mean"
        model_note = f"packaged MiniLM base checkpoint, mean pooling ({model})"
        print(f"note: the default model {DEFAULT_MODEL} does not exist; using the {model_note}")
    if args.names:
        names_dir = Path(args.names)
    elif Path(args.input).exists():
        names_dir = ingested_mesh(Path(args.input), Path(args.cache))
    else:
        print(f"input not found: {args.input} (give --names KB_DIR instead)", file=sys.stderr)
        return 2

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        names = names_subset(names_dir, args.limit, tmp / "names") if args.limit else names_dir
        small = names_subset(names_dir, START_UP_NAMES, tmp / "start-up-names")
        common = {
            "repo": str(REPO),
            "model": model,
            "pooling": pooling,
            "batch_size": args.batch_size,
            "peak": "peak_rss_kb()",
            "threads": args.threads,
            "device": args.device,
        }

        def measured(label: str, child: str, out: Path, **extra) -> dict:
            """The mode on the names, after a run on START_UP_NAMES names whose time stands for its start-up."""
            start = run_child(child.format(out=str(out) + "-start-up", names=str(small), **common, **extra))
            row = run_child(child.format(out=str(out), names=str(names), **common, **extra))
            return {
                **row,
                "start_up_seconds": start["seconds"],
                "steady_names_per_s": steady_rate(row["names"], row["seconds"], start["names"], start["seconds"]),
            }

        for label in (IN_PROCESS, *PIPELINE_MODES):
            print(f"{label} ...", flush=True)
            out = tmp / f"mode-{len(results)}"
            if label == IN_PROCESS:
                (tmp / "mode-0-start-up").mkdir()
                out.mkdir()
                results[label] = measured(label, CHILD_IN_PROCESS, out)
                reference = dict(zip(np.load(out / "ids.npy").tolist(), np.load(out / "vectors.npy")))
            else:
                results[label] = measured(label, CHILD_PIPELINE, out, flags=PIPELINE_MODES[label])
                results[label]["max_abs_difference_vs_in_process"] = max_difference(reference, out)

    base = results[IN_PROCESS]
    one, two = (results[label] for label in PIPELINE_MODES)
    print(
        f"\nmodel: {model_note}; names: {base['names']:,} from {names_dir}; batch {args.batch_size}; device {args.device}; "
        f"{os.cpu_count()} CPUs, {args.threads} torch thread(s) per process; {platform.processor() or platform.machine()}"
    )
    print(
        f"{'mode':40} {'seconds':>8} {'names/s':>8} {'start-up s':>10} {'steady names/s':>14} {'peak RSS MB':>11} "
        f"{'vs in process':>13} {'max |diff|':>10}"
    )
    for label, r in results.items():
        diff = r.get("max_abs_difference_vs_in_process")
        print(
            f"{label:40} {r['seconds']:8.1f} {r['names'] / r['seconds']:8,.0f} {r['start_up_seconds']:10.1f} "
            f"{r['steady_names_per_s']:14,.0f} {r['peak_rss_kb'] / 1024:11,.0f} "
            f"{base['seconds'] / r['seconds']:12.2f}x {'-' if diff is None else f'{diff:.1e}':>10}"
        )
    ratios = {
        "two_workers_vs_one": one["seconds"] / two["seconds"],
        "pipeline_1_worker_vs_in_process": base["seconds"] / one["seconds"],
        "pipeline_2_workers_vs_in_process": base["seconds"] / two["seconds"],
        "two_workers_vs_one_steady": two["steady_names_per_s"] / one["steady_names_per_s"],
        "pipeline_1_worker_vs_in_process_steady": one["steady_names_per_s"] / base["steady_names_per_s"],
    }
    print(
        f"2 workers / 1 worker: {ratios['two_workers_vs_one']:.2f}x end to end, "
        f"{ratios['two_workers_vs_one_steady']:.2f}x steady state; pipeline (1 worker) / in process: "
        f"{ratios['pipeline_1_worker_vs_in_process']:.2f}x end to end, {ratios['pipeline_1_worker_vs_in_process_steady']:.2f}x "
        f"steady state (names/s ratios); in-process encode alone: {base['names'] / base['encode_seconds']:,.0f} names/s"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "model": model_note,
                    "names_dir": str(names_dir),
                    "limit": args.limit,
                    "batch_size": args.batch_size,
                    "device": args.device,
                    "cpus": os.cpu_count(),
                    "threads_per_process": args.threads,
                    "start_up_names": START_UP_NAMES,
                    "modes": results,
                    "ratios": ratios,
                },
                indent=2,
            )
        )
    ok = all(r["reconciled"] and r["embedded"] == r["names"] for r in results.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
