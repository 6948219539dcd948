"""Exact inner-product search over vectors held in memory, without FAISS.

What `faiss.IndexFlatIP` answers (every stored vector scored, the k best returned), with ties broken by row (the
lower first) so the order never depends on a library's heap, and on the torch device of the caller's choice: the
collective model's training searches its name spaces on the GPU it trains on, and a machine without FAISS (a GPU
worker image) can still train and link through the in-memory dense linker. Queries are scored in blocks, so memory
stays near `block_elements` scores whatever the number of queries.
"""

from __future__ import annotations

import numpy as np
import torch


class ExactInnerProduct:
    def __init__(self, vectors: np.ndarray, device: str | torch.device = "cpu", block_elements: int = 1 << 24):
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be a (n, dim) array, got shape {vectors.shape}")
        self.device = torch.device(device)
        self.vectors = torch.from_numpy(vectors).to(self.device)
        self.block_elements = block_elements

    @property
    def ntotal(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @torch.no_grad()
    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores float32 (q, k), rows int64 (q, k)), best first, ties by row; -inf and -1 past the stored count."""
        queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        q, found = len(queries), min(k, self.ntotal)
        scores = np.full((q, k), -np.inf, dtype=np.float32)
        rows = np.full((q, k), -1, dtype=np.int64)
        if not q or not found:
            return scores, rows
        step = max(1, self.block_elements // max(1, self.ntotal))
        # one score past the k best tells a tie at the cut (the (k+1)-th as high as the k-th) without a second pass
        # over the block's scores
        deeper = min(found + 1, self.ntotal)
        for start in range(0, q, step):
            block = torch.from_numpy(queries[start : start + step]).to(self.device) @ self.vectors.T
            top = torch.topk(block, deeper, dim=1)
            values, at = top.values[:, :found].cpu().numpy(), top.indices[:, :found].cpu().numpy()
            order = np.lexsort((at, -values), axis=1)
            values, at = np.take_along_axis(values, order, axis=1), np.take_along_axis(at, order, axis=1)
            # a tie at the cut may reach past the k best: those queries take every row scored as high as the k-th
            kth = top.values[:, found - 1]
            tied = (top.values[:, found] >= kth).cpu().numpy() if deeper > found else np.zeros(len(block), dtype=bool)
            for j in np.nonzero(tied)[0]:
                candidates = torch.nonzero(block[j] >= kth[j], as_tuple=True)[0].cpu().numpy()
                tie_values = block[j, candidates].cpu().numpy()
                best = np.lexsort((candidates, -tie_values))[:found]
                values[j], at[j] = tie_values[best], candidates[best]
            scores[start : start + len(values), :found], rows[start : start + len(values), :found] = values, at
        return scores, rows
