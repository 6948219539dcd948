"""The multi-similarity loss as SapBERT uses it (Eq. 2), on mined pairs.

    L = 1/|B| sum_i [ 1/a log(1 + sum_{n in N_i} exp(a (S_in - eps))) + 1/b log(1 + sum_{p in P_i} exp(-b (S_ip - eps))) ]

S is the cosine similarity matrix of the batch; a scales negatives, b positives. Defaults follow SapBERT's
released training setup: a = 60 (negatives), b = 1 (positives), eps = 0.5.
"""

from __future__ import annotations

import torch


def multi_similarity_loss(embeddings: torch.Tensor, pos_mask: torch.Tensor, neg_mask: torch.Tensor,
                          neg_scale: float = 60.0, pos_scale: float = 1.0, offset: float = 0.5) -> torch.Tensor:
    emb = torch.nn.functional.normalize(embeddings, dim=1)
    sim = emb @ emb.T
    # log(1 + sum exp(x)) over a masked row = logsumexp over the row with a 0 term for the "1"
    neg_terms = torch.where(neg_mask, neg_scale * (sim - offset), torch.full_like(sim, float("-inf")))
    pos_terms = torch.where(pos_mask, -pos_scale * (sim - offset), torch.full_like(sim, float("-inf")))
    zero = torch.zeros(len(sim), 1, device=sim.device, dtype=sim.dtype)
    neg_loss = torch.logsumexp(torch.cat([zero, neg_terms], dim=1), dim=1) / neg_scale
    pos_loss = torch.logsumexp(torch.cat([zero, pos_terms], dim=1), dim=1) / pos_scale
    return (neg_loss + pos_loss).mean()
