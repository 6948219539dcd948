"""Bulk linking speed end to end: read, detect, encode, search, write, on the 2,292 PubMed abstracts of
NCBI-disease and BC5CDR (../shared/data/pubmed_abstracts), with diseases linked to MEDIC and chemicals
to the MeSH 2024 thesaurus (tree D, Chemicals and Drugs; benchmarks/kbs.py).

    .venv/bin/python benchmarks/bulk_link.py [--bundle DIR | --model DIR] [--detector D] [--work DIR] [--json OUT]
                                             [--limit N] [--modes M ...] [--copies K] [--threads N] [--document-runtime R]
                                             [--repeat N]

With --bundle, the linker is a built bundle folder's (`bioel build`), as a user links with it: the shipped
configuration is `bioel build benchmarks/diseases-chemicals.bundle.toml --output DIR`. Without, the KB tables,
embeddings and indexes of --model are built once into --work with the `bioel` verbs (not timed) and reused.
Then, in one run and each in its own process (so peak RSS is per mode):
- in process: bioel_core only (read_documents -> DocumentAnnotator -> one Parquet file), no Beam;
- `bioel link` on the local runner with 1 worker;
- `bioel link --direct_num_workers=2 --direct_running_mode=multi_processing`.
Wall time counts everything the command does, model and index loading included. --copies K makes a large corpus:
the abstracts K times over, each copy under new ids (`PMID-cK`). Every process runs --threads torch and FAISS
threads (default 1; `--threads_per_worker` for `bioel link`), so 2 workers vs 1 compares workers, not threads.
Each mode also runs on the first START_UP_DOCUMENTS documents: that run's time is its start-up (imports, model,
indexes, dictionaries, pipeline set-up), and the full run's extra documents over its extra seconds its
steady-state rate. --repeat N runs each mode N times, the modes taking turns, and reports each mode's median run
with every run's rates (this project's shared 2-core machine moves a run's rate by a third from one hour to the next).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.children import run_watched, steady_rate  # noqa: E402
from benchmarks.kbs import BIOEL, DATA, annotator_flags, prepare  # noqa: E402
from bioel_core.linking import DETECTORS, DOCUMENT_RUNTIMES  # noqa: E402

ABSTRACTS = DATA / "pubmed_abstracts" / "abstracts_ncbi_bc5cdr.jsonl"
MODES = {
    "in-process": "in process (bioel_core, no Beam)",
    "one-worker": "bioel link, 1 worker",
    "two-workers": "bioel link, 2 workers (multi_processing)",
}


START_UP_DOCUMENTS = 16


def corpus(work: Path, limit: int, copies: int = 1) -> Path:
    """The abstracts (the first `limit`; 0: all), `copies` times over, copy k>0 with ids `PMID-ck`."""
    if not limit and copies == 1:
        return ABSTRACTS
    path = work / f"bulk-abstracts-{limit or 'all'}x{copies}.jsonl"
    with open(ABSTRACTS) as src:
        records = [json.loads(line) for line in src if line.strip()][: limit or None]
    with open(path, "w") as dst:
        for k in range(copies):
            for record in records:
                dst.write(json.dumps({**record, "pmid": f"{record['pmid']}-c{k}" if k else record["pmid"]}) + "\n")
    return path


@dataclass
class Linker:
    """What links: a built bundle, or a model with the KBs prepared for it in --work; its `bioel link` flags and the
    in-process child's."""

    label: str
    model: str
    detector: str
    document_runtime: str
    flags: list[str]
    child_flags: list[str]

    @classmethod
    def of(cls, args, work: Path) -> Linker:
        if args.bundle:
            from bioel_core.bundle import BuiltBundle

            settings = BuiltBundle.read(args.bundle).link_settings()
            model = settings.model or "the shipped disease model"
            detector = args.detector or settings.detector or "dictionary"
            runtime = args.document_runtime or settings.document_runtime or "torch"
            flags = ["--bundle", args.bundle, "--detector", detector, "--document-runtime", runtime]
            return cls(f"bundle {args.bundle}", model, detector, runtime, flags, flags)  # the child reads the same
        from bioel_core.models import model_folder

        model = str(model_folder(args.model))
        kbs = prepare(work, model)
        detector, runtime = args.detector or "dictionary", args.document_runtime or "torch"
        chosen = ["--detector", detector, "--document-runtime", runtime]
        child = [
            "--model",
            model,
            "--indexes",
            json.dumps({t: str(kb["index"]) for t, kb in kbs.items()}),
            "--stop-lists",
            json.dumps({t: str(kb["stop_list"]) for t, kb in kbs.items()}),
        ]
        return cls(f"KBs of {work}", model, detector, runtime, [*annotator_flags(kbs, model), *chosen], child + chosen)


