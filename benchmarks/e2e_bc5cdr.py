"""End-to-end linking on the BC5CDR test corpus: raw abstracts in, detected and linked spans out, scored
against the gold PubTator file (strict and partial micro P/R/F1, diseases to MEDIC, chemicals to MeSH tree D).

    .venv/bin/python benchmarks/e2e_bc5cdr.py [--bundle-file FILE] [--bundle-dir DIR] [--bundle-only] [--model DIR] [--chemical-model DIR]
        [--collective DIR] [--work DIR] [--json OUT] [--record-in-card] [--split dev]

The default rows are the shipped configuration, as the README's quick start runs it: the bundle
`benchmarks/diseases-chemicals.bundle.toml` built by `bioel build` (its NIL thresholds, calibrated on BC5CDR dev, fixed in
the file; its learned names and stop lists learned from the train and dev sets) and
`bioel link --bundle`, on BC5CDR and on NCBI-disease (its Disease links scored); `--bundle-only` stops there. The rows after it take the configuration apart:

The KBs are built once with the `bioel` verbs (benchmarks/kbs.py). NIL thresholds are calibrated with
`bioel calibrate-nil` on the BC5CDR development set, never on test (the shipped stop lists these rows use were
learned from it too, since 2026-12-01). The test abstracts are linked by
`bioel link --mentions detect` (the gold spans in the input are ignored) twice: with no NIL threshold and
with the dev thresholds; its PubTator output writes ids as PubTator3 does (`--id-prefix vocabulary`: `MESH:D003920`),
which the scoring compares with the gold's bare ids. Gold ids that the chosen KBs cannot name (with MeSH tree D: the
supplementary concepts, chemical ids outside tree D, ...) cannot be linked by any system restricted to these KBs: the
report counts them per type, annotations and document concepts, against the default row's bundle KBs (with
`--split dev`, where the bundle is not linked, against benchmarks/kbs.py's).

Detectors side by side: the KB dictionaries (`--detector dictionary`, linking diseases with --model and chemicals
with --chemical-model, default models/chemical-default when present: `bioel link --model DIR Chemical=DIR`), and the collective
model (`--collective DIR`, default models/bc5cdr-collective when present): its exhaustive span detector through
`bioel link --detector model`, both together (`--detector both`; NIL thresholds calibrated on dev with the same
detector), and its BIO decoder run in process (no NIL threshold). The same detectors are also run on the NCBI-disease test corpus (raw abstracts,
diseases only: every NCBI mention type is a disease, linked to MEDIC).

`--split dev` scores the development sets instead (BC5CDR dev, NCBI-disease dev), for tuning a model without looking
at test: the NIL thresholds are calibrated on BC5CDR dev itself there, so only the rows without them are reported
(the bundle's learned files are learned from the dev sets: no bundle row), and nothing is recorded in a card.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.kbs import BIOEL, DATA, annotator_flags, built, model_tag, prepare, sh  # noqa: E402
from bioel_core.corpora import read_pubtator  # noqa: E402
from bioel_core.tables import data_root  # noqa: E402
from bioel_core.evaluation.concepts import ALL_TYPES, concept_scores, kb_folders, unlinkable_in  # noqa: E402
from bioel_core.evaluation.bootstrap import interval, scored_counts  # noqa: E402
from bioel_core.evaluation.e2e import e2e_scores  # noqa: E402
from schemas import SCHEMA_VERSION  # noqa: E402

CORPUS = DATA / "bc5cdr-corpus"
TYPES = ("Disease", "Chemical")
RESAMPLES = 1000  # of the documents, for each F1's 95% interval
PUBLISHED = {"dual encoder (Bhowmik et al.)": (73.8, 75.2), "MedType": (23.5, 25.7), "SciSpacy": (22.3, 24.0)}


def scored(gold, pred, types) -> dict:
    """Mention-level strict / partial scores and document-level concept scores (BioCreative V CDR) of one run, with
    each F1's 95% interval over resampled documents (bioel_core.evaluation.bootstrap)."""
    gold, pred = list(gold), list(pred)
    documents = sorted({item.doc_id for item in gold + pred})
    counts = scored_counts(gold, pred, documents, types)
    intervals = {name: asdict(interval(c, RESAMPLES)) for name, c in counts.items()}
    return {**e2e_scores(gold, pred, types), "concepts": concept_scores(gold, pred, types), "intervals": intervals}


