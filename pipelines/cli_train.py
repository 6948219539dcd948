"""`bioel train`: argument parsing for bioel_core.training.recipe."""

from __future__ import annotations

import sys
from pathlib import Path

from bioel_core import progress
from bioel_core.linking import DEFAULT_RERANK_DEPTH
from pipelines.cli_common import add_corpus_format, non_negative_int, positive_float, positive_int


def add_subcommands(subparsers) -> None:
    tr = subparsers.add_parser("train", help="train an encoder: KB self-alignment (SapBERT) then optional fine-tuning",
                               description="Stage 1 aligns the KB's synonyms (multi-similarity loss, online hard-pair mining); "
                                           "stage 2 fine-tunes on a BioSyn dataset's training mentions. Re-running the same "
                                           "command after a stop resumes from the last checkpoint.")
    tr.add_argument("--encoder", choices=["transformer", "rescnn", "collective", "cross-encoder", "generative"], required=True,
                    help="collective: the document model that detects and links in one pass (--train-corpus, --dev-corpus, "
                         "--names TYPE=KB_DIR ...); cross-encoder: a reranker for --retriever's candidates "
                         "(--train-dataset, `bioel evaluate --linker rerank`, `bioel link --reranker`); generative: a "
                         "seq2seq linker that writes KB names (GenBioEL: KB-guided pre-training, then fine-tuning on "
                         "--train-dataset; `bioel evaluate --linker generative`, or as a --reranker)")
    tr.add_argument("--retriever", help="cross-encoder, generative: the dense model whose top concepts it learns to "
                                        "reorder (its score's weight is chosen on dev; default: the shipped disease model)")
    tr.add_argument("--pretrain-epochs", type=non_negative_int, default=1, help="generative: epochs of KB-guided pre-training, one "
                                                                   "synthetic example per concept each (0: none)")
    tr.add_argument("--target-name", choices=["tfidf", "shortest", "random"], default="tfidf",
                    help="generative: which name of the gold concept a training mention learns to write (default: the "
                         "most similar by char 3-gram TF-IDF)")
    tr.add_argument("--no-prompt", action="store_true", help="generative: decode the name alone, without the `mention is` prompt")
    tr.add_argument("--decoder-layers", type=positive_int, default=1, help="generative: decoder layers (default 1, which keeps "
                                                                  "the float16 folder under 50 MB)")
    tr.add_argument("--example-size", type=positive_int, default=8, help="cross-encoder: concepts per training mention (gold + the "
                                                                "retriever's best wrong ones)")
    tr.add_argument("--synonym-examples", type=non_negative_int, help="cross-encoder: KB names trained on as mentions, their concept "
                                                         "known by its other names (default: as many as the training "
                                                         "mentions give; 0: none)")
    tr.add_argument("--rerank-depth", type=positive_int, default=DEFAULT_RERANK_DEPTH, help="cross-encoder: concepts reordered when scoring dev")
    tr.add_argument("--retriever-weight", type=float,
                    help="cross-encoder, generative: the share of the retriever's score the rerank stage adds, as chosen "
                         "on dev by an earlier run (for a model retrained on --train-split traindev, where no dev is left "
                         "to choose it; default: chosen on dev, else 0)")
    tr.add_argument("--init", help="HF checkpoint or bioel model folder to start from (default: the packaged MiniLM)")
    tr.add_argument("--pooling", choices=["cls", "mean", "max", "attention"],
                    help="transformer: cls or mean (default: a sentence-transformers --init folder's own, else cls); "
                         "rescnn: max (default) or attention")
    tr.add_argument("--names", required=True, nargs="+", metavar="[TYPE=]KB_DIR",
                    help="an ingest-kb output folder (the KB's names); collective: one per entity type, TYPE=KB_DIR")
    tr.add_argument("--train-corpus", nargs="+", help="collective: gold documents to train on (files, folders of files or "
                                                    "`bioel link` outputs, in --corpus-format)")
    tr.add_argument("--dev-corpus", nargs="+", help="collective: gold documents to choose the epoch and decoding on (as "
                                                  "--train-corpus)")
    add_corpus_format(tr, "--corpus-format", "--train-corpus and --dev-corpus")
    tr.add_argument("--name-model", help="collective: the frozen name encoder (default: the shipped disease model)")
    tr.add_argument("--document-layers", type=positive_int, help="collective: keep only the first N transformer layers of the "
                                                        "document encoder (a faster model; with --init a trained collective "
                                                        "model, its first N layers and heads are the start)")
    tr.add_argument("--mention-pooling", choices=["endpoints", "mean"], default="endpoints",
                    help="collective: mention vectors from W[h_start; h_end] (default) or the mean of the span's tokens")
    tr.add_argument("--epochs", type=positive_int, default=8, help="collective: epochs (the best on dev is kept)")
    tr.add_argument("--max-minutes", type=positive_float, help="wall-clock budget for the whole run; ends after the running step "
                                                      "with the best model so far (best on dev when there is a dev split)")
    tr.add_argument("--train-dataset", nargs="+", help="BioSyn dataset folder(s) whose training mentions fine-tune the model")
    tr.add_argument("--train-split", help="processed_SPLIT used for fine-tuning; default: train when every --train-dataset "
                                          "has processed_dev (dev then chooses the epoch), else traindev")
    tr.add_argument("--output", required=True, help="model folder to write")
    tr.add_argument("--device", default="auto", help="auto (default: cuda when available, else cpu), cpu or cuda[:N]")
    tr.add_argument("--align-epochs", type=non_negative_int, default=1, help="0 skips self-alignment")
    tr.add_argument("--align-max-steps", type=positive_int)
    tr.add_argument("--finetune-epochs", type=non_negative_int, help="at most this many epochs (default: 20 when dev chooses the "
                                                          "epoch and --patience stops it, more when the data is small: at "
                                                          "least 1,500 steps, dev scored about every 200 steps; else 3)")
    tr.add_argument("--patience", type=positive_int, default=3, help="with a dev split: epochs without a better dev acc@1 before stopping")
    tr.add_argument("--warmup", type=float, default=0.1, help="share of each stage's steps with a rising learning rate "
                                                             "(then linear decay to 0)")
    tr.add_argument("--finetune-max-steps", type=positive_int)
    tr.add_argument("--batch-size", type=positive_int, help="pairs per step (default 128); cross-encoder: mentions per step (default 8); "
                                                   "generative: examples per step (default 32)")
    tr.add_argument("--lr", type=float, help="learning rate (default 2e-5 transformer and cross-encoder, 1e-3 rescnn, "
                                             "1e-4 generative)")
    tr.add_argument("--margin", type=float, default=0.2)
    tr.add_argument("--finetune-loss", choices=["multi-similarity", "infonce"], default="multi-similarity",
                    help="fine-tuning loss: SapBERT's multi-similarity with hard-pair mining (default), or a batch "
                         "softmax (InfoNCE) where the gold name and the wrong names compete")
    tr.add_argument("--temperature", type=float, default=0.05, help="infonce temperature")
    tr.add_argument("--hard-negatives", type=non_negative_int, default=0,
                    help="fine-tuning: put each mention's N nearest wrong concepts (mined every epoch with the current "
                         "model) in its batch instead of random batches (default 0: random)")
    tr.add_argument("--max-pairs-per-concept", type=positive_int, default=50)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--save-dtype", choices=["float32", "float16"],
                    help="weights on disk (default float32; collective: float16, which keeps the folder under 50 MB)")
    tr.add_argument("--no-progress", action="store_true", help="no progress bar (there is none anyway when stderr is not a terminal)")
    tr.set_defaults(func=cmd_train)

    en = subparsers.add_parser("ensemble", help="combine trained models into one (name encoders: weighted mean of their "
                                                "cosines; rerankers: weighted sum of their scores)",
                               description="Writes a model folder that references its members (never copies them) with "
                                           "their fingerprints. Of name encoders, every verb that takes --model takes it; of "
                                           "rerankers (cross-encoder, generative), every --reranker. Choose the weights on dev "
                                           "(rerankers: python benchmarks/rerank_fusion.py).")
    en.add_argument("--member", nargs="+", action="append", required=True, metavar="PATH WEIGHT [POOLING]",
                    help="a model folder (or HF checkpoint, then with its pooling: cls or mean) and its weight; repeat per member")
    en.add_argument("--retriever-weight", type=float,
                    help="rerankers only, required: the share of the retriever's score added to the members' weighted sum")
    en.add_argument("--output", required=True, help="ensemble folder to write")
    en.set_defaults(func=cmd_ensemble)


