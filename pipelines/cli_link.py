"""`bioel link` (the bulk-linking Beam pipeline) and `bioel calibrate-nil`: argument parsing only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bioel_core import progress
from bioel_core.corpora import FORMATS
from bioel_core.linking import DEFAULT_RERANK_DEPTH, DETECTORS
from pipelines.cli_common import add_corpus_format, check_json, positive_int


def typed(values: list[str] | None, convert=str) -> tuple[tuple[str, object], ...]:
    """`[TYPE=]VALUE` flags -> ((type, value), ...); no type = '' (mentions of any type)."""
    out = []
    for v in values or ():
        entity_type, sep, value = v.rpartition("=") if "=" in v else ("", "", v)
        if not value.strip():  # "Disease=" would be read as the current folder
            raise ValueError(f"cannot read {v!r}: expected [TYPE=]VALUE, VALUE not empty")
        try:
            out.append((entity_type, convert(value)))
        except ValueError:
            raise ValueError(f"cannot read {v!r}: expected [TYPE=]VALUE") from None
    types = [t for t, _ in out]
    if len(set(types)) != len(types):
        raise ValueError(f"an entity type is given twice in {values}")
    return tuple(out)


def _annotator_spec(args, detect: bool, thresholds: tuple = (), calibrating: bool = False):
    from bioel_core.linking.annotate import AnnotatorSpec

    models = dict(typed(args.model))
    if args.bundle:
        return _bundle_spec(args, models, thresholds, calibrating, detect=detect, device=args.device,
                            reranker=args.reranker, rerank_depth=args.rerank_depth, generative=args.generative)
    return AnnotatorSpec(model=models.pop("", None), type_models=tuple(models.items()), indexes=typed(args.index), detect=detect, stop_lists=typed(args.stop_list),
                         nil_thresholds=thresholds, device=args.device, detector=args.detector, reranker=args.reranker,
                         rerank_depth=args.rerank_depth, generative=args.generative)


def _bundle_spec(args, models: dict, thresholds: tuple, calibrating: bool, **spec_args):
    """The --bundle's linker, each single setting given by a flag replacing the bundle's (`TYPE=` flags name a type;
    calibrating: none of the bundle's NIL thresholds, which would cut the predictions being calibrated)."""
    from bioel_core.bundle import BuiltBundle
    from bioel_core.settings import LinkSettings, LinkTarget

    bundle = BuiltBundle.read(args.bundle)
    given = {"index": typed(args.index), "stop_list": typed(args.stop_list), "nil_threshold": thresholds,
             "model": tuple((t, m) for t, m in models.items() if t)}
    types: dict[str, dict] = {}
    for setting, pairs in given.items():
        for entity_type, value in pairs:
            if not entity_type:
                flag = "--" + setting.replace("_", "-")
                raise ValueError(f"{flag} {value}: with --bundle, name the entity type ({flag} TYPE=VALUE); the bundle's "
                                 f"types: {', '.join(bundle.entity_types)}")
            types.setdefault(entity_type, {})[setting] = value
    for entity_type, given_here in types.items():
        if entity_type not in bundle.entity_types and "index" not in given_here:
            flag = "--" + next(iter(given_here)).replace("_", "-")
            raise ValueError(f"{flag} {entity_type}=...: the bundle has no entity type {entity_type} (its types: "
                             f"{', '.join(bundle.entity_types)}); a type of your own needs its --index too")
    flags = LinkSettings(model=models.get(""), detector=args.detector, types={t: LinkTarget(**v) for t, v in types.items()})
    return bundle.annotator_spec(flags, thresholds=not calibrating, **spec_args)


def _add_annotator_flags(parser) -> None:
    parser.add_argument("--bundle", metavar="BUNDLE_DIR",
                        help="a `bioel build` bundle folder: its indexes, models, stop lists, NIL thresholds, detector "
                             "and copy format; the flags below replace single settings of it")
    parser.add_argument("--model", nargs="+", metavar="[TYPE=]MODEL_DIR",
                        help="the model folder the indexes were built with (default: the shipped disease model); "
                             "TYPE=DIR for an entity type whose index another model built, e.g. "
                             "Chemical=models/chemical-default")
    parser.add_argument("--index", nargs="+", metavar="[TYPE=]INDEX_DIR",
                        help="a `bioel build-index` folder per entity type, e.g. Disease=idx/medic Chemical=idx/mesh "
                             "(needed unless --bundle)")
    parser.add_argument("--stop-list", nargs="+", metavar="[TYPE=]JSON",
                        help="detector stop-lists (models/stoplists/*.json), per entity type")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--detector", choices=DETECTORS,
                        help="how mentions are detected: the KB dictionaries; the span detector of a collective "
                             "--model (`bioel train --encoder collective`), which finds and links every mention of a "
                             "document in one pass; or both (longest span first: the dictionaries' spans linked by their "
                             "text, the model's by their vectors). Default: both with a collective --model (the better "
                             "on dev), else dictionary")
    parser.add_argument("--generative", help="a generative model (`bioel train --encoder generative`) that links each "
                                             "mention by writing one of its type's names (constrained to a prefix tree "
                                             "of the index's names) instead of the index's nearest names; slow on CPU")
    parser.add_argument("--reranker", help="a cross-encoder or a generative model (`bioel train --encoder cross-encoder|"
                                           "generative`), or an ensemble of them (`bioel ensemble`), that reorders each "
                                           "mention's best concepts: slower, more accurate (benchmarks/RESULTS.md)")
    parser.add_argument("--rerank-depth", type=positive_int, default=DEFAULT_RERANK_DEPTH,
                        help="with --reranker: how many of the index's best concepts it reorders (default 16)")


