"""The multi-similarity loss as SapBERT uses it (Eq. 2), on mined pairs.

    L = 1/|B| sum_i [ 1/a log(1 + sum_{n in N_i} exp(a (S_in - eps))) + 1/b log(1 + sum_{p in P_i} exp(-b (S_ip - eps))) ]

S is the cosine similarity matrix of the batch; a scales negatives, b positives. Defaults follow SapBERT's
released training setup: a = 60 (negatives), b = 1 (positives), eps = 0.5.
"""

from __future__ import annotations

import torch


def multi_similarity_loss(
    embeddings: torch.Tensor,
    pos_mask: torch.Tensor,
    neg_mask: torch.Tensor,
    neg_scale: float = 60.0,
    pos_scale: float = 1.0,
    offset: float = 0.5,
) -> torch.Tensor:
    emb = torch.nn.functional.normalize(embeddings, dim=1)
    sim = emb @ emb.T
    # log(1 + sum exp(x)) over a masked row = logsumexp over the row with a 0 term for the "1"
    neg_terms = torch.where(neg_mask, neg_scale * (sim - offset), torch.full_like(sim, float("-inf")))
    pos_terms = torch.where(pos_mask, -pos_scale * (sim - offset), torch.full_like(sim, float("-inf")))
    zero = torch.zeros(len(sim), 1, device=sim.device, dtype=sim.dtype)
    neg_loss = torch.logsumexp(torch.cat([zero, neg_terms], dim=1), dim=1) / neg_scale
    pos_loss = torch.logsumexp(torch.cat([zero, pos_terms], dim=1), dim=1) / pos_scale
    return (neg_loss + pos_loss).mean()


def supervised_infonce_loss(embeddings: torch.Tensor, labels: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """Multi-positive InfoNCE over the batch: each text's softmax over every other text, all same-label texts
    counted as the answer. L = -1/|A| sum_{i in A} log( sum_{p in P_i} exp(S_ip/t) / sum_{j != i} exp(S_ij/t) ),
    A = texts with at least one positive.

    With hard-negative batches (hard_negatives.py) this is the balanced objective: the multi-similarity loss
    weighs each negative above its offset exponentially and lets a few close wrong names dominate, whereas
    here the gold name and the wrong names compete in one softmax, as in BioSyn's candidate likelihood."""
    emb = torch.nn.functional.normalize(embeddings, dim=1)
    logits = emb @ emb.T / temperature
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    logits = logits.masked_fill(eye, float("-inf"))
    positive = (labels[:, None] == labels[None, :]) & ~eye
    anchors = positive.any(dim=1)
    if not anchors.any():
        return logits.new_zeros(())
    log_all = torch.logsumexp(logits, dim=1)
    log_pos = torch.logsumexp(logits.masked_fill(~positive, float("-inf")), dim=1)
    return (log_all - log_pos)[anchors].mean()
