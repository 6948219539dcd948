"""An external merge sort for tables larger than a worker's memory: sorted runs spilled as Arrow IPC, merged
into one sorted Parquet shard, rows that share a key reduced to one on the way.

A pipeline cuts each batch of rows by output shard, sorts every piece by the table's key and spills it
(`run_bytes`); the shard's writer then streams the runs of its shard together (`merge_runs`), holding one
record batch of each run, never the whole shard, and writes a row group whenever one fills (`write_rows`).
More than MAX_FAN_IN runs are first merged, MAX_FAN_IN at a time and without reducing, into longer runs
(`combine_runs`), so memory and open files stay bounded however large the table. Rows are tuples in the
schema's column order.
"""

from __future__ import annotations

import hashlib
import heapq
import io
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

SPILL = "_spill"  # the staged generation's folder of runs, emptied by the writers and removed before publishing
RUN_BATCH_ROWS = 1024  # a run's record batch: what its merge holds in memory
MAX_FAN_IN = 64  # runs merged at once
ROW_GROUP_ROWS = 65536

Row = tuple
Reduce = Callable[[list[Row]], Row]


def run_bytes(table: pa.Table, key: str) -> bytes:
    """`table` sorted by `key` (stable) as an Arrow IPC stream of small record batches."""
    buf = io.BytesIO()
    write_run(table.sort_by([(key, "ascending")]), buf)
    return buf.getvalue()


def write_run(table: pa.Table, sink: BinaryIO) -> None:
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=RUN_BATCH_ROWS):
            writer.write_batch(batch)


def run_name(data: bytes) -> str:
    """A run's file name from its content: a retried bundle rewrites the same file, whatever the runner."""
    return hashlib.sha256(data).hexdigest()[:40] + ".arrow"


def read_run(stream: BinaryIO) -> Iterator[Row]:
    for batch in pa.ipc.open_stream(stream):
        yield from zip(*(column.to_pylist() for column in batch.columns))


@dataclass
class MergeCounts:
    rows_in: int = 0
    rows_out: int = 0


def combine_runs(runs: Iterable[Iterator[Row]], key_index: int, schema: pa.Schema, sink: BinaryIO) -> None:
    """Sorted runs merged into one longer run, every row kept (reducing is left to the last merge, so the result
    does not depend on how the runs were grouped)."""
    rows = heapq.merge(*runs, key=itemgetter(key_index))
    with pa.ipc.new_stream(sink, schema) as writer:
        while chunk := list(itertools.islice(rows, RUN_BATCH_ROWS)):
            writer.write_table(rows_table(chunk, schema))


def rows_table(rows: list[Row], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_arrays([pa.array(values, type=field.type) for values, field in zip(zip(*rows), schema)], schema=schema)


def merge_runs(runs: Iterable[Iterator[Row]], key_index: int, reduce: Reduce, counts: MergeCounts) -> Iterator[Row]:
    """The rows of sorted runs in key order, each group of rows with one key reduced to one row."""

    def counted(rows):
        for row in rows:
            counts.rows_in += 1
            yield row

    by_key = itemgetter(key_index)
    for _, group in itertools.groupby(heapq.merge(*(counted(r) for r in runs), key=by_key), key=by_key):
        counts.rows_out += 1
        yield reduce(list(group))


def write_rows(rows: Iterable[Row], schema: pa.Schema, sink: BinaryIO) -> None:
    """Rows as one Parquet file (zstd, fixed row groups, so equal rows give equal bytes), a row group at a time."""
    rows = iter(rows)
    with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        while chunk := list(itertools.islice(rows, ROW_GROUP_ROWS)):
            writer.write_table(rows_table(chunk, schema), row_group_size=ROW_GROUP_ROWS)
