"""An output folder's table version (`manifest_sha256`: manifest.content_sha256 of its manifest.json), and the check
that a folder a later stage was made from still holds the version it recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bioel_core.outputs.fs import LOCAL, FileSystem, as_path
from bioel_core.outputs.names import MANIFEST
from bioel_core.outputs.manifest import content_sha256


def _manifest_bytes(output_dir: str | Path, fs: FileSystem) -> bytes:
    with fs.open(fs.join(str(output_dir), MANIFEST)) as fh:
        return fh.read()


def manifest_sha256(output_dir: str | Path, fs: FileSystem = LOCAL) -> str:
    """The table version of an output folder (content_sha256 of its manifest.json): equal for a re-run of the same
    inputs, so re-ingesting an unchanged KB leaves its embeddings, index and links current."""
    return content_sha256(json.loads(_manifest_bytes(output_dir, fs)))


def is_version_of(recorded: str, output_dir: str | Path, fs: FileSystem = LOCAL) -> bool:
    """True when `recorded` (a later stage's `manifest_sha256` of the folder it read) is the folder's version now.
    Outputs made before versions left out where inputs lie recorded it with them; before versions left out the run
    fields, the sha256 of the whole manifest.json."""
    text = _manifest_bytes(output_dir, fs)
    manifest = json.loads(text)
    return recorded in (content_sha256(manifest), content_sha256(manifest, with_locations=True), hashlib.sha256(text).hexdigest())


def check_unchanged_source(
    output_dir: str | Path, source, read, what: str, since: str, verb: str, fs: FileSystem = LOCAL, at: str | Path | None = None
) -> Path | str:
    """The folder an output was made from (`source`: its manifest's record of it, with `path` and
    `manifest_sha256`), read with `read` through `fs` and checked to be the same table version (is_version_of).
    `at`: where that folder lies now, when not at the recorded path (moved with the output: a relocated bundle); it
    is checked by its version all the same."""
    folder = as_path(at if at is not None else source.path)
    read(folder, fs=fs)
    if not is_version_of(source.manifest_sha256, folder, fs):
        raise ValueError(
            f"{output_dir}: the {what} at {folder} changed since {since} (its manifest.json differs); re-run `bioel {verb}`"
        )
    return folder
