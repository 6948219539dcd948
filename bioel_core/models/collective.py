"""The collective document model (Bhowmik et al., `../shared/papers/002_*`): one transformer pass over a whole
document finds its mentions and gives each a vector in the name space of a name encoder, so every mention of the
document is detected and linked from one encoding, with its context.

    document text ── WordPiece (offsets kept) ── windows of <= `window` pieces, `overlap` shared ── transformer
        └─ token states h (each token from the window where it sits farthest from an edge)
            ├─ span scores: every span of <= `max_span` pieces that starts and ends on word boundaries, per entity
            │  type t: w_s·h_start + w_e·h_end + Σ_q w_m·h_q + b  (sigmoid; overlaps resolved best first)
            ├─ BIO tags per token (the paper's comparison decoder)
            └─ mention vectors: W[h_start; h_end] + b ("endpoints", the paper's linker) or W·mean(h_span) + b ("mean")

Names are encoded by the `names` encoder (a bioel name encoder, frozen: only the document side learns), so
`bioel embed` with this model writes name vectors in the mention space and the FAISS shards serve it unchanged.
Offsets map back to characters exactly: a span's characters are [offset(start).begin, offset(end).end).
"""

from __future__ import annotations

import copy
import functools
import json
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from bioel_core.models.bert_inference import BertForInference
from bioel_core.models.base import CONFIG_FILE, fingerprint_of, read_config, stored, write_config
from bioel_core.models.checkpoints import (
    check_vocabulary,
    load_hf_model,
    load_tokenizer,
    require_hf_checkpoint,
    require_safetensors,
    token_positions,
)

MENTION_POOLINGS = ("endpoints", "mean")
DOCUMENT_DIR, NAMES_DIR, HEADS_FILE = "document", "names", "heads.safetensors"


class Piece(NamedTuple):
    start: int  # character offsets into the document text
    end: int
    word: int  # the word (pre-tokenizer unit) the piece belongs to


class Pieces(Sequence[Piece]):
    """A text's pieces as the tokenizer gives them, column by column: a `Piece` is made only when one is read (a
    document's few hundred tuples each pass cost more than the columns)."""

    __slots__ = ("starts", "ends", "words")

    def __init__(self, starts: list[int], ends: list[int], words: list[int]):
        self.starts, self.ends, self.words = starts, ends, words

    @classmethod
    def of(cls, offsets: Sequence[tuple[int, int]], words: list[int]) -> Pieces:
        return cls([a for a, _ in offsets], [b for _, b in offsets], words)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return Pieces(self.starts[k], self.ends[k], self.words[k])
        return Piece(self.starts[k], self.ends[k], self.words[k])

    def __iter__(self) -> Iterator[Piece]:
        return map(Piece, self.starts, self.ends, self.words)

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented


@dataclass
class Encoded:
    """One document through the transformer: its pieces and their states."""

    pieces: Pieces
    states: torch.Tensor  # (n_pieces, hidden)
    spans: torch.Tensor  # (n_spans, 2) piece indices [start, end], inclusive

    @functools.cached_property
    def _span_keys(self) -> np.ndarray:
        spans = self.spans.cpu().numpy()
        return spans[:, 0] * len(self.pieces) + spans[:, 1]  # ascending: word_spans lists them in (start, end) order

    def span_row(self, first: int, last: int) -> int | None:
        """The row in `spans` of the pieces [first, last], or None when they are no candidate span (a dictionary's
        mention is scored by its bounds)."""
        keys, key = self._span_keys, first * len(self.pieces) + last
        row = int(np.searchsorted(keys, key))
        return row if row < len(keys) and keys[row] == key else None

    @functools.cached_property
    def piece_bounds(self) -> tuple[dict[int, int], dict[int, int]]:
        """Character offset -> the first piece starting there, and -> the last piece ending there."""
        starts: dict[int, int] = {}
        for k, start in enumerate(self.pieces.starts):
            starts.setdefault(start, k)
        return starts, {end: k for k, end in enumerate(self.pieces.ends)}


@dataclass
class DetectedSpan:
    start: int  # characters
    end: int
    entity_type: str
    score: float
    piece_span: tuple[int, int]


