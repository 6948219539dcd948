"""Searching every shard of an index folder as one index.

Opening checks everything a search relies on before the first query: the manifest is complete and of
this schema version, every shard's files are there (a missing one is named), their sha256 match the
manifest (`verify=True`, the default), each index has the manifest's dimension and as many vectors as its
id map has rows.

`search` asks every shard for its top k and merges them exactly: the result is the k best of all shards
by (score descending, name_id ascending). A shard's top k can cut a group of equal scores anywhere, so
where a shard's k-th score equals the merged k-th score that shard is asked again, deeper, until it has
returned every vector with that score; with flat shards the result is then exactly one IndexFlatIP over
all vectors with ties broken by name_id.

Shard files are mapped, not read into memory. A shard with a re-ranking store (ivf-pq) maps the store only
while that shard is searched and releases it after: the pages of one store at a time count in the process's
memory, not all of them (10M names in 10 shards: 0.8 GB, not 7.7 GB), and the page cache keeps them warm
for the next search as far as the machine's memory allows.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bioel_core.index.build import normalized, set_search_params
from bioel_core.index.exact import ExactInnerProduct
from bioel_core.index.layout import PIPELINE, check_id_map_schema, shard_files
from bioel_core.outputs.details import IndexDetails
from bioel_core.outputs.fs import LOCAL, FileSystem
from bioel_core.tables import data_root, read_output_manifest


class IndexIntegrityError(ValueError):
    """An index folder whose files do not match its manifest."""


class SearchResult(NamedTuple):
    scores: np.ndarray  # (q, k) float32, best first; -inf where fewer than k vectors were found
    name_ids: np.ndarray  # (q, k) int64; -1 where nothing was found
    concept_ids: np.ndarray  # (q, k) object: str, None where nothing was found


@dataclass
class Shard:
    number: int
    index: faiss.Index  # searched first; the whole index unless the shard has a re-ranking store
    name_ids: np.ndarray
    concept_ids: pa.Array
    params: dict
    refine_path: Path | None = None  # the re-ranking store, mapped only while a search or a check uses it
    # a flat shard's mapped vectors searched by one matrix product and a top-k: the same hits as its IndexFlatIP
    # (ties by row), 4.3x FAISS's flat search on this project's CPU (benchmarks/flat_search.py; RESULTS.md)
    exact: ExactInnerProduct | None = None

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self.exact is not None:
            return self.exact.search(queries, k)
        with self._searchable() as index:
            return index.search(queries, k)

    def stored_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The vectors the shard stores at `rows` (a PQ index's decoded codes; a refined one's store vectors)."""
        with self._searchable() as index:
            try:
                return index.reconstruct_batch(rows.astype(np.int64))
            except RuntimeError:  # an IVF index reconstructs by id only once it has a direct map
                faiss.extract_index_ivf(self.index).make_direct_map()
                return index.reconstruct_batch(rows.astype(np.int64))

    def mapped_store(self) -> faiss.Index:
        """The re-ranking store, mapped until the returned index is dropped."""
        return faiss.read_index(str(self.refine_path), faiss.IO_FLAG_MMAP_IFC)

    @contextmanager
    def _searchable(self):
        """The index to search: with a re-ranking store, FAISS's IndexRefine over the mapped store, unmapped
        when the block ends (the caller keeps no reference past it)."""
        if self.refine_path is None:
            yield self.index
            return
        store = self.mapped_store()
        refined = faiss.IndexRefine(self.index, store)
        set_search_params(refined, {"refine_k": self.params["refine_k"]})
        try:
            yield refined
        finally:
            del refined, store


def flat_vectors(index: faiss.Index) -> ExactInnerProduct | None:
    """An exact search over a flat inner-product index's own (mapped) vector store, without a copy; None for
    any other kind."""
    flat = faiss.downcast_index(index)
    if not isinstance(flat, faiss.IndexFlatIP) or not flat.ntotal:
        return None
    return ExactInnerProduct(faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(flat.ntotal, flat.d))


def file_sha256(path: Path | str, copy_to: Path | str | None = None, fs: FileSystem = LOCAL) -> str:
    """sha256 of a file's bytes, read through `fs`; with `copy_to` (a local file), the bytes are written there as they
    are read (a copy and its check in one pass)."""
    digest = hashlib.sha256()
    with fs.open(str(path)) as fh, open(copy_to, "wb") if copy_to else nullcontext() as out:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            if out:
                out.write(chunk)
    return digest.hexdigest()


