"""`bioel link` against a UMLS-size KB, end to end (issue 43): peak memory of the link worker, abstracts/s, and
where the memory goes.

    python benchmarks/umls_link.py --rows 15000000 --work DIR [--model M] [--num-shards 10] [--json OUT]

Each step is what a user runs, on files in the real layouts, reused from --work when already there:
1. MRCONSO.RRF: `synthetic_mrconso.py`'s --rows atoms (about 2/3 of them English and unsuppressed, so kept), then
   the 30,765 MeSH 2024 descriptors of ../shared/data with their terms as real concepts, so the abstracts hold the
   KB's names as they hold a real release's;
2. `bioel ingest-kb --input-format umls`, two worker processes;
3. `bioel embed` with the model's vectors replaced by synthetic ones (encoding 10M names takes a 2-core CPU hours
   even with the ResCNN default): each name's vector is a seeded sum of rows of a random table picked by a hash
   of its text, so equal names get equal vectors; the pipeline, its tables and its manifest (with the model's real
   fingerprints) are the real ones, so `bioel link` accepts the index as the model's;
4. `bioel build-index --index-kind ivf-pq --num-shards N`;
5. `bioel link` over the 2,292 shared abstracts, one worker, the dictionary detector with the shipped disease stop
   list: seconds, abstracts/s, and its processes' peak resident memory, own (RssAnon: what the worker holds) and
   mapped (RssFile: index pages, which the kernel shares and may drop), sampled every 0.2 s; then over the first 16
   abstracts, whose time is the worker's start-up, for the steady rate;
6. a fresh process opens what the link worker opens, one part after another, and reports the own memory each
   adds: the names (NameSet), the dictionary detector, the dense linker (its name rows and index id map, the index
   files mapped), the concepts' vocabulary and alt ids.
Links made through the synthetic vectors are not meaningful; exact-name links are.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bulk_link import ABSTRACTS, START_UP_DOCUMENTS, corpus  # noqa: E402
from benchmarks.children import run_child, run_watched, steady_rate  # noqa: E402
from benchmarks.kbs import BIOEL, DATA, built, built_from, sh  # noqa: E402
from benchmarks.synthetic_mrconso import mesh_terms, write_mrconso  # noqa: E402

MESH_THESAURUS = DATA / "mesh" / "data_mesh_thesaurus.tsv.gz"
STOP_LIST = ROOT / "models" / "stoplists" / "disease-medic.json"
TWO_WORKERS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]

# step 3's child: `bioel embed` in this process (the embedded runner) with the model class's encode replaced
SYNTHETIC_EMBED = """
import hashlib, json, sys, time
import numpy as np
sys.path.insert(0, {repo!r})
from bioel_core.models import open_model
from pipelines.cli import main

encoder = open_model({model!r}, None, "cpu")
table = np.random.default_rng(0).standard_normal((1 << 16, encoder.dim)).astype(np.float32)

def synthetic_encode(self, texts, batch_size=256, show_progress=False, batch_invariant=False):
    keys = np.array([int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in texts],
                    dtype=np.uint64).reshape(-1, 1)
    rows = (keys >> np.array([0, 16, 32, 48], dtype=np.uint64)) & np.uint64(0xFFFF)
    vectors = table[rows.astype(np.int64)].sum(axis=1)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

type(encoder).encode = synthetic_encode
began = time.perf_counter()
rc = main(["embed", "--model", {model!r}, "--input", {kb!r}, "--output", {out!r}, "--no-quality",
           "--batch-size", "4096", "--num-shards", {shards!r}, "--runner", "FnApiRunner"])
