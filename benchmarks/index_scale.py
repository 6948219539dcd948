"""FAISS index kinds at KB scale: build time, serialized size, queries/s and recall@10 against flat.

    .venv/bin/python benchmarks/index_scale.py [--n 1000000] [--dim 384] [--json OUT] [--threads 2]
        [--kinds flat ivf-flat ivf-pq hnsw] [--pq-refines fp16 sq8 ...] [--nprobe-sweep 32 64 ...] [--ef-sweep 64 128 ...]
        [--refine-k-sweep 2 4 ...] [--ef-construction 40]

Vectors are a two-level Gaussian mixture, L2-normalized: random unit "topic" centres, concept centres
around them, names around their concept (≈ 20 names a concept, ≈ 50 concepts a topic, sizes log-normal),
so a query's neighbours past its own concept are related concepts, not noise; queries are like mentions: a random database vector plus noise, normalized,
so each query is near a name but equal to none. Every kind is one shard of --n vectors built with
bioel_core.index (what one build-index shard does), with the defaults of IndexSpec unless flags say
otherwise (--pq-refines builds one ivf-pq per re-ranking store); the sweeps re-search the same built
index with other search parameters. The table's last part extrapolates a 10M-name KB from these per-shard
figures.

    .venv/bin/python benchmarks/index_scale.py --n 10000000 --through-build-index [--num-shards 10] [--work DIR]

measures instead, for real, what the product does at that size: the vectors are generated chunk by chunk into an
embeddings folder of Parquet files (never held whole), `bioel build-index` (the Beam pipeline, one worker) builds
an ivf-pq index of --num-shards shards from them, and a separate process opens it with `ShardedIndex` (files
mapped, not read into memory) and searches the queries. Each step reports wall time and the peak RSS of its
process; recall@10 is against exact search, computed by streaming the same vectors a second time.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bioel_core.index import IndexSpec, build_index, serialize
from bioel_core.index.build import normalized, set_search_params

NAMES_PER_CONCEPT = 20
CONCEPTS_PER_TOPIC = 50
TOPIC_SPREAD = 0.8  # ||noise|| of a concept centre around its topic: concepts of a topic at cosine ≈ 0.6
CLUSTER_SPREAD = 0.5  # ||noise|| of a name around its concept: names of one concept at cosine ≈ 0.8
QUERY_NOISE = 0.35  # a mention at cosine ≈ 0.94 to its nearest name
TARGET_KB = 10_000_000
REPO = Path(__file__).resolve().parent.parent


def _around_chunks(rng, centres: np.ndarray, n: int, spread: float, chunk: int = 100_000):
    """n points in chunks, each a log-normally weighted centre plus isotropic noise of norm ≈ spread, unit norm."""
    weights = rng.lognormal(0.0, 1.0, len(centres))
    assign = rng.choice(len(centres), size=n, p=weights / weights.sum())
    for start in range(0, n, chunk):
        rows = assign[start : start + chunk]
        noise = rng.standard_normal((len(rows), centres.shape[1]), dtype=np.float32)
        out = centres[rows] + noise * (spread / math.sqrt(centres.shape[1]))
        faiss.normalize_L2(out)
        yield out


def _around(rng, centres: np.ndarray, n: int, spread: float) -> np.ndarray:
    return np.concatenate(list(_around_chunks(rng, centres, n, spread)))


def clustered_chunks(n: int, d: int, seed: int, chunk: int = 100_000):
    """The vectors of clustered_vectors, chunk by chunk: a KB of any size, generated without holding it."""
    rng = np.random.default_rng(seed)
    concepts = max(1, n // NAMES_PER_CONCEPT)
    topics = normalized(rng.standard_normal((max(1, concepts // CONCEPTS_PER_TOPIC), d), dtype=np.float32))
    yield from _around_chunks(rng, _around(rng, topics, concepts, TOPIC_SPREAD), n, CLUSTER_SPREAD, chunk)


def clustered_vectors(n: int, d: int, seed: int) -> np.ndarray:
    return np.concatenate(list(clustered_chunks(n, d, seed)))


def mention_queries(base: np.ndarray, nq: int, seed: int) -> np.ndarray:
    rows, noise = query_draw(len(base), nq, base.shape[1], seed)
    return normalized(base[rows] + noise)


def query_draw(n: int, nq: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Which database vectors the queries start from, and the noise each gets."""
    rng = np.random.default_rng(seed + 1)
    rows = rng.choice(n, size=nq, replace=False)
    return rows, rng.standard_normal((nq, d), dtype=np.float32) * (QUERY_NOISE / math.sqrt(d))


