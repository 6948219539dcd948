"""The benchmark KBs: MEDIC for diseases, the MeSH 2024 thesaurus restricted to tree D (Chemicals and Drugs)
for chemicals, each ingested, embedded and indexed (flat, 2 shards) once with the `bioel` verbs and reused."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
STOP_LISTS = ROOT / "models" / "stoplists"
BIOEL = [sys.executable, "-m", "pipelines.cli"]

# entity type -> (ingest-kb flags, stop list file)
KBS = {
    "Disease": (["--input-format", "medic-biosyn", "--input", DATA / "medic" / "medic_06Jul2012.txt"], "disease-medic.json"),
    "Chemical": (
        [
            "--input-format",
            "mesh-tsv",
            "--input",
            DATA / "mesh" / "data_mesh_thesaurus.tsv.gz",
            DATA / "mesh" / "data_mesh_trees.tsv",
            "--tree-include",
            "D",
        ],
        "chemical-mesh.json",
    ),
}


def sh(args: list) -> None:
    print("$", " ".join(str(a) for a in args), flush=True)
    subprocess.run([str(a) for a in args], check=True, cwd=ROOT)


@functools.cache
def model_tag(model: str) -> str:
    """A short name for the model's weights (its fingerprint), so a retrained model gets outputs of its own."""
    from bioel_core.models import open_model

    return open_model(model).fingerprint()[:12]


def built(folder: Path) -> bool:
    """A finished output of this bioel's schema version (a cache from an older version is built again)."""
    from schemas import SCHEMA_VERSION

    manifest = folder / "manifest.json"
    return manifest.is_file() and json.loads(manifest.read_text()).get("schema_version") == SCHEMA_VERSION


def built_from(folder: Path, source_key: str, source: Path) -> bool:
    """`built`, from the version of `source` there is now (its manifest records the one it read under `source_key`)."""
    from bioel_core.embeddings import is_version_of

    return built(folder) and is_version_of(
        json.loads((folder / "manifest.json").read_text())[source_key]["manifest_sha256"], source
    )


def prepare(work: Path, model: str, type_models: dict[str, str] | None = None) -> dict[str, dict[str, Path]]:
    """Entity type -> {"kb", "index", "stop_list", "model"}, built once into `work`, each type's index with its model
    in `type_models` or else `model`."""
    from bioel_core.normalize import Normalizer

    out = {}
    for entity_type, (ingest_flags, stop_list) in KBS.items():
        type_model = (type_models or {}).get(entity_type, model)
        tag = model_tag(type_model)
        kb = work / f"{entity_type}-kb"
        emb, idx = work / f"{entity_type}-emb-{tag}", work / f"{entity_type}-index-{tag}"
        # a KB ingested under another normalizer than today's default (an older bioel) fails the stop lists; embeddings
        # or an index made from another version of their input are refused by link: each is rebuilt
        if not built(kb) or json.loads((kb / "manifest.json").read_text())["normalizer"]["version"] != Normalizer().version:
            sh(BIOEL + ["ingest-kb", *ingest_flags, "--output", kb, "--no-quality"])
        if not built_from(emb, "names", kb):
            sh(BIOEL + ["embed", "--model", type_model, "--input", kb, "--output", emb, "--no-quality"])
        if not built_from(idx, "embeddings", emb):
            sh(
                BIOEL
                + ["build-index", "--input", emb, "--output", idx, "--num-shards", "2", "--index-kind", "flat", "--no-quality"]
            )
        out[entity_type] = {"kb": kb, "index": idx, "stop_list": STOP_LISTS / stop_list, "model": type_model}
    return out


def annotator_flags(kbs: dict[str, dict[str, Path]], model: str) -> list[str]:
    """The `--model`, `--index` and `--stop-list` flags of `bioel link` / `calibrate-nil` for the prepared KBs:
    `model` for every type, `--model TYPE=DIR` for a type whose index another model built."""
    own = [f"{t}={kb['model']}" for t, kb in kbs.items() if kb["model"] != model]
    return [
        "--model",
        model,
        *own,
        "--index",
        *[f"{t}={kb['index']}" for t, kb in kbs.items()],
        "--stop-list",
        *[f"{t}={kb['stop_list']}" for t, kb in kbs.items()],
    ]
