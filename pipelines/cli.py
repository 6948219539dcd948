"""The `bioel` command: argument parsing only, then a call into a pipeline or bioel_core.

Flags a verb does not know are passed to Beam as pipeline options (--runner, --direct_num_workers, ...) when Beam
defines them; any other flag is an error (Beam would drop it with a warning and the job would run without it).
Parsing imports no heavy library (torch, Beam, pyarrow, ...): `--help` answers at once, and a verb imports what it
needs when it runs. The flag vocabulary shared by every verb is in README.md ("CLI vocabulary").
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import bioel_core
from bioel_core import progress
from bioel_core.guards import QualityGateError, UnpublishedError
from bioel_core.kb import READERS
from bioel_core.normalize import PUNCTUATION_POLICIES
from bioel_core.settings import SHARED_NAME_POLICIES
from pipelines import cli_build, cli_embed, cli_evaluate, cli_index, cli_link, cli_refresh, cli_train, logs
from pipelines.cli_common import add_renamed, finish, positive_int, quality, quality_gate

# Never reach for a model hub or analytics endpoint from a scheduled job.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

BEAM_VERBS = {"ingest-kb", "embed", "build-index", "link", "build"}


def _reader_options(args) -> dict:
    """Only the options the chosen format understands (the ingest contract's ReaderOptions: its fields are these
    flags' names)."""
    from dataclasses import fields

    from bioel_core.settings import ReaderOptions

    given = {f.name: getattr(args, f.name) for f in fields(ReaderOptions)}
    given["mesh_tree_prefix"] = given["mesh_tree_prefix"] or []
    return ReaderOptions(**given).reader_kwargs(args.input_format)


def cmd_ingest_kb(args, beam_args: list[str]) -> int:
    from bioel_core.normalize import Normalizer, NormalizerConfig
    from pipelines import ingest_kb
    from pipelines.options import pipeline_options

    normalizer = Normalizer(NormalizerConfig(unicode_form=None if args.unicode_form == "none" else args.unicode_form,
                                             lowercase=not args.keep_case, punctuation=args.punctuation))
    gate = quality_gate(args)
    manifest = ingest_kb.run(args.input_format, args.input, args.output, pipeline_options(beam_args),
                             reader_options=_reader_options(args), normalizer=normalizer,
                             shared_names=args.shared_names, num_shards=args.num_shards, gate=gate)
    counts, outputs = manifest["counts"], manifest["outputs"]
    progress.count(names=outputs["names"]["rows"], concepts=outputs["concepts"]["rows"], records=counts["records_read"])
    print(f"ingested {args.input_format}: {outputs['concepts']['rows']:,} concepts, "
          f"{outputs['names']['rows']:,} names, {outputs['dead_letter']['rows']:,} dead letters "
          f"from {counts['records_read']:,} input records -> {args.output}")
    return finish(gate)


def cmd_report(args) -> int:
    return quality(args.input, args.output, args.fail_on)


class _OneLineErrors(argparse.ArgumentParser):
    """Argument errors as one line (`bioel VERB: error: ...`), exit 2, like every other bioel refusal; the usage
    is one `--help` away. Subparsers inherit the class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrors(prog="bioel", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log bioel's progress messages (INFO); anywhere on the line")
    parser.add_argument("--version", action="version", version=f"%(prog)s {bioel_core.__version__}")
    sub = parser.add_subparsers(dest="verb", required=True)

    ingest = sub.add_parser("ingest-kb", help="KB dump -> Parquet concepts/names tables + manifest + quality report",
                            description="Unknown flags go to Beam (e.g. --runner, --direct_num_workers=2 "
                                        "--direct_running_mode=multi_processing).")
    add_renamed(ingest, "--input-format", "--kb", required=True, choices=sorted(READERS), help="the KB dump's format")
    ingest.add_argument("--input", required=True, nargs="+", help="input files (local, gs://, ...)")
    ingest.add_argument("--output", required=True, help="output folder")
    ingest.add_argument("--num-shards", type=positive_int, default=4, help="Parquet shards per table (default 4)")
    ingest.add_argument("--shared-names", choices=SHARED_NAME_POLICIES, default="keep-all",
                        help="a name shared by several concepts: keep it with all (default), or GenBioEL's rule "
                             "(keep it only in the concept with fewest names)")
    ingest.add_argument("--punctuation", choices=PUNCTUATION_POLICIES, default="split",
                        help="split (BioSyn: punctuation becomes a space, default), remove, keep")
    ingest.add_argument("--keep-case", action="store_true", help="do not lowercase")
    ingest.add_argument("--unicode-form", choices=["NFKC", "NFC", "none"], default="NFKC")
    ingest.add_argument("--kb-name", default="medic", help="biosyn-dict: the kb column value (default medic)")
    ingest.add_argument("--vocabulary", help="biosyn-dict: the vocabulary of every id in the dictionary (e.g. SNOMEDCT, UMLS); "
                                             "default: MeSH and OMIM ids by their shape, others by a VOCAB: prefix, else LOCAL")
    ingest.add_argument("--id-pattern", help="biosyn-dict: a regular expression every id must match (others are "
                                             "dead-lettered); default: any id")
    ingest.add_argument("--umls-languages", nargs="+", default=["ENG"], help="umls: LAT values kept")
    ingest.add_argument("--umls-sabs", nargs="+", help="umls: source vocabularies kept (default all)")
    ingest.add_argument("--umls-ttys", nargs="+", help="umls: term types kept (default all)")
    ingest.add_argument("--umls-keep-suppressed", action="store_true", help="umls: keep SUPPRESS=O/E/Y rows")
    ingest.add_argument("--umls-preferred-only", action="store_true", help="umls: TS=P, STT=PF, ISPREF=Y rows only")
    ingest.add_argument("--umls-semantic-types", nargs="+", help="umls: keep concepts of these semantic types (MRSTY "
                                                                 "TUIs, e.g. a semantic group's); give MRSTY as an input too")
    ingest.add_argument("--snomed-language-refset", nargs="+", help="snomed: language refset ids for acceptability")
    ingest.add_argument("--mesh-exclude-permuted", action="store_true", help="mesh-tsv: drop permuted entry terms")
    ingest.add_argument("--mesh-tree-prefix", nargs="+", help="mesh-tsv: keep descriptors under these tree numbers "
                                                              "(e.g. D: Chemicals and Drugs); give the trees TSV as an input too")
    ingest.add_argument("--fail-on", choices=["critical", "warning", "none"], default="critical",
                        help="quality failures that make the command exit non-zero")
    ingest.add_argument("--no-quality", action="store_true", help="skip the quality report")
    ingest.set_defaults(func=cmd_ingest_kb)

    rep = sub.add_parser("report", help="data-quality report (offline report.html + summary.json) for an output folder")
    add_renamed(rep, "--input", "--table", required=True, help="an output folder written by a bioel pipeline")
    rep.add_argument("--output", help="where to write the report (default INPUT/quality)")
    rep.add_argument("--fail-on", choices=["critical", "warning", "none"], default="critical")
    rep.set_defaults(func=cmd_report)

    cli_evaluate.add_subcommands(sub)
    cli_train.add_subcommands(sub)
    cli_embed.add_subcommands(sub)
    cli_index.add_subcommands(sub)
    cli_link.add_subcommands(sub)
    cli_build.add_subcommands(sub)
    cli_refresh.add_subcommands(sub)
    for verb_parser in sub.choices.values():  # -v after the verb too; SUPPRESS keeps a -v given before it
        verb_parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:  # argparse exits on a bad argument (and on --help): return its code, as every other refusal does
        args, extra = parser.parse_known_args(argv)
        if extra and args.verb not in BEAM_VERBS:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    logs.configure(logging.INFO if args.verbose else logging.WARNING)
    if extra:
        from pipelines.options import unknown_flag_error

        verb_parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[args.verb]  # noqa: SLF001
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
        print(f"bioel {args.verb}: error: {err}", file=sys.stderr)
        return 2
    print(summary.line(), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