def write_embeddings_folder(work: Path, n: int, d: int, seed: int, per_file: int, nq: int) -> tuple[Path, np.ndarray]:
    """An ingest-kb names manifest and an embed output of the n generated vectors (name_id = row number), in the
    layouts the pipelines write, the vectors streamed to Parquet; returns the folder and the queries."""
    from schemas import SCHEMA_VERSION, embeddings_schema

    names, emb = work / "names", work / "embeddings"
    names.mkdir(parents=True)
    (names / "manifest.json").write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "pipeline": "ingest-kb",
                "complete": True,
                "kb": "synthetic",
                "outputs": {"names": {"rows": n}},
                "benchmark": f"index_scale.py: {n:,} synthetic names (no names table)",
            }
        )
    )
    (emb / "embeddings").mkdir(parents=True)
    (emb / "dead_letter").mkdir()
    rows, noise = query_draw(n, nq, d, seed)
    picked = np.empty((len(rows), d), dtype=np.float32)
    files, writer, start = -(-n // per_file), None, 0
    for chunk in clustered_chunks(n, d, seed):
        ids = np.arange(start, start + len(chunk), dtype=np.int64)
        inside = (rows >= start) & (rows < start + len(chunk))
        picked[inside] = chunk[rows[inside] - start]
        if start % per_file == 0:
            if writer:
                writer.close()
            path = emb / "embeddings" / f"part-{start // per_file:05d}-of-{files:05d}.parquet"
            writer = pq.ParquetWriter(path, embeddings_schema(d), compression="none")
        writer.write_table(
            pa.Table.from_arrays(
                [
                    pa.array(ids),
                    pa.array([f"C{i // NAMES_PER_CONCEPT:07d}" for i in ids.tolist()], pa.string()),
                    pa.FixedSizeListArray.from_arrays(pa.array(chunk.ravel(), pa.float32()), d),
                ],
                schema=embeddings_schema(d),
            )
        )
        start += len(chunk)
    writer.close()
    (emb / "manifest.json").write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "pipeline": "embed",
                "complete": True,
                "kb": "synthetic",
                "model": {"path": "synthetic", "fingerprint": "0" * 64, "config": {}, "dim": d, "pooling": None},
                "names": {
                    "path": str(names),
                    "manifest_sha256": hashlib.sha256((names / "manifest.json").read_bytes()).hexdigest(),
                    "rows": n,
                },
            }
        )
    )
    return emb, normalized(picked + noise)


def exact_top_k(n: int, d: int, seed: int, queries: np.ndarray, k: int) -> np.ndarray:
    """The exact top k row numbers of each query over the n generated vectors, streamed chunk by chunk."""
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), k), dtype=np.int64)
    start = 0
    for chunk in clustered_chunks(n, d, seed):
        scores = queries @ chunk.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # the chunk's own top k, then merged with the best so far
        scores = np.concatenate([best_scores, np.take_along_axis(scores, top, 1)], axis=1)
        ids = np.concatenate([best_ids, top + start], axis=1)
        keep = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        best_scores, best_ids = np.take_along_axis(scores, keep, 1), np.take_along_axis(ids, keep, 1)
        start += len(chunk)
    return best_ids