def _model_inputs(args) -> list[tuple[str, str]]:
    """(flag, path) of every folder or file a train or ensemble run reads."""
    single = [(flag, getattr(args, attr, None)) for flag, attr in
              (("--init", "init"), ("--retriever", "retriever"), ("--name-model", "name_model"))]
    many = [(flag, path) for flag, attr in (("--train-dataset", "train_dataset"), ("--train-corpus", "train_corpus"),
                                            ("--dev-corpus", "dev_corpus")) for path in getattr(args, attr, None) or ()]
    names = [("--names", typed.rpartition("=")[2]) for typed in getattr(args, "names", None) or ()]  # [TYPE=]DIR
    members = [("--member", member[0]) for member in getattr(args, "member", None) or ()]
    return [(flag, str(path)) for flag, path in single + many + names + members if path]


def cmd_train(args) -> int:
    from bioel_core.guards import check_model_output

    check_model_output(args.output, _model_inputs(args))
    if args.encoder == "collective":  # before the name encoders' recipe, which needs FAISS (a GPU image may lack it)
        return cmd_train_collective(args)
    from bioel_core.models import resolve_device
    from bioel_core.training.loop import TrainConfig
    from bioel_core.training.recipe import DEFAULT_BATCH, DEFAULT_LR, DEV_EVERY_STEPS, FINETUNE_MIN_STEPS, run_training
    if len(args.names) != 1 or "=" in args.names[0]:
        raise ValueError(f"--encoder {args.encoder} takes one --names folder, got {args.names}")
    args.names, args.save_dtype = args.names[0], args.save_dtype or "float32"
    lr = args.lr or DEFAULT_LR[args.encoder]

    def config(epochs: int, max_steps: int | None, loss: str = "multi-similarity", dev: bool = False) -> TrainConfig:
        # with dev choosing the epoch and the default epochs, small data trains longer and scores dev less often
        by_size = dev and args.finetune_epochs_default
        return TrainConfig(epochs=epochs, batch_size=args.batch_size or DEFAULT_BATCH[args.encoder], learning_rate=lr,
                           margin=args.margin, max_steps=max_steps, seed=args.seed, loss=loss, temperature=args.temperature,
                           warmup=args.warmup, patience=args.patience, max_minutes=args.max_minutes,
                           min_steps=FINETUNE_MIN_STEPS if by_size else 0, dev_every_steps=DEV_EVERY_STEPS if by_size else 0)

    if args.retriever_weight is not None and (args.encoder not in ("cross-encoder", "generative") or not args.retriever_weight >= 0):
        raise ValueError(f"--retriever-weight {args.retriever_weight:g}: a weight of zero or more, for --encoder cross-encoder "
                         f"or generative (got --encoder {args.encoder})")
    with_dev = bool(args.train_dataset) and all((Path(d) / "processed_dev").is_dir() for d in args.train_dataset)
    if args.train_split is None:
        args.train_split = "train" if with_dev else "traindev"
    dev_chooses = with_dev and args.train_split == "train"
    args.finetune_epochs_default = args.finetune_epochs is None
    if args.finetune_epochs is None:
        args.finetune_epochs = 20 if dev_chooses else 3
    if args.encoder == "cross-encoder":
        return cmd_train_reranker(args, config(args.finetune_epochs, args.finetune_max_steps, "listwise", dev_chooses))
    if args.encoder == "generative":
        return cmd_train_generative(args, config(args.pretrain_epochs, None, "cross-entropy") if args.pretrain_epochs > 0 else None,
                                    config(args.finetune_epochs, args.finetune_max_steps, "cross-entropy", dev_chooses)
                                    if args.finetune_epochs > 0 else None)

    card = run_training(encoder_kind=args.encoder, names_dir=args.names, output=args.output, init=args.init,
                        pooling=args.pooling, train_datasets=args.train_dataset, train_split=args.train_split,
                        device=resolve_device(args.device),
                        align=config(args.align_epochs, args.align_max_steps) if args.align_epochs > 0 else None,
                        finetune=config(args.finetune_epochs, args.finetune_max_steps, args.finetune_loss, dev_chooses)
                        if args.finetune_epochs > 0 else None,
                        max_pairs_per_concept=args.max_pairs_per_concept, hard_negatives=args.hard_negatives,
                        save_dtype=args.save_dtype,
                        command=["bioel", *sys.argv[1:]], progress=not args.no_progress)
    progress.count(steps=sum(stage["steps"] for stage in card["stages"].values()))
    print(f"trained {args.encoder} -> {args.output} in {card['training_seconds'] / 60:.1f} min; card: {args.output}/MODEL_CARD.md")
    return 0