def word_spans(pieces: Pieces, max_span: int) -> np.ndarray:
    """(n, 2) inclusive piece ranges of at most `max_span` pieces that start at a word's first piece and end at
    a word's last piece (a mention never splits a word), in (start, end) order."""
    n = len(pieces)
    if not n:
        return np.zeros((0, 2), dtype=np.int64)
    words = np.array(pieces.words)
    first = np.ones(n, dtype=bool)
    first[1:] = words[1:] != words[:-1]
    last = np.ones(n, dtype=bool)
    last[:-1] = words[:-1] != words[1:]
    starts = np.nonzero(first)[0].astype(np.int64)
    ends = starts[:, None] + np.arange(max_span, dtype=np.int64)  # row by row: (start, end) order
    kept = (ends < n) & last[np.minimum(ends, n - 1)]
    return np.stack([np.broadcast_to(starts[:, None], ends.shape)[kept], ends[kept]], axis=1)


def _encoder_layers(document: torch.nn.Module) -> torch.nn.ModuleList | None:
    """A BERT-like encoder's list of transformer layers (`encoder.layer`), None when it has none."""
    stack = getattr(getattr(document, "encoder", None), "layer", None)
    return stack if isinstance(stack, torch.nn.ModuleList) else None


def keep_first_layers(document: torch.nn.Module, layers: int) -> None:
    """Cut a BERT-like document encoder to its first `layers` transformer layers (in place; the config follows,
    so the saved folder loads back with that many). Dropping the top layers is the cheap way to a faster encoder
    that keeps what the lower layers learned (Sajjad et al., "On the effect of dropping layers")."""
    stack = _encoder_layers(document)
    if stack is None:
        raise ValueError(f"cannot keep the first {layers} layers of a {type(document).__name__}: it has no encoder.layer list")
    if not 1 <= layers <= len(stack):
        raise ValueError(f"the document encoder has {len(stack)} layers; cannot keep {layers}")
    document.encoder.layer = stack[:layers]
    document.config.num_hidden_layers = layers


def _feed_forward_layers(document: torch.nn.Module) -> list[torch.nn.Module]:
    stack = _encoder_layers(document)
    if stack is None or not all(
        hasattr(layer, "intermediate") and hasattr(getattr(layer, "output", None), "dense") for layer in stack
    ):
        raise ValueError(f"cannot cut the feed-forward units of a {type(document).__name__}: it has no BERT-like layers")
    return list(stack)


def feed_forward_importance(model: CollectiveEncoder, texts: Sequence[str]) -> list[torch.Tensor]:
    """Per transformer layer, each feed-forward unit's share of the layer's output over `texts`: its mean absolute
    activation over their pieces times the norm of its output weights (what removing it takes away, to first order)."""
    layers = _feed_forward_layers(model.document)
    sums = [torch.zeros(layer.intermediate.dense.out_features) for layer in layers]

    def hook(k: int):
        def add(module, inputs, output):
            sums[k].add_(output.detach().abs().sum(dim=(0, 1)).cpu())

        return add

    count = _pieces_run(model, texts, [layer.intermediate.register_forward_hook(hook(k)) for k, layer in enumerate(layers)])
    return [s / max(count, 1) * layer.output.dense.weight.detach().norm(dim=0).cpu() for s, layer in zip(sums, layers)]


def _pieces_run(model: CollectiveEncoder, texts: Sequence[str], handles: list) -> int:
    """Run the model over `texts` without dropout and gradients, for the forward hooks `handles` (removed after);
    the number of pieces they saw."""
    count, training = 0, model.training
    model.eval()
    try:
        with torch.no_grad():
            for text in texts:
                count += len(model.encode_document(text).pieces)
    finally:
        model.train(training)
        for handle in handles:
            handle.remove()
    return count


def keep_feed_forward(document: torch.nn.Module, size: int, importance: Sequence[torch.Tensor]) -> None:
    """Cut every transformer layer's feed-forward block to its `size` most important units (in place; the config's
    intermediate_size follows, so the saved folder loads back as a plain model of that size). The feed-forward
    products are two thirds of a BERT layer's: the structured pruning that shrinks them, fine-tuned after (Michel et
    al., "Are Sixteen Heads Really Better than One?", do the same for heads)."""
    layers = _feed_forward_layers(document)
    width = document.config.intermediate_size
    if not 1 <= size <= width:
        raise ValueError(f"the document encoder's feed-forward blocks have {width} units; cannot keep {size}")
    for layer, scores in zip(layers, importance):
        keep = _top(scores, size)
        layer.intermediate.dense = _cut_linear(layer.intermediate.dense, keep, None)
        layer.output.dense = _cut_linear(layer.output.dense, None, keep)
    document.config.intermediate_size = size


def _top(scores: torch.Tensor, n: int) -> torch.Tensor:
    """The indices of the n highest scores (the first on ties), in index order."""
    return torch.sort(torch.argsort(scores, descending=True, stable=True)[:n]).values


