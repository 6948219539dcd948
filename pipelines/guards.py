"""The pipelines' side of bioel_core.guards: the empty-output refusal over a staged output (through Beam's
FileSystems, so remote staging folders work too)."""

from __future__ import annotations

from apache_beam.io.filesystems import FileSystems

from bioel_core.guards import check_not_empty, dead_letter_sample


def refuse_empty(manifest: dict, staged) -> dict:
    """Call inside `StagedOutput.publish`'s build step: raising there abandons the staging folder, so a job with
    no rows publishes nothing and the previous output stands. Returns the manifest."""
    opener = lambda p: FileSystems.open(p, compression_type="uncompressed")  # noqa: E731
    check_not_empty(manifest, lambda: dead_letter_sample(staged.files("dead_letter"), opener))
    return manifest
