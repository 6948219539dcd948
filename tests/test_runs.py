"""bioel_core.outputs.runs: the external merge sort checked against an in-memory sort of the same rows."""

import io
import random

import pyarrow as pa
import pyarrow.parquet as pq

from bioel_core.outputs import runs

SCHEMA = pa.schema([pa.field("key", pa.int64(), nullable=False), pa.field("value", pa.string(), nullable=False)])


def _smallest(rows):
    return min(rows, key=lambda r: r[1])


def _table(rows):
    return pa.Table.from_pylist([{"key": k, "value": v} for k, v in rows], schema=SCHEMA)


def test_merged_runs_equal_one_sort_with_duplicates_reduced(monkeypatch):
    monkeypatch.setattr(runs, "RUN_BATCH_ROWS", 7)  # several record batches a run
    rng = random.Random(0)
    pieces = [[(rng.randrange(200), f"v{rng.randrange(50)}") for _ in range(rng.randrange(1, 120))] for _ in range(9)]
    streams = [io.BytesIO(runs.run_bytes(_table(piece), "key")) for piece in pieces]
    counts = runs.MergeCounts()
    merged = list(runs.merge_runs([runs.read_run(s) for s in streams], 0, _smallest, counts))
    everything = [row for piece in pieces for row in piece]
    expected = sorted({k: min(v for kk, v in everything if kk == k) for k, _ in everything}.items())
    assert merged == expected
    assert counts.rows_in == len(everything) and counts.rows_out == len(expected)


def test_a_run_is_sorted_and_named_by_its_content():
    rows = [(3, "c"), (1, "a"), (2, "b"), (1, "z")]
    data = runs.run_bytes(_table(rows), "key")
    assert list(runs.read_run(io.BytesIO(data))) == [(1, "a"), (1, "z"), (2, "b"), (3, "c")]  # stable within a key
    assert runs.run_name(data) == runs.run_name(runs.run_bytes(_table(list(rows)), "key"))
    assert runs.run_name(data) != runs.run_name(runs.run_bytes(_table(rows[:3]), "key"))


def test_written_rows_read_back_in_row_groups_and_rewrite_byte_for_byte(monkeypatch):
    monkeypatch.setattr(runs, "ROW_GROUP_ROWS", 10)
    rows = [(i, f"name {i}") for i in range(25)]
    first, second = io.BytesIO(), io.BytesIO()
    runs.write_rows(rows, SCHEMA, first)
    runs.write_rows(iter(rows), SCHEMA, second)
    assert first.getvalue() == second.getvalue()
    parquet = pq.ParquetFile(io.BytesIO(first.getvalue()))
    assert parquet.metadata.num_row_groups == 3 and parquet.schema_arrow == SCHEMA
    assert [tuple(r.values()) for r in parquet.read().to_pylist()] == rows


def test_no_rows_write_an_empty_file_of_the_schema():
    sink = io.BytesIO()
    runs.write_rows([], SCHEMA, sink)
    table = pq.read_table(io.BytesIO(sink.getvalue()))
    assert table.num_rows == 0 and table.schema == SCHEMA


def test_runs_combined_in_groups_merge_as_the_runs_themselves():
    rng = random.Random(1)
    pieces = [[(rng.randrange(40), f"v{rng.randrange(9)}") for _ in range(rng.randrange(1, 30))] for _ in range(7)]
    data = [runs.run_bytes(_table(piece), "key") for piece in pieces]
    combined = []
    for group in (data[:3], data[3:6], data[6:]):
        sink = io.BytesIO()
        runs.combine_runs([runs.read_run(io.BytesIO(d)) for d in group], 0, SCHEMA, sink)
        combined.append(sink.getvalue())
    assert sum(1 for _ in runs.read_run(io.BytesIO(combined[0]))) == sum(len(p) for p in pieces[:3])  # nothing reduced
    direct, grouped = runs.MergeCounts(), runs.MergeCounts()
    assert list(runs.merge_runs([runs.read_run(io.BytesIO(d)) for d in data], 0, _smallest, direct)) == list(
        runs.merge_runs([runs.read_run(io.BytesIO(d)) for d in combined], 0, _smallest, grouped)
    )
    assert direct == grouped
