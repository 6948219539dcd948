"""`TransformerEncoder`: any local Hugging Face checkpoint (MiniLM, SapBERT, PubMedBERT) with CLS or mean pooling.

CLS pooling is SapBERT's choice (the [CLS] state of the last layer); mean pooling averages the real tokens
(what sentence-transformers' MiniLM was trained with). Weights are read from safetensors only.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModel

from bioel_core.models.base import Encoder, stored, write_config
from bioel_core.models.checkpoints import load_tokenizer, require_hf_checkpoint

POOLINGS = ("cls", "mean")


class TransformerEncoder(Encoder):
    encoder_type = "transformer"

    def __init__(self, checkpoint_dir: str | Path, pooling: str = "cls", max_length: int = 25):
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        checkpoint_dir = require_hf_checkpoint(checkpoint_dir)
        super().__init__(load_tokenizer(checkpoint_dir), max_length)
        # float32 whatever the stored dtype: a float16 folder is upcast for CPU inference and training.
        self.model = AutoModel.from_pretrained(checkpoint_dir, local_files_only=True, use_safetensors=True,
                                               dtype=torch.float32)
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
        return {"encoder_type": self.encoder_type, "pooling": self.pooling, "max_length": self.max_length,
                "model_type": self.model.config.model_type, "dim": self.dim}

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
