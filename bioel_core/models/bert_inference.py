"""A document model's BERT encoder read for inference, without transformers' modeling code.

`bioel link` runs one BERT encoder (the collective model's document side) over each document window. transformers'
`BertModel` does the same arithmetic, but importing its modeling code takes 3-5 s of every link worker's start-up
(it pulls in torch.distributed, torch._dynamo and scipy). `BertForInference` runs the same operations in the same
order (embeddings summed as BertModel sums them, SDPA attention without a mask, exact GELU, post-layer norms), so its
token states are the same bits: tests/test_bert_inference.py holds it to `BertModel` bit for bit, and
benchmarks/RESULTS.md has the start-up it buys (the pass itself runs at the same speed).

It reads config.json and the safetensors weights itself, under BertModel's parameter names (so a model's fingerprint,
`state_dict` and saved folder are what transformers gives), and only a plain BERT: absolute positions, GELU, an
encoder without cross-attention. Anything else is None from `from_folder`, and the caller loads the folder with
transformers. Training never uses it (no dropout, no gradients).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

WEIGHTS_FILE = "model.safetensors"
_EMBEDDINGS = (
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight",
    "embeddings.LayerNorm.bias",
)
_LAYER = tuple(
    f"{part}.{kind}"
    for part in (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "attention.output.LayerNorm",
        "intermediate.dense",
        "output.dense",
        "output.LayerNorm",
    )
    for kind in ("weight", "bias")
)
_POOLER = ("pooler.dense.weight", "pooler.dense.bias")


class Output(NamedTuple):
    last_hidden_state: torch.Tensor  # (1, n, hidden)


def is_plain_bert(config: dict) -> bool:
    """Whether `BertForInference` computes what transformers' BertModel does for this config.json."""
    return (
        config.get("model_type") == "bert"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and config.get("hidden_act", "gelu") == "gelu"
        and not config.get("is_decoder", False)
        and not config.get("add_cross_attention", False)
        and config.get("_attn_implementation", config.get("attn_implementation")) in (None, "sdpa")
        and not config.get("chunk_size_feed_forward", 0)
        and config.get("hidden_size", 768) % config.get("num_attention_heads", 12) == 0
    )


class BertSettings(SimpleNamespace):
    """A BERT config.json's settings as attributes, what BertConfig gives the code here, without importing
    transformers (a second of a link worker's start-up); `save_pretrained` writes them through BertConfig."""

    REQUIRED = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "layer_norm_eps")

    @classmethod
    def of(cls, config: dict) -> BertSettings | None:
        """None when config.json leaves one of REQUIRED to BertConfig's defaults."""
        return cls(**config) if all(key in config for key in cls.REQUIRED) else None

    def save_pretrained(self, directory: str | Path) -> None:
        from transformers import BertConfig

        BertConfig.from_dict(vars(self)).save_pretrained(directory)


class BertForInference(torch.nn.Module):
    """BERT's encoder over one unpadded sequence: `forward(input_ids)` -> Output(last_hidden_state)."""

    def __init__(self, config: BertSettings, weights: dict[str, torch.Tensor]):
        super().__init__()
        self.config = config
        for name, tensor in weights.items():
            *path, leaf = name.split(".")
            module: torch.nn.Module = self
            for part in path:
                if part not in module._modules:
                    module.add_module(part, torch.nn.Module())
                module = module.get_submodule(part)
            module.register_parameter(leaf, torch.nn.Parameter(tensor, requires_grad=False))
        self.heads = config.num_attention_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        self._weights: dict[str, torch.Tensor] | None = None  # by name: get_parameter walks the modules each call

    def _apply(self, fn, recurse=True):  # .to(), .float() and the like may give other tensors
        self._weights = None
        return super()._apply(fn, recurse)

    @classmethod
    def from_folder(cls, folder: str | Path) -> BertForInference | None:
        """The folder's BERT (config.json, model.safetensors, float32), or None when it is not a plain BERT, keeps its
        weights otherwise (sharded) or lacks one BertModel needs: the caller then loads it with transformers, which
        reads any layout and says what is wrong."""
        folder = Path(folder)
        config_dict = json.loads((folder / "config.json").read_text())
        config = BertSettings.of(config_dict)
        if config is None or not is_plain_bert(config_dict) or not (folder / WEIGHTS_FILE).is_file():
            return None
        stored = load_file(str(folder / WEIGHTS_FILE))
        names = [*_EMBEDDINGS, *(f"encoder.layer.{i}.{k}" for i in range(config.num_hidden_layers) for k in _LAYER)]
        if any(n not in stored for n in names):  # a checkpoint saved with a task head ("bert." keys), or incomplete
            return None
        if all(n in stored for n in _POOLER):  # kept as BertModel keeps it: part of the fingerprint
            names += _POOLER
        return cls(config, {n: stored[n].to(torch.float32) for n in names})

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> Output:
        """`attention_mask`, if given, must be all ones: one sequence, no padding (what a document window is)."""
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError("BertForInference reads one unpadded sequence: its attention mask must be all ones")
        n, hidden, eps = input_ids.shape[1], self.config.hidden_size, self.config.layer_norm_eps
        if self._weights is None:
            self._weights = dict(self.named_parameters())
        w = self._weights.__getitem__

        def linear(x: torch.Tensor, name: str) -> torch.Tensor:
            return F.linear(x, w(f"{name}.weight"), w(f"{name}.bias"))

        def norm(x: torch.Tensor, name: str) -> torch.Tensor:
            return F.layer_norm(x, (hidden,), w(f"{name}.weight"), w(f"{name}.bias"), eps)

        # BertModel's order: word + token type 0, then + position
        x = F.embedding(input_ids, w("embeddings.word_embeddings.weight")) + w("embeddings.token_type_embeddings.weight")[0]
        x = norm(x + w("embeddings.position_embeddings.weight")[:n], "embeddings.LayerNorm")
        shape = (input_ids.shape[0], n, self.heads, self.head_size)
        for i in range(self.config.num_hidden_layers):
            layer = f"encoder.layer.{i}"
            q, k, v = (linear(x, f"{layer}.attention.self.{p}").view(shape).transpose(1, 2) for p in ("query", "key", "value"))
            a = F.scaled_dot_product_attention(q, k, v, scale=self.head_size**-0.5).transpose(1, 2).reshape(x.shape)
            a = norm(linear(a, f"{layer}.attention.output.dense") + x, f"{layer}.attention.output.LayerNorm")
            h = F.gelu(linear(a, f"{layer}.intermediate.dense"))
            x = norm(linear(h, f"{layer}.output.dense") + a, f"{layer}.output.LayerNorm")
        return Output(x)

    def save_pretrained(self, directory: str | Path, state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """config.json and model.safetensors, as transformers saves a BertModel (it loads them back)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.config.save_pretrained(directory)
        weights = self.state_dict() if state_dict is None else state_dict
        save_file({k: v.contiguous() for k, v in weights.items()}, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