def read_index_manifest(folder: str | Path, flag: str = "", fs: FileSystem = LOCAL) -> dict:
    """A finished build-index manifest of this schema version."""
    return read_output_manifest(folder, PIPELINE, flag, fs)


class ShardedIndex:
    def __init__(
        self,
        folder: str | Path,
        *,
        verify: bool = True,
        threads: int | None = None,
        nprobe: int | None = None,
        ef_search: int | None = None,
        refine_k: int | None = None,
    ):
        """`threads`: FAISS's OpenMP threads while this index searches (None: FAISS's default, every core); flat
        shards are searched on torch's threads.
        nprobe / ef_search / refine_k override the built values on the shards they apply to."""
        self.folder = Path(folder)
        self.threads = threads
        self.manifest = read_index_manifest(folder)
        self.details = IndexDetails.from_dict(self.manifest)
        self.root = data_root(folder, self.manifest)  # the generation holding the shard files
        self.dimension = int(self.details.index.dimension)
        records = sorted(self.details.shards, key=lambda r: r["shard"])
        if [r["shard"] for r in records] != list(range(self.details.num_shards)):
            raise IndexIntegrityError(
                f"{folder}: the manifest lists shards {[r['shard'] for r in records]}, expected 0..{self.details.num_shards - 1}"
            )
        missing = [f for r in records for f in shard_files(r).values() if not (self.root / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{folder}: index shard file(s) missing: {', '.join(missing)}")
        if verify:
            files = [(self.root / relative, r[f"{key}_sha256"]) for r in records for key, relative in shard_files(r).items()]
            # hashlib hashes outside the GIL: the files of a UMLS-size index (6.7 GB) on every core, not one
            with ThreadPoolExecutor(max_workers=max(1, min(len(files), os.cpu_count() or 1))) as pool:
                found = list(pool.map(file_sha256, (path for path, _ in files)))
            for (path, recorded), sha in zip(files, found):
                if sha != recorded:
                    raise IndexIntegrityError(f"{path}: sha256 does not match the manifest (corrupted or replaced)")
        overrides = {"nprobe": nprobe, "ef_search": ef_search, "refine_k": refine_k}
        self.shards = [self._open_shard(r, overrides) for r in records]

    def _open_shard(self, record: dict, overrides: dict) -> Shard:
        path = self.root / record["index_file"]
        # mapped, not copied: vector and code stores are read from the page cache, which every worker process
        # on the machine shares, and only the pages a search touches become resident
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        if index.d != self.dimension:
            raise IndexIntegrityError(f"{path}: dimension {index.d}, the manifest says {self.dimension}")
        if index.ntotal != record["vectors"]:
            raise IndexIntegrityError(f"{path}: {index.ntotal} vectors, the manifest says {record['vectors']}")
        ids_path = self.root / record["id_map_file"]
        ids = pq.read_table(ids_path)
        check_id_map_schema(ids.schema, str(ids_path))
        if ids.num_rows != index.ntotal:
            raise IndexIntegrityError(f"{ids_path}: {ids.num_rows} rows for {index.ntotal} vectors")
        params = dict(record["params"])
        params.update({k: v for k, v in overrides.items() if v is not None and k in params})
        set_search_params(index, params)
        shard = Shard(
            record["shard"],
            index,
            ids.column("name_id").to_numpy(),
            ids.column("concept_id").combine_chunks(),
            params,
            self.root / record["refine_file"] if "refine_file" in record else None,
            None if "refine_file" in record else flat_vectors(index),
        )
        if shard.refine_path is not None:
            store = shard.mapped_store()
            if (store.d, store.ntotal) != (index.d, index.ntotal):
                raise IndexIntegrityError(
                    f"{shard.refine_path}: {store.ntotal} vectors of dimension {store.d} to re-rank "
                    f"a shard of {index.ntotal} of dimension {index.d}"
                )
        return shard

    @property
    def ntotal(self) -> int:
        return sum(s.ntotal for s in self.shards)

    def search(self, queries: np.ndarray, k: int, exact_scores: bool = False) -> SearchResult:
        """Top k of every shard merged: (scores, name_ids, concept_ids), each (q, k), best first.

        `exact_scores`: each hit's score recomputed in float64 from the vector its shard stores (then rounded
        to float32) and the hits re-ranked by it, ties by name_id. FAISS's own scores depend on how many
        queries are searched together (it switches to BLAS at 20 queries, whose blocking follows the batch
        shape), so without this a query's score changes in the last bits with its batch."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        queries = np.asarray(queries)
        if queries.ndim != 2 or queries.shape[1] != self.dimension:
            raise ValueError(f"queries of shape {queries.shape}; this index holds {self.dimension}-d vectors")
        q = normalized(queries)
        if self.threads:
            faiss.omp_set_num_threads(self.threads)
        nq, everyone = len(q), np.arange(len(q))
        parts = []  # (shard, query rows, D, I)
        for shard in self.shards:
            width = min(k, shard.ntotal)
            if width:
                parts.append((shard, everyone, *shard.search(q, width)))
        top = _merge(parts, nq, k)
        parts += self._deepen_cut_ties(parts, q, top[0][:, k - 1])
        merged = _merge(parts, nq, k)
        return self._result(self._rescored(q, merged) if exact_scores else merged)

    def _rescored(self, q: np.ndarray, merged):
        scores, name_ids, shard_numbers, rows = merged
        exact = np.full(scores.shape, -np.inf, dtype=np.float32)
        for shard in self.shards:
            where = shard_numbers == shard.number
            if where.any():
                stored = shard.stored_vectors(rows[where]).astype(np.float64)
                queries = np.broadcast_to(q[:, None, :], (*scores.shape, q.shape[1]))[where].astype(np.float64)
                exact[where] = np.einsum("ij,ij->i", queries, stored).astype(np.float32)
        order = np.lexsort((np.where(name_ids < 0, np.iinfo(np.int64).max, name_ids), -exact), axis=1)
        pick = lambda a: np.take_along_axis(a, order, axis=1)  # noqa: E731
        return pick(exact), pick(name_ids), pick(shard_numbers), pick(rows)

    @staticmethod
    def _deepen_cut_ties(parts: list, q: np.ndarray, kth: np.ndarray) -> list:
        """Where a shard's last returned score equals the merged k-th score, it may hold more vectors of
        that score that it cut; search it again with doubling widths until its last score falls below.
        The first answers of those (shard, query) pairs are blanked and the deeper ones returned."""
        extra = []
        for shard, _, D, I in list(parts):
            if D.shape[1] == shard.ntotal:
                continue
            todo = np.nonzero((I[:, -1] >= 0) & (D[:, -1] == kth))[0]
            if not len(todo):
                continue
            I[todo] = -1
            width = D.shape[1]
            while len(todo):
                width = min(2 * width, shard.ntotal)
                D2, I2 = shard.search(q[todo], width)
                done = (width == shard.ntotal) | (I2[:, -1] < 0) | (D2[:, -1] < kth[todo])
                extra.append((shard, todo[done], D2[done], I2[done]))
                todo = todo[~done]
        return extra

    def _result(self, merged) -> SearchResult:
        scores, name_ids, shard_numbers, rows = merged
        concept_ids = np.full(scores.shape, None, dtype=object)
        for shard in self.shards:
            where = shard_numbers == shard.number
            if where.any():
                concept_ids[where] = shard.concept_ids.take(pa.array(rows[where])).to_pylist()
        return SearchResult(scores, name_ids, concept_ids)


def _merge(parts: list, nq: int, k: int):
    """The k best candidates per query over all parts by (score desc, name_id asc):
    (scores, name_ids, shard numbers, rows), each (nq, k), padded with -inf / -1."""
    qi, sc, nid, sh, rw = [], [], [], [], []
    for shard, qrows, D, I in parts:
        found = I >= 0
        qi.append(np.repeat(qrows, D.shape[1])[found.ravel()])
        sc.append(D[found])
        rw.append(I[found])
        nid.append(shard.name_ids[I[found]])
        sh.append(np.full(int(found.sum()), shard.number))
    scores = np.full((nq, k), -np.inf, dtype=np.float32)
    name_ids = np.full((nq, k), -1, dtype=np.int64)
    shard_of_hit = np.full((nq, k), -1, dtype=np.int64)
    rows = np.full((nq, k), -1, dtype=np.int64)
    if not parts:
        return scores, name_ids, shard_of_hit, rows
    qi, sc, nid, sh, rw = (np.concatenate(a) for a in (qi, sc, nid, sh, rw))
    order = np.lexsort((nid, -sc, qi))
    qi = qi[order]
    rank = np.arange(len(qi)) - np.searchsorted(qi, qi)
    keep = rank < k
    at = (qi[keep], rank[keep])
    scores[at], name_ids[at] = sc[order][keep], nid[order][keep]
    shard_of_hit[at], rows[at] = sh[order][keep], rw[order][keep]
    return scores, name_ids, shard_of_hit, rows
