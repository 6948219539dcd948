"""The `bioel` command: argument parsing only, then a call into a pipeline or bioel_core.

Flags a verb does not know are passed to Beam as pipeline options (--runner, --direct_num_workers, ...) when Beam
defines them; any other flag is an error (Beam would drop it with a warning and the job would run without it).
Parsing imports no heavy library (torch, Beam, pyarrow, ...): `--help` answers at once, and a verb imports what it
needs when it runs. The flag vocabulary shared by every verb is in README.md ("CLI vocabulary").
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys

import bioel_core
from bioel_core import progress
from bioel_core.guards import QualityGateError, UnpublishedError
from bioel_core.settings import SettingsError
from pipelines import cli_build, cli_embed, cli_evaluate, cli_index, cli_link, cli_refresh, cli_train, logs
from pipelines.cli_common import finish, quality
from pipelines.cli_flags import add_contracts, flag_name
from pipelines.cli_verbs import FLAGS, VERB_ORDER

# Never reach for a model hub or analytics endpoint from a scheduled job.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

BEAM_VERBS = {"ingest-kb", "embed", "build-index", "link", "build"}


def cmd_ingest_kb(args, beam_args: list[str]) -> int:
    from bioel_core.normalize import Normalizer
    from bioel_core.settings import IngestSettings, QualitySettings, StageRun
    from pipelines import ingest_kb
    from pipelines.options import pipeline_options

    ingest = args.contracts.settings(args, IngestSettings)
    output = args.contracts.settings(args, StageRun).output
    gate = args.contracts.settings(args, QualitySettings).gate()
    manifest = ingest_kb.run(
        ingest.format,
        ingest.dumps,
        output,
        pipeline_options(beam_args),
        reader_options=ingest.reader_kwargs(),
        normalizer=Normalizer(ingest.normalizer_config()),
        shared_names=ingest.shared_names,
        num_shards=ingest.num_shards,
        extra_names=ingest.extra_names,
        add_missing_concepts=ingest.add_missing_concepts,
        gate=gate,
    )
    counts, outputs = manifest["counts"], manifest["outputs"]
    progress.count(names=outputs["names"]["rows"], concepts=outputs["concepts"]["rows"], records=counts["records_read"])
    print(
        f"ingested {ingest.format}: {outputs['concepts']['rows']:,} concepts, "
        f"{outputs['names']['rows']:,} names, {outputs['dead_letter']['rows']:,} dead letters "
        f"from {counts['records_read']:,} input records -> {output}"
    )
    return finish(gate)


def cmd_report(args) -> int:
    from bioel_core.settings import QualitySettings, ReportSettings

    report = args.contracts.settings(args, ReportSettings)
    return quality(report.input, report.output, args.contracts.settings(args, QualitySettings).fail_on)


class _ParseError(Exception):
    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog, self.message = prog, message


class _OneLineErrors(argparse.ArgumentParser):
    """Argument errors as one line (`bioel VERB: error: ...`), exit 2, like every other bioel refusal; the usage
    is one `--help` away. Subparsers inherit the class; `main` words the error (a misspelt flag is named as such)."""

    def error(self, message: str):
        raise _ParseError(self.prog, message)


class _OneLineHelp(argparse.HelpFormatter):
    """`bioel --help`: one line per verb, however long, its help after the longest verb's name."""

    def __init__(self, prog: str):
        super().__init__(prog, max_help_position=20)
        self._action_max_length = 18  # argparse counts a verb's name without its indent

    def _split_lines(self, text, width):
        return [text]


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrors(prog="bioel", description=__doc__.splitlines()[0], formatter_class=_OneLineHelp)
    parser.add_argument("-v", "--verbose", action="store_true", help="log bioel's progress messages (INFO); anywhere on the line")
    parser.add_argument("--version", action="version", version=f"%(prog)s {bioel_core.__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    ingest = sub.add_parser(
        "ingest-kb",
        help="KB dump -> Parquet concepts/names tables + manifest + quality report",
        description="Unknown flags go to Beam (e.g. --runner, --direct_num_workers=2 --direct_running_mode=multi_processing).",
    )
    add_contracts(ingest, FLAGS["ingest-kb"])
    ingest.set_defaults(func=cmd_ingest_kb)

    rep = sub.add_parser("report", help="data-quality report (offline report.html + summary.json) for an output folder")
    add_contracts(rep, FLAGS["report"])
    rep.set_defaults(func=cmd_report)

    for module in (cli_evaluate, cli_train, cli_embed, cli_index, cli_link, cli_build, cli_refresh):
        module.add_subcommands(sub)
    _in_order(sub)
    for verb_parser in sub.choices.values():  # -v after the verb too; SUPPRESS keeps a -v given before it
        verb_parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def _in_order(sub) -> None:
    """The verbs listed (help, usage) in VERB_ORDER."""
    parsers = dict(sub.choices)
    sub.choices.clear()
    sub.choices.update((verb, parsers[verb]) for verb in VERB_ORDER)
    sub._choices_actions.sort(key=lambda action: VERB_ORDER.index(action.dest))  # noqa: SLF001 - argparse's help list


