"""`bioel link` (the bulk-linking Beam pipeline) and `bioel calibrate-nil`: their contracts made from the flags, then the
pipeline or bioel_core."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bioel_core import progress
from bioel_core.settings import to_mapping
from pipelines.cli_common import check_json
from pipelines.cli_flags import FlagError, add_contracts
from pipelines.cli_verbs import FLAGS


def linker_spec(args, detect: bool, calibrating: bool = False):
    """The AnnotatorSpec of the linker the flags name: their LinkSettings (an item without TYPE= is for mentions of
    any type), or the --bundle's linker with each single setting a flag gives replacing the bundle's (`TYPE=` flags
    name a type; calibrating: none of the bundle's NIL thresholds, which would cut the predictions being calibrated)."""
    from bioel_core.settings import LinkSettings, RerankSettings

    flags = args.contracts
    rerank = flags.settings(args, RerankSettings)
    device = _run_device(args)
    spec_args = {
        "detect": detect,
        "device": device,
        "reranker": rerank.reranker,
        "rerank_depth": rerank.rerank_depth,
        "generative": rerank.generative,
    }
    if not args.bundle:
        return flags.settings(args, LinkSettings, untyped="").annotator_spec(**spec_args)
    from bioel_core.bundle import BuiltBundle

    bundle = BuiltBundle.read(args.bundle, "--bundle")
    try:
        overrides = flags.settings(args, LinkSettings)
    except FlagError as err:
        raise FlagError(f"{err}; with --bundle, the bundle's types: {', '.join(bundle.entity_types)}") from None
    for entity_type, target in overrides.types.items():
        if entity_type not in bundle.entity_types and target.index is None:
            given = next(k for k, v in to_mapping(target).items() if v is not None)
            flag = flags.of(LinkSettings).flag_for(f"types.{entity_type}.{given}")[0].option
            raise FlagError(
                f"{flag} {entity_type}=...: the bundle has no entity type {entity_type} (its types: "
                f"{', '.join(bundle.entity_types)}); a type of your own needs its --index too"
            )
    return bundle.annotator_spec(overrides, thresholds=not calibrating, **spec_args)


def _run_device(args) -> str:
    from bioel_core.settings import CalibrateSettings, LinkRunSettings

    cls = LinkRunSettings if args.verb == "link" else CalibrateSettings
    return args.contracts.settings(args, cls).device


def add_subcommands(subparsers) -> None:
    ln = subparsers.add_parser(
        "link",
        help="link a corpus: documents in, annotations (Parquet + PubTator/BioC) out",
        description="Beam pipeline; unknown flags go to Beam (--runner, --direct_num_workers, ...). "
        "With --incremental, documents already annotated with the same content, model "
        "and KB versions are kept, not linked again. A type's setting is TYPE=VALUE "
        "(--index Disease=idx/medic Chemical=idx/mesh); without --bundle, a value "
        "without TYPE= is for mentions of any type.",
    )
    _add_bundle_flag(ln)
    add_contracts(ln, FLAGS["link"])
    ln.set_defaults(func=cmd_link)

    cal = subparsers.add_parser(
        "calibrate-nil",
        help="NIL thresholds that maximize span+concept F1 on a gold corpus",
        description="Detects and links the gold corpus's documents, then picks per entity type the "
        "score below which mentions are better left NIL. Use a dev corpus, not test.",
    )
    _add_bundle_flag(cal)
    add_contracts(cal, FLAGS["calibrate-nil"])
    cal.add_argument("--json", help="write the thresholds and their P/R/F1 here")
    cal.set_defaults(func=cmd_calibrate_nil)


def _add_bundle_flag(parser) -> None:
    parser.add_argument(
        "--bundle",
        metavar="BUNDLE_DIR",
        help="a `bioel build` bundle folder: its indexes, models, stop lists, NIL thresholds, detector "
        "and copy format; the linker's flags replace single settings of it",
    )


def cmd_link(args, beam_args: list[str]) -> int:
    from bioel_core.settings import LinkRunSettings, LinkSettings, QualitySettings
    from pipelines import link_corpus
    from pipelines.cli_common import finish
    from pipelines.options import pipeline_options

    run = args.contracts.settings(args, LinkRunSettings)
    spec = linker_spec(args, run.mentions == "detect")
    copies = args.contracts.settings(args, LinkSettings, untyped="").copy_formats or _bundle_copy_formats(args, run.output)
    gate = args.contracts.settings(args, QualitySettings).gate()
    manifest = link_corpus.run(
        run.input,
        run.input_format,
        run.output,
        spec,
        pipeline_options(beam_args),
        output_formats=copies,
        per_line=run.text_per_line,
        incremental=run.incremental,
        num_shards=run.num_shards,
        batch_size=run.batch_size,
        id_prefix=run.id_prefix,
        single_file=run.single_file,
        gate=gate,
        labels=args.contracts.options(),
    )
    docs, mentions = manifest["counts"]["documents"], manifest["counts"]["mentions"]
    progress.count(documents=docs["linked"], mentions=mentions["linked"])  # NIL mentions are among the linked ones
    if manifest.get(link_corpus.NOTHING_CHANGED):
        print(
            f"nothing changed: the inputs, linker and settings are those of the state published {manifest['created_utc']}; "
            f"it stands, nothing published -> {run.output}"
        )
        return 0
    print(
        f"linked {docs['linked']:,} documents ({mentions['linked']:,} mentions, {mentions['nil']:,} NIL); "
        f"unchanged {docs['unchanged']:,}, deleted {docs['deleted']:,}, carried {docs['carried']:,}, "
        f"kept (bad re-delivery) {docs['kept_previous']:,}, "
        f"dead-lettered {docs['dead_lettered'] + manifest['counts']['records']['dead_lettered']:,} -> {run.output}"
    )
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
        warnings.append(f"not one mention in the {docs['linked']:,} documents linked; they are published without annotations")
    no_index = mentions.get("no_index") or {}
    if no_index:
        reasons = "; ".join(f"{no_index_reason(t)}: {n:,}" for t, n in sorted(no_index.items()))
        warnings.append(
            f"{sum(no_index.values()):,} given mentions kept NIL, unlinked ({reasons}); give an --index "
            "TYPE=DIR for a type to link its mentions"
        )
    return warnings


def _bundle_copy_formats(args, output: str) -> list[str]:
    """The --bundle's copy formats (its output folder refused inside the bundle, which links would be copied with)."""
    if not args.bundle:
        return []
    from bioel_core.bundle import BuiltBundle
    from bioel_core.guards import check_not_an_input

    check_not_an_input(output, [("--bundle", args.bundle)])
    return BuiltBundle.read(args.bundle, "--bundle").link_settings().copy_formats


def nil_threshold_flags(thresholds: dict) -> str:
    """`--nil-threshold`'s value for calibrated thresholds ({entity type: NilThreshold}), each written whole: a
    threshold is a prediction's own score, kept at >=, which a rounded one would cut."""
    return " ".join(f"{k + '=' if k else ''}{v.threshold!r}" for k, v in sorted(thresholds.items()))


def cmd_calibrate_nil(args) -> int:
    from bioel_core.evaluation.nil_calibration import calibrate_on_gold
    from bioel_core.settings import CalibrateSettings

    calibrate = args.contracts.settings(args, CalibrateSettings)
    gold, spec = calibrate.gold, linker_spec(args, detect=True, calibrating=True)
    check_json(args.json, [("--gold", gold)] + spec.inputs(args.contracts.options()))
    result = calibrate_on_gold(spec, gold, calibrate.gold_format, labels=args.contracts.options())
    progress.count(mentions=sum(t.predictions for t in result.values()))
    print(f"{'type':<12}{'threshold':>10}{'P':>8}{'R':>8}{'F1':>8}{'F1 no cut':>11}{'kept':>8}{'pred':>8}{'gold':>8}")
    for entity_type, t in sorted(result.items()):
        print(
            f"{entity_type or '(any)':<12}{t.threshold:>10.4f}{100 * t.precision:>8.2f}{100 * t.recall:>8.2f}{100 * t.f1:>8.2f}"
            f"{100 * t.f1_without_threshold:>11.2f}{t.kept:>8}{t.predictions:>8}{t.gold:>8}"
        )
    print(f"use: bioel link ... --nil-threshold {nil_threshold_flags(result)}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"gold": gold, "thresholds": {k: v.to_dict() for k, v in result.items()}}, indent=2)
        )
    return 0
