"""Every verb's flags, in one table: the contracts (bioel_core.settings) each verb makes its flags of, with the
verb's own spelling where it differs from the field's name (`rename`) and the fields it deliberately does not expose
(`skip`). A flag that is no contract's field is one of CLI_ONLY. `train` and `ensemble` keep their own parsers
(pipelines/cli_train.py).
"""

from __future__ import annotations

from bioel_core.settings import (
    CalibrateSettings,
    EmbedSettings,
    EndToEndSettings,
    EvaluateSettings,
    IndexSettings,
    IngestSettings,
    LinkRunSettings,
    LinkSettings,
    ProbeSettings,
    QualitySettings,
    RefreshSettings,
    ReportSettings,
    RerankSettings,
    StageRun,
)
from pipelines.cli_flags import Contract

# `bioel --help` lists the verbs in the order a user meets them: build a bundle and link with it (and read the
# report); then the stages a bundle runs, one by one; then scoring; then making models
VERB_ORDER = (
    "build",
    "link",
    "report",
    "ingest-kb",
    "embed",
    "build-index",
    "calibrate-nil",
    "refresh",
    "evaluate",
    "evaluate-e2e",
    "probe",
    "train",
    "ensemble",
)

QUALITY = Contract(QualitySettings, rename={"skip": "--no-quality"})
# the linker's flags of link and calibrate-nil: a type's setting is TYPE=VALUE (`--index Disease=DIR`)
LINKER_RENAME = {"copy_formats": "--output-format"}

FLAGS: dict[str, tuple[Contract, ...]] = {
    "build": (Contract(StageRun, skip=("input",)), QUALITY),
    "link": (Contract(LinkRunSettings), Contract(LinkSettings, rename=LINKER_RENAME), Contract(RerankSettings), QUALITY),
    "report": (Contract(ReportSettings), Contract(QualitySettings, skip=("skip",))),
    "ingest-kb": (
        Contract(IngestSettings, rename={"format": "--input-format", "dumps": "--input"}),
        Contract(StageRun, skip=("input",)),
        QUALITY,
    ),
    "embed": (Contract(StageRun, required=("input",)), Contract(EmbedSettings), QUALITY),
    "build-index": (Contract(StageRun, required=("input",)), Contract(IndexSettings, rename={"kind": "--index-kind"}), QUALITY),
    # calibrating: no NIL threshold (it would cut the predictions calibrated) and no copy is written
    "calibrate-nil": (
        Contract(CalibrateSettings),
        Contract(LinkSettings, skip=("copy_formats", "types.*.nil_threshold")),
        Contract(RerankSettings),
    ),
    "refresh": (Contract(RefreshSettings), QUALITY),
    "evaluate": (Contract(EvaluateSettings),),
    "evaluate-e2e": (Contract(EndToEndSettings),),
    "probe": (Contract(ProbeSettings),),
}

# the flags (and positionals) that are no contract's field: how the CLI is driven, not what a stage does
CLI_ONLY = {
    "-h": "argparse's help",
    "--help": "argparse's help",
    "-v": "progress messages on stderr",
    "--verbose": "as -v",
    "--json": "where a scoring verb writes its figures as JSON",
    "--bundle": "a built bundle folder, whose linker the linker flags override (a base mapping, not a setting)",
    "BUNDLE_FILE": "build's bundle file (its settings are BundleSettings)",
    "--set": "one setting of the bundle file replaced (`--set NAME=VALUE`)",
}
