"""Character n-gram TF-IDF nearest names, with exact match as the fast path.

Names and queries are vectorized alike: n-gram counts (scikit-learn CountVectorizer over the normalized
strings), times smoothed idf from the names (sklearn's TfidfTransformer formula), L2-normalized; the
score is the cosine. Distinct names form the matrix rows; a row stands for every entry with that name.
A query equal to a name gets that name's entries first (score 1) and skips the matrix when they fill k.
Saved as `tfidf.npz` (CSR arrays + idf, read with allow_pickle=False) and `vocabulary.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.preprocessing import normalize as l2_normalize

from bioel_core.corpora.records import Candidate
from bioel_core.linking.base import Linker
from bioel_core.names import NameSet
from bioel_core.linking.exact import NameIndex

# char_wb pads each word with spaces, so n-grams never straddle two words and word edges count;
# chosen by calibration against the published plain TF-IDF baseline (see benchmarks/RESULTS.md).
DEFAULT_ANALYZER = "char_wb"
DEFAULT_NGRAM_RANGE = (3, 3)
MATRIX = "tfidf.npz"
VOCABULARY = "vocabulary.json"


def top_rows(scores: sp.csr_matrix, row: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The best m (column, score) of one row of a sparse score matrix, best first, ties in column order."""
    start, end = scores.indptr[row], scores.indptr[row + 1]
    cols, vals = scores.indices[start:end], scores.data[start:end]
    if m < len(cols):
        keep = np.argpartition(-vals, m - 1)[:m]
        cols, vals = cols[keep], vals[keep]
    order = np.lexsort((cols, -vals))
    return cols[order], vals[order]


class TfidfLinker(Linker):
    kind = "tfidf"

    def __init__(
        self,
        names: NameSet,
        analyzer: str = DEFAULT_ANALYZER,
        ngram_range: tuple[int, int] = DEFAULT_NGRAM_RANGE,
        vocabulary: dict[str, int] | None = None,
        idf: np.ndarray | None = None,
        matrix: sp.csr_matrix | None = None,
    ):
        super().__init__(names)
        self.analyzer, self.ngram_range = analyzer, tuple(ngram_range)
        self.exact = NameIndex(names)
        self.row_names = self.exact.row_names  # a matrix row per distinct name
        if vocabulary is None:
            counter = CountVectorizer(analyzer=analyzer, ngram_range=self.ngram_range, lowercase=False, dtype=np.float32)
            counts = counter.fit_transform(self.row_names)
            df = np.bincount(counts.indices, minlength=counts.shape[1])
            idf = (np.log((1 + counts.shape[0]) / (1 + df)) + 1).astype(np.float32)
            vocabulary = {t: int(i) for t, i in counter.vocabulary_.items()}
        self.vocabulary, self.idf = vocabulary, np.asarray(idf, dtype=np.float32)
        self._counter = CountVectorizer(
            analyzer=analyzer, ngram_range=self.ngram_range, lowercase=False, vocabulary=vocabulary, dtype=np.float32
        )
        matrix = self.vectorize(self.row_names) if matrix is None else matrix
        if matrix.shape != (len(self.row_names), len(vocabulary)):
            raise ValueError(
                f"TF-IDF matrix shape {matrix.shape} does not fit {len(self.row_names)} names x {len(vocabulary)} n-grams"
            )
        self.matrix = matrix
        self._matrix_t = matrix.T.tocsr()  # (n-grams x names): query @ this is the score matrix

    @classmethod
    def build(cls, names: NameSet, analyzer: str = DEFAULT_ANALYZER, ngram_range=DEFAULT_NGRAM_RANGE, **options) -> TfidfLinker:
        if options:
            raise ValueError(f"unknown tfidf options {sorted(options)}; known: analyzer, ngram_range")
        return cls(names, analyzer=analyzer, ngram_range=tuple(ngram_range))

    def options(self) -> dict:
        return {"analyzer": self.analyzer, "ngram_range": list(self.ngram_range)}

    def vectorize(self, texts: list[str]) -> sp.csr_matrix:
        counts = self._counter.transform(texts)
        return l2_normalize(counts.multiply(self.idf).tocsr().astype(np.float32))

    def scores(self, queries: list[str]) -> sp.csr_matrix:
        """(queries x distinct names) cosines, sparse: only names sharing an n-gram with the query are stored."""
        return self.vectorize(queries) @ self._matrix_t

    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        out: list[list[Candidate]] = [self.exact.candidates(self.names, q, k) for q in queries]
        todo = [i for i, c in enumerate(out) if len(c) < k]
        if not todo:
            return out
        scores = self.scores([queries[i] for i in todo])
        for row, i in enumerate(todo):
            # enough rows to fill k entries even when the exact row is among them
            cols, vals = top_rows(scores, row, k + 1)
            self.exact.fill(self.names, out[i], queries[i], zip(cols, vals), k)
        return out

    def _save_state(self, folder: Path) -> None:
        m = self.matrix
        np.savez(folder / MATRIX, data=m.data, indices=m.indices, indptr=m.indptr, shape=np.array(m.shape), idf=self.idf)
        (folder / VOCABULARY).write_text(json.dumps(self.vocabulary, ensure_ascii=False))

    @classmethod
    def _load_state(cls, folder: Path, names: NameSet, options: dict) -> TfidfLinker:
        with np.load(folder / MATRIX, allow_pickle=False) as z:
            matrix = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
            idf = z["idf"]
        vocabulary = json.loads((folder / VOCABULARY).read_text(encoding="utf-8"))
        return cls(
            names,
            analyzer=options["analyzer"],
            ngram_range=tuple(options["ngram_range"]),
            vocabulary=vocabulary,
            idf=idf,
            matrix=matrix,
        )
