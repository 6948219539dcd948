"""Building one shard: its FAISS index (serialized in FAISS's native format) and its id map (Parquet).

An ivf-pq shard with a re-ranking store is written as two FAISS files: the IVF-PQ index and the store (the
`refine_index` of FAISS's IndexRefine, row for row). A search maps the store only while it re-ranks that
shard's shortlist (`ShardedIndex`), so a process holds one shard's store pages at a time: at 10M names the
stores are 7.7 GB and the PQ codes 0.5 GB.

Pure functions of the shard's rows: rows are put in name_id order first, so the same rows give the same
files whatever order a runner delivered them in. Flat and IVF shards are byte-identical on re-runs whatever the
FAISS threads (IVF training runs on TRAIN_THREADS); an HNSW graph built with several threads depends on their
interleaving (build with threads=1 to pin it).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bioel_core.index.layout import ID_MAP_SCHEMA, SHARD_FILE_KEYS, shard_file
from bioel_core.index.spec import IndexSpec

# FAISS's k-means sums the points of each thread's part of the sample, so trained centroids (and every vector's
# list) depend on the thread count: IVF training runs on this many threads whatever the machine, worker count or
# faiss_threads, which then set the threads of adding and searching only
TRAIN_THREADS = 8


@contextmanager
def faiss_threads(threads: int | None) -> Iterator[None]:
    """FAISS's threads set to `threads` (None: left as they are) for the block, then put back."""
    before = faiss.omp_get_max_threads()
    if threads:
        faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


@dataclass
class ShardFiles:
    files: dict[str, bytes]  # path relative to the index folder -> the file's bytes
    record: dict  # this shard's entry in the manifest


def normalized(vectors: np.ndarray) -> np.ndarray:
    """A C-contiguous float32 copy with unit rows (zero rows stay zero): inner product is then cosine."""
    out = np.array(vectors, dtype=np.float32, order="C", copy=True)
    faiss.normalize_L2(out)
    return out


def set_search_params(index: faiss.Index, params: dict) -> None:
    """nprobe / efSearch / refine k_factor from a shard's parameters (FAISS also stores them in the file;
    setting them here lets a reader override them)."""
    space = faiss.ParameterSpace()
    for key, faiss_name in (("nprobe", "nprobe"), ("ef_search", "efSearch")):
        if params.get(key) is not None:
            space.set_index_parameter(index, faiss_name, params[key])
    if params.get("refine_k") is not None and isinstance(faiss.downcast_index(index), faiss.IndexRefine):
        space.set_index_parameter(index, "k_factor_rf", params["refine_k"])


def split_refine(index: faiss.Index) -> dict[str, faiss.Index]:
    """{"index": the index searched first, "refine": its re-ranking store} for a FAISS IndexRefine, else
    {"index": index}. The parts stay owned by `index`."""
    index = faiss.downcast_index(index)
    if not isinstance(index, faiss.IndexRefine):
        return {"index": index}
    return {"index": faiss.downcast_index(index.base_index), "refine": faiss.downcast_index(index.refine_index)}


def build_index(vectors: np.ndarray, spec: IndexSpec, seed_key: tuple[int, ...] = ()) -> tuple[faiss.Index, dict]:
    """One FAISS index over `vectors` (normalized here, on a copy), rows in the given order; returns it with
    the parameters it was built with. IVF kinds train on a sample drawn with the seed (spec.seed, *seed_key)."""
    return _build_normalized(normalized(vectors), spec, seed_key)


def _build_normalized(vectors: np.ndarray, spec: IndexSpec, seed_key: tuple[int, ...]) -> tuple[faiss.Index, dict]:
    n, d = vectors.shape
    params = spec.resolve(n, d)
    index = faiss.index_factory(d, params["factory"], faiss.METRIC_INNER_PRODUCT)
    if params["kind"] == "hnsw":
        index.hnsw.efConstruction = params["ef_construction"]
    if not index.is_trained:
        seed = [spec.seed, *seed_key]
        rng = np.random.default_rng(seed)
        sample = np.sort(rng.choice(n, size=params["train_size"], replace=False))
        ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
        ivf.cp.seed = spec.seed  # FAISS's k-means seeding, fixed too
        if params["kind"] == "ivf-pq":
            ivf.pq.cp.seed = spec.seed
        with faiss_threads(TRAIN_THREADS):
            index.train(vectors[sample])
        params["training"] = {"sample_seed": seed, "kmeans_seed": spec.seed, "kmeans_iterations": ivf.cp.niter}
    index.add(vectors)
    set_search_params(index, params)
    return index, params


def serialize(index: faiss.Index) -> bytes:
    """The bytes faiss.write_index would write."""
    return faiss.serialize_index(index).tobytes()


def id_map_bytes(name_ids: np.ndarray, concept_ids: pa.Array | list[str]) -> bytes:
    buf = io.BytesIO()
    table = pa.Table.from_arrays([pa.array(name_ids, pa.int64()), pa.array(concept_ids, pa.string())], schema=ID_MAP_SCHEMA)
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def build_shard(
    shard: int,
    num_shards: int,
    name_ids: np.ndarray,
    concept_ids: pa.Array | list[str],
    vectors: np.ndarray,
    spec: IndexSpec,
    dimension: int,
) -> ShardFiles:
    """Shard `shard` of `num_shards`: rows sorted by name_id, index built, both files serialized.
    A shard can hold millions of vectors: each copy is dropped as soon as the next one exists."""
    name_ids = np.asarray(name_ids, dtype=np.int64)
    order = np.argsort(name_ids, kind="stable")
    name_ids, vectors = name_ids[order], np.asarray(vectors, dtype=np.float32).reshape(-1, dimension)[order]
    faiss.normalize_L2(vectors)  # in place: the reordering above already made a copy
    concept_ids = pa.array(concept_ids, pa.string()).take(pa.array(order))
    index, params = _build_normalized(vectors, spec, (shard,))
    del vectors
    data = {key: serialize(part) for key, part in split_refine(index).items()}
    ntotal = int(index.ntotal)
    del index
    data["id_map"] = id_map_bytes(name_ids, concept_ids)
    record, files = {"shard": shard, "vectors": ntotal, "params": params}, {}
    for key in (key for key in SHARD_FILE_KEYS if key in data):
        relative = shard_file(key, shard, num_shards)
        files[relative] = data[key]
        record.update(
            {f"{key}_file": relative, f"{key}_sha256": hashlib.sha256(data[key]).hexdigest(), f"{key}_bytes": len(data[key])}
        )
    return ShardFiles(files, record)
