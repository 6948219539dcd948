"""Dictionary mention detection on BC5CDR test: strict-span P/R/F1 with and without the stop list and
abbreviation expansion, and speed; learns the shipped stop lists.

    .venv/bin/bioel ingest-kb --input-format medic-biosyn --input ../shared/data/medic/medic_06Jul2012.txt --output /tmp/medic_kb
    .venv/bin/bioel ingest-kb --input-format mesh-tsv --input ../shared/data/mesh/data_mesh_thesaurus.tsv.gz \
        ../shared/data/mesh/data_mesh_trees.tsv --output /tmp/mesh_kb
    .venv/bin/python benchmarks/detect.py --medic-kb /tmp/medic_kb [--mesh-kb /tmp/mesh_kb] [--learn-from train+dev] \
        [--write-stop-lists] [--json OUT]

Stop lists are learned from the gold corpora `--learn-from` names (benchmarks/training_corpora.py; diseases:
NCBI-disease, every mention type, plus BC5CDR Disease mentions; chemicals: BC5CDR Chemical mentions, MeSH restricted
to tree D) with min_count 3 and max_precision 0.2, the thresholds chosen on BC5CDR dev learning from train; the shipped
lists are learned from train+dev (the refit). `--write-stop-lists` saves them to models/stoplists/ (or --models). Speed is
detect() alone (documents already read, detector built), best of 3 passes over the 500 test abstracts on
one core.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bioel_core.corpora import Document, read_pubtator  # noqa: E402
from bioel_core.text.detect import DictionaryDetector, learn_stop_list  # noqa: E402
from benchmarks.training_corpora import LEARN_FROM, corpora  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
MODELS = ROOT / "models"
# names the training corpora's annotators disagree on, stopped as the development corpora annotate them (counted in
# the corpora's text, whole words, case-insensitive; benchmarks/RESULTS.md, "A span of the model's that a stop list holds")
_DEATH = (
    "BC5CDR dev annotates 0 of its 25 occurrences of death(s), NCBI-disease train 0 of 21 and dev 0 of 8; "
    "BC5CDR train 32 of 39: the development corpora's convention, chosen on dev"
)
CHOSEN_ON_DEV = {"Disease": {"death": _DEATH, "deaths": _DEATH}}
MIN_COUNT, MAX_PRECISION = 3, 0.2


def score(docs: list[Document], detector: DictionaryDetector, entity_type: str) -> dict:
    tp = fp = fn = 0
    for d in docs:
        gold = {(m.start, m.end) for m in d.mentions if m.entity_type == entity_type}
        pred = {(m.start, m.end) for m in detector.detect(d)}
        tp, fp, fn = tp + len(gold & pred), fp + len(pred - gold), fn + len(gold - pred)
    p, r = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(2 * p * r / max(p + r, 1e-9), 4),
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def speed(docs: list[Document], detector: DictionaryDetector) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for d in docs:
            detector.detect(d)
        best = min(best, time.perf_counter() - t0)
    return round(len(docs) / best, 1)


def run_kb(
    label: str,
    kb: Path,
    entity_type: str,
    semantic_types: tuple[str, ...],
    sources: list[str],
    train_docs: list[Document],
    test: list[Document],
    out: Path | None,
) -> dict:

    def detector(**options) -> DictionaryDetector:
        return DictionaryDetector.from_names_table(kb, entity_type=entity_type, semantic_types=semantic_types, **options)

    t0 = time.perf_counter()
    base = detector()
    build_s = time.perf_counter() - t0
    stop = learn_stop_list(train_docs, base, MIN_COUNT, MAX_PRECISION, learned_from=sources)
    stop.chosen = CHOSEN_ON_DEV.get(entity_type, {})
    # name the KB by its input files and checksums, not by this run's output folder
    inputs = json.loads((kb / "manifest.json").read_text())["inputs"]
    stop.dictionary = "; ".join(f"{Path(i['path']).name} (sha256 {i['sha256'][:16]})" for i in inputs)
    if semantic_types:
        stop.dictionary += f"; concepts with semantic types {', '.join(semantic_types)}*"
    if out is not None:
        stop.save(out)
    rows = []
    for use_stop in (False, True):
        for abbreviations in (False, True):
            det = detector(abbreviations=abbreviations, stop_list=stop if use_stop else None)
            rows.append(
                {
                    "stop_list": use_stop,
                    "abbreviations": abbreviations,
                    "acronyms_uppercase_only": True,
                    **score(test, det, entity_type),
                }
            )
    # without the acronym rule, with a stop list learned without it too
    plain_stop = learn_stop_list(train_docs, detector(acronyms_uppercase_only=False), MIN_COUNT, MAX_PRECISION)
    for use_stop in (False, True):
        det = detector(acronyms_uppercase_only=False, stop_list=plain_stop if use_stop else None)
        rows.append(
            {"stop_list": use_stop, "abbreviations": True, "acronyms_uppercase_only": False, **score(test, det, entity_type)}
        )
    return {
        "kb": label,
        "entity_type": entity_type,
        "names_dir": str(kb),
        "semantic_types": list(semantic_types),
        "build_s": round(build_s, 2),
        "stop_list_names": len(stop.counts),
        "learned_from": stop.learned_from,
        "rows": rows,
        "abstracts_per_s": speed(test, detector(stop_list=stop)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--medic-kb", type=Path, required=True, help="ingest-kb output of MEDIC (medic-biosyn)")
    parser.add_argument("--mesh-kb", type=Path, help="ingest-kb output of the MeSH thesaurus with its trees file (mesh-tsv)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--learn-from", choices=LEARN_FROM, default="train", help="the gold corpora (default train)")
    parser.add_argument("--models", type=Path, default=MODELS, help="the folder whose stoplists/ are written")
    parser.add_argument("--write-stop-lists", action="store_true", help="save the learned stop lists under MODELS/stoplists")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cdr = args.data / "bc5cdr-corpus"
    test = read_pubtator(cdr / "CDR_TestSet.PubTator.txt")
    stop_lists = args.models / "stoplists"
    if args.write_stop_lists:
        stop_lists.mkdir(parents=True, exist_ok=True)

    runs = [
        run_kb(
            "MEDIC (medic_06Jul2012)",
            args.medic_kb,
            "Disease",
            (),
            *corpora("Disease", args.learn_from, args.data)[:2],
            test,
            stop_lists / "disease-medic.json" if args.write_stop_lists else None,
        )
    ]
    if args.mesh_kb:
        runs.append(
            run_kb(
                "MeSH 2024 thesaurus, tree D (chemicals and drugs)",
                args.mesh_kb,
                "Chemical",
                ("D",),
                *corpora("Chemical", args.learn_from, args.data)[:2],
                test,
                stop_lists / "chemical-mesh.json" if args.write_stop_lists else None,
            )
        )
    result = {
        "test": "bc5cdr-corpus/CDR_TestSet.PubTator.txt (strict span)",
        "min_count": MIN_COUNT,
        "max_precision": MAX_PRECISION,
        "runs": runs,
        "machine": platform.platform(),
        "load_average": os.getloadavg(),
    }
    for run in runs:
        print(
            f"{run['entity_type']} with {run['kb']}: stop list of {run['stop_list_names']} names, "
            f"detector built in {run['build_s']} s, {run['abstracts_per_s']} abstracts/s"
        )
        print("| stop list | abbreviations | acronyms uppercase only | P | R | F1 |\n|---|---|---|---|---|---|")
        for r in run["rows"]:
            print(
                f"| {'yes' if r['stop_list'] else 'no'} | {'yes' if r['abbreviations'] else 'no'} | "
                f"{'yes' if r['acronyms_uppercase_only'] else 'no'} | {r['precision']:.3f} | {r['recall']:.3f} | {r['f1']:.3f} |"
            )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
