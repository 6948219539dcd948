"""Bulk linking speed end to end: read, detect, encode, search, write, on the 2,292 PubMed abstracts of
NCBI-disease and BC5CDR (../shared/data/pubmed_abstracts), with diseases linked to MEDIC and chemicals
to the MeSH 2024 thesaurus (tree D, Chemicals and Drugs; benchmarks/kbs.py).

    .venv/bin/python benchmarks/bulk_link.py [--model DIR] [--detector D] [--work DIR] [--json OUT] [--limit N] [--modes M ...]

The KB tables, embeddings and indexes are built once into --work with the `bioel` verbs (not timed) and
reused. Then, in one run and each in its own process (so peak RSS is per mode):
- in process: bioel_core only (read_documents -> DocumentAnnotator -> one Parquet file), no Beam;
- `bioel link` on the local runner with 1 worker;
- `bioel link --direct_num_workers=2 --direct_running_mode=multi_processing`.
Wall time counts everything the command does, model and index loading included.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.kbs import BIOEL, DATA, annotator_flags, prepare  # noqa: E402
from bioel_core.linking import DETECTORS  # noqa: E402

ABSTRACTS = DATA / "pubmed_abstracts" / "abstracts_ncbi_bc5cdr.jsonl"
MODES = {"in-process": "in process (bioel_core, no Beam)", "one-worker": "bioel link, 1 worker",
         "two-workers": "bioel link, 2 workers (multi_processing)"}


def corpus(work: Path, limit: int) -> Path:
    if not limit:
        return ABSTRACTS
    path = work / f"bulk-abstracts-{limit}.jsonl"
    with open(ABSTRACTS) as src, open(path, "w") as dst:
        for i, line in enumerate(src):
            if i == limit:
                break
            dst.write(line)
    return path


def in_process(args) -> None:
    """Child mode: the annotator without Beam; prints its figures as JSON."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bioel_core.corpora import Document, read_documents
    from bioel_core.linking.annotate import AnnotatorSpec
    from schemas import ANNOTATIONS_SCHEMA

    began = time.perf_counter()
    spec = AnnotatorSpec(model=args.model, indexes=tuple(json.loads(args.indexes).items()),
                         stop_lists=tuple(json.loads(args.stop_lists).items()), detector=args.detector)
    annotator = spec.open()
    docs = [d for d in read_documents([args.input], "jsonl") if isinstance(d, Document)]
    rows = []
    for start in range(0, len(docs), 64):
        batch = docs[start:start + 64]
        for d in batch:
            annotator.check(d)
        for r in annotator.annotate(batch):
            rows.extend(r)
    pq.write_table(pa.Table.from_pylist(rows, schema=ANNOTATIONS_SCHEMA), args.output)
    print(json.dumps({"documents": len(docs), "mentions": len(rows), "seconds": time.perf_counter() - began,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


# Runs a mode's command and reports on stderr's last line the peak RSS of its largest process (workers included):
# this process's own RUSAGE_CHILDREN would carry the largest of every earlier mode into the later ones.
PEAK_RSS_WRAPPER = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
                    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")


def measure(label: str, command: list[str], documents: int, output: Path) -> dict:
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS_WRAPPER, *[str(c) for c in command]], cwd=ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if proc.returncode:
        raise SystemExit(f"{label} failed:\n{proc.stdout}\n{proc.stderr}")
    rss = int(proc.stderr.strip().splitlines()[-1]) / 1024
    if output.suffix == ".parquet":
        mentions = json.loads(proc.stdout.strip().splitlines()[-1])["mentions"]
    else:
        mentions = json.loads((output / "manifest.json").read_text())["counts"]["mentions"]["linked"]
    return {"mode": label, "documents": documents, "mentions": mentions, "seconds": seconds,
            "abstracts_per_s": documents / seconds, "mentions_per_s": mentions / seconds, "peak_rss_mb": rss}


def abstracts_parser(description: str) -> argparse.ArgumentParser:
    """The flags of every benchmark over the shared abstracts."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", help="model folder (default: the shipped disease model)")
    parser.add_argument("--work", default=str(ROOT / ".bench"), help="cache of KB tables, embeddings, indexes (shared with e2e_bc5cdr.py) and runs")
    parser.add_argument("--limit", type=int, default=0, help="first N abstracts only (0: all 2,292)")
    parser.add_argument("--detector", choices=DETECTORS, default="dictionary",
                        help="mention detector; model needs a collective --model (e.g. models/bc5cdr-collective)")
    parser.add_argument("--json", help="write the figures here")
    return parser


def main() -> None:
    parser = abstracts_parser(__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES), help="which modes to run (default: all)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--indexes", help=argparse.SUPPRESS)
    parser.add_argument("--stop-lists", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        in_process(args)
        return
    from bioel_core.models import model_folder

    model = str(model_folder(args.model))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    kbs = prepare(work, model)
    indexes = {t: kb["index"] for t, kb in kbs.items()}
    stop_lists = {t: kb["stop_list"] for t, kb in kbs.items()}
    source = corpus(work, args.limit)
    documents = sum(1 for line in open(source) if line.strip())
    link = BIOEL + ["link", *annotator_flags(kbs, model), "--input", source,
                    "--input-format", "jsonl", "--detector", args.detector, "--no-quality"]
    runs = {
        "in-process": lambda: measure(
            MODES["in-process"], [sys.executable, __file__, "--child", "--model", model, "--input", source,
                                  "--indexes", json.dumps({t: str(p) for t, p in indexes.items()}),
                                  "--stop-lists", json.dumps({t: str(p) for t, p in stop_lists.items()}),
                                  "--detector", args.detector, "--output", work / "bulk-inprocess.parquet"],
            documents, work / "bulk-inprocess.parquet"),
        "one-worker": lambda: measure(MODES["one-worker"], link + ["--output", work / "bulk-out-1", "--runner", "FnApiRunner"],
                                      documents, work / "bulk-out-1"),
        "two-workers": lambda: measure(MODES["two-workers"], link + ["--output", work / "bulk-out-2", "--runner", "FnApiRunner",
                                                                     "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
                                       documents, work / "bulk-out-2"),
    }
    rows = {mode: runs[mode]() for mode in MODES if mode in args.modes}
    print(f"\nBulk linking, {documents:,} abstracts ({source.name}), model {model}, {os.cpu_count()} CPUs, "
          f"{platform.python_implementation()} {platform.python_version()}")
    print(f"{'mode':<42}{'seconds':>9}{'abstracts/s':>13}{'mentions/s':>12}{'mentions':>10}{'peak RSS MB':>13}")
    for r in rows.values():
        print(f"{r['mode']:<42}{r['seconds']:>9.1f}{r['abstracts_per_s']:>13.1f}{r['mentions_per_s']:>12.1f}"
              f"{r['mentions']:>10,}{r['peak_rss_mb']:>13.0f}")
    result = {"documents": documents, "model": model, "detector": args.detector, "runs": list(rows.values())}
    if "one-worker" in rows and "two-workers" in rows:
        result["two_vs_one_worker"] = rows["two-workers"]["abstracts_per_s"] / rows["one-worker"]["abstracts_per_s"]
        print(f"2 workers / 1 worker: {result['two_vs_one_worker']:.2f}x; peak RSS is the largest single process")
    linked = [rows[m] for m in ("one-worker", "two-workers") if m in rows]
    if linked:  # what `bioel link` reaches, the better of its modes
        best = max(linked, key=lambda r: r["abstracts_per_s"])
        result.update(abstracts_per_s=best["abstracts_per_s"], mentions_per_s=best["mentions_per_s"], best_mode=best["mode"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