SPLITS = {
    "test": (CORPUS / "CDR_TestSet.PubTator.txt", DATA / "ncbi-disease" / "raw_corpus" / "NCBItestset_corpus.txt"),
    "dev": (CORPUS / "CDR_DevelopmentSet.PubTator.txt", DATA / "ncbi-disease" / "raw_corpus" / "NCBIdevelopset_corpus.txt"),
}


def link(
    kbs: dict,
    model: str,
    output: Path,
    thresholds: dict[str, float],
    detector: str = "dictionary",
    corpus: Path = SPLITS["test"][0],
) -> Path:
    """`bioel link` over the raw abstracts of a gold corpus; returns the PubTator file of its predictions."""
    if not built(output):
        nil = ["--nil-threshold", *[f"{t}={v}" for t, v in thresholds.items()]] if thresholds else []
        sh(
            BIOEL
            + [
                "link",
                "--input",
                corpus,
                "--input-format",
                "pubtator",
                "--detector",
                detector,
                "--mentions",
                "detect",
                *annotator_flags(kbs, model),
                *nil,
                "--output",
                output,
                "--output-format",
                "pubtator",
                "--id-prefix",
                "vocabulary",
                "--no-quality",
                "--runner",
                "FnApiRunner",
            ]
        )
    merged = output.with_suffix(".pubtator")
    merged.write_text("".join(p.read_text() for p in sorted((data_root(output) / "pubtator").glob("*.pubtator"))))
    return merged


def built_bundle(work: Path, bundle_file: Path, bundle: Path | None) -> Path:
    """`bioel build` the bundle file into `bundle` (default WORK/bundle-NAME; up to date: a no-op), as the README's
    quick start does; returns the bundle folder."""
    bundle = bundle or work / f"bundle-{bundle_file.name.removesuffix('.toml').removesuffix('.bundle')}"
    sh(BIOEL + ["build", bundle_file, "--output", bundle, "--runner", "FnApiRunner"])
    return bundle


def bundle_links(work: Path, bundle: Path, corpus: Path) -> Path:
    """`bioel link --bundle` the corpus's raw abstracts; returns the PubTator file of the predictions. Incremental:
    a document is linked again when the bundle or bioel's rules changed (its settings key), else kept."""
    output = work / f"e2e-bundle-{bundle.name}-{corpus.stem}"
    sh(
        BIOEL
        + ["link", "--bundle", bundle, "--input", corpus, "--input-format", "pubtator", "--output", output]
        + ["--incremental", "--no-quality", "--runner", "FnApiRunner"]
    )
    merged = output.with_suffix(".pubtator")
    merged.write_text("".join(p.read_text() for p in sorted((data_root(output) / "pubtator").glob("*.pubtator"))))
    return merged


def interval_text(found: dict) -> str:
    return f"{found['low']:.2f}-{found['high']:.2f}"


def kb_gap_lines(missing: dict[str, dict], kbs: str) -> list[str]:
    """The report's lines on the gold ids the KBs (`kbs` says which) cannot name: per type, the annotations none of
    whose ids they name and the document-level (type, id) pairs whose id they do not (`unlinkable`)."""
    return [
        f"gold {t} ids {kbs} cannot name: annotations {c['unlinkable']:,} of {c['with_id']:,} ({c['unlinkable_share']:.1f}%), "
        f"document concepts {c['concepts_unlinkable']:,} of {c['concepts']:,} ({c['concepts_unlinkable_share']:.1f}%)"
        for t, c in missing.items()
    ]


def calibrated(work: Path, kbs: dict, model: str, tag: str, detector: str) -> dict[str, float]:
    """NIL thresholds from `bioel calibrate-nil` on the BC5CDR development set (cached per model, detector, schema)."""
    # the thresholds depend on the KB tables too: a new schema version (new ids) calibrates again
    calibration = work / f"e2e-nil-{tag}-{detector}-schema{SCHEMA_VERSION}.json"
    if not calibration.is_file():
        sh(
            BIOEL
            + [
                "calibrate-nil",
                "--gold",
                CORPUS / "CDR_DevelopmentSet.PubTator.txt",
                "--detector",
                detector,
                *annotator_flags(kbs, model),
                "--json",
                calibration,
            ]
        )
    return {t: v["threshold"] for t, v in json.loads(calibration.read_text())["thresholds"].items()}


