"""BioSyn-style hybrid scoring: dense cosine + weight x char n-gram TF-IDF cosine.

Candidates are the union of the dense top-m and the sparse top-m names (m = max(4k, 20)); each is scored
with both similarities and ranked by the weighted sum. Exact matches come first, as in every linker.
The weight is chosen on dev (`benchmarks`, or `bioel evaluate` with a sparse weight), never on test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bioel_core.corpora.records import Candidate
from bioel_core.linking.base import Linker
from bioel_core.linking.dense import DenseLinker
from bioel_core.names import NameSet
from bioel_core.linking.tfidf import TfidfLinker, top_rows

# best of {0.1, 0.25, 0.5} on NCBI- and BC5CDR-disease dev with the shipped disease model (benchmarks/RESULTS.md);
# re-tune per model
DEFAULT_SPARSE_WEIGHT = 0.25


class HybridLinker(Linker):
    kind = "hybrid"

    def __init__(self, names: NameSet, dense: DenseLinker, sparse: TfidfLinker, sparse_weight: float = DEFAULT_SPARSE_WEIGHT):
        super().__init__(names)
        if dense.exact.row_names != sparse.row_names:
            raise ValueError("dense and sparse linkers were built on different name sets")
        self.dense, self.sparse, self.sparse_weight = dense, sparse, sparse_weight
        self.exact = dense.exact

    @classmethod
    def build(
        cls,
        names: NameSet,
        model: str | None = None,
        pooling: str | None = None,
        device: str = "cpu",
        sparse_weight: float = DEFAULT_SPARSE_WEIGHT,
    ) -> HybridLinker:
        return cls(names, DenseLinker.build(names, model, pooling, device), TfidfLinker.build(names), sparse_weight)

    def options(self) -> dict:
        return {"dense": self.dense.options(), "sparse": self.sparse.options(), "sparse_weight": self.sparse_weight}

    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        out = [self.exact.candidates(self.names, q, k) for q in queries]
        todo = [i for i, c in enumerate(out) if len(c) < k]
        if not todo:
            return out
        pool = min(max(4 * k, 20), len(self.exact.row_names))
        texts = [queries[i] for i in todo]
        dense_q = self.dense.encoder.encode(texts, batch_size=self.dense.batch_size)
        _, dense_rows = self.dense.index.search(dense_q, pool)
        # sparse: only names sharing an n-gram with the query are scored, never a dense queries x names array
        sparse_scores = self.sparse.scores(texts)
        for j, i in enumerate(todo):
            rows = np.union1d(dense_rows[j][dense_rows[j] >= 0], top_rows(sparse_scores, j, pool)[0])
            sparse = sparse_scores[j, rows].toarray().ravel()
            scores = self.dense.embeddings[rows] @ dense_q[j] + self.sparse_weight * sparse
            order = np.lexsort((rows, -scores))  # best first, ties in name order
            self.exact.fill(self.names, out[i], queries[i], zip(rows[order], scores[order]), k)
        return out

    def _save_state(self, folder: Path) -> None:
        self.dense._save_state(folder)
        self.sparse._save_state(folder)

    @classmethod
    def _load_state(cls, folder: Path, names: NameSet, options: dict) -> HybridLinker:
        dense = DenseLinker._load_state(folder, names, options["dense"])
        sparse = TfidfLinker._load_state(folder, names, options["sparse"])
        return cls(names, dense, sparse, options["sparse_weight"])