print(json.dumps({{"rc": rc, "seconds": time.perf_counter() - began, "peak_rss_mb": peak_rss_kb() / 1024}}))
"""

# step 6's child: the parts AnnotatorSpec.open builds for one KB, opened one after another
BREAKDOWN = """
import json, os, sys, time
import pyarrow as pa
sys.path.insert(0, {repo!r})
from benchmarks.children import resident_mb
from bioel_core.heap import long_lived
from bioel_core.linking.annotate import concept_lookup
from bioel_core.linking.dense import DenseLinker
from bioel_core.models import open_model
from bioel_core.names import NameSet
from bioel_core.text.detect import DictionaryDetector, StopList
from bioel_core.text.spelling import SpellingVariants

steps, kept = [], []
def step(label, make):
    before, began = resident_mb(os.getpid())[0], time.perf_counter()
    kept.append(make())
    pa.default_memory_pool().release_unused()  # as AnnotatorSpec.open does once its parts are built
    own, mapped = resident_mb(os.getpid())
    steps.append({{"part": label, "seconds": time.perf_counter() - began, "own_mb": own - before,
                  "own_total_mb": own, "mapped_total_mb": mapped}})

step("model (name encoder)", lambda: open_model({model!r}, None, "cpu"))
with long_lived():  # as AnnotatorSpec.open builds them
    step("names (NameSet)", lambda: NameSet.from_names_table({kb!r}))
    names = kept[-1]
    step("spelling variants (the names' word counts)", lambda: SpellingVariants.from_names_table({kb!r}))
    spelling = kept[-1]
    step("dictionary detector", lambda: DictionaryDetector.from_names_table(
        {kb!r}, names=names, stop_list=StopList.load({stop!r}), spelling=spelling))
    step("dense linker (name rows, index id map, shards mapped)", lambda: DenseLinker.from_index(
        {index!r}, names, kept[0], model={model!r}, names_dir={kb!r}, reproducible=True))
    step("concepts (vocabulary, alt ids)", lambda: concept_lookup({kb!r}))
