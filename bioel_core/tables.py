"""Reading the tables the pipelines write, refusing incomplete outputs and other schema versions."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bioel_core.guards import read_json_object
from bioel_core.outputs.layout import MANIFEST
from schemas import SCHEMA_VERSION, TABLE_SCHEMAS, check_schema

KB_PIPELINE = "ingest-kb"  # the verb whose outputs (concepts, names) every later stage reads


class IncompleteOutputError(RuntimeError):
    pass


def read_manifest(output_dir: str | Path) -> dict:
    """The manifest of a finished output folder; an unfinished one is an error, not an empty table."""
    path = Path(output_dir) / MANIFEST
    if not Path(output_dir).is_dir():
        raise FileNotFoundError(f"no such folder: {output_dir}")
    if not path.is_file():
        raise IncompleteOutputError(f"{output_dir} is not a finished bioel output (no {MANIFEST}): interrupted, still "
                                    f"running, or not written by bioel")
    manifest = read_json_object(path, "bioel manifest")
    if not manifest.get("complete"):
        raise IncompleteOutputError(f"{path}: output is marked incomplete")
    return manifest


def read_output_manifest(output_dir: str | Path, pipeline: str, flag: str = "") -> dict:
    """The manifest of a finished `bioel {pipeline}` output of this bioel's schema version; any other folder
    (another verb's output, an unfinished run, an older layout) is refused, naming the `flag` it came from."""
    where = f"{flag} {output_dir}".strip()
    manifest = read_manifest(output_dir)
    if manifest.get("pipeline") != pipeline:
        raise ValueError(f"{where}: written by pipeline {manifest.get('pipeline')!r}, not by `bioel {pipeline}`")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{where}: manifest schema version {manifest.get('schema_version')}, "
                         f"this bioel reads {SCHEMA_VERSION}; re-run `bioel {pipeline}`")
    return manifest


def stable_shard(key: str, num_shards: int) -> int:
    """The Parquet shard of a row keyed `key` (the pipelines shard names by str(name_id)): stable across runs and
    machines, so a KB refresh writes a new row where `bioel embed` would."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") % num_shards


def data_root(output_dir: str | Path, manifest: dict | None = None) -> Path:
    """Where a finished output's tables are: the generation its manifest names (the folder itself for a
    hand-made folder whose manifest names none)."""
    manifest = read_manifest(output_dir) if manifest is None else manifest
    return Path(output_dir) / manifest.get("generation", "")


def table_files(output_dir: str | Path, table: str) -> list[Path]:
    return sorted((data_root(output_dir) / table).glob("*.parquet"))


def _checked(path: Path, table: str) -> pq.ParquetFile:
    pf = pq.ParquetFile(path)
    check_schema(pf.schema_arrow, table, str(path))
    return pf


def read_table(output_dir: str | Path, table: str, columns: list[str] | None = None) -> pa.Table:
    """All shards of `table` under a finished output folder, schema-checked, in shard order."""
    parts = [_checked(f, table).read(columns=columns) for f in table_files(output_dir, table)]
    if not parts:
        schema = TABLE_SCHEMAS[table]
        return schema.empty_table() if columns is None else pa.schema([schema.field(c) for c in columns]).empty_table()
    return pa.concat_tables(parts)


def iter_batches(output_dir: str | Path, table: str, columns: list[str] | None = None,
                 batch_rows: int = 65_536) -> Iterator[pa.RecordBatch]:
    """The rows of `table` as `read_table` reads them, in record batches of at most `batch_rows`: one pass over a
    table too large to hold at once (the vectors of 10M names are 12 GB)."""
    for f in table_files(output_dir, table):
        yield from file_batches(f, table, columns, batch_rows)


def file_batches(path: Path, table: str, columns: list[str] | None = None, batch_rows: int = 65_536) -> Iterator[pa.RecordBatch]:
    """One shard file of `table`, schema-checked, in record batches of at most `batch_rows`."""
    yield from _checked(path, table).iter_batches(batch_size=batch_rows, columns=columns)