def in_process(args) -> None:
    """Child mode: the annotator without Beam; prints its figures as JSON."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bioel_core.corpora import Document, read_documents
    from bioel_core.linking.annotate import AnnotatorSpec
    from schemas import ANNOTATIONS_SCHEMA

    began = time.perf_counter()
    if args.threads:
        import faiss
        import torch

        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)
    if args.bundle:
        from bioel_core.bundle import BuiltBundle
        from bioel_core.settings import LinkSettings

        overrides = LinkSettings(detector=args.detector, document_runtime=args.document_runtime)
        spec = BuiltBundle.read(args.bundle).annotator_spec(overrides)
    else:
        spec = AnnotatorSpec(
            model=args.model,
            indexes=tuple(json.loads(args.indexes).items()),
            stop_lists=tuple(json.loads(args.stop_lists).items()),
            detector=args.detector or "dictionary",
            document_runtime=args.document_runtime,
        )
    annotator = spec.open()
    docs = [d for d in read_documents([args.input], "jsonl") if isinstance(d, Document)]
    rows = []
    for start in range(0, len(docs), 64):
        batch = docs[start : start + 64]
        for d in batch:
            annotator.check(d)
        for r in annotator.annotate(batch):
            rows.extend(r)
    pq.write_table(pa.Table.from_pylist(rows, schema=ANNOTATIONS_SCHEMA), args.output)
    print(
        json.dumps(
            {
                "documents": len(docs),
                "mentions": len(rows),
                "seconds": time.perf_counter() - began,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


# Runs a mode's command and reports on stderr's last line the peak RSS of its largest process (workers included):
# this process's own RUSAGE_CHILDREN would carry the largest of every earlier mode into the later ones.
PEAK_RSS_WRAPPER = (
    "import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)"
)


def measure(label: str, command: list[str], documents: int, output: Path) -> dict:
    began = time.perf_counter()
    proc, cpu = run_watched([sys.executable, "-c", PEAK_RSS_WRAPPER, *[str(c) for c in command]], cwd=ROOT)
    seconds = time.perf_counter() - began
    if proc.returncode:
        raise SystemExit(f"{label} failed:\n{proc.stdout}\n{proc.stderr}")
    rss = int(proc.stderr.strip().splitlines()[-1]) / 1024
    if output.suffix == ".parquet":
        mentions = json.loads(proc.stdout.strip().splitlines()[-1])["mentions"]
    else:
        mentions = json.loads((output / "manifest.json").read_text())["counts"]["mentions"]["linked"]
    # the wrapper is depth 0; the command's own process (with the local runner, the runner) is depth 1, and
    # its worker processes below it
    return {
        "mode": label,
        "documents": documents,
        "mentions": mentions,
        "seconds": seconds,
        "abstracts_per_s": documents / seconds,
        "mentions_per_s": mentions / seconds,
        "peak_rss_mb": rss,
        "cpu_seconds": {
            "command": sum(s for depth, s in cpu if depth == 1),
            "workers": sorted((round(s, 1) for depth, s in cpu if depth > 1 and s >= 0.1), reverse=True),
        },
    }


def median_run(runs: list[dict]) -> dict:
    """The run of median end-to-end rate (of an even count, the slower middle one), with every run's rates under
    "repeats"."""
    median = sorted(runs, key=lambda r: r["abstracts_per_s"])[(len(runs) - 1) // 2]
    keys = ("seconds", "abstracts_per_s", "start_up_seconds", "steady_abstracts_per_s", "cpu_seconds")
    return {**median, "repeats": [{k: r[k] for k in keys} for r in runs]}


def abstracts_parser(description: str) -> argparse.ArgumentParser:
    """The flags of every benchmark over the shared abstracts."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--bundle", help="a built bundle folder (bioel build) to link with, as a user does; --model is then unused"
    )
    parser.add_argument("--model", help="model folder (default: the shipped disease model)")
    parser.add_argument(
        "--work",
        default=str(ROOT / ".bench"),
        help="cache of KB tables, embeddings, indexes (shared with e2e_bc5cdr.py) and runs",
    )
    parser.add_argument("--limit", type=int, default=0, help="first N abstracts only (0: all 2,292)")
    parser.add_argument(
        "--detector",
        choices=DETECTORS,
        help="mention detector (default: the bundle's, else dictionary); model needs a collective model",
    )
    parser.add_argument(
        "--document-runtime",
        choices=DOCUMENT_RUNTIMES,
        help="what runs a collective model's document encoder (bioel link --document-runtime; default: the bundle's, else torch)",
    )
    parser.add_argument("--json", help="write the figures here")
    return parser


