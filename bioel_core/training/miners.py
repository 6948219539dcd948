"""Online hard-triplet mining (SapBERT, Eq. 1).

On L2-normalized embeddings, a triplet (a, p, n) is hard when the negative is not farther from the anchor
than the positive by the margin: d(a, n) < d(a, p) + margin. Every hard triplet contributes its pair
(a, p) to the positives and (a, n) to the negatives. Since (a, p) is in some hard triplet exactly when
d(a, p) + margin > min over negatives of d(a, n) (and symmetrically for negatives), the pair sets come
from B x B comparisons, never the B^3 triplet cube.
"""

from __future__ import annotations

import torch


def hard_pairs(embeddings: torch.Tensor, labels: torch.Tensor, margin: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean (B, B) masks of the hard positive and hard negative pairs, row = anchor."""
    with torch.no_grad():
        emb = torch.nn.functional.normalize(embeddings.float(), dim=1)
        dist = torch.cdist(emb, emb)
        same = labels[:, None] == labels[None, :]
        eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
        positive, negative = same & ~eye, ~same
        inf = torch.tensor(float("inf"), device=dist.device)
        nearest_negative = torch.where(negative, dist, inf).min(dim=1, keepdim=True).values
        farthest_positive = torch.where(positive, dist, -inf).max(dim=1, keepdim=True).values
        hard_pos = positive & (dist + margin > nearest_negative)
        hard_neg = negative & (dist < farthest_positive + margin)
    return hard_pos, hard_neg
