"""Dense linking against FAISS shards built by `bioel build-index`: the KB's names are encoded once by
`bioel embed`, so a worker only loads the shards and encodes its queries.

Exact matches come first (every concept whose name equals the normalized query, score 1), as in the
other linkers; the rest of the top k comes from the sharded search, one candidate per (concept, name).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bioel_core.corpora.records import Candidate
from bioel_core.linking.base import Linker
from bioel_core.linking.dictionary import NameSet
from bioel_core.linking.exact import NameIndex
from bioel_core.tables import read_table


class IndexedDenseLinker(Linker):
    kind = "dense-index"

    def __init__(self, names: NameSet, encoder, index, names_dir: str | Path, model_path: str, batch_size: int = 256):
        """`index`: a bioel_core.index.ShardedIndex built from the embeddings of `names_dir` with `encoder`
        (read from `model_path`)."""
        super().__init__(names)
        fingerprint = index.manifest.get("model_fingerprint")
        if fingerprint != encoder.fingerprint():
            raise ValueError(f"{index.folder}: built with the model of fingerprint {str(fingerprint)[:12]}, not with this one "
                             f"({encoder.fingerprint()[:12]}); pass the model the index was built with")
        self.encoder, self.index, self.names_dir, self.batch_size = encoder, index, str(names_dir), batch_size
        self.model_path = str(model_path)
        self.exact = NameIndex(names)
        table = read_table(names_dir, "names", ["name_id", "name_norm"])
        self.name_of = dict(zip(table.column("name_id").to_pylist(), table.column("name_norm").to_pylist()))

    @classmethod
    def build(cls, names: NameSet, index_dir: str | Path, names_dir: str | Path, model: str | None = None,
              device: str = "cpu") -> IndexedDenseLinker:
        from bioel_core.index import ShardedIndex
        from bioel_core.linking.dense import model_folder, open_model

        return cls(names, open_model(model, device=device), ShardedIndex(index_dir), names_dir, str(model_folder(model)))

    def options(self) -> dict:
        return {"index_dir": str(self.index.folder), "names_dir": self.names_dir, "model": self.model_path}

    @classmethod
    def _load_state(cls, folder: Path, names: NameSet, options: dict) -> IndexedDenseLinker:
        return cls.build(names, **options)

    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        out = [self.exact.candidates(self.names, q, k) for q in queries]
        todo = [i for i, c in enumerate(out) if len(c) < k]
        if not todo:
            return out
        vectors = self.encoder.encode([queries[i] for i in todo], batch_size=self.batch_size)
        # deeper than k: the exact names already listed come back from the index too and are skipped
        found = self.index.search(np.ascontiguousarray(vectors, dtype=np.float32), k + max(len(out[i]) for i in todo))
        for j, i in enumerate(todo):
            seen = {(c.concept_ids[0], c.name) for c in out[i]}
            for score, name_id, concept_id in zip(found.scores[j], found.name_ids[j], found.concept_ids[j]):
                if len(out[i]) == k or name_id < 0:
                    break
                name = self.name_of[int(name_id)]
                if (concept_id, name) not in seen:
                    seen.add((concept_id, name))
                    out[i].append(Candidate((concept_id,), name, float(score)))
        return out
