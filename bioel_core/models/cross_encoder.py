"""`CrossEncoder`: a transformer that reads a mention and a candidate concept together and scores the pair.

A bi-encoder (the dense linker) embeds mention and names apart and compares vectors; a cross-encoder attends
across both texts, so it can weigh which words of the mention each name accounts for. That is too slow to
search a dictionary, and exactly right to reorder the few concepts a retriever returns
(bioel_core.linking.rerank). Input: `[CLS] mention [SEP] names of the concept [SEP]`; the score is a linear
head on the [CLS] state. Past `max_length` the longer side is cut first (usually the concept's last names).

A folder like every model: `bioel_encoder.json` (encoder_type "cross-encoder"), the HF model and tokenizer
(safetensors), the head in `head.safetensors`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from bioel_core.models.base import fingerprint_of, float64_copy, read_config, stored, write_config
from bioel_core.models.checkpoints import check_positions, load_hf_model, load_tokenizer, require_hf_checkpoint

HEAD_FILE = "head.safetensors"


class CrossEncoder(torch.nn.Module):
    encoder_type = "cross-encoder"

    def __init__(self, checkpoint_dir: str | Path, max_length: int = 64, dropout: float = 0.1, retriever_weight: float = 0.0):
        """`retriever_weight`: how much of the retriever's score a rerank stage adds to this model's (chosen on dev
        after training; part of the config, so of the fingerprint)."""
        super().__init__()
        self.retriever_weight = retriever_weight
        checkpoint_dir = require_hf_checkpoint(checkpoint_dir)
        self.tokenizer = load_tokenizer(checkpoint_dir)
        self.model = load_hf_model(checkpoint_dir, self.tokenizer)
        check_positions(checkpoint_dir, self.model, max_length)
        self.max_length, self.dropout_p = max_length, dropout
        self.dropout = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(self.model.config.hidden_size, 1)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self._fast = Tokenizer.from_str(self.tokenizer.backend_tokenizer.to_str())
        self._fast.no_padding()
        # the longer text loses tokens first: the concept's later names, and a mention only when it is the longer
        self._fast.enable_truncation(max_length, strategy="longest_first")

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        """(n,) scores, differentiable."""
        states = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        return self.head(self.dropout(states[:, 0])).squeeze(-1)

    def encode_pairs(self, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        """(token ids, segment ids) per (mention, concept text), unpadded."""
        return [(e.ids, e.type_ids) for e in self._fast.encode_batch(list(pairs))]

    def pad(self, encoded: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
        width = max((len(ids) for ids, _ in encoded), default=0)
        input_ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)
        types = torch.zeros((len(encoded), width), dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for i, (ids, type_ids) in enumerate(encoded):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            types[i, : len(ids)] = torch.tensor(type_ids)
            mask[i, : len(ids)] = 1
        device = self.device
        return {"input_ids": input_ids.to(device), "attention_mask": mask.to(device), "token_type_ids": types.to(device)}

    def tokenize(self, pairs: list[tuple[str, str]]) -> dict[str, torch.Tensor]:
        """A padded batch on the module's device: the keyword arguments of `forward`."""
        return self.pad(self.encode_pairs(pairs))

    @torch.inference_mode()
    def score(self, pairs: list[tuple[str, str]], batch_size: int = 128, batch_invariant: bool = False) -> np.ndarray:
        """(n,) float32 scores, in input order; pairs of similar length are batched together (little padding).

        `batch_invariant`: computed in float64 and rounded to float32, so a pair's score does not depend on the
        other pairs of its batch (as `Encoder.encode`'s option): near-tied concepts then keep one order whatever
        the batching, the worker count or the thread count. Several times slower on CPU."""
        module = float64_copy(self) if batch_invariant else self
        encoded = self.encode_pairs(pairs)
        order = np.argsort(np.fromiter((len(ids) for ids, _ in encoded), dtype=np.int64, count=len(encoded)), kind="stable")
        out = np.empty(len(encoded), dtype=np.float32)
        was_training = self.training
        self.eval()
        try:
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                out[rows] = module(**self.pad([encoded[i] for i in rows])).float().cpu().numpy()
        finally:
            self.train(was_training)
        return out

    def config(self) -> dict:
        return {
            "encoder_type": self.encoder_type,
            "max_length": self.max_length,
            "dropout": self.dropout_p,
            "retriever_weight": self.retriever_weight,
            "model_type": self.model.config.model_type,
            "hidden_size": self.model.config.hidden_size,
        }

    def weights(self) -> dict[str, torch.Tensor]:
        return {
            **{f"model.{k}": v for k, v in self.model.state_dict().items()},
            **{f"head.{k}": v for k, v in self.head.state_dict().items()},
        }

    def fingerprint(self) -> str:
        return fingerprint_of(self.config(), self.weights(), self.tokenizer)

    def save(self, directory: str | Path, dtype: str = "float32") -> Path:
        """HF model + tokenizer + head (safetensors) + bioel_encoder.json; dtype="float16" halves the size on disk."""
        model, head = stored(self.model.state_dict(), dtype), stored(self.head.state_dict(), dtype)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory, state_dict=model)
        self.tokenizer.save_pretrained(directory)
        save_file(head, str(directory / HEAD_FILE))
        write_config(directory, {**self.config(), "storage_dtype": dtype})
        return directory

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> CrossEncoder:
        config = read_config(directory, cls.encoder_type)
        model = cls(
            directory,
            max_length=config["max_length"],
            dropout=config["dropout"],
            retriever_weight=config.get("retriever_weight", 0.0),
        )
        head = {k: v.float() for k, v in load_file(str(Path(directory) / HEAD_FILE)).items()}
        model.head.load_state_dict(head)
        return model.to(device).eval()