def verb_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name (the verbs of `bioel`, the kinds of `bioel train`); none: {}."""
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})  # noqa: SLF001


def _flags_of(parser: argparse.ArgumentParser, rest: list[str]) -> list[str]:
    """The option strings `parser` takes, and those of the subcommand `rest` names (`train KIND`), or of all its
    subcommands when it names none."""
    known = [s for a in parser._actions for s in a.option_strings]  # noqa: SLF001
    nested = verb_parsers(parser)
    named = [nested[a] for a in rest if a in nested][:1] or list(nested.values())
    return known + [flag for sub in named for flag in _flags_of(sub, [])]


def misspelt_flag(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """`unknown flag --inptu; did you mean --input?` for the first `--flag` on the line that is neither the verb's
    (nor a prefix of one, as argparse takes) nor, for a Beam verb, one of Beam's options; None when there is none."""
    verbs = verb_parsers(parser)
    verb = next((a for a in argv if a in verbs), None)
    if verb is None:
        return None
    rest = argv[argv.index(verb) + 1 :]
    known = _flags_of(verbs[verb], rest)
    unknown = [
        name for name in (a.split("=", 1)[0] for a in rest if a.startswith("--")) if not any(k.startswith(name) for k in known)
    ]
    if unknown and verb in BEAM_VERBS:
        from pipelines.options import beam_parser

        beam = {s for a in beam_parser()._actions for s in a.option_strings}  # noqa: SLF001
        unknown = [name for name in unknown if name not in beam]
    if not unknown:
        return None
    near = difflib.get_close_matches(unknown[0], known, n=1, cutoff=0.6)
    kinds = verb_parsers(verbs[verb])
    command = " ".join([verb, *[a for a in rest if a in kinds][:1]])  # `train rescnn`
    elsewhere = (
        "neither a flag of this verb nor a Beam pipeline option"
        if verb in BEAM_VERBS
        else f"not a flag of bioel {command}; see bioel {command} --help"
    )
    return f"unknown flag {unknown[0]}" + (f"; did you mean {near[0]}?" if near else f" ({elsewhere})")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # argparse exits on --help and --version: return its code, as every other refusal does
        args, extra = parser.parse_known_args(argv)
        if extra and args.verb not in BEAM_VERBS:
            raise _ParseError(f"bioel {args.verb}", f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    except _ParseError as err:  # a misspelt flag is what to say, rather than what it left missing or unread
        print(f"{err.prog}: error: {misspelt_flag(parser, argv) or err.message}", file=sys.stderr)
        return 2
    logs.configure(logging.INFO if args.verbose else logging.WARNING)
    if extra:
        from pipelines.options import unknown_flag_error

        verb_parser = verb_parsers(parser)[args.verb]
        error = unknown_flag_error(extra, [s for a in verb_parser._actions for s in a.option_strings])  # noqa: SLF001
        if error:
            print(f"bioel {args.verb}: error: {error}", file=sys.stderr)
            return 2
    if not progress.terminal():
        progress.silence_library_bars()
    summary = progress.start(args.verb)
    try:
        # Beam verbs also take the flags meant for Beam; every other verb takes its parsed arguments only
        code = args.func(args, extra) if args.verb in BEAM_VERBS else int(args.func(args) or 0)
    except UnpublishedError as err:  # the job ran but nothing came out, or its counts do not add up: nothing published
        print(f"bioel {args.verb}: error: {err}", file=sys.stderr)
        return 3
    except QualityGateError as err:  # the job's tables failed their quality checks: nothing published
        from bioel_core.quality import format_summary

        print(format_summary(err.summary))
        print(f"bioel {args.verb}: error: {err}", file=sys.stderr)
        return 4
    except (OSError, ValueError, RuntimeError) as err:  # OSError: a missing, unreadable or unwritable path, a full disk
        print(f"bioel {args.verb}: error: {_worded(args, err)}", file=sys.stderr)
        return 2
    print(summary.line(), file=sys.stderr)
    return code


def _worded(args, err: Exception) -> str:
    """An error as the command line says it: a setting at fault named by the verb's flag that sets it (a verb
    without contracts, `train`: the flag of the field's name)."""
    if not isinstance(err, SettingsError) or not err.field:
        return str(err)
    if getattr(args, "contracts", None) is not None:
        return args.contracts.describe(err)
    return f"{flag_name(err.field)}: {err.reason}" if "." not in err.field else str(err)


if __name__ == "__main__":
    sys.exit(main())