def add_subcommands(subparsers) -> None:
    ln = subparsers.add_parser("link", help="link a corpus: documents in, annotations (Parquet + PubTator/BioC) out",
                               description="Beam pipeline; unknown flags go to Beam (--runner, --direct_num_workers, ...). "
                                           "With --incremental, documents already annotated with the same content, model "
                                           "and KB versions are kept, not linked again.")
    ln.add_argument("--input", required=True, nargs="+",
                    help="corpus files, folders or globs ('DIR/*.xml.gz'; local, gs://, s3://, ...; gzip is detected)")
    ln.add_argument("--input-format", required=True, choices=FORMATS)
    ln.add_argument("--text-per-line", action="store_true", help="text format: one document per line (ID<TAB>TEXT)")
    ln.add_argument("--output", required=True, help="output folder (the annotated state)")
    ln.add_argument("--output-format", nargs="+", choices=["parquet", "pubtator", "bioc-json", "bioc-xml"],
                    help="besides the Parquet tables (always written), copies of the linked documents in these formats "
                         "(default: the --bundle's copy formats, else none); --incremental keeps every copy the state has")
    ln.add_argument("--single-file", action="store_true",
                    help="write the PubTator/BioC copy as one file in doc-id order (OUTPUT/gen-*/FORMAT/linked.*), not parts")
    ln.add_argument("--id-prefix", choices=["none", "vocabulary"], default="none",
                    help="ids in the PubTator/BioC copies: bare (D003920, default) or with their vocabulary as PubTator3 "
                         "writes them (MESH:D003920); the Parquet tables always have both columns")
    ln.add_argument("--mentions", choices=["detect", "given"], default="detect",
                    help="detect mentions with the KB dictionaries (default), or link the corpus's own")
    _add_annotator_flags(ln)
    ln.add_argument("--nil-threshold", nargs="+", metavar="[TYPE=]SCORE",
                    help="mentions scored below are NIL (see `bioel calibrate-nil`); default: none are NIL")
    ln.add_argument("--incremental", action="store_true", help="keep the previous output's documents; link only new or changed ones")
    ln.add_argument("--num-shards", type=positive_int, default=4)
    ln.add_argument("--batch-size", type=positive_int, default=64, help="documents per linking batch")
    ln.add_argument("--no-quality", action="store_true", help="skip the quality report")
    ln.add_argument("--fail-on", choices=["critical", "warning", "none"], default="critical")
    ln.set_defaults(func=cmd_link)

    cal = subparsers.add_parser("calibrate-nil", help="NIL thresholds that maximize span+concept F1 on a gold corpus",
                                description="Detects and links the gold corpus's documents, then picks per entity type the "
                                            "score below which mentions are better left NIL. Use a dev corpus, not test.")
    cal.add_argument("--gold", required=True, help="gold annotations (e.g. the BC5CDR development set): a file, a folder "
                                                 "of files or a `bioel link` output (its --gold-format copy)")
    add_corpus_format(cal, "--gold-format", "--gold")
    _add_annotator_flags(cal)
    cal.add_argument("--json", help="write the thresholds and their P/R/F1 here")
    cal.set_defaults(func=cmd_calibrate_nil)