CHILD_BUILD = """
import json, sys, time
sys.path.insert(0, {repo!r})
from bioel_core.index import IndexSpec
from pipelines import build_index
from pipelines.options import pipeline_options
t0 = time.perf_counter()
m = build_index.run({emb!r}, {out!r}, pipeline_options(["--threads_per_worker", "{threads}"]), num_shards={shards},
                    spec=IndexSpec(kind="ivf-pq"))
print(json.dumps({{"seconds": time.perf_counter() - t0, "indexed": m["counts"]["indexed"], "reconciled": all(m["reconciliation"].values()),
                  "params": m["shards"][0]["params"],
                  "peak_rss_mb": peak_rss_kb() / 1024}}))
"""
CHILD_SEARCH = """
import json, os, sys, time
import faiss, numpy as np
sys.path.insert(0, {repo!r})
from benchmarks.children import resident_mb
from bioel_core.index import ShardedIndex
faiss.omp_set_num_threads({threads})
t0 = time.perf_counter()
index = ShardedIndex({out!r})
opened = time.perf_counter() - t0
queries = np.load({queries!r})
best = 0.0
for _ in range(2):
    t = time.perf_counter()
    found = index.search(queries, {k}).name_ids
    best = max(best, len(queries) / (time.perf_counter() - t))
np.save({found!r}, found)
# RSS split after the searches: pages of the mapped index files (file-backed, dropped by the kernel under pressure)
# and the process's own memory
own, mapped = resident_mb(os.getpid())
print(json.dumps({{"open_seconds": opened, "qps": best, "peak_rss_mb": peak_rss_kb() / 1024,
                  "rss_anon_mb": own, "rss_file_mb": mapped}}))
"""


