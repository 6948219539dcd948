"""The `Encoder` interface: texts -> L2-normalized float32 vectors, saved and loaded as a folder.

A model folder holds `bioel_encoder.json` (our config, with `encoder_type`), safetensors weights and the
tokenizer files. Subclasses supply `forward`, `dim`, `config`, `weights`, `save` and `load`; tokenization,
batched encoding and the fingerprint are shared here.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import json
from collections import OrderedDict
from copy import deepcopy
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from bioel_core.guards import read_json_object
from bioel_core.progress import bar as progress_bar

CONFIG_FILE = "bioel_encoder.json"  # not config.json: a transformer folder also holds HF's config.json
WEIGHTS_FILE = "model.safetensors"
STORAGE_DTYPES = {"float32": torch.float32, "float16": torch.float16}
# the encoder_type of an ensemble of rerankers (linking.rerank_ensemble): a folder `bioel ensemble` makes, not an Encoder
RERANKER_ENSEMBLE = "reranker-ensemble"
# batch-invariant vectors kept per encoder (a vector is then a function of its text alone, so a kept one is exact):
# mentions repeat across the documents of a corpus; 65,536 vectors of 768 floats stay under 200 MB
KEPT_QUERY_VECTORS = 65_536


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """The raw bytes of a tensor (any dtype, bfloat16 included), for hashing."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy())


def stored(tensors: dict[str, torch.Tensor], dtype: str) -> dict[str, torch.Tensor]:
    """`tensors` as a model folder stores them: on the CPU, contiguous, the floating ones in `dtype` (STORAGE_DTYPES)."""
    if dtype not in STORAGE_DTYPES:
        raise ValueError(f"dtype must be one of {sorted(STORAGE_DTYPES)}, got {dtype!r}")
    return {
        k: (t.detach().to("cpu", STORAGE_DTYPES[dtype]) if t.is_floating_point() else t.detach().cpu()).contiguous()
        for k, t in tensors.items()
    }


# what a recorded fingerprint covers: 2 since bioel 0.2 (the tokenizer too); cards written before record none
FINGERPRINT_SCHEME = 2


def tokenizer_digest(tokenizer) -> str:
    """sha256 of what an HF fast tokenizer does: its Rust pipeline (normalizer, pre-tokenizer, vocabulary,
    post-processor, added tokens) and the ids of its special tokens. Truncation and padding are left out: each
    model sets its own from its config."""
    special = {
        role: tokenizer.convert_tokens_to_ids(token)
        for role, token in tokenizer.special_tokens_map.items()
        if isinstance(token, str)
    }
    return _pipeline_digest(tokenizer.backend_tokenizer.to_str(), tuple(sorted(special.items())))


