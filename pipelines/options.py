"""Beam pipeline options shared by every bioel pipeline.

The embedded default runner is Beam's FnApiRunner: it is what the Python DirectRunner runs locally, minus
the DirectRunner's first attempt to download and start the Prism binary (no network here, and none
wanted in scheduled jobs). It honours --direct_num_workers and --direct_running_mode.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import shlex
import sys
from contextlib import contextmanager

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.portability import python_urns
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from bioel_core import progress
from pipelines.guards import CheckWorkerLibraries

LOCAL_RUNNER = "FnApiRunner"
# Beam's DirectRunner and SwitchingDirectRunner try Prism first; DaskRunner silently drops data.
_REDIRECTED = {"DirectRunner", "SwitchingDirectRunner"}
_REFUSED = {"DaskRunner": "Beam's DaskRunner drops data silently; use FnApiRunner locally or a cluster runner"}

log = logging.getLogger(__name__)


def pipeline_options(beam_args: list[str]) -> PipelineOptions:
    """PipelineOptions from the Beam flags a user passed, with the local runner made explicit."""
    options = PipelineOptions(beam_args)
    standard = options.view_as(StandardOptions)
    runner = standard.runner or LOCAL_RUNNER
    short = runner.split(".")[-1]
    if short in _REFUSED:
        raise ValueError(f"--runner={runner}: {_REFUSED[short]}")
    if short in _REDIRECTED:
        log.info("--runner=%s runs as %s (the same local execution, without the Prism download)", runner, LOCAL_RUNNER)
        runner = LOCAL_RUNNER
    standard.runner = runner
    return options


class WorkerOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--threads_per_worker",
            type=int,
            default=None,
            help="torch and FAISS threads in each worker process (default: local worker processes "
            "share the cores evenly; elsewhere the libraries' own default)",
        )


def worker_threads(options: PipelineOptions) -> int | None:
    """Torch / FAISS intra-op threads per worker process: --threads_per_worker when given; when Beam runs
    several local processes, the cores shared evenly, so they do not each start one thread per core; else None
    (the library's default)."""
    threads = options.view_as(WorkerOptions).threads_per_worker
    if threads is not None:
        if threads < 1:
            raise ValueError(f"--threads_per_worker must be at least 1, got {threads}")
        return threads
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode != "multi_processing":
        return None
    cores = len(os.sched_getaffinity(0))
    return max(1, cores // (direct.direct_num_workers or cores))


class LocalRunner(FnApiRunner):
    """Beam's FnApiRunner, whose worker processes (multi_processing) run `pipelines.beam_worker`: Beam's worker
    with bioel's logging. Beam's own prints some twenty INFO lines a process, then prints each of its warnings
    twice (on its stderr and forwarded through the runner); here each warning once, and bioel's INFO with -v."""

    _BEAM_WORKER = f"{sys.executable} -m apache_beam.runners.worker.sdk_worker_main".encode()
    # the runner re-logs every record its workers forward; they print their own to stderr already
    _FORWARDED = logging.getLogger("apache_beam.runners.portability.local_job_service")

    def run_via_runner_api(self, pipeline_proto, options):
        level = logging.getLevelName(logging.getLogger("pipelines").getEffectiveLevel())
        ours = f"{shlex.quote(sys.executable)} -m pipelines.beam_worker {level}".encode()
        for environment in pipeline_proto.components.environments.values():
            if environment.urn == python_urns.SUBPROCESS_SDK and environment.payload == self._BEAM_WORKER:
                environment.payload = ours
        self._FORWARDED.addFilter(_not_forwarded)
        try:
            return super().run_via_runner_api(pipeline_proto, options)
        finally:
            self._FORWARDED.removeFilter(_not_forwarded)


def _not_forwarded(record: logging.LogRecord) -> bool:
    return record.msg != "Worker: %s"


def new_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A pipeline on the runner the options name, the local one being `LocalRunner`, whose first step checks that
    the workers run the launcher's libraries (pipelines.guards.CheckWorkerLibraries)."""
    local = runner_name(options) == LOCAL_RUNNER
    pipeline = beam.Pipeline(runner=LocalRunner(), options=options) if local else beam.Pipeline(options=options)
    _ = pipeline | "CheckWorkerLibraries" >> CheckWorkerLibraries()
    return pipeline


def runner_name(options: PipelineOptions) -> str:
    return str(options.view_as(StandardOptions).runner).split(".")[-1]


def in_process(options: PipelineOptions) -> bool:
    """Whether the pipeline's DoFns run in this process: the local runner in memory or in threads, not in worker
    processes (--direct_running_mode=multi_processing) nor on a cluster."""
    mode = options.view_as(DirectOptions).direct_running_mode
    return runner_name(options) == LOCAL_RUNNER and mode in (None, "in_memory", "multi_threading")


@contextmanager
def pipeline_progress(options: PipelineOptions, verb: str, unit: str, total: int | None = None):
    """While a pipeline runs: a bar its DoFns move (`bioel_core.progress.advance`) when they run in this process;
    else a start line, the workers being out of reach (the verb's summary line is the end line)."""
    local = in_process(options)
    if not local:
        print(
            f"{verb}: started on {runner_name(options)}; its workers run in other processes or machines, so no progress bar here",
            file=sys.stderr,
        )
    with progress.shared_bar(unit, total, desc=verb, show=local):
        yield


def _all_option_classes() -> list[type]:
    """Every PipelineOptions subclass imported so far (runners and IOs register theirs by subclassing)."""
    seen: dict[str, type] = {}
    stack = list(PipelineOptions.__subclasses__())
    while stack:
        cls = stack.pop()
        seen.setdefault(f"{cls.__module__}.{cls.__qualname__}", cls)
        stack.extend(cls.__subclasses__())
    return list(seen.values())


def beam_parser():
    """An argument parser holding every option Beam's own option classes define (as PipelineOptions builds it); a
    value it cannot take raises ValueError with argparse's one-line message (Beam's own prints its whole usage, every
    runner's flags, above that line)."""
    from apache_beam.options.pipeline_options import _BeamArgumentParser

    class OneLineErrors(_BeamArgumentParser):
        def error(self, message: str):
            raise ValueError(message)

    parser = OneLineErrors(allow_abbrev=False, add_help=False)
    for cls in _all_option_classes():
        try:
            cls._add_argparse_args(parser)  # noqa: SLF001 - Beam's own registration hook
        except argparse.ArgumentError:  # a flag two classes define: the first registration stands
            pass
    return parser


def unknown_flag_error(extra: list[str], verb_flags: list[str]) -> str | None:
    """None when every flag in `extra` (what the verb's own parser left) is one of Beam's options; else a
    one-line error naming the first unknown flag and the nearest known one (Beam would drop it with a warning,
    so a misspelled --incremental or --num-shards would silently change what the job does), or that one of Beam's
    options has a value it cannot take (`argument --direct_num_workers: invalid int value: 'two'`)."""
    parser = beam_parser()
    try:
        _, unknown = parser.parse_known_args(extra)
    except ValueError as err:
        return str(err)
    if not unknown:
        return None
    bad = next((u for u in unknown if u.startswith("-")), unknown[0])
    if not bad.startswith("-"):
        return f"unrecognized argument {bad!r}"
    name = bad.split("=", 1)[0]
    known = sorted(set(verb_flags) | {s for a in parser._actions for s in a.option_strings})  # noqa: SLF001
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else " (neither a flag of this verb nor a Beam pipeline option)"
    return f"unknown flag {name}{hint}"