def _cut_linear(old: torch.nn.Linear, rows: torch.Tensor | None, cols: torch.Tensor | None) -> torch.nn.Linear:
    """A linear layer of `old`'s output units `rows` over its inputs `cols` (None: all), its weights copied."""
    weight = old.weight.detach()
    weight = weight if rows is None else weight[rows]
    weight = weight if cols is None else weight[:, cols]
    new = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=old.bias is not None, device=weight.device)
    with torch.no_grad():
        new.weight.copy_(weight)
        if old.bias is not None:
            new.bias.copy_(old.bias.detach() if rows is None else old.bias.detach()[rows])
    return new


def _attention_layers(document: torch.nn.Module) -> list[torch.nn.Module]:
    stack = _encoder_layers(document)
    parts = (
        *(f"attention.self.{name}" for name in ("query", "key", "value")),
        *(f"{block}.{name}" for block in ("attention.output", "output") for name in ("dense", "LayerNorm")),
        "intermediate.dense",
    )
    if stack is None or not all(_has(layer, p) for layer in stack for p in parts) or not _has(document, "embeddings.LayerNorm"):
        raise ValueError(f"cannot narrow the hidden states of a {type(document).__name__}: it has no BERT-like layers")
    return list(stack)


def _has(module: torch.nn.Module, path: str) -> bool:
    try:
        module.get_submodule(path)
    except AttributeError:
        return False
    return True


