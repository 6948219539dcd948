"""Text encoders (`Encoder`): a transformer over any local HF checkpoint and the ResCNN, saved as folders, and
ensembles of them (references to member folders); beside them, models that are not name encoders: the collective
document model, the cross-encoder reranker and the generative (seq2seq) linker.

Every model folder is opened by `open_model(folder, role=...)`: the folder's kind (KINDS: name encoder, document
model, reranker, generative model; read from its config before anything is loaded) is checked against what the
role takes (ROLES), in one place with one wording (`check_kind`), and the typed model of that kind is returned.
`load_encoder` loads any folder by its type, unchecked (training reads back its own checkpoints with it)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch

from bioel_core.models.base import CONFIG_FILE, RERANKER_ENSEMBLE, Encoder, read_config
from bioel_core.models.cards import check_fingerprint
from bioel_core.settings.fields import SettingsError
from bioel_core.models.checkpoints import MODULES_FILE, UnsafeCheckpointError, default_base_checkpoint
from bioel_core.models.collective import CollectiveEncoder
from bioel_core.models.cross_encoder import CrossEncoder
from bioel_core.models.ensemble import EnsembleEncoder, MemberChangedError
from bioel_core.models.generative import GenerativeModel
from bioel_core.models.rescnn import EmbeddingMismatchError, ResCNNEncoder
from bioel_core.models.transformer import TransformerEncoder

ENCODERS: dict[str, type] = {
    cls.encoder_type: cls
    for cls in (TransformerEncoder, ResCNNEncoder, EnsembleEncoder, CollectiveEncoder, CrossEncoder, GenerativeModel)
}
NAME_ENCODER, DOCUMENT_MODEL, RERANKER, GENERATIVE = "name encoder", "document model", "reranker", "generative model"
# a model folder's kind by its config's encoder_type (a plain HF checkpoint, with no bioel config, is a name encoder)
KINDS = {
    TransformerEncoder.encoder_type: NAME_ENCODER,
    ResCNNEncoder.encoder_type: NAME_ENCODER,
    EnsembleEncoder.encoder_type: NAME_ENCODER,
    CollectiveEncoder.encoder_type: DOCUMENT_MODEL,
    CrossEncoder.encoder_type: RERANKER,
    RERANKER_ENSEMBLE: RERANKER,
    GenerativeModel.encoder_type: GENERATIVE,
}
# the settings that name a model folder -> the kinds each takes (a generative model also reranks)
ROLES = {"model": (NAME_ENCODER, DOCUMENT_MODEL), "reranker": (RERANKER, GENERATIVE), "generative": (GENERATIVE,)}
# what a model that is not a name encoder does, for the refusal of one given as the model
_DOES = {
    CrossEncoder.encoder_type: (
        "a cross-encoder",
        "it reorders a retriever's candidates (the reranker), it does not "
        "embed texts; give it as the reranker and a name encoder as the model or retriever",
    ),
    GenerativeModel.encoder_type: (
        "a generative model",
        "it writes names (generative linking) or reorders a retriever's candidates (the reranker), it does not embed texts",
    ),
    RERANKER_ENSEMBLE: (
        "an ensemble of rerankers",
        "it reorders a retriever's candidates (the reranker), it does not embed texts",
    ),
}
# what the other roles need, for the refusal of another kind
_NEEDS = {
    "reranker": "a reranker is a cross-encoder, a generative model or an ensemble of them (made by `bioel train` "
    "and `bioel ensemble`)",
    "generative": "generative linking needs a generative model (made by `bioel train`)",
}
SHIPPED_PACKAGE = "bioel_models"  # the wheel's copy of the checkout's models/ (setup.py: package_dir)


def shipped_path(relative: str) -> Path:
    """A shipped model or stop-list (`disease-default`, `stoplists/disease-medic.json`): in the checkout's
    models/ folder, else in the installed package's data (the wheel carries the default model and the stop-lists)."""
    checkout = Path(__file__).resolve().parents[2] / "models" / relative
    if checkout.exists():
        return checkout
    spec = importlib.util.find_spec(SHIPPED_PACKAGE)
    installed = Path(next(iter(spec.submodule_search_locations))) / relative if spec and spec.submodule_search_locations else None
    return installed if installed is not None and installed.exists() else checkout


# BIOEL_DEFAULT_MODEL names another default (a worker image's own model folder)
DEFAULT_MODEL = Path(os.environ.get("BIOEL_DEFAULT_MODEL") or shipped_path("disease-default"))


