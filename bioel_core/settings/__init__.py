"""Typed stage contracts: one settings class per stage (ingest, embed, index, link, calibrate), the linker bundle
that composes them and each verb's run, each validated once with errors that name the field (`fields`: the machinery;
`stages`: the stage contracts; `runs`: the verbs' runs; `bundle`: the bundle file). Beam-free and light: the CLI reads them to make its flags."""

from bioel_core.settings.bundle import BundleSettings, TypeSettings, load_bundle_file
from bioel_core.settings.fields import Settings, SettingsError, fields_of, from_mapping, override, to_mapping
from bioel_core.settings.runs import (
    EndToEndSettings,
    EvaluateSettings,
    LinkRunSettings,
    ProbeSettings,
    QualitySettings,
    RefreshSettings,
    ReportSettings,
    RerankSettings,
    StageRun,
)
from bioel_core.settings.stages import (
    READER_OPTIONS,
    SHARED_NAME_POLICIES,
    CalibrateSettings,
    EmbedSettings,
    IndexSettings,
    IngestSettings,
    LinkSettings,
    LinkTarget,
    ReaderOptions,
    ScopeSettings,
)

__all__ = [
    "READER_OPTIONS",
    "SHARED_NAME_POLICIES",
    "BundleSettings",
    "CalibrateSettings",
    "EmbedSettings",
    "IndexSettings",
    "IngestSettings",
    "LinkSettings",
    "LinkTarget",
    "ReaderOptions",
    "ScopeSettings",
    "Settings",
    "SettingsError",
    "TypeSettings",
    "EndToEndSettings",
    "EvaluateSettings",
    "LinkRunSettings",
    "ProbeSettings",
    "QualitySettings",
    "RefreshSettings",
    "ReportSettings",
    "RerankSettings",
    "StageRun",
    "fields_of",
    "from_mapping",
    "load_bundle_file",
    "override",
    "to_mapping",
]
