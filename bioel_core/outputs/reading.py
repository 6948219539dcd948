"""Reading an output folder's manifest: a finished output of the expected verb and schema version, or a one-line
refusal naming the folder (and the setting it came from). Every stage reads its upstream folders through here."""

from __future__ import annotations

import json
from pathlib import Path

from bioel_core.outputs.errors import IncompleteOutputError
from bioel_core.outputs.fs import LOCAL, FileSystem, as_path
from bioel_core.outputs.names import MANIFEST
from schemas import SCHEMA_VERSION


def read_json_object(path: str | Path, what: str) -> dict:
    """The JSON object a bioel file holds (a manifest, a model config); anything else (not JSON, a list, null) is
    refused naming the file and what it should have been."""
    return json_object(Path(path).read_bytes(), path, what)


def json_object(data: bytes, path: str | Path, what: str) -> dict:
    """`read_json_object` of the bytes of the file at `path`, read elsewhere (through an output FileSystem)."""
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError as err:
        raise ValueError(f"{path}: not a readable {what} ({err})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: not a readable {what} (a JSON {type(value).__name__}, not an object)")
    return value


def read_manifest(output_dir: str | Path, fs: FileSystem = LOCAL) -> dict:
    """The manifest of a finished output folder; an unfinished one is an error, not an empty table."""
    path = fs.join(str(output_dir), MANIFEST)
    if not fs.exists(path):
        if not fs.is_folder(str(output_dir)):
            raise FileNotFoundError(f"no such folder: {output_dir}")
        raise IncompleteOutputError(
            f"{output_dir} is not a finished bioel output (no {MANIFEST}): interrupted, still running, or not written by bioel"
        )
    with fs.open(path) as fh:
        manifest = json_object(fh.read(), path, "bioel manifest")
    if not manifest.get("complete"):
        raise IncompleteOutputError(f"{path}: output is marked incomplete")
    return manifest


def read_output_manifest(output_dir: str | Path, pipeline: str, flag: str = "", fs: FileSystem = LOCAL) -> dict:
    """The manifest of a finished `bioel {pipeline}` output of this bioel's schema version; any other folder
    (another verb's output, an unfinished run, an older layout) is refused, naming the `flag` it came from."""
    where = f"{flag} {output_dir}".strip()
    manifest = read_manifest(output_dir, fs)
    if manifest.get("pipeline") != pipeline:
        raise ValueError(f"{where}: written by pipeline {manifest.get('pipeline')!r}, not by `bioel {pipeline}`")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"{where}: manifest schema version {manifest.get('schema_version')}, "
            f"this bioel reads {SCHEMA_VERSION}; re-run `bioel {pipeline}`"
        )
    return manifest


def data_root(output_dir: str | Path, manifest: dict | None = None, fs: FileSystem = LOCAL) -> Path | str:
    """Where a finished output's tables are: the generation its manifest names (the folder itself for a
    hand-made folder whose manifest names none); a Path when local, else a URL string (`as_path`)."""
    manifest = read_manifest(output_dir, fs) if manifest is None else manifest
    generation = manifest.get("generation")
    return as_path(fs.join(str(output_dir), generation) if generation else output_dir)
