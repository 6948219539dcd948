"""`ResCNNEncoder`: the residual CNN of "BERT might be Overkill" (Lai et al., 2021), Sec. 2.3.

WordPiece tokens -> frozen word embeddings of a BERT checkpoint -> linear projection to the block width ->
`num_blocks` encoding blocks (parallel Conv1d of kernel sizes 1/3/5 with ReLU, concatenated, a position-wise
feed-forward layer back to the width, residual connection) -> masked max or self-attention pooling.

Only the trainable weights (~1.6M) are saved; the frozen embeddings of a base inside a Python package (the packaged
MiniLM) are re-read from it, named by package + path, and those of any other base checkpoint are stored beside the
weights (FROZEN_FILE), so the folder works wherever it is copied and whatever becomes of the base; either way they are
checked against their sha256. (Models saved before stored the base's absolute path; they still load from there.)
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from bioel_core.models.base import WEIGHTS_FILE, Encoder, stored, tensor_bytes, write_config
from bioel_core.models.checkpoints import (
    check_vocabulary,
    checkpoint_reference,
    default_base_checkpoint,
    hf_checkpoint_folder,
    load_tokenizer,
    require_safetensors,
    resolve_reference,
)

POOLINGS = ("max", "attention")
_EMBEDDING = "embedding.weight"
FROZEN_FILE = "frozen_embeddings.safetensors"
_FROZEN_KEY = "word_embeddings.weight"


class EmbeddingMismatchError(ValueError):
    """The base checkpoint's word embeddings are not the ones the model was trained on."""


def read_word_embeddings(source: Path) -> torch.Tensor:
    """The `*word_embeddings.weight` tensor of a checkpoint folder (or of one safetensors file), read alone (no full
    model load), as float32."""
    files = [source] if source.is_file() else sorted(require_safetensors(source).glob("*.safetensors"))
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():
                if key.endswith(_FROZEN_KEY):
                    return handle.get_tensor(key).float()
    raise ValueError(f"{source}: no '*{_FROZEN_KEY}' tensor in its safetensors files")


