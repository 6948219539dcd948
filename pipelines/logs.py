"""How bioel's processes log, the CLI and the local Beam worker processes it starts alike: one line a record, led
by its UTC time (a scheduled job's log), WARNING and above from every library, bioel's own loggers at the level the
user chose (-v: INFO)."""

from __future__ import annotations

import logging
import time

OWN_LOGGERS = ("bioel_core", "pipelines")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# Beam warns at import that the GCP client libraries are absent (irrelevant unless gs:// paths are used, and then
# the GCS filesystem raises its own clear error); a local worker process warns that it has no persistent folder.
_NOISE = ("apitools not found", "No semi_persistent_directory found")


def configure(own_level: int) -> None:
    """Before Beam is imported: its import-time warning goes through these handlers."""
    logging.basicConfig(level=logging.WARNING, format=FORMAT, datefmt=DATE_FORMAT)
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(own_level)
    for handler in logging.getLogger().handlers:
        handler.addFilter(shown)
        if handler.formatter is not None:
            handler.formatter.converter = time.gmtime


def shown(record: logging.LogRecord) -> bool:
    """Whether a record reaches the terminal: WARNING and above but known noise, or one of bioel's own (whose
    loggers' levels already chose). A Beam worker process sets the root logger to INFO once it starts, so the
    handler, not the root level, holds the line there."""
    if record.name.split(".")[0] in OWN_LOGGERS:
        return True
    return record.levelno >= logging.WARNING and not record.getMessage().startswith(_NOISE)


class Stage:
    """A verb's stage messages, shown with -v: its start, its counts and its end with the seconds it took since the
    Stage was made, INFO lines of the logger `pipelines.VERB` in the launcher process (workers may run elsewhere):
    `2026-11-29T01:02:03Z INFO pipelines.link: linked 2,292 documents, ... in 41.0 s`."""

    def __init__(self, verb: str):
        self.log, self.began = logging.getLogger(f"pipelines.{verb}"), time.perf_counter()

    def info(self, message: str, *args) -> None:
        self.log.info(message, *args)

    def done(self, message: str, *args) -> None:
        self.log.info(message + " in %.1f s", *args, time.perf_counter() - self.began)
