"""Reading the tables the pipelines write, refusing other schema versions (a folder's manifest, and so whether it
is a finished output, is read by bioel_core.outputs.reading; re-exported here for the many readers that import it).

Every reader takes the FileSystem it reads through (bioel_core.outputs; default: the local disk), so the quality
checks read a gs:// or s3:// output as they read a local one; folders are named by strings or, when local, Paths.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bioel_core.outputs.errors import IncompleteOutputError  # noqa: F401 (re-exported)
from bioel_core.outputs.fs import LOCAL, FileSystem, as_path, is_local
from bioel_core.outputs.names import MANIFEST  # noqa: F401 (re-exported)
from bioel_core.outputs.reading import data_root, read_manifest, read_output_manifest  # noqa: F401 (re-exported)
from schemas import TABLE_SCHEMAS, check_schema

KB_PIPELINE = "ingest-kb"  # the verb whose outputs (concepts, names) every later stage reads


def stable_shard(key: str, num_shards: int) -> int:
    """The Parquet shard of a row keyed `key` (the pipelines shard names by str(name_id)): stable across runs and
    machines, so a KB refresh writes a new row where `bioel embed` would."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") % num_shards


def table_files(output_dir: str | Path, table: str, fs: FileSystem = LOCAL) -> list[Path | str]:
    folder = fs.join(str(data_root(output_dir, fs=fs)), table)
    return [as_path(fs.join(folder, name)) for name in fs.children(folder) if name.endswith(".parquet")]


@contextmanager
def parquet_file(path: str | Path, fs: FileSystem = LOCAL) -> Iterator[pq.ParquetFile]:
    """A Parquet file read through `fs`, open while the block runs. pyarrow seeks (the footer, then the columns it
    reads): every stream Beam opens on an object store is seekable (GCS's BlobReader; filesystemio's DownloaderStream
    for s3://, Azure, HDFS), so a shard is read by ranges where it lies, not copied whole into memory. A local file
    is opened by pyarrow itself (native reads, no Python file object in the way)."""
    if is_local(path):
        with pq.ParquetFile(path) as pf:
            yield pf
        return
    with fs.open(str(path)) as fh:
        yield pq.ParquetFile(fh)


@contextmanager
def _checked(path: str | Path, table: str, fs: FileSystem) -> Iterator[pq.ParquetFile]:
    with parquet_file(path, fs) as pf:
        check_schema(pf.schema_arrow, table, str(path))
        yield pf


def read_table(output_dir: str | Path, table: str, columns: list[str] | None = None, fs: FileSystem = LOCAL) -> pa.Table:
    """All shards of `table` under a finished output folder, schema-checked, in shard order."""
    parts = []
    for f in table_files(output_dir, table, fs):
        with _checked(f, table, fs) as pf:
            parts.append(pf.read(columns=columns))
    if not parts:
        schema = TABLE_SCHEMAS[table]
        return schema.empty_table() if columns is None else pa.schema([schema.field(c) for c in columns]).empty_table()
    return pa.concat_tables(parts)


def iter_batches(
    output_dir: str | Path, table: str, columns: list[str] | None = None, batch_rows: int = 65_536, fs: FileSystem = LOCAL
) -> Iterator[pa.RecordBatch]:
    """The rows of `table` as `read_table` reads them, in record batches of at most `batch_rows`: one pass over a
    table too large to hold at once (the vectors of 10M names are 12 GB)."""
    for f in table_files(output_dir, table, fs):
        yield from file_batches(f, table, columns, batch_rows, fs)


def file_batches(
    path: str | Path, table: str, columns: list[str] | None = None, batch_rows: int = 65_536, fs: FileSystem = LOCAL
) -> Iterator[pa.RecordBatch]:
    """One shard file of `table`, schema-checked, in record batches of at most `batch_rows`."""
    with _checked(path, table, fs) as pf:
        yield from pf.iter_batches(batch_size=batch_rows, columns=columns)
