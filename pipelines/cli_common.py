"""What the verbs share besides their contracts' flags: the --json refusal and the quality report of a published
output."""

from __future__ import annotations

from bioel_core.guards import check_not_an_input


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
