"""The pipelines' side of bioel_core.guards: the check that the workers run the launcher's libraries."""

from __future__ import annotations

import apache_beam as beam

from bioel_core.guards import check_same_libraries, library_versions


class CheckWorkerLibraries(beam.PTransform):
    """A step that fails the job on a worker whose output-deciding libraries (bioel_core.guards.OUTPUT_LIBRARIES)
    are not the launcher's: `--setup_file` workers install setup.py's version ranges, not the lock file, so a
    cluster job could otherwise write other vectors and scores than the same job run here, and nothing would say."""

    def expand(self, pipeline):
        return (
            pipeline | "LauncherLibraries" >> beam.Create([library_versions()]) | "SameOnWorker" >> beam.Map(check_same_libraries)
        )
