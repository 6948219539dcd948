"""Beam pipeline options shared by every bioel pipeline.

The embedded default runner is Beam's FnApiRunner: it is what the Python DirectRunner runs locally, minus
the DirectRunner's first attempt to download and start the Prism binary (no network here, and none
wanted in scheduled jobs). It honours --direct_num_workers and --direct_running_mode.
"""

from __future__ import annotations

import logging

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

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


def runner_name(options: PipelineOptions) -> str:
    return str(options.view_as(StandardOptions).runner).split(".")[-1]
