"""`TransformerEncoder`: any local Hugging Face checkpoint (MiniLM, SapBERT, PubMedBERT) with CLS or mean pooling.

CLS pooling is SapBERT's choice (the [CLS] state of the last layer); mean pooling averages the real tokens
(what sentence-transformers' MiniLM was trained with). A sentence-transformers folder declares its own (its
modules.json and Pooling config), which is then the default. Weights are read from safetensors only.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import normalizers

from bioel_core.guards import read_json_object
from bioel_core.models.base import Encoder, stored, write_config
from bioel_core.models.checkpoints import (
    MODULES_FILE,
    check_positions,
    hf_checkpoint_folder,
    load_hf_model,
    load_tokenizer,
    require_hf_checkpoint,
    sentence_transformers_modules,
)

POOLINGS = ("cls", "mean")
# sentence-transformers' Pooling config: `pooling_mode` (a mode or a list of them, concatenated) since version 6,
# before it a flag per mode (none set: mean)
_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_ST_CONFIG = "config_sentence_transformers.json"


def sentence_transformers_settings(folder: str | Path) -> dict:
    """What a sentence-transformers folder declares about its vectors, as this encoder's settings: "pooling", and
    "max_length" and "lowercase" where its Transformer module says (max_seq_length, do_lower_case); {} for any
    other folder. What bioel would not reproduce is refused in one line naming the folder: a module besides
    Transformer, Pooling and Normalize, a pooling besides cls and mean, a default prompt, a similarity other than
    cosine."""
    modules = sentence_transformers_modules(folder)
    if not modules:
        return {}
    folder, transformer = Path(folder), hf_checkpoint_folder(folder)
    settings, normalized = {}, False
    for kind, where in modules[1:]:
        if kind == "Pooling" and "pooling" not in settings:
            settings["pooling"] = _declared_pooling(folder, where)
        elif kind == "Normalize" and "pooling" in settings:
            normalized = True  # bioel's vectors are unit vectors anyway
        else:
            raise ValueError(
                f"{folder}: its sentence-transformers module {kind} ({where.relative_to(folder)}, "
                f"{MODULES_FILE}) is not supported; bioel reads a Transformer, then cls or mean Pooling, "
                f"then optionally Normalize"
            )
    if "pooling" not in settings:
        raise ValueError(
            f"{folder}: a sentence-transformers folder with no Pooling module ({MODULES_FILE}), so no sentence vectors"
        )
    # sentence_bert_config.json; folders of early versions name it after the architecture (sentence_roberta_config.json)
    for path in sorted(transformer.glob("sentence_*_config.json"))[:1]:
        config = read_json_object(path, "sentence-transformers Transformer config")
        if config.get("max_seq_length"):
            settings["max_length"] = int(config["max_seq_length"])
        if config.get("do_lower_case"):
            settings["lowercase"] = True
    path = folder / _ST_CONFIG
    config = read_json_object(path, "sentence-transformers config") if path.is_file() else {}
    if config.get("default_prompt_name"):
        raise ValueError(
            f"{folder}: declares a default prompt ({config['default_prompt_name']!r}, {_ST_CONFIG}) put "
            f"before every text; bioel encodes texts as they are"
        )
    similarity = config.get("similarity_fn_name")
    # on unit vectors (a Normalize module) the dot product is the cosine
    if similarity not in (None, "cosine") and not (similarity == "dot" and normalized):
        raise ValueError(f"{folder}: declares {similarity} similarity ({_ST_CONFIG}); bioel ranks by the cosine")
    return settings


def _declared_pooling(folder: Path, module: Path) -> str:
    path = module / "config.json"
    config = read_json_object(path, "sentence-transformers Pooling config")
    if "pooling_mode" in config:
        declared = config["pooling_mode"]
        modes = list(declared) if isinstance(declared, list) else [declared]
    else:
        modes = [mode for flag, mode in _POOLING_FLAGS.items() if config.get(flag)] or ["mean"]
    if len(modes) != 1 or modes[0] not in POOLINGS:
        raise ValueError(
            f"{folder}: its sentence-transformers Pooling ({path.relative_to(folder)}) is {' + '.join(map(str, modes))} "
            f"pooling; bioel pools with cls or mean"
        )
    return modes[0]


class TransformerEncoder(Encoder):
    encoder_type = "transformer"

    def __init__(self, checkpoint_dir: str | Path, pooling: str | None = None, max_length: int = 25):
        """`pooling`: cls or mean; by default what a sentence-transformers folder declares, else cls."""
        declared = sentence_transformers_settings(checkpoint_dir)
        pooling = pooling or declared.get("pooling", "cls")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        checkpoint_dir = require_hf_checkpoint(checkpoint_dir)
        tokenizer = load_tokenizer(checkpoint_dir)
        if declared.get("lowercase"):  # sentence-transformers lowercases the texts before its tokenizer sees them
            backend = tokenizer.backend_tokenizer
            backend.normalizer = normalizers.Sequence(
                [normalizers.Lowercase()] + ([backend.normalizer] if backend.normalizer else [])
            )
        super().__init__(tokenizer, min(max_length, declared.get("max_length", max_length)))
        # float32 whatever the stored dtype: a float16 folder is upcast for CPU inference and training.
        self.model = load_hf_model(checkpoint_dir, tokenizer)
        check_positions(checkpoint_dir, self.model, self.max_length)
        self.pooling = pooling

    @property
    def dim(self) -> int:
        return self.model.config.hidden_size

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        states = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if self.pooling == "cls":
            return states[:, 0]
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        return (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)

    def config(self) -> dict:
        return {
            "encoder_type": self.encoder_type,
            "pooling": self.pooling,
            "max_length": self.max_length,
            "model_type": self.model.config.model_type,
            "dim": self.dim,
        }

    def weights(self) -> dict[str, torch.Tensor]:
        return self.model.state_dict()

    def save(self, directory: str | Path, dtype: str = "float32") -> Path:
        """HF model (safetensors) + tokenizer + bioel_encoder.json; dtype="float16" halves the size on disk."""
        state = stored(self.weights(), dtype)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory, state_dict=state)
        self.tokenizer.save_pretrained(directory)
        write_config(directory, {**self.config(), "storage_dtype": dtype})
        return directory

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> TransformerEncoder:
        config = cls.folder_config(directory)
        return cls(directory, pooling=config["pooling"], max_length=config["max_length"]).to(device)