def bio_predictions(collective: str, kbs: dict, docs) -> list:
    """The collective model's BIO decoder in process: Documents whose mentions are its linked spans."""
    from bioel_core.models import CollectiveEncoder
    from bioel_core.training.collective import NameSpace, predicted_documents

    model = CollectiveEncoder.load(collective)
    spaces = {t: NameSpace.from_names_table(kbs[t]["kb"], model) for t in model.entity_types if t in kbs}
    return predicted_documents(
        model, docs, spaces, model.decoding["thresholds"], decoder="bio", link_with=model.decoding["link_with"]
    )


def ncbi_corpus(work: Path, split: str = "test") -> Path:
    """The NCBI-disease test (or dev) set with every mention typed Disease (its four types are all diseases)."""
    from bioel_core.corpora import write_pubtator
    from bioel_core.corpora.annotated import CorpusSpec

    docs = CorpusSpec(str(SPLITS[split][1]), ("Disease",)).read("pubtator", TYPES).documents
    path = work / f"ncbi-{split}-disease.pubtator"
    with open(path, "w") as fh:
        write_pubtator(docs, fh)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bundle-file",
        default=str(ROOT / "benchmarks" / "diseases-chemicals.bundle.toml"),
        help="the bundle of the default row (the README's quick start)",
    )
    parser.add_argument("--bundle-dir", help="where the bundle is built (default: WORK/bundle-NAME)")
    parser.add_argument("--bundle-only", action="store_true", help="the default row only")
    parser.add_argument("--model", help="model folder (default: the shipped disease model)")
    parser.add_argument(
        "--chemical-model",
        help="the dictionary detector's chemical model (default: models/chemical-default "
        "when present; 'none': --model links chemicals too)",
    )
    parser.add_argument("--collective", help="collective model folder (default: models/bc5cdr-collective when present)")
    parser.add_argument(
        "--work", default=str(ROOT / ".bench"), help="cache of KB tables, embeddings, indexes (shared with bulk_link.py) and runs"
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--record-in-card", action="store_true", help="put the collective model's rows in its card")
    parser.add_argument(
        "--split",
        choices=sorted(SPLITS),
        default="test",
        help="the gold sets scored (dev: for tuning; no NIL-threshold rows, no card)",
    )
    args = parser.parse_args()
    from bioel_core.models import model_folder

    model = str(model_folder(args.model))
    default_chemical = ROOT / "models" / "chemical-default"
    chemical = (
        None
        if args.chemical_model == "none"
        else args.chemical_model or (str(default_chemical) if (default_chemical / "bioel_encoder.json").is_file() else None)
    )
    default_collective = ROOT / "models" / "bc5cdr-collective"
    collective = args.collective or (str(default_collective) if (default_collective / "bioel_encoder.json").is_file() else None)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus, split = SPLITS[args.split][0], args.split
    if split != "test" and args.record_in_card:
        raise ValueError("--record-in-card records test figures; --split dev is for tuning")
    gold = read_pubtator(corpus)
    ncbi = ncbi_corpus(work, split)
    ncbi_gold = read_pubtator(ncbi)
    # (detector, model, chemical model): the collective model's one pass links every type with its own vectors
    detectors = [("dictionary", model, chemical)] + (
        [("model", collective, None), ("both", collective, None)] if collective else []
    )
    rows, thresholds_used, missing, missing_kbs = [], {}, None, ""
    bundle = built_bundle(work, Path(args.bundle_file), Path(args.bundle_dir) if args.bundle_dir else None)
    if split == "test":  # the bundle's names, stop lists and NIL thresholds are learned on dev: no dev row
        pred = read_pubtator(bundle_links(work, bundle, corpus))
        missing, missing_kbs = unlinkable_in(gold, kb_folders([str(bundle)])), f"the KBs of {Path(args.bundle_file).name}"
        for types in (TYPES, ("Disease",), ("Chemical",)):
            rows.append(
                {
                    "corpus": "BC5CDR",
                    "detector": "bundle",
                    "run": Path(args.bundle_file).name,
                    "types": "+".join(types),
                    **scored(gold, pred, types),
                }
            )
    # NCBI-disease annotates diseases only: the bundle links both types, its Disease links are scored; its NIL
    # thresholds come from BC5CDR dev, so the dev split's row is not tuned on itself
    pred = read_pubtator(bundle_links(work, bundle, ncbi))
    rows.append(
        {
            "corpus": "NCBI-disease",
            "detector": "bundle",
            "run": Path(args.bundle_file).name,
            "types": "Disease",
            **scored(ncbi_gold, pred, ("Disease",)),
        }
    )
    if args.bundle_only:
        detectors = []
    for detector, folder, chemical_folder in detectors:
        kbs = prepare(work, folder, {"Chemical": chemical_folder} if chemical_folder else None)
        tag = model_tag(folder) + (f"-chem{model_tag(chemical_folder)}" if chemical_folder else "")
        if missing is None:
            missing, missing_kbs = unlinkable_in(gold, {t: kbs[t]["kb"] for t in TYPES}), "benchmarks/kbs.py's KBs"
        thresholds = calibrated(work, kbs, folder, tag, detector) if split == "test" else {}
        thresholds_used[detector] = thresholds
        label = {"dictionary": "dictionary", "model": "model spans", "both": "dict+model"}[detector]
        runs = (
            (("no NIL threshold", {}), ("NIL thresholds from dev", thresholds))
            if split == "test"
            else (("no NIL threshold", {}),)
        )
        for run, cut in runs:
            pred = read_pubtator(
                link(kbs, folder, work / f"e2e-{split}-{tag}-{detector}-{'nil' if cut else 'all'}", cut, detector, corpus)
            )
            for types in (TYPES, ("Disease",), ("Chemical",)):
                rows.append(
                    {"corpus": "BC5CDR", "detector": label, "run": run, "types": "+".join(types), **scored(gold, pred, types)}
                )
        disease = {"Disease": kbs["Disease"]}
        pred = read_pubtator(
            link(disease, folder, work / f"e2e-ncbi{'' if split == 'test' else '-' + split}-{tag}-{detector}", {}, detector, ncbi)
        )
        rows.append(
            {
                "corpus": "NCBI-disease",
                "detector": label,
                "run": "no NIL threshold",
                "types": "Disease",
                **scored(ncbi_gold, pred, None),
            }
        )
        if detector == "model":
            pred = bio_predictions(folder, kbs, gold)
            for types in (TYPES, ("Disease",), ("Chemical",)):
                rows.append(
                    {
                        "corpus": "BC5CDR",
                        "detector": "model BIO",
                        "run": "no NIL threshold",
                        "types": "+".join(types),
                        **scored(gold, pred, types),
                    }
                )
            pred = bio_predictions(folder, disease, ncbi_gold)
            rows.append(
                {
                    "corpus": "NCBI-disease",
                    "detector": "model BIO",
                    "run": "no NIL threshold",
                    "types": "Disease",
                    **scored(ncbi_gold, pred, None),
                }
            )

    print(f"\nEnd to end on raw abstracts: BC5CDR {split} ({len(gold)}), NCBI-disease {split} ({len(ncbi_gold)})")
    print(f"bundle: {args.bundle_file} built in {bundle} (its models, KBs and NIL thresholds: {bundle}/manifest.json)")
    if detectors:  # the configuration taken apart: the rows after the bundle's
        print(
            f"dictionary detector with {model}, chemicals with {chemical or 'the same'}; collective model {collective or '(none)'}"
        )
        print(f"NIL thresholds (calibrated on BC5CDR dev): {thresholds_used}")
    print(
        f"{'corpus':<14}{'detector':<13}{'run':<32}{'types':<18}{'strict P':>9}{'R':>7}{'F1':>7}{'partial P':>11}{'R':>7}{'F1':>7}{'pred':>7}{'gold':>7}{'concept F1':>12}{'95% interval':>14}"
    )
    for r in rows:
        s, p = r["strict"], r["partial"]
        print(
            f"{r['corpus']:<14}{r['detector']:<13}{r['run']:<32}{r['types']:<18}{s['precision']:>9.2f}{s['recall']:>7.2f}{s['f1']:>7.2f}"
            f"{p['precision']:>11.2f}{p['recall']:>7.2f}{p['f1']:>7.2f}{s['n_pred']:>7}{s['n_gold']:>7}"
            f"{r['concepts'][ALL_TYPES]['f1']:>12.2f}{interval_text(r['intervals'][f'concepts {ALL_TYPES}']):>14}"
        )
    print(f"95% intervals of the concept F1: {RESAMPLES:,} resamplings of each corpus's documents")
    for name, (strict, partial) in PUBLISHED.items():
        print(f"published: {name}: strict F1 {strict}, partial F1 {partial}")
    for line in kb_gap_lines(missing or {}, missing_kbs):
        print(line)
    if args.record_in_card and collective:
        from bioel_core.models.cards import record_e2e

        record_e2e(collective, [r for r in rows if r["detector"] != "dictionary"])
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "split": split,
                    "model": model,
                    "chemical_model": chemical,
                    "collective": collective,
                    "thresholds": thresholds_used,
                    "unlinkable": missing,
                    "runs": rows,
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
