"""Retriever alone vs retriever + reranker (a cross-encoder or a generative model): acc@1/acc@k and mentions/s, NCBI-disease and BC5CDR-disease (BioSyn protocol).

    .venv/bin/python benchmarks/rerank.py [--reranker models/disease-reranker] [--retriever models/disease-default ...]
                                          [--splits dev test] [--depth 16] [--device cpu]

Each retriever is scored alone and with the reranker reordering its `depth` best concepts, on each split, side by
side in one run (same queries, same dictionary: the split's `*_dictionary.txt`). Choose the retriever and depth on
dev; test is reported beside it. Prints a Markdown table (for benchmarks/RESULTS.md); `--json OUT` writes the rows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.biosyn_sets import DATASETS, missing_datasets, split_data  # noqa: E402
from bioel_core.evaluation import evaluate  # noqa: E402
from bioel_core.linking.dense import DenseLinker  # noqa: E402
from bioel_core.linking.rerank import RerankLinker, open_reranker  # noqa: E402
from bioel_core.models import open_model  # noqa: E402


def run(data: Path, retrievers: list[str], reranker_dir: str, splits: list[str], depth: int, k: int, device: str) -> list[dict]:
    reranker = open_reranker(reranker_dir, device)
    rows = []
    for retriever in retrievers:
        encoder = open_model(retriever, device=device)
        for dataset in DATASETS:
            for split in splits:
                names, queries = split_data(data, dataset, split)
                dense = DenseLinker(names, encoder, retriever)
                for label, linker in (
                    ("retriever", dense),
                    (f"+ reranker (depth {depth})", RerankLinker(names, dense, reranker, reranker_dir, depth)),
                ):
                    scores, _ = evaluate(linker, queries, k)
                    row = {
                        "retriever": Path(retriever).name,
                        "stage": label,
                        "dataset": dataset,
                        "split": split,
                        "n": scores["n"],
                        "acc@1": scores["acc@1"],
                        f"acc@{k}": scores[f"acc@{k}"],
                        "seconds": scores["seconds"],
                        "mentions_per_s": scores["n"] / scores["seconds"],
                    }
                    rows.append(row)
                    print(
                        f"{row['retriever']:<18}{label:<24}{dataset:<16}{split:<5} n={row['n']:<6}acc@1={row['acc@1']:.2f} "
                        f"acc@{k}={row[f'acc@{k}']:.2f} {row['mentions_per_s']:.0f} mentions/s",
                        flush=True,
                    )
    return rows


def table(rows: list[dict], args) -> str:
    k = args.k
    lines = [
        f"## Retrieve and rerank ({Path(args.reranker).name}), BioSyn protocol",
        "",
        f"`python benchmarks/rerank.py --reranker {args.reranker} --depth {args.depth}` on {datetime.date.today().isoformat()}, "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, device {args.device}. "
        "Dictionary: the split's `*_dictionary.txt`; every query line counts. mentions/s: all queries of the split "
        "linked in one call (the rerank stage scores each distinct query once; exact unambiguous names are not reranked).",
        "",
        f"| retriever | stage | dataset | split | n | acc@1 | acc@{k} | mentions/s |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['retriever']} | {r['stage']} | {r['dataset']} | {r['split']} | {r['n']:,} | {r['acc@1']:.2f} | "
            f"{r[f'acc@{k}']:.2f} | {r['mentions_per_s']:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="shared benchmark data folder")
    parser.add_argument("--reranker", default=str(ROOT / "models" / "disease-reranker"))
    parser.add_argument(
        "--retriever", nargs="+", default=[str(ROOT / "models" / "disease-default"), str(ROOT / "models" / "disease-ensemble")]
    )
    parser.add_argument("--splits", nargs="+", choices=["dev", "test"], default=["dev", "test"])
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    problem = missing_datasets(args.data)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    rows = run(args.data, args.retriever, args.reranker, args.splits, args.depth, args.k, args.device)
    args.reranker = os.path.relpath(args.reranker, ROOT)
    print(table(rows, args))
    if args.json:
        args.json.write_text(json.dumps({"reranker": args.reranker, "depth": args.depth, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
