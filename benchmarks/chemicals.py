"""Chemical linking: BC5CDR-chemical queries against the MeSH 2024 thesaurus restricted to tree D (10,527
descriptors, every entry term a name, MeSH ids), linked by the shipped disease model and by a chemical model.

    .venv/bin/python benchmarks/chemicals.py [--model models/chemical-default] [--work .bench] [--json OUT]

Builds the BioSyn-layout dataset (dictionary = the KB's names, no mentions added, so the figures are NOT
comparable with published BC5CDR-chemical ones, whose CTD-chemical dictionary is not here; queries whose
concept is not a tree D descriptor, e.g. supplementary C ids, are left out and counted), trains the chemical
model with the default `bioel train` command when `--model` does not exist yet (`--max-minutes` bounds it), and
scores dev and test acc@1/@5 and mentions/s of each model with `bioel evaluate --linker dense`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.kbs import BIOEL, KBS, built, sh  # noqa: E402
from benchmarks.user_dataset import write_dataset  # noqa: E402


def build(work: Path) -> tuple[Path, Path, dict]:
    """(KB folder, dataset folder, counts): the tree D KB ingested once, the dataset written from its names."""
    from bioel_core.tables import read_table

    kb, dataset = work / "Chemical-kb", work / "bc5cdr-chemical-mesh"
    if not built(kb):
        sh(BIOEL + ["ingest-kb", *KBS["Chemical"][0], "--output", kb, "--no-quality"])
    names = read_table(kb, "names", ["concept_id", "name"]).to_pydict()
    dictionary = sorted(set(zip(names["concept_id"], names["name"])))
    return kb, dataset, write_dataset(dataset, dictionary, {c: c for c, _ in dictionary})


def score(model: Path, dataset: Path, kb: Path, split: str, report: Path) -> dict:
    started = time.perf_counter()
    sh(
        BIOEL
        + [
            "evaluate",
            "--linker",
            "dense",
            "--model",
            model,
            "--dataset",
            dataset,
            "--split",
            split,
            "--names",
            kb,
            "--json",
            report,
        ]
    )
    seconds = time.perf_counter() - started  # the whole command: the KB's names are embedded each time
    return {**json.loads(report.read_text()), "command_seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "chemical-default")
    parser.add_argument("--baseline", type=Path, default=ROOT / "models" / "disease-default")
    parser.add_argument("--work", type=Path, default=ROOT / ".bench")
    parser.add_argument("--max-minutes", type=float, default=80, help="training budget when --model is trained here")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    kb, dataset, counts = build(args.work)
    print(json.dumps(counts))
    if not (args.model / "card.json").is_file():
        sh(
            BIOEL
            + [
                "train",
                "rescnn",
                "--names",
                kb,
                "--train-dataset",
                dataset,
                "--output",
                args.model,
                "--save-dtype",
                "float16",
                "--max-minutes",
                args.max_minutes,
                "--no-progress",
            ]
        )
    rows = []
    for label, model in (("disease model", args.baseline), ("chemical model", args.model)):
        for split in ("dev", "test"):
            r = score(model, dataset, kb, split, args.work / f"chemicals-{model.name}-{split}.json")
            rows.append(
                {
                    "model": label,
                    "folder": str(model),
                    "split": split,
                    "n": r["n"],
                    "acc@1": r["acc@1"],
                    "acc@5": r["acc@5"],
                    "command_seconds": r["command_seconds"],
                }
            )
    print("| model | split | queries | acc@1 | acc@5 | `bioel evaluate` seconds |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['split']} | {r['n']:,} | {r['acc@1']:.2f} | {r['acc@5']:.2f} | {r['command_seconds']:.0f} |")
    if args.json:
        args.json.write_text(json.dumps({"dataset": counts, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
