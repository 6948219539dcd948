"""The entry point of the worker processes bioel's local runner starts (--direct_running_mode=multi_processing):
Beam's SDK harness, logging as the `bioel` command does instead of every INFO line of its start-up.

Run by the runner as `python -m pipelines.beam_worker LEVEL`, LEVEL the level of bioel's own loggers (INFO, WARNING).
"""

from __future__ import annotations

import logging
import sys

from pipelines import logs


def main(argv: list[str]) -> None:
    logs.configure(logging.getLevelNamesMapping()[argv[1]] if len(argv) > 1 else logging.WARNING)
    from apache_beam.runners.worker import sdk_worker_main  # after logging is set: its import logs a warning

    sdk_worker_main.main(argv)


if __name__ == "__main__":
    main(sys.argv)