def through_build_index(args) -> int:
    sys.path.insert(0, str(REPO))
    from benchmarks.children import run_child

    work = Path(args.work or Path(tempfile.gettempdir()) / f"bioel-bench-index-{args.n}")
    if work.exists():
        shutil.rmtree(work)
    t0 = time.perf_counter()
    emb, queries = write_embeddings_folder(work, args.n, args.dim, args.seed, -(-args.n // args.num_shards), args.queries)
    generated = time.perf_counter() - t0
    parquet_gb = sum(f.stat().st_size for f in (emb / "embeddings").iterdir()) / 1e9
    print(f"{args.n:,} x {args.dim} vectors written to {emb} ({parquet_gb:.2f} GB of Parquet) in {generated:.0f} s", flush=True)
    np.save(work / "queries.npy", queries)
    out = work / "index"
    build = run_child(
        CHILD_BUILD.format(repo=str(REPO), emb=str(emb), out=str(out), threads=args.threads, shards=args.num_shards)
    )
    index_gb = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e9
    print(
        f"bioel build-index: {build['seconds']:.0f} s, peak RSS {build['peak_rss_mb']:,.0f} MB, {index_gb:.2f} GB on disk",
        flush=True,
    )
    search = run_child(
        CHILD_SEARCH.format(
            repo=str(REPO),
            out=str(out),
            queries=str(work / "queries.npy"),
            k=args.k,
            threads=args.threads,
            found=str(work / "found.npy"),
        )
    )
    t0 = time.perf_counter()
    truth = exact_top_k(args.n, args.dim, args.seed, queries, args.k)
    exact_s = time.perf_counter() - t0
    rec = recall(np.load(work / "found.npy"), truth)
    print(
        f"search: opened in {search['open_seconds']:.1f} s, {search['qps']:,.0f} q/s, peak RSS {search['peak_rss_mb']:,.0f} MB "
        f"(after searching: {search['rss_file_mb']:,.0f} MB of mapped index pages, {search['rss_anon_mb']:,.0f} MB own), "
        f"recall@{args.k} {rec:.4f} (exact search over the stream: {exact_s:.0f} s)"
    )
    report = {
        "n": args.n,
        "dim": args.dim,
        "queries": len(queries),
        "k": args.k,
        "threads": args.threads,
        "num_shards": args.num_shards,
        "faiss": faiss.__version__,
        "cpu_count": os.cpu_count(),
        "generate_seconds": generated,
        "parquet_gb": parquet_gb,
        "build": build,
        "index_gb_on_disk": index_gb,
        "search": search,
        f"recall_at_{args.k}": rec,
        "exact_search_seconds": exact_s,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(work)
    return 0 if build["reconciled"] and build["indexed"] == args.n else 1


def timed_search(index, queries: np.ndarray, k: int, repeat: int = 2) -> tuple[np.ndarray, float]:
    """Ids and the best queries/s of `repeat` runs (the machine is shared; best-of is the fair figure)."""
    best = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        _, ids = index.search(queries, k)
        best = max(best, len(queries) / (time.perf_counter() - t0))
    return ids, best


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


def measure(label: str, spec: IndexSpec, base, queries, truth, k: int, sweeps: dict) -> dict:
    t0 = time.perf_counter()
    index, params = build_index(base, spec, seed_key=(0,))
    build_s = time.perf_counter() - t0
    size = len(serialize(index))
    ids, qps = timed_search(index, queries, k)
    row = {
        "kind": label,
        "params": params,
        "build_s": round(build_s, 1),
        "index_bytes": size,
        "bytes_per_vector": round(size / len(base), 1),
        "qps": round(qps, 1),
        "recall_at_10": None if truth is None else round(recall(ids, truth), 4),
        "sweep": [],
    }
    for key, values in sweeps.items():
        if key not in params:
            continue
        for value in values:
            set_search_params(index, {**params, key: value})
            ids, qps = timed_search(index, queries, k)
            row["sweep"].append({key: value, "qps": round(qps, 1), "recall_at_10": round(recall(ids, truth), 4)})
        set_search_params(index, params)
    if spec.kind == "flat":
        row["truth"] = ids
    return row


def extrapolate(row: dict, n: int) -> dict:
    shards = math.ceil(TARGET_KB / n)
    return {
        "kind": row["kind"],
        "shards": shards,
        "memory_gb": round(row["bytes_per_vector"] * TARGET_KB / 1e9, 2),
        "build_hours_one_worker": round(row["build_s"] * shards / 3600, 2),
        "build_minutes_one_worker_per_shard": round(row["build_s"] / 60, 1),
        "qps_all_shards": round(row["qps"] / shards, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2, help="FAISS threads for building and searching")
    ap.add_argument("--kinds", nargs="+", default=["flat", "ivf-flat", "ivf-pq", "hnsw"])
    ap.add_argument("--pq-m", type=int)
    ap.add_argument("--pq-refines", nargs="+", default=[IndexSpec.refine], help="ivf-pq re-ranking stores, one row each")
    ap.add_argument("--refine-k", type=int, default=IndexSpec.refine_k)
    ap.add_argument("--nprobe", type=int)
    ap.add_argument("--ef-search", type=int)
    ap.add_argument("--ef-construction", type=int, default=IndexSpec.ef_construction)
    ap.add_argument("--nprobe-sweep", type=int, nargs="*", default=[])
    ap.add_argument("--ef-sweep", type=int, nargs="*", default=[])
    ap.add_argument("--refine-k-sweep", type=int, nargs="*", default=[])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--through-build-index",
        action="store_true",
        help="build an ivf-pq index of --n vectors with `bioel build-index` from streamed Parquet and search it",
    )
    ap.add_argument("--num-shards", type=int, default=10, help="with --through-build-index (default 10)")
    ap.add_argument("--work", help="with --through-build-index: where the Parquet and the index go (default: a temp folder)")
    ap.add_argument("--keep", action="store_true", help="with --through-build-index: keep the work folder")
    args = ap.parse_args(argv)
    if args.through_build_index:
        return through_build_index(args)
    if "flat" not in args.kinds:
        ap.error("flat is the recall reference: keep it in --kinds")
    faiss.omp_set_num_threads(args.threads)

    t0 = time.perf_counter()
    base = clustered_vectors(args.n, args.dim, args.seed)
    queries = mention_queries(base, args.queries, args.seed)
    print(
        f"{args.n:,} x {args.dim} vectors, {args.queries:,} queries generated in {time.perf_counter() - t0:.0f} s; "
        f"FAISS {faiss.__version__}, {args.threads} threads",
        flush=True,
    )
    sweeps = {"nprobe": args.nprobe_sweep, "ef_search": args.ef_sweep, "refine_k": args.refine_k_sweep}
    rows, truth = [], None
    runs = [
        (kind, refine)
        for kind in ["flat"] + [k for k in args.kinds if k != "flat"]
        for refine in (args.pq_refines if kind == "ivf-pq" else [IndexSpec.refine])
    ]
    for kind, refine in runs:
        label = f"{kind} {refine}" if kind == "ivf-pq" else kind
        spec = IndexSpec(
            kind=kind,
            pq_m=args.pq_m,
            refine=refine,
            refine_k=args.refine_k,
            nprobe=args.nprobe,
            ef_search=args.ef_search,
            ef_construction=args.ef_construction,
            seed=args.seed,
        )
        row = measure(label, spec, base, queries, truth, args.k, sweeps)
        if kind == "flat":
            truth = row.pop("truth")
            row["recall_at_10"] = 1.0
        rows.append(row)
        print(
            f"  {label}: built in {row['build_s']} s, {row['index_bytes'] / 1e6:,.0f} MB, {row['qps']:,} q/s, "
            f"recall@10 {row['recall_at_10']}",
            flush=True,
        )

    flat_bytes = rows[0]["index_bytes"]
    print(
        f"\n{'kind':12} {'parameters':44} {'build s':>8} {'index MB':>9} {'B/vector':>9} {'vs flat':>8} {'q/s':>8} {'recall@10':>9}"
    )
    for r in rows:
        p = r["params"]
        shown = p["factory"] + "".join(f" {k}={p[k]}" for k in ("nprobe", "refine_k", "ef_search", "ef_construction") if k in p)
        print(
            f"{r['kind']:12} {shown:44} {r['build_s']:8.1f} {r['index_bytes'] / 1e6:9,.0f} {r['bytes_per_vector']:9.1f} "
            f"{flat_bytes / r['index_bytes']:7.1f}x {r['qps']:8,.0f} {r['recall_at_10']:9.4f}"
        )
        for s in r["sweep"]:
            key = next(k for k in s if k not in ("qps", "recall_at_10"))
            print(
                f"{'':12} {'  ' + key + '=' + str(s[key]):44} {'':8} {'':9} {'':9} {'':8} {s['qps']:8,.0f} {s['recall_at_10']:9.4f}"
            )

    scale = [extrapolate(r, args.n) for r in rows]
    print(f"\nwhat a {TARGET_KB:,}-name KB needs (extrapolated from {args.n:,}-vector shards, not measured):")
    print(f"{'kind':12} {'shards':>6} {'index GB':>9} {'build min/shard':>15} {'build h, 1 worker':>17} {'q/s, all shards':>15}")
    for s in scale:
        print(
            f"{s['kind']:12} {s['shards']:6} {s['memory_gb']:9.2f} {s['build_minutes_one_worker_per_shard']:15.1f} "
            f"{s['build_hours_one_worker']:17.2f} {s['qps_all_shards']:15,.1f}"
        )
    report = {
        "n": args.n,
        "dim": args.dim,
        "queries": args.queries,
        "k": args.k,
        "threads": args.threads,
        "faiss": faiss.__version__,
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "machine": platform.processor() or platform.machine(),
        "data": {
            "names_per_concept": NAMES_PER_CONCEPT,
            "concepts_per_topic": CONCEPTS_PER_TOPIC,
            "topic_spread": TOPIC_SPREAD,
            "cluster_spread": CLUSTER_SPREAD,
            "query_noise": QUERY_NOISE,
        },
        "defaults": dataclasses.asdict(IndexSpec()),
        "results": rows,
        "extrapolated_10m": scale,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