def hidden_importance(model: CollectiveEncoder, texts: Sequence[str]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """What each part of the document encoder's width carries over `texts`: per hidden dimension, its mean absolute
    value after every layer norm (the residual stream every layer and head reads); per transformer layer and
    attention head, its context's mean absolute value times the norm of its output weights (as feed_forward_importance
    scores a unit)."""
    document = model.document
    layers = _attention_layers(document)
    norms = [m for m in document.modules() if isinstance(m, torch.nn.LayerNorm)]
    dims = torch.zeros(document.config.hidden_size)
    contexts = [torch.zeros(layer.attention.output.dense.in_features) for layer in layers]

    def add_dims(module, inputs, output):
        dims.add_(output.detach().abs().sum(dim=(0, 1)).cpu())

    def add_context(k: int):
        def add(module, inputs):
            contexts[k].add_(inputs[0].detach().abs().sum(dim=(0, 1)).cpu())

        return add

    handles = [m.register_forward_hook(add_dims) for m in norms]
    handles += [layer.attention.output.dense.register_forward_pre_hook(add_context(k)) for k, layer in enumerate(layers)]
    count = _pieces_run(model, texts, handles)
    heads = document.config.num_attention_heads
    per_head = [
        (c / max(count, 1) * layer.attention.output.dense.weight.detach().norm(dim=0).cpu()).view(heads, -1).sum(dim=1)
        for c, layer in zip(contexts, layers)
    ]
    return dims / max(count, 1), per_head


def keep_hidden(model: CollectiveEncoder, size: int, importance: tuple[torch.Tensor, Sequence[torch.Tensor]]) -> None:
    """Narrow the document encoder's hidden states to their `size` most important dimensions and each layer's attention
    to its size / head-size most important heads (in place, with the collective heads that read the states; the config
    follows, so the saved folder loads back as a plain BERT of that width with heads of the same size). Every product
    of a layer shrinks with the width, attention's too; fine-tuned after, as feed-forward cuts are."""
    document = model.document
    layers = _attention_layers(document)
    config = document.config
    width, head_size = config.hidden_size, config.hidden_size // config.num_attention_heads
    if not 1 <= size <= width or size % head_size:
        raise ValueError(
            f"the document encoder's hidden states have {width} dimensions in heads of {head_size}; "
            f"cannot keep {size} (a multiple of {head_size} up to {width})"
        )
    dims_scores, head_scores = importance
    dims = _top(dims_scores, size)

    def layer_norm(old: torch.nn.LayerNorm) -> torch.nn.LayerNorm:
        new = torch.nn.LayerNorm(size, eps=old.eps, device=old.weight.device)
        with torch.no_grad():
            new.weight.copy_(old.weight[dims])
            new.bias.copy_(old.bias[dims])
        return new

    embeddings = document.embeddings
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        old = getattr(embeddings, name)
        new = torch.nn.Embedding(old.num_embeddings, size, padding_idx=old.padding_idx, device=old.weight.device)
        with torch.no_grad():
            new.weight.copy_(old.weight[:, dims])
        setattr(embeddings, name, new)
    embeddings.LayerNorm = layer_norm(embeddings.LayerNorm)
    for layer, scores in zip(layers, head_scores):
        kept = _top(scores, size // head_size)
        inner = (kept[:, None] * head_size + torch.arange(head_size)).reshape(-1)  # the kept heads' rows
        attention = layer.attention.self
        for name in ("query", "key", "value"):
            setattr(attention, name, _cut_linear(getattr(attention, name), inner, dims))
        attention.num_attention_heads, attention.all_head_size = size // head_size, size
        layer.attention.output.dense = _cut_linear(layer.attention.output.dense, dims, inner)
        layer.attention.output.LayerNorm = layer_norm(layer.attention.output.LayerNorm)
        layer.intermediate.dense = _cut_linear(layer.intermediate.dense, None, dims)
        layer.output.dense = _cut_linear(layer.output.dense, dims, None)
        layer.output.LayerNorm = layer_norm(layer.output.LayerNorm)
    pooler = getattr(document, "pooler", None)
    if pooler is not None:
        pooler.dense = _cut_linear(pooler.dense, dims, dims)
    config.hidden_size, config.num_attention_heads = size, size // head_size
    # the collective heads read the states: endpoints pooling reads two of them side by side
    for name in ("span_start", "span_end", "span_inside", "bio"):
        setattr(model, name, _cut_linear(getattr(model, name), None, dims))
    mention_cols = torch.cat([dims, width + dims]) if model.mention.in_features == 2 * width else dims
    model.mention = _cut_linear(model.mention, None, mention_cols)


def windows(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """[start, end) piece ranges of at most `size` covering 0..n, consecutive ones sharing `overlap` pieces."""
    if n <= size:
        return [(0, n)]
    step, out, start = size - overlap, [], 0
    while True:
        out.append((start, min(n, start + size)))
        if start + size >= n:
            return out
        start += step


def owner_window(n: int, ranges: list[tuple[int, int]]) -> np.ndarray:
    """For each piece, the window in which it is farthest from an edge (most context on both sides)."""
    best, owner = np.full(n, -1), np.zeros(n, dtype=np.int64)
    for w, (a, b) in enumerate(ranges):
        idx = np.arange(a, b)
        room = np.minimum(idx - a, b - 1 - idx)
        better = room > best[idx]
        best[idx[better]], owner[idx[better]] = room[better], w
    return owner


def _document_encoder(folder: Path, tokenizer, inference: bool) -> torch.nn.Module:
    if inference and (encoder := BertForInference.from_folder(folder)) is not None:
        check_vocabulary(folder, tokenizer, encoder.embeddings.word_embeddings.weight.shape[0])
        return encoder
    return load_hf_model(folder, tokenizer)


class CollectiveEncoder(torch.nn.Module):
    encoder_type = "collective"

    def __init__(
        self,
        document_dir: str | Path,
        names,
        entity_types: Sequence[str],
        *,
        max_span: int = 10,
        window: int | None = None,
        overlap: int = 128,
        mention_pooling: str = "endpoints",
        names_source: dict | None = None,
        decoding: dict | None = None,
        document_layers: int | None = None,
        inference: bool = False,
    ):
        """`document_layers`: keep only the document encoder's first N layers (a faster model to train from).
        `inference`: a plain BERT document encoder is read as `BertForInference` (the same bits as transformers', a
        shorter start-up; never trained), any other with transformers."""
        super().__init__()
        if mention_pooling not in MENTION_POOLINGS:
            raise ValueError(f"mention_pooling must be one of {MENTION_POOLINGS}, got {mention_pooling!r}")
        if not entity_types:
            raise ValueError("a collective model needs at least one entity type")
        document_dir = require_hf_checkpoint(document_dir)
        self.tokenizer = load_tokenizer(document_dir)
        # the tokenizer's own Rust pipeline, untruncated, for the pieces: transformers' call around it costs more than
        # the split itself, and it sets truncation on the pipeline per call (which threads sharing it cannot do)
        self._pieces = Tokenizer.from_str(self.tokenizer.backend_tokenizer.to_str())
        self._pieces.no_padding()
        self._pieces.no_truncation()
        self.document = _document_encoder(document_dir, self.tokenizer, inference)
        self.document_dir = document_dir
        if document_layers:
            keep_first_layers(self.document, document_layers)
        positions = token_positions(self.document) or 512
        window = window or min(512, positions)  # the model's positions, at most 512
        overlap = min(overlap, window // 4)
        if window > positions or window <= overlap + 2:
            raise ValueError(f"window {window} must fit the model's {positions} positions and exceed the overlap {overlap} + 2")
        self.names = names.eval()
        for p in self.names.parameters():
            p.requires_grad_(False)
        self.names_source = names_source or {}
        # chosen on dev after training (bioel_core.training.collective.tune_on_dev): span thresholds per type, link_with
        self.decoding = decoding or {"thresholds": {t: 0.5 for t in entity_types}, "link_with": "collective"}
        self.entity_types = list(entity_types)
        self.max_span, self.window, self.overlap, self.mention_pooling = max_span, window, overlap, mention_pooling
        hidden, types = self.document.config.hidden_size, len(self.entity_types)
        self.span_start = torch.nn.Linear(hidden, types)
        self.span_end = torch.nn.Linear(hidden, types, bias=False)
        self.span_inside = torch.nn.Linear(hidden, types, bias=False)
        self.bio = torch.nn.Linear(hidden, 1 + 2 * types)  # O, then B-t, I-t per type
        self.mention = torch.nn.Linear(2 * hidden if mention_pooling == "endpoints" else hidden, names.dim)
        # what runs the document encoder: torch, or a session over its graph (use_runtime)
        self.runtime, self.document_session = "torch", None

    # ---------------------------------------------------------------------------------- the name side
    @property
    def dim(self) -> int:
        return self.names.dim

    def encode(
        self, texts: list[str], batch_size: int = 256, show_progress: bool = False, batch_invariant: bool = False
    ) -> np.ndarray:
        """Name vectors: the frozen name encoder's (what `bioel embed` writes)."""
        return self.names.encode(texts, batch_size=batch_size, show_progress=show_progress, batch_invariant=batch_invariant)

    # ------------------------------------------------------------------------------ the document side
    def pieces(self, text: str) -> tuple[list[int], Pieces]:
        """The text's piece ids and pieces, the whole text (a document longer than a window is windowed:
        encode_document)."""
        # a batch of one: the tokenizer lets other threads run while it splits a batch, not a single text
        enc = self._pieces.encode_batch([text], add_special_tokens=False)[0]
        return enc.ids, Pieces.of(enc.offsets, enc.word_ids)

    def encode_document(self, text: str) -> Encoded:
        """Token states of the whole document (windows merged) and its candidate spans."""
        ids, pieces = self.pieces(text)
        n, device = len(ids), self.device
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        ranges = windows(n, self.window - 2, self.overlap) if n else []
        if len(ranges) == 1:  # most documents: one window's states are the document's (copied out of the window's)
            states = self.window_states(torch.tensor([[cls, *ids, sep]], device=device))[0, 1:-1].clone()
        else:
            states = torch.zeros((n, self.document.config.hidden_size), device=device)
            owner = torch.from_numpy(owner_window(n, ranges)).to(device)
            for w, (a, b) in enumerate(ranges):
                out = self.window_states(torch.tensor([[cls, *ids[a:b], sep]], device=device))[0, 1:-1]
                mine = owner[a:b] == w
                states = states.index_copy(0, torch.arange(a, b, device=device)[mine], out[mine])
        return Encoded(pieces, states, torch.from_numpy(word_spans(pieces, self.max_span)).to(device))

    def encode_documents(
        self, texts: Sequence[str], with_logits: bool = False, then: Callable[[int], Any] | None = None
    ) -> Iterator[tuple[Encoded, torch.Tensor | None, Any]]:
        """(`encode_document`, its `span_logits` with `with_logits`, `then(k)` when given) of each text k, in order. On
        a CPU with several torch threads the documents are encoded side by side, one thread each, a few ahead of the
        caller, which meanwhile works on those already done: one document's products are too small to keep several
        threads busy (they wait for each other, and idle while the caller runs Python), so threads across documents do
        more; `then` runs on the document's thread after its pass (the caller's other work of a document that does not
        need the pass: its Python then runs while the caller waits for a pass, not after). The values are the same bits
        either way (MKL's strict mode, bioel_core/__init__.py), as each document's pass never depends on the others.
        Close the iterator (or read it to the end) to restore the thread count."""
        threads = torch.get_num_threads()

        def one(k: int) -> tuple[Encoded, torch.Tensor | None, Any]:
            with torch.no_grad():  # grad mode is per thread
                encoded = self.encode_document(texts[k])
                logits = self.span_logits(encoded) if with_logits else None
            return encoded, logits, then(k) if then is not None else None

        if threads == 1 or len(texts) < 2 or self.device.type != "cpu":
            yield from map(one, range(len(texts)))
            return
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(threads, thread_name_prefix="bioel-document") as pool:
                ahead = deque(pool.submit(one, k) for k in range(min(len(texts), 2 * threads)))
                try:
                    for k in range(2 * threads, len(texts)):
                        done = ahead.popleft().result()
                        ahead.append(pool.submit(one, k))
                        yield done
                    while ahead:
                        yield ahead.popleft().result()
                finally:
                    for future in ahead:
                        future.cancel()
        finally:
            torch.set_num_threads(threads)

    def window_states(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(1, n, hidden) token states of one window's piece ids (with [CLS] and [SEP]), by the runtime in use."""
        if self.document_session is not None:
            return self.document_session(input_ids)
        return self.document(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).last_hidden_state

    def transformers_document(self) -> torch.nn.Module:
        """A copy of the document encoder as a transformers model (what an ONNX graph is exported from)."""
        if isinstance(self.document, BertForInference):  # read from its folder: the same weights
            return load_hf_model(self.document_dir, self.tokenizer).to(self.device).eval()
        return copy.deepcopy(self.document)

    def use_runtime(self, runtime: str) -> CollectiveEncoder:
        """Run the document encoder with `runtime` (DOCUMENT_RUNTIMES): torch, or the model's ONNX graph, float32 or
        int8 (bioel_core.models.onnx_document, exported on first use). The heads stay torch's (a few small matrices)."""
        from bioel_core.linking import DOCUMENT_RUNTIMES
        from bioel_core.models.onnx_document import open_session

        if runtime not in DOCUMENT_RUNTIMES:
            raise ValueError(f"document_runtime must be one of {DOCUMENT_RUNTIMES}, got {runtime!r}")
        self.document_session = None if runtime == "torch" else open_session(self, runtime)
        self.runtime = runtime
        return self

    def encode_around(self, text: str, start: int, end: int, context: int = 64) -> tuple[Encoded, tuple[int, int]] | None:
        """One mention on its own: the transformer over the mention's pieces and `context` pieces on each side only,
        and the mention's piece span in that window (None when it covers no piece). The per-mention baseline the
        collective pass is compared with (benchmarks/collective_speed.py)."""
        ids, pieces = self.pieces(text)
        inside = [k for k, p in enumerate(pieces) if p.end > start and p.start < end]
        if not inside:
            return None
        a = max(0, inside[0] - context)
        b = min(len(ids), inside[-1] + 1 + context, a + self.window - 2)
        batch = torch.tensor([[self.tokenizer.cls_token_id, *ids[a:b], self.tokenizer.sep_token_id]], device=self.device)
        states = self.window_states(batch)[0, 1:-1]
        window = pieces[a:b]
        spans = torch.from_numpy(word_spans(window, self.max_span)).to(self.device)
        return Encoded(window, states, spans), (inside[0] - a, min(inside[-1], b - 1) - a)

    def span_logits(self, encoded: Encoded) -> torch.Tensor:
        """(n_spans, n_types) logits of being a mention of each type."""
        h, spans = encoded.states, encoded.spans
        if not len(spans):
            return h.new_zeros((0, len(self.entity_types)))
        inside = torch.cat([h.new_zeros((1, len(self.entity_types))), torch.cumsum(self.span_inside(h), dim=0)])
        return self.span_start(h)[spans[:, 0]] + self.span_end(h)[spans[:, 1]] + inside[spans[:, 1] + 1] - inside[spans[:, 0]]

    def bio_logits(self, encoded: Encoded) -> torch.Tensor:
        return self.bio(encoded.states)

    def mention_vectors(self, encoded: Encoded, spans: torch.Tensor, batch_invariant: bool = False) -> torch.Tensor:
        """(m, dim) L2-normalized vectors of the given inclusive piece ranges. `batch_invariant`: the head in
        float64, so a span's vector does not depend on the other spans asked for with it (as `Encoder.encode`)."""
        h = encoded.states
        if self.mention_pooling == "endpoints":
            x = torch.cat([h[spans[:, 0]], h[spans[:, 1]]], dim=-1)
        else:
            sums = torch.cat([h.new_zeros((1, h.shape[1])), torch.cumsum(h, dim=0)])
            x = (sums[spans[:, 1] + 1] - sums[spans[:, 0]]) / (spans[:, 1] - spans[:, 0] + 1).unsqueeze(-1)
        if batch_invariant:
            return F.normalize(F.linear(x.double(), *self._mention_float64()), dim=-1)
        return F.normalize(self.mention(x), dim=-1)

    def _mention_float64(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The mention head's weight and bias in float64, converted again only when they change (an optimizer updates
        them in place, which bumps their versions); with gradients on, converted each call so gradients reach them."""
        weight, bias = self.mention.weight, self.mention.bias
        if torch.is_grad_enabled():
            return weight.double(), bias.double()
        key = (weight.data_ptr(), weight._version, bias.data_ptr(), bias._version)
        kept = self.__dict__.get("_mention_float64_kept")
        if kept is None or kept[0] != key:
            kept = (key, weight.detach().double(), bias.detach().double())
            self.__dict__["_mention_float64_kept"] = kept
        return kept[1], kept[2]

    def query_vectors(self, encoded: Encoded, text: str, piece_spans: Sequence[tuple[int, int]], link_with: str) -> np.ndarray:
        """The vectors mentions are searched with, float32 (m, dim): collective (the mention vector), surface (the
        name encoder on the span's text, batch-invariant) or both (their normalized sum)."""
        return self.linking_vectors(
            self.collective_vectors(encoded, piece_spans), self.span_texts(encoded, text, piece_spans), link_with
        )

    def collective_vectors(self, encoded: Encoded, piece_spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """The mention vectors of the given piece spans, batch-invariant, float32 (m, dim)."""
        spans = torch.tensor(list(piece_spans), dtype=torch.long, device=self.device).reshape(-1, 2)
        return self.mention_vectors(encoded, spans, batch_invariant=True).float().detach().cpu().numpy()

    @staticmethod
    def span_texts(encoded: Encoded, text: str, piece_spans: Sequence[tuple[int, int]]) -> list[str]:
        starts, ends = encoded.pieces.starts, encoded.pieces.ends
        return [text[starts[i] : ends[j]] for i, j in piece_spans]

    LINK_WITH = ("collective", "surface", "both")

    def linking_vectors(self, collective: np.ndarray, texts: list[str], link_with: str) -> np.ndarray:
        """`query_vectors` from mention vectors and span texts already taken, of any number of documents at once
        (the name encoder is batch-invariant, so one call for many documents gives what one call each would)."""
        if link_with not in self.LINK_WITH:
            raise ValueError(f"link_with must be one of {self.LINK_WITH}, got {link_with!r}")
        if link_with == "collective":
            return collective
        surface = self.encode(texts, batch_invariant=True)
        if link_with == "surface":
            return surface
        both = collective.astype(np.float64) + surface
        return (both / np.linalg.norm(both, axis=1, keepdims=True)).astype(np.float32)

    def covering_span(self, encoded: Encoded, start: int, end: int) -> tuple[int, int] | None:
        """The pieces a character span [start, end) covers (a given mention need not start on a piece boundary)."""
        pieces = encoded.pieces
        inside = [k for k, (a, b) in enumerate(zip(pieces.starts, pieces.ends)) if b > start and a < end]
        return (inside[0], inside[-1]) if inside else None

    # -------------------------------------------------------------------------------------- decoding
    def decode_spans(self, encoded: Encoded, logits: torch.Tensor, thresholds: dict[str, float]) -> list[DetectedSpan]:
        """Spans scored above their type's threshold, overlaps resolved best first (one type per span)."""
        probs = torch.sigmoid(logits).detach().cpu().numpy()
        spans = encoded.spans.cpu().numpy()
        found = []
        for t, entity_type in enumerate(self.entity_types):
            for k in np.nonzero(probs[:, t] >= thresholds.get(entity_type, 0.5))[0]:
                found.append((float(probs[k, t]), int(spans[k, 0]), int(spans[k, 1]), entity_type))
        return self._non_overlapping(encoded, found)

    def span_score(self, encoded: Encoded, logits: torch.Tensor, start: int, end: int, entity_type: str) -> float | None:
        """The span detector's probability that the characters [start, end) are a mention of `entity_type` (what
        `decode_spans` compares with its threshold); None when no scored span has those bounds (they split a word
        piece, or the span is longer than `max_span` pieces) or the model has no such type."""
        if entity_type not in self.entity_types:
            return None
        starts, ends = encoded.piece_bounds
        if start not in starts or end not in ends:
            return None
        row = encoded.span_row(starts[start], ends[end])
        if row is None:
            return None
        return float(torch.sigmoid(logits[row, self.entity_types.index(entity_type)]))

    def decode_bio(self, encoded: Encoded, logits: torch.Tensor) -> list[DetectedSpan]:
        """Spans of B(-I)* runs of one type (the BIO decoder); a run also ends where a word would be split."""
        tags = logits.argmax(-1).cpu().numpy()
        probs = torch.softmax(logits, -1).max(-1).values.detach().cpu().numpy()
        found, i, n, words = [], 0, len(tags), encoded.pieces.words
        while i < n:
            tag = int(tags[i])
            if tag == 0 or tag % 2 == 0:  # O, or an I- without its B-
                i += 1
                continue
            t, j = (tag - 1) // 2, i
            while j + 1 < n and int(tags[j + 1]) == 2 + 2 * t:
                j += 1
            while j + 1 < n and words[j + 1] == words[j]:  # finish the word
                j += 1
            found.append((float(probs[i : j + 1].mean()), i, j, self.entity_types[t]))
            i = j + 1
        return self._non_overlapping(encoded, found)

    @staticmethod
    def _non_overlapping(encoded: Encoded, found: list) -> list[DetectedSpan]:
        taken = np.zeros(len(encoded.pieces), dtype=bool)
        out = []
        for score, i, j, entity_type in sorted(found, key=lambda f: (-f[0], f[1], f[2], f[3])):
            if not taken[i : j + 1].any():
                taken[i : j + 1] = True
                out.append(DetectedSpan(encoded.pieces.starts[i], encoded.pieces.ends[j], entity_type, score, (i, j)))
        return sorted(out, key=lambda s: (s.start, s.end))

    # ------------------------------------------------------------------------------------ persistence
    @property
    def device(self) -> torch.device:
        return self.span_start.weight.device  # the heads sit where the document encoder does

    def heads(self) -> dict[str, torch.Tensor]:
        return {
            f"{name}.{k}": v
            for name in ("span_start", "span_end", "span_inside", "bio", "mention")
            for k, v in getattr(self, name).state_dict().items()
        }

    def config(self) -> dict:
        return {
            "encoder_type": self.encoder_type,
            "entity_types": self.entity_types,
            "max_span": self.max_span,
            "window": self.window,
            "overlap": self.overlap,
            "mention_pooling": self.mention_pooling,
            "dim": self.dim,
            "document_model_type": self.document.config.model_type,
            "names": self.names.config(),
        }

    def weights(self) -> dict[str, torch.Tensor]:
        return {**{f"document.{k}": v for k, v in self.document.state_dict().items()}, **self.heads()}

    def fingerprint(self) -> str:
        """sha256 over the config, the document side's tokenizer and weights and the name encoder's fingerprint."""
        return fingerprint_of(self.config(), self.weights(), self.tokenizer, self.names.fingerprint())

    def vectors_fingerprint(self) -> str:
        """The fingerprint of what makes the name vectors: the frozen name encoder's alone, so a document side
        retrained on the same name encoder links against the KB's existing embeddings and index."""
        return self.names.vectors_fingerprint()

    def save(self, directory: str | Path, dtype: str = "float32") -> Path:
        """document/ (HF model + tokenizer), names/ (the name encoder's own folder), heads.safetensors, config."""
        document = stored(self.document.state_dict(), dtype)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.document.save_pretrained(directory / DOCUMENT_DIR, state_dict=document)
        self.tokenizer.save_pretrained(directory / DOCUMENT_DIR)
        self.names.save(directory / NAMES_DIR, dtype=dtype)
        save_file(stored(self.heads(), dtype), str(directory / HEADS_FILE))
        write_config(
            directory, {**self.config(), "storage_dtype": dtype, "names_source": self.names_source, "decoding": self.decoding}
        )
        return directory

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> CollectiveEncoder:
        from bioel_core.models import load_encoder  # the name encoder is any bioel model folder

        directory = Path(directory)
        config = read_config(directory, cls.encoder_type)
        model = cls(
            directory / DOCUMENT_DIR,
            load_encoder(directory / NAMES_DIR),
            config["entity_types"],
            max_span=config["max_span"],
            window=config["window"],
            overlap=config["overlap"],
            mention_pooling=config["mention_pooling"],
            names_source=config.get("names_source"),
            decoding=config.get("decoding"),
            inference=True,
        )
        heads = require_safetensors(directory) / HEADS_FILE
        state = {k: v.float() for k, v in load_file(str(heads)).items()}
        for name in ("span_start", "span_end", "span_inside", "bio", "mention"):
            getattr(model, name).load_state_dict({k.split(".", 1)[1]: v for k, v in state.items() if k.startswith(name + ".")})
        return model.to(device).eval()

    @classmethod
    def folder_config(cls, directory: str | Path) -> dict:
        return read_config(directory, cls.encoder_type)


def is_collective(folder: str | Path) -> bool:
    path = Path(folder) / CONFIG_FILE
    return path.is_file() and json.loads(path.read_text()).get("encoder_type") == CollectiveEncoder.encoder_type
