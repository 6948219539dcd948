"""Generative linking beside the dense model: acc@1/@5 and mentions/s of the whole-tree generative linker and of the
generative model as a reranker of the dense retriever's candidates, NCBI-disease and BC5CDR-disease (BioSyn
protocol), batched vs one-mention-at-a-time decoding, and ablation models on dev.

    .venv/bin/python benchmarks/generative.py --model GEN_DIR [--retriever models/disease-default] [--splits dev test]
        [--beams 5] [--depth 16] [--ablation NAME=DIR ...] [--speed-mentions 64] [--json OUT]

Side by side in one run, on the same queries and dictionary (the split's `*_dictionary.txt`): the dense retriever
alone, the generative linker over the whole dictionary's prefix tree, and the retriever's `depth` best concepts
reordered by the generative model. Decoding speed: the same distinct dev mentions decoded with the same beams
`--speed-mentions` at a time vs one at a time (the two must give the same names). `--ablation NAME=DIR` adds the
whole-tree dev acc@1 of other models (target choice, prompt off, no pre-training). Prints Markdown tables (for
benchmarks/RESULTS.md); `--json OUT` writes the rows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.biosyn_sets import DATASETS, missing_datasets, split_data  # noqa: E402
from bioel_core.evaluation import evaluate  # noqa: E402
from bioel_core.linking.dense import DenseLinker  # noqa: E402
from bioel_core.linking.generative import GenerativeLinker, GenerativeReranker, open_generative  # noqa: E402
from bioel_core.linking.rerank import RerankLinker  # noqa: E402
from bioel_core.models import open_model  # noqa: E402


def scored(label: str, linker, queries: list, dataset: str, split: str, k: int, record_in: str | None = None) -> dict:
    """Scores one linker; `record_in`: the model folder whose card gets them (as `bioel evaluate --record-in-card`)."""
    scores, _ = evaluate(linker, queries, k)
    if record_in:
        from bioel_core.models.cards import record_scores

        record_scores(
            record_in, {"dataset": dataset, "split": split, "linker": linker.kind, "linker_options": linker.options(), **scores}
        )
    row = {
        "stage": label,
        "dataset": dataset,
        "split": split,
        "n": scores["n"],
        "acc@1": scores["acc@1"],
        "acc@5": scores.get("acc@5"),
        "seconds": scores["seconds"],
        "mentions_per_s": scores["n"] / scores["seconds"],
    }
    print(
        f"{label:<32}{dataset:<16}{split:<5} n={row['n']:<6}acc@1={row['acc@1']:.2f} acc@5={row['acc@5']:.2f} "
        f"{row['mentions_per_s']:.1f} mentions/s",
        flush=True,
    )
    return row


def accuracy_rows(args, model, retriever) -> list[dict]:
    rows = []
    for dataset in DATASETS:
        for split in args.splits:
            names, queries = split_data(args.data, dataset, split, args.limit)
            dense = DenseLinker(names, retriever, args.retriever)
            rows.append(scored("dense retriever", dense, queries, dataset, split, 5))
            card = args.model if args.record_in_card else None
            rows.append(
                scored(
                    f"generative, whole tree ({args.beams} beams)",
                    GenerativeLinker(names, model, args.model, beams=args.beams),
                    queries,
                    dataset,
                    split,
                    5,
                    card,
                )
            )
            rows.append(
                scored(
                    f"dense + generative reranker ({args.depth})",
                    RerankLinker(names, dense, GenerativeReranker(model), args.model, args.depth),
                    queries,
                    dataset,
                    split,
                    5,
                    card,
                )
            )
    return rows


def decoding_speed(args, model) -> dict:
    """Distinct dev mentions that are not a dictionary name (those skip decoding), NCBI's first, then BC5CDR's, decoded
    against NCBI's dev dictionary batched vs one at a time, after one warm-up of each (a GPU's first calls pay its
    kernels' start-up)."""
    dev = [split_data(args.data, dataset, "dev") for dataset in DATASETS]
    names = dev[0][0]
    linker = GenerativeLinker(names, model, args.model, beams=args.beams)
    known = set(names.names)
    queries = [q for _, split_queries in dev for q in split_queries]
    mentions = [m for m in dict.fromkeys(names.normalizer(q.text) for q in queries) if m not in known][: args.speed_mentions]
    model.generate_names(mentions[:8], linker.tree, args.beams, batch_size=8)
    model.generate_names(mentions[:1], linker.tree, args.beams, batch_size=1)
    began = time.perf_counter()
    batched = model.generate_names(mentions, linker.tree, args.beams, batch_size=len(mentions))
    batched_s = time.perf_counter() - began
    began = time.perf_counter()
    single = [model.generate_names([m], linker.tree, args.beams, batch_size=1)[0] for m in mentions]
    single_s = time.perf_counter() - began
    same = sum([n for n, _ in a] == [n for n, _ in b] for a, b in zip(batched, single))
    out = {
        "mentions": len(mentions),
        "beams": args.beams,
        "batched_mentions_per_s": len(mentions) / batched_s,
        "one_at_a_time_mentions_per_s": len(mentions) / single_s,
        "speedup": single_s / batched_s,
        "same_names": same,
    }
    print(
        f"decoding {len(mentions)} mentions, {args.beams} beams: batched {out['batched_mentions_per_s']:.1f} vs one at a "
        f"time {out['one_at_a_time_mentions_per_s']:.2f} mentions/s -> {out['speedup']:.1f}x; same names for {same}",
        flush=True,
    )
    return out


