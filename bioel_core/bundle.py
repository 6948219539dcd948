"""A built linker bundle: one self-contained folder that `bioel link` and `Annotator.from_bundle` link with,
made and kept up to date from a bundle file (bioel_core.settings.bundle) by `bioel build` (pipelines/build_bundle.py).

It is relocatable: every path it records is relative to the folder, and every input is known by its version (an
output's content sha256, a file's or a model folder's digest), never by where it lay when it was built.

    BUNDLE/manifest.json               written last (pipeline "build"): how to link (the link settings, paths relative
                                       to BUNDLE), where each type's thresholds came from, every stage's record
    BUNDLE/gen-<time>-<run>/settings/  bundle.json (the resolved bundle settings), calibration.json
    BUNDLE/kb/TYPE/                    the type's `bioel ingest-kb` output    (each a published output folder)
    BUNDLE/embeddings/TYPE/            its `bioel embed` output
    BUNDLE/index/TYPE/                 its `bioel build-index` output
    BUNDLE/models/NAME/                a copy of each model folder the bundle embeds and links with
    BUNDLE/stoplists/NAME              a copy of each stop list
    BUNDLE/stages/STAGE.json           a stage's record (StageRecord), written as soon as the stage is done
    BUNDLE/_lock.json                  present while `bioel build` writes here

A stage is up to date when its record's settings and input versions are the current ones and its output is still the
version it recorded (`staleness`); records are written per stage, so a build stopped half way keeps what it finished.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bioel_core.settings import LinkSettings, LinkTarget, from_mapping, to_mapping

PIPELINE = "build"
KB, EMBEDDINGS, INDEX, MODELS, STOPLISTS, STAGES = "kb", "embeddings", "index", "models", "stoplists", "stages"
SETTINGS_TABLE = "settings"  # the generation's folder: bundle.json, calibration.json


@dataclass(frozen=True)
class StageRecord:
    """What a finished stage was run with and made: compared with the current ones to tell whether it must run."""

    settings: dict
    inputs: dict  # input name -> version (a sha256, a digest, an output's content version)
    output: str = ""  # its output folder, relative to the bundle ("" for a stage that writes none)
    version: str = ""  # that output's content version when the stage finished
    result: dict = field(default_factory=dict)  # what it found (the calibrated thresholds)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def stage_folder(bundle: Path, kind: str, entity_type: str) -> Path:
    """The output folder of one type's stage (kind: KB, EMBEDDINGS, INDEX)."""
    return bundle / kind / entity_type


def own_sources(bundle: Path, types: Iterable[str]) -> dict[str, tuple[tuple[str, str], ...]]:
    """An AnnotatorSpec's `embeddings` and `names` for these types: their folders in this bundle, where the index
    manifests of a bundle built in another folder (moved, copied) name that folder's."""
    return {
        key: tuple((t, str(stage_folder(bundle, kind, t))) for t in types)
        for key, kind in (("embeddings", EMBEDDINGS), ("names", KB))
    }


def read_record(bundle: Path, name: str) -> StageRecord | None:
    """The record of stage `name` (e.g. `Disease.embed`), None when there is none or it cannot be read (the stage runs)."""
    path = bundle / STAGES / f"{name}.json"
    try:
        return StageRecord(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def write_record(bundle: Path, name: str, record: StageRecord) -> None:
    """Written beside itself and renamed into place: a kill leaves the previous record or this one."""
    folder = bundle / STAGES
    folder.mkdir(parents=True, exist_ok=True)
    staged = folder / f".{name}.json.{uuid.uuid4().hex[:8]}"
    staged.write_text(json.dumps(record.to_dict(), indent=2, sort_keys=True), encoding="utf-8")
    os.replace(staged, folder / f"{name}.json")


def output_version(folder: Path, pipeline: str) -> str:
    """The content version of a finished output folder of `pipeline` (ValueError/OSError when it is not one)."""
    from bioel_core.embeddings import manifest_sha256
    from bioel_core.tables import read_output_manifest

    read_output_manifest(folder, pipeline)
    return manifest_sha256(folder)


def staleness(bundle: Path, name: str, settings: dict, inputs: dict, pipeline: str | None = None) -> str | None:
    """Why stage `name` must run, or None when it is up to date: its record's settings and inputs equal `settings` and
    `inputs`, and (for a stage with an output folder, written by `pipeline`) that folder is the version it recorded.
    Inputs count by content version, not path: a bundle copied or moved elsewhere is up to date there, and whatever
    reads an input an output's manifest names by path reads the bundle's own folder instead (`own_sources`)."""
    record = read_record(bundle, name)
    if record is None:
        return "not built yet"
    if record.settings != settings:
        changed = sorted(k for k in settings.keys() | record.settings.keys() if settings.get(k) != record.settings.get(k))
        return f"settings changed ({', '.join(changed)})"
    if record.inputs != inputs:
        changed = sorted(k for k in inputs.keys() | record.inputs.keys() if inputs.get(k) != record.inputs.get(k))
        return f"inputs changed ({', '.join(changed)})"
    if pipeline is not None:
        try:
            if output_version(bundle / record.output, pipeline) != record.version:
                return "its output changed since it was built"
        except (OSError, ValueError, RuntimeError):
            return "its output is missing or unreadable"
    return None


# a model folder's card (bioel_core.models.cards' CARD_JSON, CARD_MD), named here so that a build's up-to-date check
# imports no torch
MODEL_CARD_FILES = ("card.json", "MODEL_CARD.md")
# a model folder's config and a collective document model's name encoder folder (bioel_core.models.base.CONFIG_FILE,
# CollectiveEncoder.encoder_type, bioel_core.models.collective.NAMES_DIR), named here for the same reason
MODEL_CONFIG_FILE, COLLECTIVE, COLLECTIVE_NAMES_DIR = "bioel_encoder.json", "collective", "names"


def vectors_folder(model: str | Path) -> Path:
    """The part of a model folder whose files make its name vectors (what the models' `vectors_fingerprint()` covers,
    told by the folder's config): a collective document model's frozen name encoder, any other model's whole folder."""
    from bioel_core.outputs.reading import read_json_object

    model, config = Path(model), Path(model) / MODEL_CONFIG_FILE
    if config.is_file() and read_json_object(config, "bioel model config").get("encoder_type") == COLLECTIVE:
        return model / COLLECTIVE_NAMES_DIR
    return model


def file_digest(path: str | Path, skip: Collection[str] = ()) -> str:
    """sha256 of a file, or of a folder's files (each file's relative path and sha256, in path order), those whose
    relative path is in `skip` left out."""
    import hashlib

    from bioel_core.index.sharded import file_sha256

    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    digest = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.relative_to(path).as_posix() not in skip):
        digest.update(f"{f.relative_to(path).as_posix()}\0{file_sha256(f)}\n".encode())
    return digest.hexdigest()


