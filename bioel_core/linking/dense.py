"""Dense nearest names: an `Encoder` embeds every distinct name once; queries go through the same encoder
and an exact inner-product search (cosine on L2-normalized vectors). Exact matches come first, as in
the other linkers.

The model is a bioel model folder (`bioel train` output) or any plain local Hugging Face checkpoint
(pooling chosen with `pooling`). A saved dense linker keeps the name embeddings (`embeddings.npy`, read
with allow_pickle=False) and the model's path and fingerprint; loading refuses a model that changed.

Names held in memory are searched exactly without FAISS (bioel_core.index.exact: what a flat inner-product index
answers, ties by row), so a machine without FAISS links through this linker too. `DenseLinker.from_index` searches
the FAISS shards of a `bioel build-index` folder instead of encoding the dictionary: each hit (a name_id) stands for
its name's row, so with flat shards it answers exactly as the in-memory linker over the same names; a saved one keeps
the index folder's path, not vectors.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bioel_core.corpora.records import Candidate
from bioel_core.embeddings import ModelMismatchError
from bioel_core.index.exact import ExactInnerProduct
from bioel_core.linking.base import Linker
from bioel_core.names import NameSet
from bioel_core.linking.exact import NameIndex
from bioel_core.models import Encoder, model_folder, open_model

if TYPE_CHECKING:
    from bioel_core.index import ShardedIndex

EMBEDDINGS = "embeddings.npy"
# with reproducible scores, hits are re-ranked by their exact score: search a few past k so that a hit FAISS
# placed just below the cut by a rounding difference can still come back
RESCORE_MARGIN = 8


class DenseLinker(Linker):
    kind = "dense"

    def __init__(
        self,
        names: NameSet,
        encoder: Encoder,
        model_path: str,
        pooling: str | None = None,
        embeddings: np.ndarray | None = None,
        batch_size: int = 256,
        shards: ShardedIndex | None = None,
        reproducible: bool = False,
        names_dir: str | Path | None = None,
    ):
        """`shards`: search this index folder's FAISS shards instead of embedding the names (see from_index).
        `reproducible`: a query's candidates and scores do not depend on the other queries it is linked with
        (batch-invariant encoding, exact float64 scores), so bulk linking writes the same bytes whatever its
        batching, worker count or thread count; slower to encode. `names_dir`: the names folder the index was built
        from, when not at the path its manifest records (a relocated bundle's)."""
        super().__init__(names)
        self.encoder, self.model_path, self.pooling, self.batch_size = encoder, model_path, pooling, batch_size
        self.reproducible, self.names_dir = reproducible, names_dir
        self.exact = NameIndex(names)
        self.shards = shards
        if shards is not None:
            self._use_shards(shards)
            return
        if embeddings is None:
            embeddings = encoder.encode(self.exact.row_names, batch_size=batch_size, show_progress=len(names) > 20000)
        if embeddings.shape != (len(self.exact.row_names), encoder.dim):
            raise ValueError(
                f"embeddings of shape {embeddings.shape} do not fit {len(self.exact.row_names)} names x {encoder.dim}"
            )
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.index = ExactInnerProduct(self.embeddings)

    @classmethod
    def build(
        cls, names: NameSet, model: str | None = None, pooling: str | None = None, device: str = "cpu", batch_size: int = 256
    ) -> DenseLinker:
        encoder = open_model(model, pooling, device)
        return cls(names, encoder, str(model_folder(model)), pooling, batch_size=batch_size)

    @classmethod
    def from_index(
        cls,
        index_dir: str | Path,
        names: NameSet | None = None,
        encoder: Encoder | None = None,
        *,
        model: str | None = None,
        pooling: str | None = None,
        device: str = "cpu",
        batch_size: int = 256,
        verify: bool = True,
        threads: int | None = None,
        reproducible: bool = False,
        names_dir: str | Path | None = None,
    ) -> DenseLinker:
        """A dense linker over the FAISS shards of `index_dir`. `names` default: the names table the index's
        embeddings were made from (in `names_dir` when given: where it lies now, if moved); `encoder` default:
        `model`, else the model recorded in the index manifest. The encoder must be the model the index was built
        with (same fingerprint)."""
        from bioel_core.index import ShardedIndex

        shards = ShardedIndex(index_dir, verify=verify, threads=threads)
        names_dir = names_dir or shards.details.names.path
        if names is None:
            names = NameSet.from_names_table(names_dir)
        recorded = shards.details.model
        if encoder is None:
            pooling = pooling or recorded.pooling
            encoder = open_model(model or recorded.path, pooling, device)
        model_path = str(model_folder(model)) if model else recorded.path
        return cls(
            names,
            encoder,
            model_path,
            pooling,
            batch_size=batch_size,
            shards=shards,
            reproducible=reproducible,
            names_dir=names_dir,
        )

    def _use_shards(self, shards: ShardedIndex) -> None:
        """Check the model makes the indexed vectors, and map every indexed name_id to the row of its name (-1: not
        in these names)."""
        recorded = shards.details.model
        if recorded.vectors_of(self.encoder) != recorded.vectors():
            raise ModelMismatchError(
                f"{shards.folder}: the index was built from embeddings of the model at {recorded.path} "
                f"(fingerprint {recorded.vectors()[:12]}); this model has fingerprint "
                f"{recorded.vectors_of(self.encoder)[:12]}: queries would not be comparable with the indexed vectors"
            )
        from bioel_core.tables import read_table

        table = read_table(self.names_dir or shards.details.names.path, "names", ["name_id", "name_norm"])
        ids = table.column("name_id").to_numpy()
        names = table.column("name_norm")
        # a slice of names as Python strings at a time: a UMLS-size table's all at once would take gigabytes
        in_slices = (n for at in range(0, len(names), 1 << 16) for n in names.slice(at, 1 << 16).to_pylist())
        rows = np.fromiter((self.exact.row_of.get(n, -1) for n in in_slices), dtype=np.int64, count=len(ids))
        order = np.argsort(ids)
        self._ids, self._rows = ids[order], rows[order]
        self.embeddings, self.index = None, None

    def _rows_of(self, name_ids: np.ndarray) -> np.ndarray:
        if not len(self._ids):
            return np.full(len(name_ids), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self._ids, name_ids), len(self._ids) - 1)
        return np.where(self._ids[at] == name_ids, self._rows[at], -1)

    def _ranked_rows(self, vectors: np.ndarray, width: int) -> list[list[tuple[int, float]]]:
        """Per query, (name row, score) best first, each row once."""
        if self.reproducible:
            width += RESCORE_MARGIN
        if self.shards is None:
            scores, rows = self.index.search(vectors, min(width, self.index.ntotal))
            if self.reproducible:
                scores, rows = self._rescored(vectors, scores, rows)
            return [[(r, s) for r, s in zip(rows[j], scores[j]) if r >= 0] for j in range(len(vectors))]
        # a row with several names in the index comes back once per name_id; each name_id is one of its
        # entries, so width hits still give enough entries to fill k
        found = self.shards.search(vectors, width, exact_scores=self.reproducible)
        out = []
        for ids, scores in zip(found.name_ids, found.scores):
            rows, seen = [], set()
            for r, s in zip(self._rows_of(ids).tolist(), scores.tolist()):
                if r >= 0 and r not in seen:
                    seen.add(r)
                    rows.append((r, s))
            out.append(rows)
        return out

    def _rescored(self, vectors: np.ndarray, scores: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """In-memory hits re-scored in float64 and re-ranked, ties by row (ShardedIndex.search's exact_scores)."""
        stored = self.embeddings[np.maximum(rows, 0)].astype(np.float64)
        exact = np.einsum("qd,qkd->qk", vectors.astype(np.float64), stored).astype(np.float32)
        exact[rows < 0] = -np.inf
        order = np.lexsort((np.where(rows < 0, np.iinfo(np.int64).max, rows), -exact), axis=1)
        return np.take_along_axis(exact, order, axis=1), np.take_along_axis(rows, order, axis=1)

    def options(self) -> dict:
        options = {"model": self.model_path, "pooling": self.pooling, "fingerprint": self.encoder.fingerprint()}
        if self.shards is not None:
            options["index"] = str(self.shards.folder.resolve())
        return options

    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        out = [self.exact.candidates(self.names, q, k) for q in queries]
        todo = [i for i, c in enumerate(out) if len(c) < k]
        if not todo:
            return out
        vectors = self.encoder.encode([queries[i] for i in todo], batch_size=self.batch_size, batch_invariant=self.reproducible)
        for j, ranked in enumerate(self._ranked_rows(vectors, k + 1)):
            i = todo[j]
            self.exact.fill(self.names, out[i], queries[i], ranked, k)
        return out

    def search_vectors(self, vectors: np.ndarray, k: int, texts=None) -> list[list[Candidate]]:
        """The k best concepts for query vectors made elsewhere (a document model's mention vectors), by the
        same ranking as `search` without its exact-name shortcut. `texts` (the mentions) are not needed here;
        a rerank stage over this linker reads them."""
        out: list[list[Candidate]] = []
        for ranked in self._ranked_rows(np.ascontiguousarray(vectors, dtype=np.float32), k + 1):
            found: list[Candidate] = []
            self.exact.fill(self.names, found, "", ranked, k)
            out.append(found)
        return out

    def _save_state(self, folder: Path) -> None:
        if self.shards is None:
            np.save(folder / EMBEDDINGS, self.embeddings, allow_pickle=False)

    @classmethod
    def _load_state(cls, folder: Path, names: NameSet, options: dict) -> DenseLinker:
        encoder = open_model(options["model"], options.get("pooling"))
        if encoder.fingerprint() != options["fingerprint"]:
            raise ValueError(
                f"{folder}: the model at {options['model']} is not the one these embeddings were made with "
                f"(fingerprint {encoder.fingerprint()[:12]} != {options['fingerprint'][:12]})"
            )
        if options.get("index"):
            return cls.from_index(options["index"], names, encoder, model=options["model"], pooling=options.get("pooling"))
        embeddings = np.load(folder / EMBEDDINGS, allow_pickle=False)
        return cls(names, encoder, options["model"], options.get("pooling"), embeddings=embeddings)
