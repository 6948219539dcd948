"""The output layer: how every verb (and `bioel refresh`) lays out, writes, describes and publishes an output
folder. Beam-free: pipelines pass an adapter over Beam's FileSystems, refresh the local filesystem."""

from bioel_core.outputs.fs import LOCAL, FileSystem, LocalFileSystem, absolute, as_path, is_local
from bioel_core.outputs.layout import (MANIFEST, QUALITY, STATS_FILE, check_num_shards, embeddings_table, name_chunks,
                                       parquet_bytes, parquet_rows, read_json, shard_name, write_json, write_parquet)
from bioel_core.outputs.lock import LOCK, ConcurrentRunError, OutputError
from bioel_core.outputs.manifest import VERBS, Manifest, utc_now
from bioel_core.outputs.publish import FAULT_ENV, STEPS, OutputFolder, read_pointer

__all__ = [
    "FAULT_ENV", "LOCAL", "LOCK", "MANIFEST", "QUALITY", "STATS_FILE", "STEPS", "VERBS", "ConcurrentRunError", "FileSystem",
    "LocalFileSystem", "Manifest", "OutputError", "OutputFolder", "absolute", "as_path", "check_num_shards", "embeddings_table", "is_local",
    "name_chunks", "parquet_bytes", "parquet_rows", "read_json", "read_pointer", "shard_name", "utc_now",
    "write_json", "write_parquet",
]