def _conv(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """`conv(x)`; in float64 (batch-invariant encoding) as one matrix product over the unfolded windows: torch has no
    fast float64 convolution on CPU (its im2col loop took 1.3-5x longer on this model's shapes). The two differ by
    float64 rounding noise, which the vectors' rounding to float32 removes as it removes the batch's: the same
    vectors (tests/test_models.py)."""
    if x.dtype != torch.float64:
        return conv(x)
    (k,), (pad,) = conv.kernel_size, conv.padding
    windows = F.pad(x, (pad, pad)).unfold(2, k, 1)  # (batch, channels, length, k)
    columns = windows.permute(0, 2, 1, 3).reshape(-1, x.shape[1] * k)
    out = columns @ conv.weight.reshape(conv.out_channels, -1).T
    if conv.bias is not None:
        out += conv.bias
    return out.reshape(x.shape[0], x.shape[2], -1).transpose(1, 2)


class _Block(nn.Module):
    """Multi-width convolutions + position-wise feed-forward + residual; works on (batch, width, length)."""

    def __init__(self, width: int, filters: int, kernel_sizes: tuple[int, ...], dropout: float):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(width, filters, k, padding=k // 2) for k in kernel_sizes)
        self.feed_forward = nn.Conv1d(filters * len(kernel_sizes), width, 1)  # a 1x1 conv is a position-wise linear
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        features = torch.cat([F.relu(_conv(conv, x)) for conv in self.convs], dim=1)
        # Re-zero padding so the next block's kernels see zeros there, exactly as beyond a sequence's end:
        # this makes a text's vector independent of how long its batch neighbours are.
        return (x + self.dropout(_conv(self.feed_forward, features))) * mask


class ResCNNEncoder(Encoder):
    encoder_type = "rescnn"

    def __init__(
        self,
        base_checkpoint: str | Path | None = None,
        *,
        pooling: str = "max",
        num_blocks: int = 4,
        kernel_sizes: tuple[int, ...] = (1, 3, 5),
        filters: int = 100,
        width: int = 300,
        max_length: int = 25,
        dropout: float = 0.1,
        tokenizer_dir: str | Path | None = None,
        frozen_file: Path | None = None,
    ):
        """`base_checkpoint`: HF folder giving the WordPiece tokenizer and the frozen word embeddings (default:
        the packaged MiniLM). `tokenizer_dir`: read the tokenizer from elsewhere (a saved model folder).
        `frozen_file`: the frozen embeddings a saved model stored (FROZEN_FILE), instead of a base checkpoint."""
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if any(k % 2 == 0 for k in kernel_sizes):
            raise ValueError(f"kernel sizes must be odd to keep the sequence length, got {kernel_sizes}")
        if frozen_file is not None:
            embeddings, reference, tokenizer_source = read_word_embeddings(frozen_file), {"file": FROZEN_FILE}, tokenizer_dir
        else:
            base = hf_checkpoint_folder(base_checkpoint) if base_checkpoint is not None else default_base_checkpoint()
            embeddings, reference, tokenizer_source = (
                read_word_embeddings(base),
                checkpoint_reference(base),
                tokenizer_dir or base,
            )
            if "package" not in reference:  # stored with the model: an absolute path breaks once the folder moves
                reference = {"file": FROZEN_FILE}
        tokenizer = load_tokenizer(tokenizer_source)
        check_vocabulary(tokenizer_source, tokenizer, embeddings.shape[0])
        super().__init__(tokenizer, max_length)
        self.pooling, self.num_blocks, self.kernel_sizes = pooling, num_blocks, tuple(kernel_sizes)
        self.filters, self.width, self.dropout_p = filters, width, dropout
        self.frozen_embeddings = {**reference, "sha256": hashlib.sha256(tensor_bytes(embeddings)).hexdigest()}
        self.embedding = nn.Embedding.from_pretrained(embeddings, freeze=True)
        self.projection = nn.Linear(embeddings.shape[1], width)
        self.blocks = nn.ModuleList(_Block(width, filters, self.kernel_sizes, dropout) for _ in range(num_blocks))
        if pooling == "attention":  # self-attention pooling: an MLP scores each token state
            self.attention = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 1))

    @property
    def dim(self) -> int:
        return self.width

    def trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(1).to(self.projection.weight.dtype)  # (batch, 1, length)
        x = self.projection(self.embedding(input_ids)).transpose(1, 2) * mask  # (batch, width, length)
        for block in self.blocks:
            x = block(x, mask)
        padding = attention_mask.unsqueeze(1) == 0
        if self.pooling == "max":
            return x.masked_fill(padding, float("-inf")).amax(dim=2)
        scores = self.attention(x.transpose(1, 2)).transpose(1, 2)  # (batch, 1, length)
        weights = torch.softmax(scores.masked_fill(padding, float("-inf")), dim=2)
        return (x * weights).sum(dim=2)

    def config(self) -> dict:
        return {
            "encoder_type": self.encoder_type,
            "pooling": self.pooling,
            "num_blocks": self.num_blocks,
            "kernel_sizes": list(self.kernel_sizes),
            "filters": self.filters,
            "width": self.width,
            "max_length": self.max_length,
            "dropout": self.dropout_p,
            "frozen_embeddings": self.frozen_embeddings,
        }

    def weights(self) -> dict[str, torch.Tensor]:
        return {name: t for name, t in self.state_dict().items() if name != _EMBEDDING}

    def save(self, directory: str | Path, dtype: str = "float32") -> Path:
        """Trainable weights (safetensors) + tokenizer + bioel_encoder.json referencing the frozen embeddings."""
        weights = stored(self.weights(), dtype)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file(weights, str(directory / WEIGHTS_FILE))
        if "file" in self.frozen_embeddings:  # float32 as read, so their sha256 stays the recorded one
            save_file({_FROZEN_KEY: self.embedding.weight.detach().float().contiguous()}, str(directory / FROZEN_FILE))
        self.tokenizer.save_pretrained(directory)
        write_config(directory, {**self.config(), "storage_dtype": dtype})
        return directory

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> ResCNNEncoder:
        directory = require_safetensors(directory)
        config = cls.folder_config(directory)
        reference = config["frozen_embeddings"]
        stored_file = directory / reference["file"] if "file" in reference else None
        source = stored_file or resolve_reference(reference)
        encoder = cls(
            None if stored_file else source,
            pooling=config["pooling"],
            num_blocks=config["num_blocks"],
            kernel_sizes=tuple(config["kernel_sizes"]),
            filters=config["filters"],
            width=config["width"],
            max_length=config["max_length"],
            dropout=config["dropout"],
            tokenizer_dir=directory,
            frozen_file=stored_file,
        )
        if encoder.frozen_embeddings["sha256"] != reference["sha256"]:
            raise EmbeddingMismatchError(
                f"{directory}: the frozen embeddings at {source} have sha256 "
                f"{encoder.frozen_embeddings['sha256'][:16]}..., but the model was trained with "
                f"{reference['sha256'][:16]}...; use the same base checkpoint (package version) it was saved with"
            )
        encoder.frozen_embeddings = dict(reference)  # as recorded (a model saved with a base's path keeps it): its fingerprint
        weights = {name: t.float() for name, t in load_file(str(directory / WEIGHTS_FILE)).items()}
        weights[_EMBEDDING] = encoder.embedding.weight
        encoder.load_state_dict(weights, strict=True)
        return encoder.to(device)