def cmd_train_reranker(args, config) -> int:
    from bioel_core.models import model_folder, resolve_device
    from bioel_core.training.rerank import run_reranker_training

    if not args.train_dataset:
        raise ValueError("--encoder cross-encoder learns from training mentions: give --train-dataset")
    card = run_reranker_training(names_dir=args.names, retriever_model=str(model_folder(args.retriever)), output=args.output,
                                 train_datasets=args.train_dataset, train_split=args.train_split, config=config,
                                 init=args.init, device=resolve_device(args.device), example_size=args.example_size,
                                 synonym_count=args.synonym_examples,
                                 depth=args.rerank_depth, retriever_weight=args.retriever_weight, save_dtype=args.save_dtype,
                                 command=["bioel", *sys.argv[1:]], progress=not args.no_progress)
    progress.count(steps=card["stages"]["rerank"]["steps"])
    print(f"trained cross-encoder -> {args.output} in {card['training_seconds'] / 60:.1f} min; card: {args.output}/MODEL_CARD.md")
    return 0


def cmd_train_generative(args, pretrain, finetune) -> int:
    from bioel_core.models import model_folder, resolve_device
    from bioel_core.training.generative import run_generative_training

    card = run_generative_training(names_dir=args.names, output=args.output, retriever_model=str(model_folder(args.retriever)),
                                   train_datasets=args.train_dataset, train_split=args.train_split, pretrain=pretrain,
                                   finetune=finetune, target=args.target_name, prompt=not args.no_prompt,
                                   decoder_layers=args.decoder_layers, init=args.init, device=resolve_device(args.device),
                                   depth=args.rerank_depth, retriever_weight=args.retriever_weight, save_dtype=args.save_dtype,
                                   command=["bioel", *sys.argv[1:]], progress=not args.no_progress)
    progress.count(steps=sum(stage["steps"] for stage in card["stages"].values()))
    print(f"trained generative -> {args.output} in {card['training_seconds'] / 60:.1f} min; card: {args.output}/MODEL_CARD.md")
    return 0


