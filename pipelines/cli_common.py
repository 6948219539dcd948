"""What the verbs share besides their contracts' flags: argparse types (of `train`'s own flags), the --json refusal, and
the quality report of a published output."""

from __future__ import annotations

import argparse

from bioel_core.corpora import FORMATS, FORMATS_WITH_MENTIONS
from bioel_core.guards import check_not_an_input


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type for counts (shards, batch sizes): a 0 would divide by zero deep inside a worker."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type for counts where 0 means none (training epochs: 0 skips the stage)."""
    return _int_at_least(text, 0)


def positive_float(text: str) -> float:
    """argparse type for amounts above zero (a time budget in minutes)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def add_corpus_format(parser, flag: str, of: str) -> None:
    """`flag`: the corpus format of the annotated corpora `of` names, spelled as link's --input-format (README, "CLI
    vocabulary"); every format is a choice, so that one without annotations is refused naming its file
    (bioel_core.corpora.read_annotated) rather than as an invalid choice."""
    parser.add_argument(
        flag,
        choices=FORMATS,
        default="pubtator",
        help=f"the corpus format of {of}, named as link's --input-format (default pubtator); one that "
        f"carries annotations: {', '.join(FORMATS_WITH_MENTIONS)}",
    )


def check_json(path: str | None, inputs: list[tuple[str, str | None]]) -> None:
    """Refuse, before any work, a --json that is one of the run's inputs (it would be overwritten: `--json` typed for
    `--pred`) or lies inside an input folder; `inputs`: (flag, path) pairs, unset ones None."""
    if path:
        check_not_an_input(path, [(flag, p) for flag, p in inputs if p], "--json")


def quality(table_dir: str, output: str | None, fail_on: str) -> int:
    from bioel_core.outputs import LocalFileSystem, is_local
    from bioel_core.quality import format_summary, report

    if all(is_local(p) for p in (table_dir, output) if p):
        fs = LocalFileSystem()
    else:  # Beam's FileSystems read and write local paths too, should one of the two be local
        from pipelines.outputs import BeamFileSystem

        fs = BeamFileSystem()
    summary = report(table_dir, output_dir=output, fail_on=fail_on, fs=fs)
    print(format_summary(summary))
    return 0 if summary["passed"] else 4


def finish(gate) -> int:
    """The report of the checks a published output passed (one that failed was refused, nothing published: the
    CLI's QualityGateError, exit 4)."""
    if gate is not None:
        from bioel_core.quality import format_summary

        print(format_summary(gate.summary))
    return 0