print(json.dumps({{"names": len(names), "steps": steps, "peak_rss_mb": peak_rss_kb() / 1024}}))
"""


def timed(label: str, command: list) -> float:
    began = time.perf_counter()
    sh(command)
    seconds = time.perf_counter() - began
    print(f"{label}: {seconds:.0f} s", flush=True)
    return seconds


def link_watched(command: list, documents: int) -> dict:
    """`bioel link` (`command`), its process tree's peak own and mapped memory sampled."""
    memory: dict[int, tuple[float, float]] = {}
    print(f"$ {' '.join(map(str, command))}", flush=True)
    began = time.perf_counter()
    proc, cpu = run_watched([str(c) for c in command], every=0.2, memory=memory, cwd=ROOT)
    seconds = time.perf_counter() - began
    if proc.returncode:
        raise SystemExit(f"bioel link failed:\n{proc.stderr[-3000:]}")
    own, mapped = max(memory.values(), key=lambda m: m[0] + m[1])
    return {
        "seconds": seconds,
        "abstracts_per_s": documents / seconds,
        "peak_own_mb": own,
        "peak_mapped_mb": mapped,
        "processes": len(memory),
        "cpu_seconds": sum(s for _, s in cpu),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=15_000_000, help="synthetic MRCONSO atoms (default 15M: about 10M names)")
    ap.add_argument("--work", type=Path, required=True, help="where the KB, embeddings, index and link output go (reused)")
    ap.add_argument(
        "--model", default=str(ROOT / "models" / "disease-default"), help="the name encoder (default: disease-default)"
    )
    ap.add_argument("--num-shards", type=int, default=10)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    kb, emb, index, out = work / "kb", work / "embeddings", work / "index", work / "links"
    report: dict = {"rows": args.rows, "model": args.model, "num_shards": args.num_shards, "cpu_count": os.cpu_count()}

    mrconso = work / "umls" / "MRCONSO.RRF"
    if not mrconso.is_file():
        began = time.perf_counter()
        write_mrconso(mrconso.parent, args.rows, real=mesh_terms(MESH_THESAURUS))
        report["generate_seconds"] = time.perf_counter() - began
    if not built(kb):
        report["ingest_seconds"] = timed(
            "ingest-kb",
            BIOEL + ["ingest-kb", "--input-format", "umls", "--input", mrconso, "--output", kb, "--no-quality", *TWO_WORKERS],
        )
    names = json.loads((kb / "manifest.json").read_text())["outputs"]["names"]["rows"]
    report["names"] = names
    if not built_from(emb, "names", kb):
        embed = run_child(
            SYNTHETIC_EMBED.format(repo=str(ROOT), model=args.model, kb=str(kb), out=str(emb), shards=str(args.num_shards))
        )
        if embed["rc"]:
            raise SystemExit(f"bioel embed (synthetic vectors) failed with exit status {embed['rc']}")
        print(f"embed (synthetic vectors): {embed['seconds']:.0f} s", flush=True)
        report["embed"] = embed
    if not built_from(index, "embeddings", emb):
        report["build_index_seconds"] = timed(
            "build-index",
            BIOEL
            + ["build-index", "--input", emb, "--output", index, "--index-kind", "ivf-pq"]
            + ["--num-shards", str(args.num_shards), "--no-quality", "--runner", "FnApiRunner"],
        )
    documents = sum(1 for line in open(ABSTRACTS) if line.strip())
    link = BIOEL + ["link", "--model", args.model, "--index", index, "--stop-list", STOP_LIST, "--detector", "dictionary"]
    link += ["--input-format", "jsonl", "--no-quality", "--runner", "FnApiRunner"]
    for folder in (out, work / "links-start-up"):
        if folder.exists():
            shutil.rmtree(folder)
    report["link"] = link_watched(link + ["--input", ABSTRACTS, "--output", out], documents)
    manifest = json.loads((out / "manifest.json").read_text())
    report["link"]["mentions"] = manifest["counts"]["mentions"]["linked"]
    # the first abstracts alone: that run's time is the worker's start-up (bulk_link.py's rule)
    small = corpus(work, START_UP_DOCUMENTS)
    start_up = link_watched(link + ["--input", small, "--output", work / "links-start-up"], START_UP_DOCUMENTS)
    report["link"]["start_up_seconds"] = start_up["seconds"]
    report["link"]["steady_abstracts_per_s"] = steady_rate(
        documents, report["link"]["seconds"], START_UP_DOCUMENTS, start_up["seconds"]
    )
    report["breakdown"] = run_child(
        BREAKDOWN.format(repo=str(ROOT), model=args.model, kb=str(kb), index=str(index), stop=str(STOP_LIST))
    )
    report["index_gb_on_disk"] = sum(f.stat().st_size for f in index.rglob("*") if f.is_file()) / 1e9
    report["kb_sha256"] = hashlib.sha256((kb / "manifest.json").read_bytes()).hexdigest()

    r = report["link"]
    print(f"\n`bioel link`, {documents:,} abstracts, KB of {names:,} names ({args.rows:,} synthetic atoms + MeSH), 1 worker")
    print(
        f"{r['seconds']:.0f} s, {r['abstracts_per_s']:.1f} abstracts/s ({r['steady_abstracts_per_s']:.1f} after a "
        f"{r['start_up_seconds']:.0f} s start-up), {r['mentions']:,} mentions; peak own "
        f"{r['peak_own_mb']:,.0f} MB, mapped {r['peak_mapped_mb']:,.0f} MB; index {report['index_gb_on_disk']:.2f} GB on disk"
    )
    print(f"{'part opened (fresh process)':<58}{'seconds':>9}{'own MB':>10}{'own total':>11}{'mapped total':>14}")
    for s in report["breakdown"]["steps"]:
        print(
            f"{s['part']:<58}{s['seconds']:>9.1f}{s['own_mb']:>10,.0f}{s['own_total_mb']:>11,.0f}{s['mapped_total_mb']:>14,.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