def resolve_device(requested: str) -> str:
    """`auto` -> cuda when a CUDA device is visible, else cpu; an explicit cuda[:N] without one is an error
    here rather than a torch failure deep inside the first batch."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:  # here, not in embed's workers once the pipeline has started (torch's error, under a traceback)
        torch.device(requested)
    except RuntimeError:
        raise SettingsError("device", f"{requested}: not a device (cpu, cuda, cuda:N or auto)") from None
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise SettingsError("device", f"{requested}: no CUDA device is available here")
    return requested


def load_encoder(directory: str | Path, device: str | torch.device = "cpu") -> Encoder:
    """A saved model folder, by its `encoder_type`, checked against its card's fingerprint; a plain HF checkpoint
    folder loads as a TransformerEncoder (with the pooling a sentence-transformers folder declares, else CLS)."""
    directory = Path(directory)
    if not (directory / CONFIG_FILE).is_file() and (
        (directory / "config.json").is_file() or (directory / MODULES_FILE).is_file()
    ):
        return TransformerEncoder(directory).to(device)
    encoder_type = read_config(directory).get("encoder_type")
    if encoder_type not in ENCODERS:
        raise ValueError(f"{directory}: unknown encoder_type {encoder_type!r}; known: {sorted(ENCODERS)}")
    model = ENCODERS[encoder_type].load(directory, device)
    check_fingerprint(directory, model)
    return model


def check_kind(folder: str | Path, role: str = "model") -> str | None:
    """The folder's encoder_type (None: a plain HF checkpoint, a name encoder), after refusing, before anything is
    loaded, a model of a kind `role` (a ROLES key: the setting that names the folder) does not take."""
    folder = Path(folder)
    if not (folder / CONFIG_FILE).is_file():
        if role == "model":
            return None
        raise ValueError(f"{folder}: not a model folder (no {CONFIG_FILE}); the {role} is a bioel model folder")
    found = read_config(folder).get("encoder_type")
    if KINDS.get(found) in ROLES[role]:
        return found
    if role == "model" and found in _DOES:
        raise ValueError(f"{folder} is {_DOES[found][0]}: {_DOES[found][1]}")
    if found not in KINDS:
        raise ValueError(f"{folder}: unknown encoder_type {found!r}; known: {sorted(KINDS)}")
    raise ValueError(f"{folder}: a {found} model; {_NEEDS[role]}")


def open_encoder(folder: str | Path, pooling: str | None = None, device: str | torch.device = "cpu") -> Encoder:
    """A name encoder or document model folder (its pooling fixed by its config), or a plain HF checkpoint read with
    `pooling` (default: what a sentence-transformers folder declares, else cls, as SapBERT)."""
    folder = Path(folder)
    if check_kind(folder, "model") is None:
        return TransformerEncoder(folder, pooling=pooling).to(device)
    if pooling is not None:
        raise SettingsError(
            "pooling", f"{folder} is a bioel model folder: its pooling is fixed by its config; leave the pooling out"
        )
    return load_encoder(folder, device)


def model_folder(model: str | Path | None) -> Path:
    """The folder a model setting names, the shipped default when none is given."""
    return (Path(model) if model else DEFAULT_MODEL).resolve()


def open_model(model: str | Path | None, pooling: str | None = None, device: str | torch.device = "cpu", *, role: str = "model"):
    """The one way every verb opens a model folder, as the model of its kind: for the `model` role (default: the
    shipped disease model) a name encoder or document model (an Encoder; `open_encoder`); for `reranker` a
    CrossEncoder or GenerativeModel (an ensemble of rerankers is opened by bioel_core.linking.rerank.open_reranker,
    over its members); for `generative` a GenerativeModel."""
    if role != "model":
        check_kind(model, role)  # a missing folder: not a model folder
        return load_encoder(model, device)
    folder = model_folder(model)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"model folder not found: {folder}"
            + ("" if model else " (the default disease model is not shipped in this checkout)")
        )
    return open_encoder(folder, pooling, device)


__all__ = [
    "DOCUMENT_MODEL",
    "GENERATIVE",
    "KINDS",
    "NAME_ENCODER",
    "RERANKER",
    "ROLES",
    "CollectiveEncoder",
    "CrossEncoder",
    "DEFAULT_MODEL",
    "ENCODERS",
    "EmbeddingMismatchError",
    "Encoder",
    "EnsembleEncoder",
    "GenerativeModel",
    "MemberChangedError",
    "ResCNNEncoder",
    "TransformerEncoder",
    "UnsafeCheckpointError",
    "check_kind",
    "default_base_checkpoint",
    "load_encoder",
    "model_folder",
    "open_encoder",
    "open_model",
    "resolve_device",
    "shipped_path",
]