def copy_in(source: str | Path, target: Path) -> None:
    """`source` (a file or a folder) copied to `target` whole or not at all: copied beside it, then swapped in."""
    source, target = Path(source), Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
    (shutil.copytree if source.is_dir() else shutil.copyfile)(source, staged)
    old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
    if target.exists():
        os.replace(target, old)
    os.replace(staged, target)
    if old.is_dir():
        shutil.rmtree(old)
    elif old.exists():
        old.unlink()


def relative(path: str | None, bundle: Path) -> str | None:
    return None if path is None else Path(os.path.relpath(path, bundle)).as_posix()


@dataclass(frozen=True)
class BuiltBundle:
    """A bundle folder `bioel build` published, read for linking."""

    folder: Path
    manifest: dict

    @classmethod
    def read(cls, folder: str | Path, flag: str = "bundle") -> BuiltBundle:
        """The bundle at `folder`; anything else (a folder no build finished, another verb's output) is refused."""
        from bioel_core.tables import read_output_manifest

        folder = Path(folder).resolve()
        return cls(folder, read_output_manifest(folder, PIPELINE, flag))

    @property
    def entity_types(self) -> list[str]:
        return list(self.manifest["link"]["settings"]["types"])

    def link_settings(self) -> LinkSettings:
        """How the bundle links, its paths made absolute in the folder where it lies now."""
        return from_mapping(LinkSettings, self.manifest["link"]["settings"], "link", base=self.folder)

    def annotator_spec(self, overrides: LinkSettings | None = None, thresholds: bool = True, **kwargs):
        """The AnnotatorSpec of the bundle's linker, single settings replaced by those given in `overrides` (a type
        whose index is overridden reads that index's own sources); `thresholds` False: no NIL threshold of the
        bundle's (calibrating anew); `kwargs`: the spec's other arguments (detect, device...)."""
        link = self.link_settings()
        if not thresholds:
            link.types = {t: dataclasses.replace(target, nil_threshold=None) for t, target in link.types.items()}
        if overrides is not None:
            link = overridden(link, overrides)
        own = sorted(t for t, target in link.types.items() if target.index == str(stage_folder(self.folder, INDEX, t)))
        return link.annotator_spec(**own_sources(self.folder, own), **kwargs)


def overridden(base: LinkSettings, flags: LinkSettings) -> LinkSettings:
    """`base` with every setting `flags` gives replacing it (per type and per field; a type `base` lacks is added)."""
    types = {t: dataclasses.replace(target) for t, target in base.types.items()}
    for t, target in flags.types.items():
        given = {k: v for k, v in to_mapping(target).items() if v is not None}
        types[t] = dataclasses.replace(types.get(t, LinkTarget()), **given)
    # a flag not given is None (or an empty list); False is given: every field of LinkSettings so, new ones too
    linker = {
        f.name: value
        for f in dataclasses.fields(LinkSettings)
        if f.name != "types" and (value := getattr(flags, f.name)) is not None and value != []
    }
    return dataclasses.replace(base, **linker, types=types)
