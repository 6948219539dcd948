"""A flat index's shards searched by FAISS's IndexFlatIP.search and by the matrix product + top-k that
`ShardedIndex` uses for flat shards (bioel_core.index.exact over the vectors FAISS maps), side by side in one run.

    .venv/bin/python benchmarks/flat_search.py --index BUNDLE/index/Disease [--queries 2000] [--batch 150]
        [--threads 1] [--rounds 3] [--json OUT]

The queries are the index's own vectors with noise (near neighbours, like mention vectors), searched in batches of
--batch (a link batch's vector-linked mentions of one type are about 100-150 per 64 abstracts), k = 10 (a link's
width with its re-scoring margin). The two ways take turns batch by batch, so load on the machine slows them alike;
reported per way: seconds, queries/s, and of the hits, the share equal to FAISS's and the largest score difference.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import faiss
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

K = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="a build-index output folder of kind flat")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=150)
    parser.add_argument("--threads", type=int, default=1, help="torch and FAISS threads")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)

    from bioel_core.index import ShardedIndex
    from bioel_core.index.build import normalized

    index = ShardedIndex(args.index)
    flat = [s for s in index.shards if s.exact is not None]
    if not flat:
        sys.exit(f"{args.index}: no flat shard to compare")
    rng = np.random.default_rng(0)
    stored = np.concatenate([s.exact.vectors.numpy() for s in flat])
    picks = stored[rng.integers(0, len(stored), args.queries)]
    queries = normalized(picks + 0.05 * rng.standard_normal(picks.shape).astype(np.float32))

    seconds = {"faiss": 0.0, "exact": 0.0}
    same, hits, worst = 0, 0, 0.0
    for _ in range(args.rounds):
        for start in range(0, len(queries), args.batch):
            batch = queries[start : start + args.batch]
            for shard in flat:
                began = time.perf_counter()
                d_faiss, i_faiss = shard.index.search(batch, K)
                seconds["faiss"] += time.perf_counter() - began
                began = time.perf_counter()
                d_exact, i_exact = shard.exact.search(batch, K)
                seconds["exact"] += time.perf_counter() - began
                same += int((i_faiss == i_exact).sum())
                hits += i_faiss.size
                worst = max(worst, float(np.abs(d_faiss - d_exact).max()))
    searched = args.rounds * len(queries)
    figures = {
        "index": str(Path(args.index).resolve()),
        "shards": len(flat),
        "vectors": int(sum(s.ntotal for s in flat)),
        "dimension": index.dimension,
        "queries": args.queries,
        "batch": args.batch,
        "threads": args.threads,
        "rounds": args.rounds,
        "seconds": seconds,
        "queries_per_s": {way: searched / s for way, s in seconds.items()},
        "speedup_exact_over_faiss": seconds["faiss"] / seconds["exact"],
        "hits_equal_share": same / hits,
        "max_score_difference": worst,
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