def cmd_train_collective(args) -> int:
    from bioel_core.models import resolve_device
    from bioel_core.training.collective import CollectiveTrainConfig, run_collective_training
    from pipelines.cli_link import typed

    names = dict(typed(args.names))
    if not args.train_corpus or not args.dev_corpus or "" in names:
        raise ValueError("--encoder collective needs --train-corpus, --dev-corpus and --names TYPE=KB_DIR per entity type")
    config = CollectiveTrainConfig(epochs=args.epochs, seed=args.seed, max_minutes=args.max_minutes,
                                   **({"learning_rate": args.lr} if args.lr else {}))
    args.save_dtype = args.save_dtype or "float16"
    card = run_collective_training(train_corpus=args.train_corpus, dev_corpus=args.dev_corpus,
                                   corpus_format=args.corpus_format, names=names,
                                   output=args.output, name_model=args.name_model, init=args.init, config=config,
                                   device=resolve_device(args.device), mention_pooling=args.mention_pooling,
                                   save_dtype=args.save_dtype, command=["bioel", *sys.argv[1:]],
                                   document_layers=args.document_layers)
    dev = card["collective"]["dev"]
    progress.count(epochs=len(card["collective"]["epochs"]))
    print(f"trained collective -> {args.output} in {card['training_seconds'] / 60:.1f} min; dev strict F1 "
          f"{100 * dev['f1']:.2f}; card: {args.output}/MODEL_CARD.md")
    return 0


def cmd_ensemble(args) -> int:
    from bioel_core.guards import check_model_output
    from bioel_core.linking.rerank import is_reranker_folder
    from bioel_core.models.ensemble import make_ensemble

    check_model_output(args.output, _model_inputs(args))
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
        raise ValueError(f"--member: {rerankers[0]} is a reranker and {others[0]} is not: an ensemble is of name "
                         f"encoders or of rerankers, not both")
    if any(pooling for _, _, pooling in specs):
        raise ValueError("--member: a reranker folder has no pooling to choose")
    if args.retriever_weight is None:
        raise ValueError("an ensemble of rerankers needs --retriever-weight (chosen on dev with the member weights: "
                         "python benchmarks/rerank_fusion.py)")
    make_reranker_ensemble([(path, weight) for path, weight, _ in specs], args.retriever_weight, args.output,
                           command=["bioel", *sys.argv[1:]])
    print(f"ensemble of {len(specs)} rerankers -> {args.output} (retriever weight {args.retriever_weight:g}); "
          f"card: {args.output}/MODEL_CARD.md")
    return 0
