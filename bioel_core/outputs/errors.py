"""Why an output folder was not published, or cannot be read: the errors the output layer raises (beside
lock.OutputError and lock.ConcurrentRunError). The CLI maps them to exit codes."""

from __future__ import annotations


class UnpublishedError(RuntimeError):
    """A job that ran but whose output is not published, so the previous output stands (the CLI exits 3)."""


class QualityGateError(RuntimeError):
    """A job whose tables failed their quality checks (bioel_core.quality.QualityGate): nothing published, the
    previous output stands (the CLI exits 4). `summary`: the quality report's."""

    def __init__(self, message: str, summary: dict):
        super().__init__(message)
        self.summary = summary


class EmptyOutputError(UnpublishedError):
    """A job that read its inputs but has no row to publish."""


class UnreconciledError(UnpublishedError):
    """A job whose counts do not add up (rows in != rows out + dead letters): its tables are not what it read."""


class IncompleteOutputError(RuntimeError):
    """A folder that is not a finished bioel output: no manifest (interrupted, still running, not bioel's), or one
    marked incomplete."""