def main() -> None:
    parser = abstracts_parser(__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES), help="which modes to run (default: all)")
    parser.add_argument("--copies", type=int, default=1, help="the abstracts this many times over, re-keyed (default 1)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch and FAISS threads per process (default 1; 0: the libraries' default)"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each mode N times, the modes taking turns; report each mode's median run"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--indexes", help=argparse.SUPPRESS)
    parser.add_argument("--stop-lists", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.child:
        in_process(args)
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    linker = Linker.of(args, work)
    source = corpus(work, args.limit, args.copies)
    small = corpus(work, START_UP_DOCUMENTS)
    documents = sum(1 for line in open(source) if line.strip())
    threads = ["--threads_per_worker", str(args.threads)] if args.threads else []
    link = BIOEL + ["link", *linker.flags, "--input-format", "jsonl", "--no-quality", *threads]

    def run(mode: str, source: Path, documents: int, tag: str) -> dict:
        if mode == "in-process":
            output = work / f"bulk-inprocess{tag}.parquet"
            command = [sys.executable, __file__, "--child", *linker.child_flags, "--threads", str(args.threads)]
            command += ["--input", source, "--output", output]
        else:
            output = work / f"bulk-out-{mode}{tag}"
            workers = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"] if mode == "two-workers" else []
            command = link + ["--input", source, "--output", output, "--runner", "FnApiRunner", *workers]
        return measure(MODES[mode], command, documents, output)

    def with_start_up(mode: str) -> dict:
        start = run(mode, small, START_UP_DOCUMENTS, "-start-up")
        row = run(mode, source, documents, "")
        return {
            **row,
            "start_up_seconds": start["seconds"],
            "steady_abstracts_per_s": steady_rate(documents, row["seconds"], START_UP_DOCUMENTS, start["seconds"]),
        }

    # each mode --repeat times, the modes taking turns, so a machine that speeds up or slows down between runs (a shared
    # one does, by the hour) weighs on every mode alike; a mode's row is its median run
    repeats: dict[str, list[dict]] = {mode: [] for mode in MODES if mode in args.modes}
    for _ in range(args.repeat):
        for mode, runs in repeats.items():
            runs.append(with_start_up(mode))
    rows = {mode: median_run(runs) for mode, runs in repeats.items()}
    print(
        f"\nBulk linking, {documents:,} abstracts ({source.name}), {linker.label}, model {linker.model}, "
        f"detector {linker.detector}, document runtime {linker.document_runtime}, "
        f"{os.cpu_count()} CPUs, {args.threads or 'default'} thread(s) per process, "
        f"{platform.python_implementation()} {platform.python_version()}"
    )
    print(
        f"{'mode':<42}{'seconds':>9}{'abstracts/s':>13}{'mentions/s':>12}{'mentions':>10}{'peak RSS MB':>13}"
        f"{'start-up s':>12}{'steady abstracts/s':>20}"
    )
    for r in rows.values():
        print(
            f"{r['mode']:<42}{r['seconds']:>9.1f}{r['abstracts_per_s']:>13.1f}{r['mentions_per_s']:>12.1f}"
            f"{r['mentions']:>10,}{r['peak_rss_mb']:>13.0f}{r['start_up_seconds']:>12.1f}{r['steady_abstracts_per_s']:>20.1f}"
        )
    result = {
        "documents": documents,
        "copies": args.copies,
        "bundle": args.bundle,
        "model": linker.model,
        "detector": linker.detector,
        "document_runtime": linker.document_runtime,
        "threads_per_process": args.threads,
        "runs": list(rows.values()),
    }
    ratios = {"two_vs_one_worker": ("two-workers", "one-worker"), "one_worker_vs_in_process": ("one-worker", "in-process")}
    for name, (a, b) in ratios.items():
        if a in rows and b in rows:
            result[name] = rows[a]["abstracts_per_s"] / rows[b]["abstracts_per_s"]
            result[f"{name}_steady"] = rows[a]["steady_abstracts_per_s"] / rows[b]["steady_abstracts_per_s"]
            print(f"{name.replace('_', ' ')}: {result[name]:.2f}x end to end, {result[name + '_steady']:.2f}x steady state")
    print("peak RSS is the largest single process")
    for r in rows.values():
        if len(r["repeats"]) > 1:
            rates = ", ".join(f"{x['abstracts_per_s']:.1f} ({x['steady_abstracts_per_s']:.1f})" for x in r["repeats"])
            print(f"{r['mode']}, {len(r['repeats'])} runs in turn, abstracts/s end to end (steady): {rates}; the median above")
    for r in rows.values():
        cpu = r["cpu_seconds"]
        print(f"CPU seconds, {r['mode']}: its own process {cpu['command']:.1f}, worker processes {cpu['workers'] or 'none'}")
    linked = [rows[m] for m in ("one-worker", "two-workers") if m in rows]
    if linked:  # what `bioel link` reaches, the better of its modes
        best = max(linked, key=lambda r: r["abstracts_per_s"])
        result.update(abstracts_per_s=best["abstracts_per_s"], mentions_per_s=best["mentions_per_s"], best_mode=best["mode"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
