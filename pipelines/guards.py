"""The pipelines' side of bioel_core.guards: the empty-output refusal over a new output generation."""

from __future__ import annotations

from bioel_core.guards import check_not_empty, dead_letter_sample
from bioel_core.outputs import Manifest, OutputFolder


def refuse_empty(manifest: Manifest, staged: OutputFolder) -> Manifest:
    """Call inside `OutputFolder.publish`'s build step: raising there removes the new generation, so a job with
    no rows publishes nothing and the previous output stands. Returns the manifest."""
    check_not_empty(manifest.to_dict(), lambda: dead_letter_sample(staged.files("dead_letter"), staged.fs.open))
    return manifest
