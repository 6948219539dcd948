"""The linker bundle file (TOML, read with the standard library's tomllib): per entity type the KB dump(s) and
reader options, the model, the index, the stop list and the NIL policy; for all, the detector, the copy formats and
the gold corpus NIL thresholds are calibrated on. Paths are relative to the file. docs/bundles.md describes every
setting; `bioel build` brings a bundle folder up to date with it (pipelines/build_bundle.py).

    name = "diseases-chemicals"
    model = "../models/cdr-ncbi-collective-1layer-ff384" # embeds every type's names unless a type names its own
    [link]                                          # LinkSettings: detector, copy_formats
    [calibrate]                                     # CalibrateSettings: gold, gold_format (optional)
    [types.Disease.ingest]                          # IngestSettings: format, dumps, reader options, ...
    [types.Disease.embed]                           # EmbedSettings: model (the type's own), batch_size, ...
    [types.Disease.index]                           # IndexSettings: kind, num_shards, ...
    [types.Disease.link]                            # LinkTarget: stop_list, nil_threshold
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bioel_core.settings.fields import Settings, SettingsError, from_mapping, override, setting
from bioel_core.settings.stages import (
    ENTITY_TYPE,
    CalibrateSettings,
    EmbedSettings,
    IndexSettings,
    IngestSettings,
    LinkSettings,
    LinkTarget,
)

MODEL_CONFIG = "bioel_encoder.json"
# model kinds whose folder refers to other folders (its members): a bundle copies one folder per model
NOT_SELF_CONTAINED = {
    "ensemble": "an ensemble refers to its member models' folders",
    "reranker-ensemble": "an ensemble refers to its member models' folders",
}


@dataclass
class TypeSettings(Settings):
    """One entity type of a bundle: its KB, how its names are embedded and indexed, how its mentions are linked."""

    ingest: IngestSettings = setting(help="the type's KB dump(s), format and reader options")
    embed: EmbedSettings = setting(
        EmbedSettings(), help="how the type's names are embedded (model: the type's own; default the bundle's)"
    )
    index: IndexSettings = setting(IndexSettings(), help="the type's FAISS index")
    link: LinkTarget = setting(LinkTarget(), help="the type's stop list and NIL threshold")

    def check(self) -> None:
        if self.link.index is not None:
            raise SettingsError("link.index", "set by the build (the bundle's own index of this type); remove it")
        if self.link.model is not None:
            raise SettingsError(
                "link.model",
                "a type's model is embed.model (its names are embedded with the model that links its mentions); remove it",
            )


@dataclass
class BundleSettings(Settings):
    """A linker bundle: what `bioel build` makes a bundle folder of."""

    name: str = setting("", help="the bundle's name")
    description: str = setting("", help="what the bundle links, in a line")
    model: str | None = setting(
        None,
        path=True,
        help="the model of every type without an embed.model of its own "
        "(default: the shipped disease model); with a collective model, "
        "its span detector",
    )
    link: LinkSettings = setting(LinkSettings(), help="the detector and the copy formats")
    calibrate: CalibrateSettings | None = setting(
        None, help="a gold corpus (a dev set) to calibrate the NIL thresholds of the types without a fixed one"
    )
    types: dict[str, TypeSettings] = setting({}, names=ENTITY_TYPE, help="the entity types, each with its KB")

    def check(self) -> None:
        if not self.types:
            raise SettingsError("types", "no entity type declared (a [types.NAME.ingest] table)")
        if self.link.model is not None:
            raise SettingsError("link.model", "a bundle's model is its top-level `model`; remove it")
        if self.link.types:
            raise SettingsError("link.types", "a type's link settings are types.NAME.link; remove it")

    def model_of(self, entity_type: str) -> str | None:
        """The model folder that embeds this type's names and links its mentions (None: the shipped default)."""
        return self.types[entity_type].embed.model or self.model

    def check_inputs(self) -> None:
        """Every local file and folder the build reads exists, and each model is one folder; a missing one is named
        by its setting. (URLs are checked where they are read.)"""
        checks: list[tuple[str, str | None, str]] = []
        for name, t in self.types.items():
            checks += [(f"types.{name}.ingest.dumps[{i}]", p, "file") for i, p in enumerate(t.ingest.dumps)]
            checks += [(f"types.{name}.ingest.extra_names[{i}]", p, "file") for i, p in enumerate(t.ingest.extra_names)]
            if t.ingest.scope is not None:
                checks.append((f"types.{name}.ingest.scope.semantic_groups_file", t.ingest.scope.semantic_groups_file, "file"))
            checks += [
                (f"types.{name}.embed.model", t.embed.model, "folder"),
                (f"types.{name}.link.stop_list", t.link.stop_list, "file"),
            ]
        checks.append(("model", self.model, "folder"))
        if self.calibrate is not None:
            checks.append(("calibrate.gold", self.calibrate.gold, "any"))
        for field, path, kind in checks:
            if path is None or "://" in path:
                continue
            p = Path(path)
            if not p.exists() or (kind == "file" and not p.is_file()) or (kind == "folder" and not p.is_dir()):
                raise SettingsError(field, f"no such {'file or folder' if kind == 'any' else kind}: {path}")
            encoder_type = _encoder_type(path) if kind == "folder" else None
            if encoder_type in NOT_SELF_CONTAINED:
                raise SettingsError(
                    field,
                    f"{path}: {NOT_SELF_CONTAINED[encoder_type]}, and a bundle holds a "
                    "copy of one folder per model: name a member model instead",
                )
        self._check_detector()

    def _check_detector(self) -> None:
        """The span detector (`model`, `both`) is the collective `model`'s, whose one pass links every type with it."""
        detector = self.link.detector
        if detector not in ("model", "both"):
            return
        if self.model is None or _encoder_type(self.model) != "collective":
            raise SettingsError(
                "link.detector",
                f"{detector!r} needs a collective model as the bundle's `model` "
                f"(`bioel train collective`), not {self.model or 'the default'}",
            )
        own = sorted(t for t, ts in self.types.items() if ts.embed.model not in (None, self.model))
        if own:
            raise SettingsError(
                f"types.{own[0]}.embed.model",
                f"the collective model's one pass links every type with its own vectors (detector {detector!r}): remove it",
            )


def _encoder_type(model: str) -> str | None:
    """A model folder's kind, from its config (None: a plain checkpoint, or a URL)."""
    config = Path(model) / MODEL_CONFIG
    return json.loads(config.read_text(encoding="utf-8")).get("encoder_type") if config.is_file() else None


def load_bundle_file(path: str | Path, assignments: Sequence[str] = (), cwd: str | Path | None = None) -> BundleSettings:
    """The bundle file at `path`, with `NAME=VALUE` assignments applied (paths in them taken from `cwd`, the working
    folder), validated. Any error names the file and the setting."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise FileNotFoundError(f"bundle file {path}: {err.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a readable TOML bundle file ({err})") from None
    try:
        for assignment in assignments:
            override(BundleSettings, data, assignment, cwd)
        return from_mapping(BundleSettings, data, base=path.resolve().parent)
    except SettingsError as err:
        raise SettingsError(err.field, f"{err.reason} (in {path})") from None
