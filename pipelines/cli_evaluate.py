"""The `bioel evaluate` and `bioel evaluate-e2e` verbs: argument parsing, then bioel_core.

`evaluate` scores a linker on a BioSyn-format dataset under the BioSyn protocol, with GenBioEL's
subpopulations; `evaluate-e2e` scores predicted annotations against gold ones (PubTator, BioC XML or JSON).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bioel_core import progress
from bioel_core.linking import DEFAULT_RERANK_DEPTH, LINKERS
from pipelines.cli_common import add_corpus_format, check_json, positive_int

# training mentions for the subpopulations: the ones a model evaluated on this split may have seen
TRAIN_FOLDER = {"dev": "processed_train", "test": "processed_traindev"}


def add_subcommands(subparsers) -> None:
    ev = subparsers.add_parser("evaluate", help="accuracy of a linker on a BioSyn-format dataset (BioSyn protocol)",
                               description="Scores every query of DATASET/processed_SPLIT: acc@1..k, MAP and "
                                           "GenBioEL's subpopulations (train mentions from processed_train for dev, "
                                           "processed_traindev for test).")
    ev.add_argument("--dataset", required=True, help="a BioSyn-format dataset folder (processed_*/, *_dictionary.txt)")
    ev.add_argument("--split", choices=sorted(TRAIN_FOLDER), default="test")
    ev.add_argument("--linker", choices=sorted(LINKERS), default="tfidf", help="which linker to build (default tfidf)")
    src = ev.add_mutually_exclusive_group()
    src.add_argument("--dictionary", help="a BioSyn dictionary (default DATASET/SPLIT_dictionary.txt)")
    src.add_argument("--names", help="an ingest-kb output folder whose names table to link against")
    src.add_argument("--linker-dir", help="a saved linker folder (its own names; --linker is ignored)")
    ev.add_argument("--model", help="dense: a bioel model folder or a local HF checkpoint (default: the shipped disease "
                                    "model); generative: a generative model folder")
    ev.add_argument("--pooling", choices=["cls", "mean"], help="dense with a plain HF checkpoint: pooling "
                    "(default: a sentence-transformers folder's own, else cls)")
    ev.add_argument("--device", default="cpu", help="dense: cpu or cuda")
    ev.add_argument("--sparse-weight", type=float, help="hybrid: weight of the TF-IDF cosine (tune on dev)")
    ev.add_argument("--retriever", help="rerank: the retriever's model folder (default: --model, else the shipped disease model)")
    ev.add_argument("--retriever-linker", choices=["dense", "hybrid"], default="dense",
                    help="rerank: the linker that retrieves the candidates (default dense)")
    ev.add_argument("--reranker", help="rerank: a cross-encoder or generative model folder (`bioel train --encoder "
                                       "cross-encoder|generative`) or an ensemble of them (`bioel ensemble`)")
    ev.add_argument("--beams", type=positive_int, default=5, help="generative: beams of the constrained beam search "
                                                                  "(default 5; at least --k)")
    ev.add_argument("--rerank-depth", type=positive_int, default=DEFAULT_RERANK_DEPTH,
                    help="rerank: how many of the retriever's best concepts the reranker reorders (default 16)")
    ev.add_argument("--record-in-card", action="store_true", help="dense/hybrid/generative: add the scores to the model's "
                                                                  "card; rerank: to the reranker's card")
    ev.add_argument("--k", type=positive_int, default=5, help="candidates per sub-mention (default 5)")
    ev.add_argument("--typos", help="a `typo||correction` map applied to queries (already applied in BioSyn's processed data)")
    ev.add_argument("--json", help="write the scores as JSON here")
    ev.set_defaults(func=cmd_evaluate)

    pr = subparsers.add_parser("probe", help="ResCNN-paper probing: shuffled n-grams and attention windows (dense linker)")
    pr.add_argument("--model", help="a bioel model folder or a local HF checkpoint (default: the shipped disease model)")
    pr.add_argument("--pooling", choices=["cls", "mean"], help="a plain HF checkpoint's pooling (default: a sentence-transformers "
                    "folder's own, else cls)")
    pr.add_argument("--dataset", required=True, help="a BioSyn-format dataset folder")
    pr.add_argument("--split", choices=sorted(TRAIN_FOLDER), default="dev")
    pr.add_argument("--k", type=positive_int, default=5)
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--device", default="cpu")
    pr.add_argument("--json", help="write the rows as JSON here")
    pr.set_defaults(func=cmd_probe)

    e2e = subparsers.add_parser("evaluate-e2e", help="span-level micro P/R/F1 (strict and partial) of predicted annotations")
    e2e.add_argument("--gold", required=True, help="gold annotations: a file, a folder of files, or a `bioel link` output")
    e2e.add_argument("--pred", required=True, help="predicted annotations: a file, a folder of files (the parts) or a "
                                                   "`bioel link` output folder (its --output-format copy)")
    for side in ("gold", "pred"):
        add_corpus_format(e2e, f"--{side}-format", f"--{side}")
    e2e.add_argument("--types", nargs="+", help="entity types scored (default all), e.g. Disease")
    e2e.add_argument("--kb", nargs="+", metavar="TYPE=KB_DIR|BUNDLE_DIR",
                     help="the KBs linked with (ingest-kb outputs per type, or a bundle's): report the gold ids they lack")
    e2e.add_argument("--json", help="write the scores as JSON here")
    e2e.set_defaults(func=cmd_evaluate_e2e)


def _linker(args):
    from bioel_core.linking import NameSet, build_linker, load_linker

    if args.linker_dir:
        return load_linker(args.linker_dir), args.linker_dir
    source = args.names or args.dictionary or str(Path(args.dataset) / f"{args.split}_dictionary.txt")
    names = NameSet.from_names_table(source) if args.names else NameSet.from_biosyn(source)
    options = {"model": args.model, "pooling": args.pooling, "device": args.device} if args.linker in ("dense", "hybrid", "rerank") else {}
    if args.linker in ("hybrid", "rerank") and args.sparse_weight is not None:
        options["sparse_weight"] = args.sparse_weight
    if args.linker == "generative":
        options = {"model": args.model, "device": args.device, "beams": args.beams}
    if args.linker == "rerank":
        options.update(model=args.retriever or args.model, retriever=args.retriever_linker, reranker=args.reranker,
                       depth=args.rerank_depth)
    return build_linker(args.linker, names, **options), source


def cmd_evaluate(args) -> int:
    from bioel_core.corpora import read_query_folder
    from bioel_core.evaluation import evaluate, subpopulation_scores
    from bioel_core.text import QueryPreprocessor

    if args.k < 1:
        raise ValueError(f"--k must be at least 1, got {args.k}")
    check_json(args.json, [(f"--{name.replace('_', '-')}", getattr(args, name)) for name in
                           ("dataset", "dictionary", "names", "linker_dir", "model", "retriever", "reranker", "typos")])
    dataset = Path(args.dataset)
    queries, without_concept = scored_queries(dataset, args.split)
    linker, source = _linker(args)
    preprocessor = QueryPreprocessor.from_typo_file(args.typos) if args.typos else None
    scores, results = evaluate(linker, queries, args.k, preprocessor)
    progress.count(queries=scores["n"])
    train_dir = dataset / TRAIN_FOLDER[args.split]
    report = {"dataset": dataset.name, "dataset_dir": str(dataset), "split": args.split, "linker": linker.kind,
              "linker_options": linker.options(), "dictionary": source, "protocol": "biosyn", "k": args.k,
              "queries_without_concept": without_concept, **scores}
    if train_dir.is_dir():
        train = read_query_folder(train_dir)
        report["subpopulations"] = subpopulation_scores(results, train, set(linker.names.names), linker.normalize, args.k)
        report["train_mentions"] = str(train_dir)
    else:
        report["subpopulations"] = {}
        print(f"note: {train_dir} not found: subpopulations skipped", file=sys.stderr)
    print(format_report(report))
    if without_concept:
        print(f"note: {without_concept} queries without a concept id (-1 or CUI-less) left out", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    if args.record_in_card:
        if args.linker not in ("dense", "hybrid", "rerank", "generative"):
            raise ValueError("--record-in-card needs --linker dense, hybrid, rerank or generative")
        from bioel_core.models import model_folder
        from bioel_core.models.cards import record_scores

        # a reranker's card holds the scores of the rerank stage (retriever in its options)
        record_scores(args.reranker if args.linker == "rerank" else model_folder(args.model), report)
    return 0


def scored_queries(dataset: Path, split: str) -> tuple[list, int]:
    """The queries of DATASET/processed_SPLIT that are scored and how many are left out: as BioSyn does, those
    without a concept (-1, CUI-less). A split with no query left to score is refused."""
    from bioel_core.corpora import read_query_folder

    folder = dataset / f"processed_{split}"
    queries = read_query_folder(folder)
    scored = [q for q in queries if q.concept_ids]
    if not scored:
        raise ValueError(f"{folder}: no query to score: {len(queries):,} queries, all without a concept id (-1 or CUI-less)"
                         if queries else f"{folder}: no query to score: its *.concept files are empty")
    return scored, len(queries) - len(scored)


def cmd_probe(args) -> int:
    from bioel_core.evaluation.probing import format_probe, probe
    from bioel_core.linking import NameSet
    from bioel_core.models import model_folder, open_model

    check_json(args.json, [("--dataset", args.dataset), ("--model", args.model)])
    dataset = Path(args.dataset)
    queries = scored_queries(dataset, args.split)[0]
    names = NameSet.from_biosyn(dataset / f"{args.split}_dictionary.txt")
    rows = probe(open_model(args.model, args.pooling, args.device), names, queries, args.k, args.seed)
    progress.count(queries=len(queries))
    model = str(model_folder(args.model))
    print(format_probe(rows, f"probing {model} on {dataset.name} {args.split} (n = {len(queries):,})"))
    if args.json:
        Path(args.json).write_text(json.dumps({"model": model, "dataset": dataset.name, "split": args.split, "rows": rows}, indent=2))
    return 0


def format_report(report: dict) -> str:
    k = report["k"]
    lines = [f"{report['dataset']} {report['split']}: linker {report['linker']}, n = {report['n']:,}, "
             f"{report['seconds']:.1f} s", ""]
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
    from bioel_core.evaluation.e2e import gold_contents

    folders = kb_folders(args.kb or ())
    check_json(args.json, [("--gold", args.gold), ("--pred", args.pred)])
    gold = read_annotated(args.gold, args.gold_format, "--gold", "--gold-format")
    pred = read_annotated(args.pred, args.pred_format, "--pred", "--pred-format")
    scores = e2e_scores(gold, pred, args.types, names=(f"--gold {args.gold}", f"--pred {args.pred}"))
    of_types = f"{' of type ' + ', '.join(args.types) if args.types else ''}"
    if not scores["strict"]["n_gold"]:
        raise ValueError(f"--gold {args.gold}: no annotation with a concept id{of_types} to score ({gold_contents(gold)})")
    if args.types and not scores["strict"]["n_pred"] and any(m.concept_ids for d in pred for m in d.mentions):
        # --types took every prediction away (types named otherwise): F1 0 that says nothing about the linker
        raise ValueError(f"--pred {args.pred}: no annotation with a concept id{of_types} to score ({gold_contents(pred)})")
    docs = scores["documents"]
    if docs["gold"] == docs["gold_not_in_pred"]:  # every gold annotation would count as missed: F1 0 that means nothing
        raise ValueError(f"--pred {args.pred}: none of its {docs['pred']:,} documents is in --gold {args.gold} "
                         f"({docs['gold']:,} documents): not predictions for this gold")
    progress.count(documents=len(pred), predictions=scores["strict"]["n_pred"])
    concepts = concept_scores(gold, pred, args.types)
    missing = unlinkable_in(gold, folders) if folders else None
    report = {"gold": args.gold, "pred": args.pred, "types": args.types or "all", **scores, "concepts": concepts,
              **({"unlinkable": missing} if missing is not None else {})}
    print(f"{'mode':<9}{'P':>8}{'R':>8}{'F1':>8}{'pred':>8}{'gold':>8}")
    for mode in ("strict", "partial"):
        s = scores[mode]
        print(f"{mode:<9}{s['precision']:>8.2f}{s['recall']:>8.2f}{s['f1']:>8.2f}{s['n_pred']:>8}{s['n_gold']:>8}")
    print(f"left out (no concept id): gold {scores['gold_without_concept']}, pred {scores['pred_without_concept']}")
    if scores["gold_composite_parts"] or scores["pred_composite_parts"]:
        print(f"left out (parts of a composite mention, BioC IndividualMention): gold {scores['gold_composite_parts']}, "
              f"pred {scores['pred_composite_parts']}")
    print(f"documents: gold {docs['gold']:,}, pred {docs['pred']:,}; gold not in pred {docs['gold_not_in_pred']:,} "
          f"({docs['gold_not_in_pred_annotations']:,} gold annotations counted as missed), "
          f"pred not in gold {docs['pred_not_in_gold']:,}")
    print("\ndocument-level concepts (BioCreative V CDR: the set of (type, id) per document)")
    width = max(map(len, concepts)) + 2
    print(f"{'type':<{width}}{'P':>8}{'R':>8}{'F1':>8}{'pred':>8}{'gold':>8}")
    for etype, s in concepts.items():
        print(f"{etype:<{width}}{s['precision']:>8.2f}{s['recall']:>8.2f}{s['f1']:>8.2f}{s['n_pred']:>8}{s['n_gold']:>8}")
    for etype, c in (missing or {}).items():
        print(f"gold {etype} ids the KB lacks: annotations {c['unlinkable']:,} of {c['with_id']:,} ({c['unlinkable_share']:.1f}%), "
              f"document concepts {c['concepts_unlinkable']:,} of {c['concepts']:,} ({c['concepts_unlinkable_share']:.1f}%)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0
