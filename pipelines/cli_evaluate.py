"""The `bioel evaluate`, `bioel probe` and `bioel evaluate-e2e` verbs: their contracts made from the flags, then
bioel_core.

`evaluate` scores a linker on a BioSyn-format dataset under the BioSyn protocol, with GenBioEL's
subpopulations; `evaluate-e2e` scores predicted annotations against gold ones (PubTator, BioC XML or JSON).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bioel_core import progress
from bioel_core.corpora.biosyn import TRAIN_FOLDER
from bioel_core.settings import EndToEndSettings, EvaluateSettings, ProbeSettings
from pipelines.cli_common import check_json
from pipelines.cli_flags import add_contracts
from pipelines.cli_verbs import FLAGS


def add_subcommands(subparsers) -> None:
    ev = subparsers.add_parser(
        "evaluate",
        help="accuracy of a linker on a BioSyn-format dataset (BioSyn protocol)",
        description="Scores every query of DATASET/processed_SPLIT: acc@1..k, MAP and "
        "GenBioEL's subpopulations (train mentions from processed_train for dev, "
        "processed_traindev for test).",
    )
    add_contracts(ev, FLAGS["evaluate"])
    ev.add_argument("--json", help="write the scores as JSON here")
    ev.set_defaults(func=cmd_evaluate)

    pr = subparsers.add_parser("probe", help="ResCNN-paper probing: shuffled n-grams and attention windows (dense linker)")
    add_contracts(pr, FLAGS["probe"])
    pr.add_argument("--json", help="write the rows as JSON here")
    pr.set_defaults(func=cmd_probe)

    e2e = subparsers.add_parser("evaluate-e2e", help="span-level micro P/R/F1 (strict and partial) of predicted annotations")
    add_contracts(e2e, FLAGS["evaluate-e2e"])
    e2e.add_argument("--json", help="write the scores as JSON here")
    e2e.set_defaults(func=cmd_evaluate_e2e)


def _linker(run: EvaluateSettings):
    from bioel_core.linking import NameSet, build_linker, load_linker

    if run.linker_dir:
        return load_linker(run.linker_dir), run.linker_dir
    source = run.names or run.dictionary or str(Path(run.dataset) / f"{run.split}_dictionary.txt")
    names = NameSet.from_names_table(source) if run.names else NameSet.from_biosyn(source)
    options = (
        {"model": run.model, "pooling": run.pooling, "device": run.device} if run.linker in ("dense", "hybrid", "rerank") else {}
    )
    if run.linker in ("hybrid", "rerank") and run.sparse_weight is not None:
        options["sparse_weight"] = run.sparse_weight
    if run.linker == "generative":
        options = {"model": run.model, "device": run.device, "beams": run.beams}
    if run.linker == "rerank":
        options.update(
            model=run.retriever or run.model, retriever=run.retriever_linker, reranker=run.reranker, depth=run.rerank_depth
        )
    return build_linker(run.linker, names, **options), source


def cmd_evaluate(args) -> int:
    from bioel_core.corpora import read_query_folder
    from bioel_core.evaluation import evaluate, subpopulation_scores
    from bioel_core.text import QueryPreprocessor

    run = args.contracts.settings(args, EvaluateSettings)
    flags = args.contracts.options()
    check_json(
        args.json,
        [
            (flags[name], getattr(run, name))
            for name in ("dataset", "dictionary", "names", "linker_dir", "model", "retriever", "reranker", "typos")
        ],
    )
    dataset = Path(run.dataset)
    queries, without_concept = scored_queries(dataset, run.split)
    linker, source = _linker(run)
    preprocessor = QueryPreprocessor.from_typo_file(run.typos) if run.typos else None
    scores, results = evaluate(linker, queries, run.k, preprocessor)
    progress.count(queries=scores["n"])
    train_dir = dataset / TRAIN_FOLDER[run.split]
    report = {
        "dataset": dataset.name,
        "dataset_dir": str(dataset),
        "split": run.split,
        "linker": linker.kind,
        "linker_options": linker.options(),
        "dictionary": source,
        "protocol": "biosyn",
        "k": run.k,
        "queries_without_concept": without_concept,
        **scores,
    }
    if train_dir.is_dir():
        train = read_query_folder(train_dir)
        report["subpopulations"] = subpopulation_scores(results, train, set(linker.names.names), linker.normalize, run.k)
        report["train_mentions"] = str(train_dir)
    else:
        report["subpopulations"] = {}
        print(f"note: {train_dir} not found: subpopulations skipped", file=sys.stderr)
    print(format_report(report))
    if without_concept:
        print(f"note: {without_concept} queries without a concept id (-1 or CUI-less) left out", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    if run.record_in_card:
        from bioel_core.models import model_folder
        from bioel_core.models.cards import record_scores

        # a reranker's card holds the scores of the rerank stage (retriever in its options)
        record_scores(run.reranker if run.linker == "rerank" else model_folder(run.model), report)
    return 0


def scored_queries(dataset: Path, split: str) -> tuple[list, int]:
    """The queries of DATASET/processed_SPLIT that are scored and how many are left out: as BioSyn does, those
    without a concept (-1, CUI-less). A split with no query left to score is refused."""
    from bioel_core.corpora import read_query_folder

    folder = dataset / f"processed_{split}"
    queries = read_query_folder(folder)
    scored = [q for q in queries if q.concept_ids]
    if not scored:
        raise ValueError(
            f"{folder}: no query to score: {len(queries):,} queries, all without a concept id (-1 or CUI-less)"
            if queries
            else f"{folder}: no query to score: its *.concept files are empty"
        )
    return scored, len(queries) - len(scored)


def cmd_probe(args) -> int:
    from bioel_core.evaluation.probing import format_probe, probe
    from bioel_core.linking import NameSet
    from bioel_core.models import model_folder, open_model

    run = args.contracts.settings(args, ProbeSettings)
    check_json(args.json, [("--dataset", run.dataset), ("--model", run.model)])
    dataset = Path(run.dataset)
    queries = scored_queries(dataset, run.split)[0]
    names = NameSet.from_biosyn(dataset / f"{run.split}_dictionary.txt")
    rows = probe(open_model(run.model, run.pooling, run.device), names, queries, run.k, run.seed)
    progress.count(queries=len(queries))
    model = str(model_folder(run.model))
    print(format_probe(rows, f"probing {model} on {dataset.name} {run.split} (n = {len(queries):,})"))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"model": model, "dataset": dataset.name, "split": run.split, "rows": rows}, indent=2)
        )
    return 0


def format_report(report: dict) -> str:
    k = report["k"]
    lines = [
        f"{report['dataset']} {report['split']}: linker {report['linker']}, n = {report['n']:,}, {report['seconds']:.1f} s",
        "",
    ]
    cols = ["acc@1"] + ([f"acc@{k}"] if k > 1 else []) + ["map"]
    lines.append(f"{'subset':<20}{'n':>7}" + "".join(f"{c:>9}" for c in cols))
    rows = report["subpopulations"] or {"overall": report}
    for name, s in rows.items():
        lines.append(f"{name:<20}{s['n']:>7}" + "".join(f"{s[c]:>9.2f}" for c in cols))
    return "\n".join(lines)


def cmd_evaluate_e2e(args) -> int:
    from bioel_core.corpora import read_annotated
    from bioel_core.evaluation import e2e_scores
    from bioel_core.evaluation.concepts import concept_scores, kb_folders, unlinkable_in
    from bioel_core.evaluation.e2e import gold_contents, text_mismatch

    run = args.contracts.settings(args, EndToEndSettings)
    folders = kb_folders(run.kb or (), "--kb")
    check_json(args.json, [("--gold", run.gold), ("--pred", run.pred), ("--baseline", run.baseline)])
    gold = read_annotated(run.gold, run.gold_format, "--gold", "--gold-format")
    pred = read_annotated(run.pred, run.pred_format, "--pred", "--pred-format")
    baseline = read_annotated(run.baseline, run.pred_format, "--baseline", "--pred-format") if run.baseline else None
    if baseline is not None and (mismatch := text_mismatch(gold, baseline, (f"--gold {run.gold}", f"--baseline {run.baseline}"))):
        raise ValueError(mismatch)
    scores = e2e_scores(gold, pred, run.types, names=(f"--gold {run.gold}", f"--pred {run.pred}"))
    of_types = f"{' of type ' + ', '.join(run.types) if run.types else ''}"
    if not scores["strict"]["n_gold"]:
        raise ValueError(f"--gold {run.gold}: no annotation with a concept id{of_types} to score ({gold_contents(gold)})")
    if run.types and not scores["strict"]["n_pred"] and any(m.concept_ids for d in pred for m in d.mentions):
        # --types took every prediction away (types named otherwise): F1 0 that says nothing about the linker
        raise ValueError(f"--pred {run.pred}: no annotation with a concept id{of_types} to score ({gold_contents(pred)})")
    docs = scores["documents"]
    if docs["gold"] == docs["gold_not_in_pred"]:  # every gold annotation would count as missed: F1 0 that means nothing
        raise ValueError(
            f"--pred {run.pred}: none of its {docs['pred']:,} documents is in --gold {run.gold} "
            f"({docs['gold']:,} documents): not predictions for this gold"
        )
    progress.count(documents=len(pred), predictions=scores["strict"]["n_pred"])
    concepts = concept_scores(gold, pred, run.types)
    missing = unlinkable_in(gold, folders) if folders else None
    sureness = _intervals(run, gold, pred, baseline)
    report = {
        "gold": run.gold,
        "pred": run.pred,
        "types": run.types or "all",
        **scores,
        "concepts": concepts,
        **({"unlinkable": missing} if missing is not None else {}),
        **sureness,
    }
    intervals = sureness.get("intervals", {})

    def interval(name: str) -> str:
        return f"  {intervals[name]['low']:.2f}-{intervals[name]['high']:.2f}" if name in intervals else ""

    ci = f"  {'95% interval':>11}" if intervals else ""
    print(f"{'mode':<9}{'P':>8}{'R':>8}{'F1':>8}{'pred':>8}{'gold':>8}{ci}")
    for mode in ("strict", "partial"):
        s = scores[mode]
        print(
            f"{mode:<9}{s['precision']:>8.2f}{s['recall']:>8.2f}{s['f1']:>8.2f}{s['n_pred']:>8}{s['n_gold']:>8}{interval(mode)}"
        )
    print(f"left out (no concept id): gold {scores['gold_without_concept']}, pred {scores['pred_without_concept']}")
    if scores["gold_composite_parts"] or scores["pred_composite_parts"]:
        print(
            f"left out (parts of a composite mention, BioC IndividualMention): gold {scores['gold_composite_parts']}, "
            f"pred {scores['pred_composite_parts']}"
        )
    print(
        f"documents: gold {docs['gold']:,}, pred {docs['pred']:,}; gold not in pred {docs['gold_not_in_pred']:,} "
        f"({docs['gold_not_in_pred_annotations']:,} gold annotations counted as missed), "
        f"pred not in gold {docs['pred_not_in_gold']:,}"
    )
    print("\ndocument-level concepts (BioCreative V CDR: the set of (type, id) per document)")
    width = max(map(len, concepts)) + 2
    print(f"{'type':<{width}}{'P':>8}{'R':>8}{'F1':>8}{'pred':>8}{'gold':>8}{ci}")
    for etype, s in concepts.items():
        print(
            f"{etype:<{width}}{s['precision']:>8.2f}{s['recall']:>8.2f}{s['f1']:>8.2f}{s['n_pred']:>8}{s['n_gold']:>8}"
            f"{interval('concepts ' + etype)}"
        )
    for etype, c in (missing or {}).items():
        print(
            f"gold {etype} ids the KB lacks: annotations {c['unlinkable']:,} of {c['with_id']:,} ({c['unlinkable_share']:.1f}%), "
            f"document concepts {c['concepts_unlinkable']:,} of {c['concepts']:,} ({c['concepts_unlinkable_share']:.1f}%)"
        )
    if intervals:
        print(
            f"95% intervals: {run.bootstrap:,} resamplings of the {sureness['documents_resampled']:,} documents "
            "(--bootstrap 0: none)"
        )
    if "differences" in sureness:
        print(f"\nagainst --baseline {run.baseline} (F1 difference, 95% interval over the same resampled documents)")
        for name, d in sureness["differences"].items():
            clear = "  (the interval leaves 0 out)" if d["clear"] else ""
            print(f"{name:<{width + 9}}{d['delta']:>+8.2f}  {d['low']:+.2f} to {d['high']:+.2f}{clear}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def _intervals(run, gold, pred, baseline) -> dict:
    """The report's intervals (`--bootstrap`) and differences from `--baseline`: {"intervals": {score: {f1, low, high}},
    "differences": {score: {delta, low, high}}, "documents_resampled": n}; {} with --bootstrap 0 or one document."""
    from dataclasses import asdict

    from bioel_core.evaluation.bootstrap import difference, interval, scored_counts

    if not run.bootstrap:
        if baseline is not None:
            raise ValueError("--baseline needs --bootstrap above 0: its differences are read with their intervals")
        return {}
    sides = [pred] if baseline is None else [pred, baseline]
    documents = sorted({d.doc_id for side in (gold, *sides) for d in side})
    if len(documents) < 2:  # one document resampled is itself: no interval to tell
        if baseline is not None:
            raise ValueError(f"--baseline: {len(documents)} document scored; a difference's interval needs two or more")
        return {}
    counts = [scored_counts(gold, side, documents, run.types) for side in sides]
    out = {
        "intervals": {name: asdict(interval(c, run.bootstrap)) for name, c in counts[0].items()},
        "documents_resampled": len(documents),
    }
    if baseline is not None:
        shared = [name for name in counts[0] if name in counts[1]]
        found = {name: difference(counts[0][name], counts[1][name], run.bootstrap) for name in shared}
        out["differences"] = {name: {**asdict(d), "clear": d.clear} for name, d in found.items()}
    return out
