"""FAISS shards: building one shard's index and id map, and searching all shards of a folder as one.

No Beam here: `pipelines/build_index.py` distributes `build_shard` over a runner; anything can open the
result with `ShardedIndex`. Layout of an index folder: `bioel_core.index.layout`; parameters and how
their defaults scale with shard size: `bioel_core.index.spec`.
"""

from bioel_core.index.build import ShardFiles, build_index, build_shard, serialize
from bioel_core.index.layout import PIPELINE, shard_of
from bioel_core.index.sharded import IndexIntegrityError, SearchResult, ShardedIndex, read_index_manifest
from bioel_core.index.spec import KINDS, IndexSpec

__all__ = ["KINDS", "PIPELINE", "IndexIntegrityError", "IndexSpec", "SearchResult", "ShardFiles", "ShardedIndex",
           "build_index", "build_shard", "read_index_manifest", "serialize", "shard_of"]
