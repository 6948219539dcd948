"""Probing experiments of the ResCNN paper (Sec. 2.2, Tables 1-2).

- Word-order permutation: the words of every query and every dictionary name are cut into consecutive
  n-grams (n = 1, 2, 3) whose order is shuffled (seeded), then linking is scored as usual.
- Attention-scope restriction (transformer encoders): every token attends only within a window of w
  tokens (|i - j| <= w // 2) at every layer, except the [CLS] token at the last layer, which sees all.
Each condition re-encodes the dictionary, so a probe costs one dense evaluation per row.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from bioel_core.corpora.records import Mention
from bioel_core.evaluation.biosyn_protocol import evaluate
from bioel_core.linking.dense import DenseLinker
from bioel_core.names import NameSet
from bioel_core.models import Encoder, TransformerEncoder

SHUFFLES = {"shuffle unigrams": 1, "shuffle bigrams": 2, "shuffle trigrams": 3}
WINDOWS = {"context size = 3": 3, "context size = 5": 5}


def shuffle_ngrams(text: str, n: int, rng: random.Random) -> str:
    """Composite parts (`a|b`) are shuffled each on its own, so the query keeps its sub-mentions."""
    out = []
    for part in text.split("|"):
        words = part.split()
        chunks = [words[i : i + n] for i in range(0, len(words), n)]
        rng.shuffle(chunks)
        out.append(" ".join(w for c in chunks for w in c))
    return "|".join(out)


def window_mask(length: int, window: int, free_cls: bool, dtype: torch.dtype, device) -> torch.Tensor:
    """Additive (length, length) mask: 0 inside the window, -inf outside; row 0 all 0 when free_cls."""
    idx = torch.arange(length, device=device)
    inside = (idx[:, None] - idx[None, :]).abs() <= window // 2
    if free_cls:
        inside[0] = True
    mask = torch.zeros(length, length, dtype=dtype, device=device)
    # a large finite negative, not the dtype minimum: added to the padding mask it must not overflow to -inf
    return mask.masked_fill(~inside, -1e4)


@contextmanager
def attention_window(encoder: TransformerEncoder, window: int) -> Iterator[None]:
    """Restricts every self-attention layer of a BERT-like encoder to a window while the context is open."""
    model = encoder.model
    layers = [m for name, m in model.named_modules() if type(m).__name__.endswith("SelfAttention")]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no self-attention modules to restrict")
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")  # the additive float mask path

    def hook_for(last: bool):
        def hook(module, args, kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            length = hidden.shape[1]
            band = window_mask(length, window, free_cls=last, dtype=hidden.dtype, device=hidden.device)
            mask = kwargs.get("attention_mask")
            kwargs["attention_mask"] = band if mask is None else mask + band
            return args, kwargs

        return hook

    handles = [
        layer.register_forward_pre_hook(hook_for(i == len(layers) - 1), with_kwargs=True) for i, layer in enumerate(layers)
    ]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        model.set_attn_implementation(previous)


def _score(encoder: Encoder, names: NameSet, queries: Sequence[Mention], k: int) -> dict:
    linker = DenseLinker(names, encoder, model_path="(probe)")
    scores, _ = evaluate(linker, queries, k)
    return scores


def probe(encoder: Encoder, names: NameSet, queries: Sequence[Mention], k: int = 5, seed: int = 0) -> list[dict]:
    """Rows {condition, acc@1, acc@5, change_pct} in the order of the paper's tables."""
    rows = [{"condition": "original", **_score(encoder, names, queries, k)}]
    for condition, n in SHUFFLES.items():
        rng = random.Random(seed)
        shuffled_names = NameSet.from_pairs(
            ((shuffle_ngrams(nm, n, rng), ids) for nm, ids in zip(names.names, names.concept_ids)),
            names.normalizer,
            names.source,
            normalized=True,
        )
        shuffled_queries = [
            Mention(
                text=shuffle_ngrams(q.text, n, rng),
                doc_id=q.doc_id,
                start=q.start,
                end=q.end,
                entity_type=q.entity_type,
                concept_ids=q.concept_ids,
            )
            for q in queries
        ]
        rows.append({"condition": condition, **_score(encoder, shuffled_names, shuffled_queries, k)})
    if isinstance(encoder, TransformerEncoder):
        for condition, w in WINDOWS.items():
            with attention_window(encoder, w):
                rows.append({"condition": condition, **_score(encoder, names, queries, k)})
    base = rows[0]["acc@1"]
    for row in rows:
        row["change_pct"] = 100.0 * (row["acc@1"] - base) / base if base else 0.0
    return rows


def format_probe(rows: list[dict], title: str) -> str:
    lines = [title, "", f"{'condition':22} {'acc@1':>7} {'acc@5':>7} {'change':>8}"]
    for r in rows:
        lines.append(f"{r['condition']:22} {r['acc@1']:7.2f} {r['acc@5']:7.2f} {r['change_pct']:+7.2f}%")
    return "\n".join(lines)