def ablation_rows(args) -> list[dict]:
    rows = []
    for spec in args.ablation or ():
        label, _, folder = spec.partition("=")
        model = open_generative(folder, args.device)
        for dataset in DATASETS:
            names, queries = split_data(args.data, dataset, "dev", args.limit)
            rows.append(
                {
                    "ablation": label,
                    "folder": folder,
                    **scored(label, GenerativeLinker(names, model, folder, beams=args.beams), queries, dataset, "dev", 5),
                }
            )
    return rows


def tables(rows: list[dict], speed: dict, ablations: list[dict], args) -> str:
    lines = [
        "## Generative linking (GenBioEL), BioSyn protocol",
        "",
        f"`python benchmarks/generative.py --model {args.model}` on {datetime.date.today().isoformat()}, "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, device {args.device}; "
        f"retriever {args.retriever}. mentions/s: every query of the split linked in one call (distinct queries "
        "decoded once; dictionary names are exact matches, not decoded).",
        "",
        "| stage | dataset | split | n | acc@1 | acc@5 | mentions/s |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['stage']} | {r['dataset']} | {r['split']} | {r['n']:,} | {r['acc@1']:.2f} | {r['acc@5']:.2f} | "
            f"{r['mentions_per_s']:,.1f} |"
        )
    if speed:
        lines += [
            "",
            f"Decoding {speed['mentions']} distinct dev mentions with {speed['beams']} beams: batched "
            f"{speed['batched_mentions_per_s']:.1f} mentions/s vs one at a time {speed['one_at_a_time_mentions_per_s']:.2f} "
            f"-> **{speed['speedup']:.1f}x** (same names for {speed['same_names']} of {speed['mentions']}).",
        ]
    if ablations:
        lines += ["", "| ablation (dev, whole tree) | dataset | acc@1 | acc@5 |", "|---|---|---:|---:|"]
        lines += [f"| {r['ablation']} | {r['dataset']} | {r['acc@1']:.2f} | {r['acc@5']:.2f} |" for r in ablations]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="shared benchmark data folder")
    parser.add_argument("--model", required=True, help="a generative model folder (`bioel train generative`)")
    parser.add_argument("--retriever", default=str(ROOT / "models" / "disease-default"))
    parser.add_argument("--splits", nargs="+", choices=["dev", "test"], default=["dev", "test"])
    parser.add_argument("--beams", type=int, default=5)
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--speed-mentions", type=int, default=64, help="0: no decoding-speed comparison")
    parser.add_argument("--ablation", nargs="+", metavar="NAME=DIR", help="other generative models scored on dev")
    parser.add_argument(
        "--limit", type=int, default=0, help="score only the first N queries of each split (a quick look; not for RESULTS.md)"
    )
    parser.add_argument("--record-in-card", action="store_true", help="add the generative rows' scores to the model's card")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    problem = missing_datasets(args.data)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    model = open_generative(args.model, args.device)
    speed = decoding_speed(args, model) if args.speed_mentions else {}
    rows = accuracy_rows(args, model, open_model(args.retriever, device=args.device))
    ablations = ablation_rows(args)
    print(tables(rows, speed, ablations, args))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"model": args.model, "retriever": args.retriever, "rows": rows, "decoding": speed, "ablations": ablations},
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
