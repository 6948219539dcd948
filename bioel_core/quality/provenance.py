"""What the report says of the run whose tables it checks, all read from manifests: when the run finished, with which
bioel and runner, its inputs (paths and versions as its manifest records them) and the linker bundle(s) it belongs to.

A bundle is found by where folders lie (bioel_core.bundle's layout): an output at BUNDLE/kb|embeddings|index/TYPE is a
stage of BUNDLE, and a link output linked with the bundle whose index folders its annotator names. The bundle's
name and file come from BUNDLE/manifest.json (pipeline "build"); a bundle whose first build is still running has no
manifest yet and is named by its folder only.
"""

from __future__ import annotations

import os

from bioel_core.bundle import EMBEDDINGS, INDEX, KB, PIPELINE as BUNDLE_PIPELINE, STAGES
from bioel_core.outputs.fs import FileSystem
from bioel_core.tables import read_manifest

# how a manifest records an input's version, in the order looked for: a file's, an output folder's, a model's
VERSION_KEYS = ("sha256", "manifest_sha256", "fingerprint")
STAGE_FOLDERS = (KB, EMBEDDINGS, INDEX)


def _version(record: dict) -> str | None:
    return next((record[k] for k in VERSION_KEYS if record.get(k)), None)


def _link_inputs(manifest: dict) -> list[dict]:
    """A link run's model, indexes and stop lists, as its annotator names them (versions: the model's; the KBs' one
    version over all types)."""
    annotator = manifest.get("annotator") or {}
    rows = (
        [{"role": "model", "path": annotator["model"], "version": manifest.get("model_version")}]
        if annotator.get("model")
        else []
    )
    for role in ("reranker", "generative"):
        if isinstance(annotator.get(role), str):
            rows.append({"role": role, "path": annotator[role], "version": None})
    for role, key in (("model", "type_models"), ("index", "indexes"), ("stop list", "stop_lists")):
        rows += [{"role": f"{role} {t or '(any type)'}", "path": path, "version": None} for t, path in annotator.get(key) or []]
    if manifest.get("kb_version"):
        rows.append({"role": "KB version (all types)", "path": None, "version": manifest["kb_version"]})
    return rows


def inputs(manifest: dict) -> list[dict]:
    """The run's inputs, each {"role", "path", "version"} (None where the manifest records none): the files or folders
    it read (`inputs`; a bundle's named by the setting that gave them), the model it embedded with, and a link's
    annotator."""
    rows = [
        {"role": record.get("setting") or "input", "path": record.get("path"), "version": _version(record)}
        for record in manifest.get("inputs") or []
    ]
    model = manifest.get("model")
    if isinstance(model, dict) and model.get("path"):
        rows.append({"role": "model", "path": model["path"], "version": _version(model)})
    if manifest.get("pipeline") == "link":
        rows += _link_inputs(manifest)
    return rows


def _bundle_folder_of(stage_output: str) -> str | None:
    """BUNDLE, when `stage_output` is BUNDLE/kb|embeddings|index/TYPE."""
    parent = os.path.dirname(stage_output.rstrip("/"))
    return os.path.dirname(parent) if os.path.basename(parent) in STAGE_FOLDERS else None


def _bundle(folder: str, fs: FileSystem) -> dict | None:
    """What BUNDLE/manifest.json says of the bundle at `folder`; None when `folder` is no bundle."""
    try:
        manifest = read_manifest(folder, fs)
    except (OSError, ValueError, RuntimeError):  # none yet (a first build running), unreadable: by its layout only
        manifest = None
    if manifest is None or manifest.get("pipeline") != BUNDLE_PIPELINE:
        building = manifest is None and fs.exists(fs.join(folder, STAGES))
        return (
            {
                "folder": folder,
                "name": None,
                "description": None,
                "file": None,
                "file_sha256": None,
                "published_utc": None,
                "generation": None,
            }
            if building
            else None
        )
    bundle, file = manifest.get("bundle") or {}, (manifest.get("bundle") or {}).get("file") or {}
    return {
        "folder": folder,
        "name": bundle.get("name"),
        "description": bundle.get("description"),
        "file": file.get("path"),
        "file_sha256": file.get("sha256"),
        "published_utc": manifest.get("created_utc"),
        "generation": manifest.get("generation"),
    }


def bundles(manifest: dict, output_dir: str, fs: FileSystem) -> list[dict]:
    """The bundles the output at `output_dir` (of `manifest`) is a stage of or linked with, each once."""
    candidates = [_bundle_folder_of(str(output_dir))]
    if manifest.get("pipeline") == "link":
        candidates += [_bundle_folder_of(str(path)) for _, path in (manifest.get("annotator") or {}).get("indexes") or []]
    found = []
    for folder in dict.fromkeys(c for c in candidates if c):
        bundle = _bundle(folder, fs)
        if bundle is not None:
            found.append(bundle)
    return found


def run_facts(manifest: dict, output_dir: str, fs: FileSystem) -> dict:
    """The summary's facts about the run: run_finished_utc (the manifest's created_utc, written as the run ends),
    package_version, runner, inputs (`inputs`), bundles (`bundles`)."""
    return {
        "run_finished_utc": manifest.get("created_utc"),
        "package_version": manifest.get("package_version"),
        "runner": manifest.get("runner"),
        "inputs": inputs(manifest),
        "bundles": bundles(manifest, output_dir, fs),
    }
