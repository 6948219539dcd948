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
index with other search parameters. A 10M-name KB does not
fit this machine at float32 with its indexes, so it is extrapolated from the per-shard figures: 10 shards
of 1M, memory and build time x10, each query searching every shard.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import time
from pathlib import Path

import faiss
import numpy as np

from bioel_core.index import IndexSpec, build_index, serialize
from bioel_core.index.build import normalized, set_search_params

NAMES_PER_CONCEPT = 20
CONCEPTS_PER_TOPIC = 50
TOPIC_SPREAD = 0.8  # ||noise|| of a concept centre around its topic: concepts of a topic at cosine ≈ 0.6
CLUSTER_SPREAD = 0.5  # ||noise|| of a name around its concept: names of one concept at cosine ≈ 0.8
QUERY_NOISE = 0.35  # a mention at cosine ≈ 0.94 to its nearest name
TARGET_KB = 10_000_000


def _around(rng, centres: np.ndarray, n: int, spread: float, chunk: int = 100_000) -> np.ndarray:
    """n points, each a log-normally weighted centre plus isotropic noise of norm ≈ spread."""
    weights = rng.lognormal(0.0, 1.0, len(centres))
    assign = rng.choice(len(centres), size=n, p=weights / weights.sum())
    out = np.empty((n, centres.shape[1]), dtype=np.float32)
    for start in range(0, n, chunk):
        rows = assign[start:start + chunk]
        noise = rng.standard_normal((len(rows), centres.shape[1]), dtype=np.float32)
        out[start:start + chunk] = centres[rows] + noise * (spread / math.sqrt(centres.shape[1]))
    faiss.normalize_L2(out)
    return out


def clustered_vectors(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    concepts = max(1, n // NAMES_PER_CONCEPT)
    topics = normalized(rng.standard_normal((max(1, concepts // CONCEPTS_PER_TOPIC), d), dtype=np.float32))
    return _around(rng, _around(rng, topics, concepts, TOPIC_SPREAD), n, CLUSTER_SPREAD)


def mention_queries(base: np.ndarray, nq: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    picked = base[rng.choice(len(base), size=nq, replace=False)]
    noise = rng.standard_normal(picked.shape, dtype=np.float32) * (QUERY_NOISE / math.sqrt(base.shape[1]))
    return normalized(picked + noise)


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
    row = {"kind": label, "params": params, "build_s": round(build_s, 1), "index_bytes": size,
           "bytes_per_vector": round(size / len(base), 1), "qps": round(qps, 1),
           "recall_at_10": None if truth is None else round(recall(ids, truth), 4), "sweep": []}
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
    return {"kind": row["kind"], "shards": shards, "memory_gb": round(row["bytes_per_vector"] * TARGET_KB / 1e9, 2),
            "build_hours_one_worker": round(row["build_s"] * shards / 3600, 2),
            "build_minutes_one_worker_per_shard": round(row["build_s"] / 60, 1),
            "qps_all_shards": round(row["qps"] / shards, 1)}


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
    args = ap.parse_args(argv)
    if "flat" not in args.kinds:
        ap.error("flat is the recall reference: keep it in --kinds")
    faiss.omp_set_num_threads(args.threads)

    t0 = time.perf_counter()
    base = clustered_vectors(args.n, args.dim, args.seed)
    queries = mention_queries(base, args.queries, args.seed)
    print(f"{args.n:,} x {args.dim} vectors, {args.queries:,} queries generated in {time.perf_counter() - t0:.0f} s; "
          f"FAISS {faiss.__version__}, {args.threads} threads", flush=True)
    sweeps = {"nprobe": args.nprobe_sweep, "ef_search": args.ef_sweep, "refine_k": args.refine_k_sweep}
    rows, truth = [], None
    runs = [(kind, refine) for kind in ["flat"] + [k for k in args.kinds if k != "flat"]
            for refine in (args.pq_refines if kind == "ivf-pq" else [IndexSpec.refine])]
    for kind, refine in runs:
        label = f"{kind} {refine}" if kind == "ivf-pq" else kind
        spec = IndexSpec(kind=kind, pq_m=args.pq_m, refine=refine, refine_k=args.refine_k, nprobe=args.nprobe,
                         ef_search=args.ef_search, ef_construction=args.ef_construction, seed=args.seed)
        row = measure(label, spec, base, queries, truth, args.k, sweeps)
        if kind == "flat":
            truth = row.pop("truth")
            row["recall_at_10"] = 1.0
        rows.append(row)
        print(f"  {label}: built in {row['build_s']} s, {row['index_bytes'] / 1e6:,.0f} MB, {row['qps']:,} q/s, "
              f"recall@10 {row['recall_at_10']}", flush=True)

    flat_bytes = rows[0]["index_bytes"]
    print(f"\n{'kind':12} {'parameters':44} {'build s':>8} {'index MB':>9} {'B/vector':>9} {'vs flat':>8} {'q/s':>8} {'recall@10':>9}")
    for r in rows:
        p = r["params"]
        shown = p["factory"] + "".join(f" {k}={p[k]}" for k in ("nprobe", "refine_k", "ef_search", "ef_construction") if k in p)
        print(f"{r['kind']:12} {shown:44} {r['build_s']:8.1f} {r['index_bytes'] / 1e6:9,.0f} {r['bytes_per_vector']:9.1f} "
              f"{flat_bytes / r['index_bytes']:7.1f}x {r['qps']:8,.0f} {r['recall_at_10']:9.4f}")
        for s in r["sweep"]:
            key = next(k for k in s if k not in ("qps", "recall_at_10"))
            print(f"{'':12} {'  ' + key + '=' + str(s[key]):44} {'':8} {'':9} {'':9} {'':8} {s['qps']:8,.0f} {s['recall_at_10']:9.4f}")

    scale = [extrapolate(r, args.n) for r in rows]
    print(f"\nwhat a {TARGET_KB:,}-name KB needs (extrapolated from {args.n:,}-vector shards, not measured):")
    print(f"{'kind':12} {'shards':>6} {'index GB':>9} {'build min/shard':>15} {'build h, 1 worker':>17} {'q/s, all shards':>15}")
    for s in scale:
        print(f"{s['kind']:12} {s['shards']:6} {s['memory_gb']:9.2f} {s['build_minutes_one_worker_per_shard']:15.1f} "
              f"{s['build_hours_one_worker']:17.2f} {s['qps_all_shards']:15,.1f}")
    report = {"n": args.n, "dim": args.dim, "queries": args.queries, "k": args.k, "threads": args.threads,
              "faiss": faiss.__version__, "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
              "machine": platform.processor() or platform.machine(),
              "data": {"names_per_concept": NAMES_PER_CONCEPT, "concepts_per_topic": CONCEPTS_PER_TOPIC, "topic_spread": TOPIC_SPREAD,
                       "cluster_spread": CLUSTER_SPREAD, "query_noise": QUERY_NOISE},
              "defaults": dataclasses.asdict(IndexSpec()), "results": rows, "extrapolated_10m": scale}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
