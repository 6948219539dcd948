"""The default training recipe on a dataset built to resemble a user's: BC5CDR-chemical mentions against a dictionary
of MeSH tree D chemicals with ONE name per concept and local, non-MeSH ids (CHEM00001 ...), beside tuned runs.

    .venv/bin/python benchmarks/user_dataset.py [--work .bench/chem-user] [--runs default hard-negatives ...]

Builds the BioSyn-layout dataset (dictionary + processed_{train,dev,test}; queries whose concept is not a tree D
descriptor, e.g. supplementary C ids, are left out and counted), ingests the dictionary with `bioel ingest-kb
--input-format biosyn-dict --id-pattern`, trains each run with `bioel train rescnn` (the default command has
no tuning flag), scores dev and test with `bioel evaluate`, prints a table; `--json OUT` writes the rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.kbs import BIOEL, DATA, built, sh  # noqa: E402

CHEMICAL_QUERIES = DATA / "bc5cdr-chemical" / "bc5cdr-chemical-cl"
SPLITS = ("train", "dev", "test")
# run name -> the flags it adds to the default command (the default adds none)
RUNS = {
    "default": [],
    "hard-negatives": ["--hard-negatives", "8"],
    "infonce": ["--finetune-loss", "infonce"],
    "lr-3e-3": ["--lr", "3e-3"],
}


def build_dataset(out: Path) -> dict:
    """Writes OUT/dictionary.txt, OUT/{split}_dictionary.txt and OUT/processed_{split}/; returns the counts."""
    names: dict[str, str] = {}
    with open(DATA / "mesh" / "data_mesh_trees.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["tree_location"].startswith("D"):
                names[row["DescriptorUI"]] = row["DescriptorName"]
    local = {ui: f"CHEM{n:05d}" for n, ui in enumerate(sorted(names), start=1)}
    return write_dataset(out, [(local[ui], names[ui]) for ui in sorted(names)], local)


def write_dataset(out: Path, dictionary: list[tuple[str, str]], dataset_id: dict[str, str]) -> dict:
    """A BioSyn-layout dataset of the BC5CDR-chemical queries: OUT/dictionary.txt and OUT/{split}_dictionary.txt
    (the `dictionary` (id, name) lines, no mentions added) and OUT/processed_{split}/, each query's MeSH ids mapped
    through `dataset_id`; a query with an id outside it is left out and counted. Returns the counts."""
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"{concept_id}||{name}\n" for concept_id, name in dictionary)
    for name in ("dictionary.txt", *(f"{s}_dictionary.txt" for s in SPLITS)):
        (out / name).write_text(lines)
    counts = {"concepts": len({concept_id for concept_id, _ in dictionary}), "names": len(dictionary)}
    for split in SPLITS:
        folder = out / f"processed_{split}"
        folder.mkdir(exist_ok=True)
        kept = dropped = 0
        for source in sorted((CHEMICAL_QUERIES / split).glob("*.concept")):
            queries = []
            for line in source.read_text().splitlines():
                fields = line.split("||")
                if all(i in dataset_id for i in re.split(r"[|+]", fields[-1])):  # composites keep their separators
                    queries.append("||".join(fields[:-1] + [re.sub(r"[^|+]+", lambda m: dataset_id[m.group()], fields[-1])]))
                    kept += 1
                else:
                    dropped += 1
            (folder / source.name).write_text("".join(f"{q}\n" for q in queries))
        counts[split] = {"queries": kept, "left_out_not_in_dictionary": dropped}
    return counts


def score(model: Path, dataset: Path, kb: Path, split: str, work: Path) -> dict:
    report = work / f"{model.name}-{split}.json"
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
    return json.loads(report.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / ".bench" / "chem-user")
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=list(RUNS))
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    dataset, kb = args.work / "dataset", args.work / "kb"
    counts = build_dataset(dataset)
    print(json.dumps(counts))
    if not built(kb):
        sh(
            BIOEL
            + [
                "ingest-kb",
                "--input-format",
                "biosyn-dict",
                "--kb-name",
                "chem-user",
                "--id-pattern",
                r"CHEM\d{5}",
                "--input",
                dataset / "dictionary.txt",
                "--output",
                kb,
                "--no-quality",
            ]
        )
    rows = []
    for run in args.runs:
        model = args.work / f"model-{run}"
        if not (model / "card.json").is_file():
            sh(
                BIOEL
                + ["train", "rescnn", "--names", kb, "--train-dataset", dataset, "--output", model, "--no-progress", *RUNS[run]]
            )
        card = json.loads((model / "card.json").read_text())
        finetune = card["stages"]["finetune"]
        dev, test = score(model, dataset, kb, "dev", args.work), score(model, dataset, kb, "test", args.work)
        rows.append(
            {
                "run": run,
                "flags": RUNS[run],
                "epochs_run": len(finetune.get("dev", [])),
                "best_epoch": finetune.get("best_dev", {}).get("epoch"),
                "minutes": card["training_seconds"] / 60,
                "dev_acc@1": dev["acc@1"],
                "test_acc@1": test["acc@1"],
                "test_acc@5": test["acc@5"],
            }
        )
    print("| run | flags | epochs run (best) | minutes | dev acc@1 | test acc@1 | test acc@5 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['run']} | `{' '.join(r['flags']) or '(none)'}` | {r['epochs_run']} ({r['best_epoch']}) | {r['minutes']:.1f} | "
            f"{r['dev_acc@1']:.2f} | {r['test_acc@1']:.2f} | {r['test_acc@5']:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"dataset": counts, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
