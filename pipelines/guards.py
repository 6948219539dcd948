"""The pipelines' side of bioel_core.guards: the empty-output refusal over a new output generation, and the check
that the workers run the launcher's libraries."""

from __future__ import annotations

import apache_beam as beam

from bioel_core.guards import check_not_empty, check_same_libraries, dead_letter_sample, library_versions
from bioel_core.outputs import Manifest, OutputFolder


def refuse_empty(manifest: Manifest, staged: OutputFolder) -> Manifest:
    """Call inside `OutputFolder.publish`'s build step: raising there removes the new generation, so a job with
    no rows publishes nothing and the previous output stands. Returns the manifest."""
    check_not_empty(manifest.to_dict(), lambda: dead_letter_sample(staged.files("dead_letter"), staged.fs.open))
    return manifest


class CheckWorkerLibraries(beam.PTransform):
    """A step that fails the job on a worker whose output-deciding libraries (bioel_core.guards.OUTPUT_LIBRARIES)
    are not the launcher's: `--setup_file` workers install setup.py's version ranges, not the lock file, so a
    cluster job could otherwise write other vectors and scores than the same job run here, and nothing would say."""

    def expand(self, pipeline):
        return (pipeline
                | "LauncherLibraries" >> beam.Create([library_versions()])
                | "SameOnWorker" >> beam.Map(check_same_libraries))
