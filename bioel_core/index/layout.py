"""The index folder: which shard a name lives in, file names, and the id map's schema.

INDEX_DIR/shards/shard-00000-of-00004.faiss     FAISS native file (faiss.write_index format)
INDEX_DIR/id_maps/shard-00000-of-00004.parquet  row i of the FAISS shard -> (name_id, concept_id)
INDEX_DIR/refine/shard-00000-of-00004.faiss     an ivf-pq shard's re-ranking store (a FAISS flat or scalar
                                                quantizer index, row i = row i of the shard), kinds that have one
INDEX_DIR/manifest.json                         written last; see bioel_core.index.manifest
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from schemas import SCHEMA_VERSION
from schemas.tables import TABLE_KEY, VERSION_KEY

PIPELINE = "build-index"
SHARDS = "shards"
ID_MAPS = "id_maps"
REFINE = "refine"
# the files of a shard, by their key in its manifest record ("<key>_file", "<key>_sha256", "<key>_bytes")
_FILE_KINDS = {"index": (SHARDS, ".faiss"), "id_map": (ID_MAPS, ".parquet"), "refine": (REFINE, ".faiss")}
SHARD_FILE_KEYS = tuple(_FILE_KINDS)
FOLDERS = tuple(folder for folder, _ in _FILE_KINDS.values())
ID_MAP_TABLE = "index_id_map"
ID_MAP_SCHEMA = pa.schema(
    [
        pa.field("name_id", pa.int64(), nullable=False),
        pa.field("concept_id", pa.string(), nullable=False),
    ],
    metadata={VERSION_KEY: SCHEMA_VERSION.encode(), TABLE_KEY: ID_MAP_TABLE.encode()},
)
SHARD_ASSIGNMENT = "splitmix64(name_id) mod num_shards"


def shard_of(name_ids, num_shards: int) -> np.ndarray:
    """The shard of each name_id, stable across runs and machines, so a refresh rebuilds only the shards
    whose names changed. name_ids are already hashes, but ids from elsewhere may be sequential or
    strided; the splitmix64 finalizer spreads those evenly too."""
    if num_shards < 1:
        raise ValueError(f"the number of shards must be at least 1, got {num_shards}")
    x = np.asarray(name_ids, dtype=np.int64).astype(np.uint64)  # two's-complement wrap for negative ids
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return (x % np.uint64(num_shards)).astype(np.int64)


def shard_stem(shard: int, num_shards: int) -> str:
    return f"shard-{shard:05d}-of-{num_shards:05d}"


def shard_file(key: str, shard: int, num_shards: int) -> str:
    """The file of `key` (one of SHARD_FILE_KEYS) of a shard, relative to the index folder, '/'-separated as in
    the manifest."""
    folder, suffix = _FILE_KINDS[key]
    return f"{folder}/{shard_stem(shard, num_shards)}{suffix}"


def shard_files(record: dict) -> dict[str, str]:
    """A shard's files by key, as its manifest record lists them (no re-ranking store: no "refine")."""
    return {key: record[f"{key}_file"] for key in SHARD_FILE_KEYS if f"{key}_file" in record}


def shard_bytes(record: dict) -> int:
    """A shard's size on disk, all its files."""
    return sum(record[f"{key}_bytes"] for key in shard_files(record))


def check_id_map_schema(found: pa.Schema, where: str) -> None:
    version = (found.metadata or {}).get(VERSION_KEY, b"<none>").decode()
    if version != SCHEMA_VERSION:
        raise ValueError(f"{where}: id map has schema version {version}, this bioel reads {SCHEMA_VERSION}")
    if not found.remove_metadata().equals(ID_MAP_SCHEMA.remove_metadata()):
        raise ValueError(f"{where}: columns {found.names} are not an index id map {ID_MAP_SCHEMA.names}")
