"""End-to-end linking on the BC5CDR test corpus: raw abstracts in, detected and linked spans out, scored
against the gold PubTator file (strict and partial micro P/R/F1, diseases to MEDIC, chemicals to MeSH tree D).

    .venv/bin/python benchmarks/e2e_bc5cdr.py [--model DIR] [--work DIR] [--json OUT]

The KBs are built once with the `bioel` verbs (benchmarks/kbs.py). NIL thresholds are calibrated with
`bioel calibrate-nil` on the BC5CDR development set, never on test. The test abstracts are linked by
`bioel link --mentions detect` (the gold spans in the input are ignored) twice: with no NIL threshold and
with the dev thresholds; its PubTator output writes ids as PubTator3 does (`--id-prefix vocabulary`: `MESH:D003920`),
which the scoring compares with the gold's bare ids. Gold annotations whose ids are in neither KB (MeSH supplementary concepts, chemical
ids outside tree D, ...) cannot be linked by any system restricted to these KBs; they are counted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.kbs import BIOEL, DATA, annotator_flags, built, model_tag, prepare, sh  # noqa: E402
from bioel_core.corpora import read_pubtator  # noqa: E402
from bioel_core.tables import data_root  # noqa: E402
from bioel_core.evaluation.e2e import e2e_scores  # noqa: E402
from bioel_core.kb.vocab import plain_id  # noqa: E402
from bioel_core.tables import read_table  # noqa: E402
from schemas import SCHEMA_VERSION  # noqa: E402

CORPUS = DATA / "bc5cdr-corpus"
TYPES = ("Disease", "Chemical")
PUBLISHED = {"dual encoder (Bhowmik et al.)": (73.8, 75.2), "MedType": (23.5, 25.7), "SciSpacy": (22.3, 24.0)}


def kb_ids(kb: Path) -> set[str]:
    table = read_table(kb, "concepts", ["concept_id", "alt_ids"])
    ids = {plain_id(c) for c in table.column("concept_id").to_pylist()}
    return ids | {plain_id(a) for alts in table.column("alt_ids").to_pylist() for a in alts}


def unlinkable(gold_docs, ids_by_type: dict[str, set[str]]) -> dict[str, dict[str, int]]:
    """Per type: gold annotations with an id, and those none of whose ids is in that type's KB."""
    out = {t: {"with_id": 0, "unlinkable": 0} for t in TYPES}
    for doc in gold_docs:
        for m in doc.mentions:
            ids = {plain_id(i) for i in m.concept_ids}
            if m.entity_type in out and ids:
                out[m.entity_type]["with_id"] += 1
                out[m.entity_type]["unlinkable"] += not (ids & ids_by_type[m.entity_type])
    return out


def link(kbs: dict, model: str, output: Path, thresholds: dict[str, float]) -> Path:
    """`bioel link` over the raw test abstracts; returns the PubTator file of its predictions."""
    if not built(output):
        nil = ["--nil-threshold", *[f"{t}={v}" for t, v in thresholds.items()]] if thresholds else []
        sh(BIOEL + ["link", "--model", model, "--input", CORPUS / "CDR_TestSet.PubTator.txt", "--input-format", "pubtator",
                    "--mentions", "detect", *annotator_flags(kbs), *nil,
                    "--output", output, "--output-format", "pubtator", "--id-prefix", "vocabulary", "--no-quality", "--runner", "FnApiRunner"])
    merged = output.with_suffix(".pubtator")
    merged.write_text("".join(p.read_text() for p in sorted((data_root(output) / "pubtator").glob("*.pubtator"))))
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: the shipped disease model)")
    parser.add_argument("--work", default=str(ROOT / ".bench"), help="cache of KB tables, embeddings, indexes (shared with bulk_link.py) and runs")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    from bioel_core.models import model_folder

    model = str(model_folder(args.model))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    kbs, tag = prepare(work, model), model_tag(model)
    # the thresholds depend on the KB tables too: a new schema version (new ids) calibrates again
    calibration = work / f"e2e-nil-{tag}-schema{SCHEMA_VERSION}.json"
    if not calibration.is_file():
        sh(BIOEL + ["calibrate-nil", "--gold", CORPUS / "CDR_DevelopmentSet.PubTator.txt", "--model", model,
                    *annotator_flags(kbs), "--json", calibration])
    thresholds = {t: v["threshold"] for t, v in json.loads(calibration.read_text())["thresholds"].items()}

    gold = read_pubtator(CORPUS / "CDR_TestSet.PubTator.txt")
    missing = unlinkable(gold, {t: kb_ids(kbs[t]["kb"]) for t in TYPES})
    runs = {"no NIL threshold": {}, "NIL thresholds from dev": thresholds}
    rows = []
    for label, cut in runs.items():
        pred = read_pubtator(link(kbs, model, work / f"e2e-test-{tag}-{'nil' if cut else 'all'}", cut))
        for types in (TYPES, ("Disease",), ("Chemical",)):
            rows.append({"run": label, "types": "+".join(types), **e2e_scores(gold, pred, types)})

    print(f"\nBC5CDR test, end to end ({len(gold)} abstracts), model {model}")
    print(f"NIL thresholds (calibrated on BC5CDR dev): {thresholds}")
    print(f"{'run':<26}{'types':<18}{'strict P':>9}{'R':>7}{'F1':>7}{'partial P':>11}{'R':>7}{'F1':>7}{'pred':>7}{'gold':>7}")
    for r in rows:
        s, p = r["strict"], r["partial"]
        print(f"{r['run']:<26}{r['types']:<18}{s['precision']:>9.2f}{s['recall']:>7.2f}{s['f1']:>7.2f}"
              f"{p['precision']:>11.2f}{p['recall']:>7.2f}{p['f1']:>7.2f}{s['n_pred']:>7}{s['n_gold']:>7}")
    for name, (strict, partial) in PUBLISHED.items():
        print(f"published: {name}: strict F1 {strict}, partial F1 {partial}")
    for t, c in missing.items():
        print(f"gold {t} annotations with an id: {c['with_id']:,}; with no id in the {t} KB (unlinkable): "
              f"{c['unlinkable']:,} ({100 * c['unlinkable'] / max(1, c['with_id']):.1f}%)")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": model, "thresholds": thresholds, "unlinkable": missing, "runs": rows,
                                               "cpu_count": os.cpu_count(), "python": platform.python_version()}, indent=2))


if __name__ == "__main__":
    main()