def cmd_link(args, beam_args: list[str]) -> int:
    from pipelines import link_corpus
    from pipelines.cli_common import finish, quality_gate
    from pipelines.options import pipeline_options

    spec = _annotator_spec(args, args.mentions == "detect", typed(args.nil_threshold, float))
    output_formats = args.output_format or _bundle_copy_formats(args)
    gate = quality_gate(args)
    manifest = link_corpus.run(args.input, args.input_format, args.output, spec, pipeline_options(beam_args),
                               output_formats=output_formats, per_line=args.text_per_line, incremental=args.incremental,
                               num_shards=args.num_shards, batch_size=args.batch_size, id_prefix=args.id_prefix,
                               single_file=args.single_file, gate=gate)
    docs, mentions = manifest["counts"]["documents"], manifest["counts"]["mentions"]
    progress.count(documents=docs["linked"], mentions=mentions["linked"])  # NIL mentions are among the linked ones
    if manifest.get(link_corpus.NOTHING_CHANGED):
        print(f"nothing changed: the inputs, linker and settings are those of the state published {manifest['created_utc']}; "
              f"it stands, nothing published -> {args.output}")
        return 0
    print(f"linked {docs['linked']:,} documents ({mentions['linked']:,} mentions, {mentions['nil']:,} NIL); "
          f"unchanged {docs['unchanged']:,}, deleted {docs['deleted']:,}, carried {docs['carried']:,}, "
          f"kept (bad re-delivery) {docs['kept_previous']:,}, "
          f"dead-lettered {docs['dead_lettered'] + manifest['counts']['records']['dead_lettered']:,} -> {args.output}")
    for warning in link_warnings(manifest):
        print(f"bioel link: warning: {warning}", file=sys.stderr)
    return finish(gate)


def link_warnings(manifest: dict) -> list[str]:
    """What a published link run says besides its counts: linked documents without one mention (a valid corpus may
    mention nothing of the indexed types, or the detector is broken), given mentions left NIL for want of an --index."""
    from bioel_core.linking.annotate import no_index_reason

    docs, mentions = manifest["counts"]["documents"], manifest["counts"]["mentions"]
    warnings = []
    if docs["linked"] and not mentions["linked"]:
        warnings.append(f"not one mention in the {docs['linked']:,} documents linked; they are published without "
                        "annotations")
    no_index = mentions.get("no_index") or {}
    if no_index:
        reasons = "; ".join(f"{no_index_reason(t)}: {n:,}" for t, n in sorted(no_index.items()))
        warnings.append(f"{sum(no_index.values()):,} given mentions kept NIL, unlinked ({reasons}); give an --index "
                        "TYPE=DIR for a type to link its mentions")
    return warnings


def _bundle_copy_formats(args) -> list[str]:
    """The --bundle's copy formats (its output folder refused inside the bundle, which links would be copied with)."""
    if not args.bundle:
        return []
    from bioel_core.bundle import BuiltBundle
    from bioel_core.guards import check_not_an_input

    check_not_an_input(args.output, [("--bundle", args.bundle)])
    return BuiltBundle.read(args.bundle).link_settings().copy_formats


def nil_threshold_flags(thresholds: dict) -> str:
    """`--nil-threshold`'s value for calibrated thresholds ({entity type: NilThreshold}), each written whole: a
    threshold is a prediction's own score, kept at >=, which a rounded one would cut."""
    return " ".join(f"{k + '=' if k else ''}{v.threshold!r}" for k, v in sorted(thresholds.items()))


def cmd_calibrate_nil(args) -> int:
    from bioel_core.evaluation.nil_calibration import calibrate_on_gold

    gold, spec = args.gold, _annotator_spec(args, detect=True, calibrating=True)
    check_json(args.json, [("--gold", gold)] + spec.inputs())
    result = calibrate_on_gold(spec, gold, args.gold_format)
    progress.count(mentions=sum(t.predictions for t in result.values()))
    print(f"{'type':<12}{'threshold':>10}{'P':>8}{'R':>8}{'F1':>8}{'F1 no cut':>11}{'kept':>8}{'pred':>8}{'gold':>8}")
    for entity_type, t in sorted(result.items()):
        print(f"{entity_type or '(any)':<12}{t.threshold:>10.4f}{100 * t.precision:>8.2f}{100 * t.recall:>8.2f}{100 * t.f1:>8.2f}"
              f"{100 * t.f1_without_threshold:>11.2f}{t.kept:>8}{t.predictions:>8}{t.gold:>8}")
    print(f"use: bioel link ... --nil-threshold {nil_threshold_flags(result)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"gold": gold, "thresholds": {k: v.to_dict() for k, v in result.items()}}, indent=2))
    return 0
