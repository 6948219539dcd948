"""Rerankers combined: an ensemble of rerankers' weights chosen on dev, and its dev/test acc@1 beside each member alone
and the retriever alone, NCBI-disease and BC5CDR-disease (BioSyn protocol).

    .venv/bin/python benchmarks/rerank_fusion.py --member models/disease-reranker models/generative-disease
                                                 [--retriever models/disease-ensemble ...] [--depth 16] [--json OUT]

The first member's weight is 1; each other member's is tried from MEMBER_WEIGHTS and the retriever's from
RETRIEVER_WEIGHTS (the weights `bioel train` tries for one reranker), every combination scored on the pooled NCBI +
BC5CDR dev queries against each split's `dev_dictionary.txt`. The best on dev (ties: the smaller weights) is then
scored on test, once. Prints the dev grid, the dev/test table and the `bioel ensemble` command that makes the chosen
folder; `--json OUT` writes them. Each member scores each query's candidates once; the weights only re-add them.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
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
from bioel_core.linking.rerank import KeptPools, KeptScores, open_reranker  # noqa: E402
from bioel_core.linking.rerank_ensemble import RerankerEnsemble  # noqa: E402
from bioel_core.models import open_model  # noqa: E402
from bioel_core.training.rerank import RETRIEVER_WEIGHTS  # noqa: E402

MEMBER_WEIGHTS = (0.5, 1.0, 2.0, 5.0, 10.0)


def pooled(stages: dict, split: str, reranker=None) -> dict:
    """acc@1 per dataset and over both (weighted by queries) of the split's stages with `reranker`, or of their
    retriever alone (None)."""
    out, hits, total = {}, 0.0, 0
    for dataset in DATASETS:
        stage, queries = stages[dataset, split]
        if reranker is not None:
            stage.reranker = reranker
        scores = evaluate(stage if reranker is not None else stage.retriever, queries, k=1)[0]
        out[dataset] = scores["acc@1"]
        hits, total = hits + scores["acc@1"] * scores["n"], total + scores["n"]
    out["pooled"] = hits / total
    return out


def run(data: Path, members: list[str], retriever: str, depth: int, device: str) -> dict:
    kept = [KeptScores(open_reranker(m, device)) for m in members]
    encoder = open_model(retriever, device=device)
    stages = {}
    for dataset, split in itertools.product(DATASETS, ("dev", "test")):
        names, queries = split_data(data, dataset, split)
        stages[dataset, split] = (KeptPools(names, DenseLinker(names, encoder, retriever), kept[0], "(fusion)", depth), queries)
    ensemble = RerankerEnsemble(kept, [1.0] * len(kept), 0.0, members)
    grid = []
    for weight in RETRIEVER_WEIGHTS:
        for others in itertools.product(MEMBER_WEIGHTS, repeat=len(kept) - 1):
            ensemble.weights, ensemble.retriever_weight = [1.0, *others], weight
            grid.append({"member_weights": ensemble.weights, "retriever_weight": weight, "dev": pooled(stages, "dev", ensemble)})
            print(f"{Path(retriever).name}: weights {ensemble.weights} retriever {weight:g}: dev {grid[-1]['dev']}", flush=True)
    best = max(grid, key=lambda g: (round(g["dev"]["pooled"], 6), -g["retriever_weight"], [-w for w in g["member_weights"]]))
    ensemble.weights, ensemble.retriever_weight = best["member_weights"], best["retriever_weight"]
    rows = [{"stage": "retriever alone", **{s: pooled(stages, s) for s in ("dev", "test")}}]
    for member, folder in zip(kept, members):
        rows.append(
            {
                "stage": f"+ {Path(folder).name} alone (its weight {member.retriever_weight:g})",
                **{s: pooled(stages, s, member) for s in ("dev", "test")},
            }
        )
    rows.append(
        {
            "stage": f"+ ensemble {best['member_weights']}, retriever {best['retriever_weight']:g} (chosen on dev)",
            **{s: pooled(stages, s, ensemble) for s in ("dev", "test")},
        }
    )
    return {"retriever": retriever, "grid": grid, "chosen": best, "rows": rows}


def tables(results: list[dict], args) -> str:
    lines = [
        f"`python benchmarks/rerank_fusion.py --member {' '.join(args.member)} --retriever {' '.join(args.retriever)} "
        f"--depth {args.depth}` on {datetime.date.today().isoformat()}, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, device {args.device}. acc@1, BioSyn protocol (the split's "
        "dictionary, every query line); dev: pooled NCBI + BC5CDR dev, on which the weights were chosen.",
        "",
        "| retriever | stage | NCBI dev | BC5CDR dev | pooled dev | NCBI test | BC5CDR test |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for r in result["rows"]:
            lines.append(
                f"| {Path(result['retriever']).name} | {r['stage']} | {r['dev']['ncbi-disease']:.2f} | "
                f"{r['dev']['bc5cdr-disease']:.2f} | {r['dev']['pooled']:.2f} | {r['test']['ncbi-disease']:.2f} | "
                f"{r['test']['bc5cdr-disease']:.2f} |"
            )
    lines += [
        "",
        "Pooled dev acc@1 of every weight tried (rows: the retriever's weight; columns: the other members' weights):",
        "",
    ]
    for result in results:
        others = sorted({tuple(g["member_weights"][1:]) for g in result["grid"]})
        lines += [
            f"{Path(result['retriever']).name}:",
            "",
            "| retriever weight | " + " | ".join(str(list(o)) for o in others) + " |",
            "|---:|" + "---:|" * len(others),
        ]
        for weight in RETRIEVER_WEIGHTS:
            cells = {
                tuple(g["member_weights"][1:]): g["dev"]["pooled"] for g in result["grid"] if g["retriever_weight"] == weight
            }
            lines.append(f"| {weight:g} | " + " | ".join(f"{cells[o]:.2f}" for o in others) + " |")
        chosen = result["chosen"]
        members = " ".join(f"--member {m} {w:g}" for m, w in zip(args.member, chosen["member_weights"]))
        lines += ["", f"Chosen: `bioel ensemble {members} --retriever-weight {chosen['retriever_weight']:g} --output OUT`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="shared benchmark data folder")
    parser.add_argument("--member", nargs="+", required=True, help="two or more reranker folders")
    parser.add_argument("--retriever", nargs="+", default=[str(ROOT / "models" / "disease-ensemble")])
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, help="write the grid, the choice and the rows as JSON here")
    args = parser.parse_args(argv)
    if len(args.member) < 2:
        parser.error("--member: give two or more reranker folders")
    problem = missing_datasets(args.data)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    results = [run(args.data, args.member, retriever, args.depth, args.device) for retriever in args.retriever]
    args.member = [os.path.relpath(m, ROOT) for m in args.member]
    args.retriever = [os.path.relpath(r, ROOT) for r in args.retriever]
    print(tables(results, args))
    if args.json:
        args.json.write_text(json.dumps({"members": args.member, "depth": args.depth, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
