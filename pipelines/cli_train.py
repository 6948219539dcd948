"""`bioel train KIND` and `bioel ensemble`: argument parsing for bioel_core.training and bioel_core.models.ensemble.

Each kind's flags are its training contract's fields (bioel_core.settings.train, made into flags by
pipelines.cli_flags), so each kind lists only its own settings, with its own defaults.
"""

from __future__ import annotations

import argparse
import sys

from bioel_core import progress
from bioel_core.settings import SettingsError
from bioel_core.settings.train import TRAIN_KINDS
from pipelines.cli_flags import FlagError, FlagSet, add_flags

KIND_HELP = {
    "transformer": "a transformer name encoder: KB self-alignment (SapBERT), then optional fine-tuning on a dataset's "
    "training mentions",
    "rescnn": "a ResCNN name encoder (small, fast on CPU): the same recipe as transformer",
    "collective": "the document model that detects and links every mention of a document in one pass "
    "(`bioel link --detector collective|both`)",
    "cross-encoder": "a reranker of a retriever's candidates (`bioel evaluate --linker rerank`, `bioel link --reranker`)",
    "generative": "a seq2seq linker that writes KB names (GenBioEL; `bioel evaluate --linker generative`, or as a --reranker)",
}


class _RemovedEncoderFlag(argparse.Action):
    """`bioel train --encoder KIND` (bioel 0.2): refused with the form that replaced it."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(
            f"--encoder was removed in bioel 0.3: the kind is a subcommand, `bioel train {values} ...` "
            f"(`bioel train {values} --help` lists its flags)"
        )


def add_subcommands(subparsers) -> None:
    tr = subparsers.add_parser(
        "train",
        help="train a model: a name encoder (transformer, rescnn), the collective "
        "document model, a cross-encoder reranker or a generative linker",
        description="Trains one kind of model into a model folder with its card; `bioel train "
        "KIND --help` lists the kind's settings. Re-running the same command after "
        "a stop resumes from the last checkpoint.",
    )
    tr.add_argument("--encoder", metavar="KIND", action=_RemovedEncoderFlag, help=argparse.SUPPRESS)
    kinds = tr.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, contract in TRAIN_KINDS.items():
        parser = kinds.add_parser(
            kind,
            help=KIND_HELP[kind],
            description=f"Trains {KIND_HELP[kind]}. Re-running the same command after a stop resumes from the last checkpoint.",
        )
        flags = add_flags(parser, contract)
        parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        parser.set_defaults(func=cmd_train, train_flags=flags)

    en = subparsers.add_parser(
        "ensemble",
        help="combine trained models into one (name encoders: weighted mean of their "
        "cosines; rerankers: weighted sum of their scores)",
        description="Writes a model folder that references its members (never copies them) with "
        "their fingerprints. Of name encoders, every verb that takes --model takes it; of "
        "rerankers (cross-encoder, generative), every --reranker. Choose the weights on dev "
        "(rerankers: python benchmarks/rerank_fusion.py).",
    )
    en.add_argument(
        "--member",
        nargs="+",
        action="append",
        required=True,
        metavar="PATH WEIGHT [POOLING]",
        help="a model folder (or HF checkpoint, then with its pooling: cls or mean) and its weight; repeat per member",
    )
    en.add_argument(
        "--retriever-weight",
        type=float,
        help="rerankers only, required: the share of the retriever's score added to the members' weighted sum",
    )
    en.add_argument("--output", required=True, help="ensemble folder to write")
    en.set_defaults(func=cmd_ensemble)


def cmd_train(args) -> int:
    from bioel_core.guards import check_model_output
    from bioel_core.training import train

    flags: FlagSet = args.train_flags
    settings = flags.settings(args)
    spell = flags.option_of  # a setting's flag, for errors about the data
    check_model_output(settings.output, [(spell(field), path) for field, path in settings.inputs()])
    try:
        card = train(settings, command=["bioel", *sys.argv[1:]], spell=spell)
    except SettingsError as err:  # a setting the data shows wrong (an --init of another kind, a budget too short)
        raise FlagError(flags.describe(err)) from None
    where = f"{settings.output} in {card['training_seconds'] / 60:.1f} min"
    if "collective" in card:
        progress.count(epochs=len(card["collective"]["epochs"]))
        print(
            f"trained collective -> {where}; dev strict F1 {100 * card['collective']['dev']['f1']:.2f}; "
            f"card: {settings.output}/MODEL_CARD.md"
        )
    else:
        progress.count(steps=sum(stage["steps"] for stage in card["stages"].values()))
        print(f"trained {settings.kind} -> {where}; card: {settings.output}/MODEL_CARD.md")
    return 0


def cmd_ensemble(args) -> int:
    from bioel_core.guards import check_model_output
    from bioel_core.linking.rerank import is_reranker_folder
    from bioel_core.models.ensemble import make_ensemble

    check_model_output(args.output, [("--member", member[0]) for member in args.member])
    specs = []
    for member in args.member:
        if len(member) not in (2, 3):
            raise ValueError(f"--member {' '.join(member)}: expected PATH WEIGHT [POOLING]")
        try:
            weight = float(member[1])
        except ValueError:
            raise ValueError(f"--member {' '.join(member)}: weight {member[1]!r} is not a number") from None
        specs.append((member[0], weight, member[2] if len(member) == 3 else None))
    rerankers = [path for path, _, _ in specs if is_reranker_folder(path)]
    if rerankers:
        return _reranker_ensemble(args, specs, rerankers)
    if args.retriever_weight is not None:
        raise ValueError("--retriever-weight: only an ensemble of rerankers adds the retriever's score")
    card = make_ensemble(specs, args.output, command=["bioel", *sys.argv[1:]])
    print(f"ensemble of {len(specs)} members -> {args.output} (dim {card['encoder']['dim']}); card: {args.output}/MODEL_CARD.md")
    return 0


def _reranker_ensemble(args, specs: list, rerankers: list[str]) -> int:
    from bioel_core.linking.rerank_ensemble import make_reranker_ensemble

    if len(rerankers) != len(specs):
        others = [path for path, _, _ in specs if path not in rerankers]
        raise ValueError(
            f"--member: {rerankers[0]} is a reranker and {others[0]} is not: an ensemble is of name "
            f"encoders or of rerankers, not both"
        )
    if any(pooling for _, _, pooling in specs):
        raise ValueError("--member: a reranker folder has no pooling to choose")
    if args.retriever_weight is None:
        raise ValueError(
            "an ensemble of rerankers needs --retriever-weight (chosen on dev with the member weights: "
            "python benchmarks/rerank_fusion.py)"
        )
    make_reranker_ensemble(
        [(path, weight) for path, weight, _ in specs], args.retriever_weight, args.output, command=["bioel", *sys.argv[1:]]
    )
    print(
        f"ensemble of {len(specs)} rerankers -> {args.output} (retriever weight {args.retriever_weight:g}); "
        f"card: {args.output}/MODEL_CARD.md"
    )
    return 0