@functools.lru_cache(maxsize=16)
def _pipeline_digest(pipeline: str, special_ids: tuple[tuple[str, int], ...]) -> str:
    # kept per serialized pipeline: the canonical dump of a 30,000-piece vocabulary takes 50 ms, and opening a
    # linker fingerprints the same few tokenizers a dozen times (model, name encoder, index and card checks)
    spec = json.loads(pipeline)
    spec.pop("truncation", None)
    spec.pop("padding", None)
    blob = json.dumps({"pipeline": spec, "special_ids": dict(special_ids)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def fingerprint_of(config: dict, weights: dict[str, torch.Tensor], tokenizer, *parts: str) -> str:
    """sha256 over a model's config, tokenizer (`tokenizer_digest`), weights (names, dtypes, shapes, bytes) and
    the fingerprints of the models it holds (`parts`): what identifies a model folder. The tokenizer belongs in it:
    the same weights behind another vocabulary or normalizer give other vectors for the same text."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    digest.update(tokenizer_digest(tokenizer).encode())
    for part in parts:
        digest.update(part.encode())
    for name, tensor in sorted(weights.items()):
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor_bytes(tensor))
    return digest.hexdigest()


def float64_copy(module: torch.nn.Module) -> torch.nn.Module:
    """`module` in float64 for batch-invariant inference, made once and kept on it (outside its parameters, so it
    is never saved); for a model whose weights no longer change."""
    copy = module.__dict__.get("_float64")
    if copy is None:
        copy = deepcopy(module).double().eval()
        module.__dict__["_float64"] = copy
    return copy


def read_config(directory: str | Path, encoder_type: str | None = None) -> dict:
    """The folder's config; with `encoder_type`, checked to be of that type."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory}: no {CONFIG_FILE} (not a bioel model folder)")
    config = read_json_object(path, "bioel model config")
    if encoder_type is not None and config.get("encoder_type") != encoder_type:
        raise ValueError(f"{directory}: encoder_type {config.get('encoder_type')!r}, expected {encoder_type!r}")
    return config


def write_config(directory: Path, config: dict) -> None:
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


class Encoder(torch.nn.Module, metaclass=abc.ABCMeta):
    encoder_type: ClassVar[str]

    def __init__(self, tokenizer, max_length: int):
        super().__init__()
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise TypeError(f"{type(tokenizer).__name__} has no fast (tokenizers) backend; a fast tokenizer is required")
        self.tokenizer = tokenizer  # the HF tokenizer: what save() writes
        self.max_length = max_length
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        # A private copy of the Rust tokenizer: ~1.6x faster than the HF wrapper on bulk encoding.
        self._fast = Tokenizer.from_str(backend.to_str())
        self._fast.no_padding()
        self._fast.enable_truncation(max_length)

    # --- subclass API -------------------------------------------------------------------------------
    @abc.abstractmethod
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(n, dim) vectors, not normalized; differentiable (training calls it)."""

    @property
    @abc.abstractmethod
    def dim(self) -> int: ...

    @abc.abstractmethod
    def config(self) -> dict:
        """JSON-able description, `encoder_type` included; with `weights()` it defines the model."""

    @abc.abstractmethod
    def weights(self) -> dict[str, torch.Tensor]:
        """The tensors `save()` stores (for ResCNN: the trainable ones only)."""

    @abc.abstractmethod
    def save(self, directory: str | Path, dtype: str = "float32") -> Path: ...

    @classmethod
    @abc.abstractmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> Encoder: ...

    # --- shared -------------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """WordPiece ids with special tokens, truncated to max_length, unpadded."""
        return [e.ids for e in self._fast.encode_batch(list(texts))]

    def pad(self, ids: list[list[int]]) -> dict[str, torch.Tensor]:
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        width = int(lengths.max()) if len(ids) else 0
        input_ids = np.array([x + [self.pad_id] * (width - len(x)) for x in ids], dtype=np.int64).reshape(len(ids), width)
        mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
        device = self.device
        return {"input_ids": torch.from_numpy(input_ids).to(device), "attention_mask": torch.from_numpy(mask).to(device)}

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """A padded batch on the module's device: the keyword arguments of `forward`."""
        return self.pad(self.token_ids(texts))

    @torch.inference_mode()
    def encode(
        self, texts: list[str], batch_size: int = 256, show_progress: bool = False, batch_invariant: bool = False
    ) -> np.ndarray:
        """(n, dim) float32, L2-normalized, in input order.

        `batch_invariant`: computed in float64 and rounded to float32, so a text's vector does not depend on
        the other texts of its batch, the batch size or the thread count. The float32 kernels' summation
        order changes with the batch's shape (a few ulps); float64's rounding noise lies about nine orders
        of magnitude below float32's, so rounding removes it. For queries whose scores must be reproducible
        (bulk linking); several times slower on CPU, so the vectors of recently seen texts are kept (an encoder
        whose weights no longer change, as its float64 copy assumes)."""
        if batch_invariant:
            return self._kept_invariant(texts, batch_size, show_progress)
        return self._encode(self, texts, batch_size, show_progress)

    def _kept_invariant(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        """Batch-invariant vectors, those of texts seen recently taken from a bounded store (least recently
        used out first)."""
        kept: OrderedDict = self.__dict__.setdefault("_kept", OrderedDict())
        new = [t for t in dict.fromkeys(texts) if t not in kept]
        if new:
            kept.update(zip(new, self._encode(self.float64_copy(), new, batch_size, show_progress, batch_invariant=True)))
        out = np.stack([kept[t] for t in texts]) if texts else np.empty((0, self.dim), dtype=np.float32)
        for t in texts:
            kept.move_to_end(t)
        while len(kept) > KEPT_QUERY_VECTORS:
            kept.popitem(last=False)
        return out

    def _encode(
        self, module, texts: list[str], batch_size: int, show_progress: bool, batch_invariant: bool = False
    ) -> np.ndarray:
        ids = self.token_ids(texts)
        # Batches of similar token length waste little compute on padding.
        order = np.argsort(np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids)), kind="stable")
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        was_training = self.training
        self.eval()
        try:
            for start in progress_bar(range(0, len(ids), batch_size), show=show_progress, desc="encode", unit="batch"):
                rows = order[start : start + batch_size]
                vectors = module(**self.pad([ids[i] for i in rows]))
                vectors = vectors.double() if batch_invariant else vectors.float()
                out[rows] = F.normalize(vectors, dim=-1).float().cpu().numpy()
        finally:
            self.train(was_training)
        return out

    def float64_copy(self) -> Encoder:
        return float64_copy(self)

    def fingerprint(self) -> str:
        """sha256 over the config, the tokenizer and the saved weights: equal before and after a save/load round trip."""
        return fingerprint_of(self.config(), self.weights(), self.tokenizer)

    def vectors_fingerprint(self) -> str:
        """The fingerprint of what makes this model's name vectors (what embed records and link checks): a name
        encoder's own."""
        return self.fingerprint()

    @classmethod
    def folder_config(cls, directory: str | Path) -> dict:
        """The folder's config, checked to be of this class's encoder_type."""
        return read_config(directory, cls.encoder_type)
