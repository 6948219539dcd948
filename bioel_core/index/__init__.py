"""FAISS shards: building one shard's index and id map, and searching all shards of a folder as one.

No Beam here: `pipelines/build_index.py` distributes `build_shard` over a runner; anything can open the
result with `ShardedIndex`. Layout of an index folder: `bioel_core.index.layout`; parameters and how
their defaults scale with shard size: `bioel_core.index.spec`. Names are imported on first use: the CLI
reads `spec` without loading FAISS.
"""

from bioel_core.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["ShardFiles", "build_index", "build_shard", "serialize"], "bioel_core.index.build"),
    **dict.fromkeys(["PIPELINE", "shard_of"], "bioel_core.index.layout"),
    **dict.fromkeys(["IndexIntegrityError", "SearchResult", "ShardedIndex", "read_index_manifest"], "bioel_core.index.sharded"),
    **dict.fromkeys(["KINDS", "IndexSpec"], "bioel_core.index.spec"),
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
