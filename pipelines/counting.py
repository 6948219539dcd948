"""The counting steps every pipeline shares: counters tagged by name, summed into the job's `_stats.json`,
which the driver reads back to build the manifest."""

from __future__ import annotations

import apache_beam as beam

from bioel_core.outputs import STATS_FILE, read_json, write_json
from pipelines.outputs import filesystem_for


def count_as(key: str):
    return beam.Map(lambda _: (key, 1))


def merge_stats(values):
    """Combines counters (ints) and lists (read stats, shard records) alike."""
    values = list(values)
    return sum(values, []) if values and isinstance(values[0], list) else sum(values)


class WriteStats(beam.PTransform):
    """(counter, value) collections -> one JSON object of sums in `folder`/_stats.json."""

    def __init__(self, folder: str):
        super().__init__()
        self.folder = folder

    def expand(self, counters):
        path = f"{self.folder.rstrip('/')}/{STATS_FILE}"
        return (
            counters
            | "AllCounters" >> beam.Flatten()
            | "SumCounters" >> beam.CombinePerKey(merge_stats)
            | "CountersToDict" >> beam.combiners.ToDict()
            | "WriteStatsFile" >> beam.Map(lambda d: write_json(filesystem_for(path), path, d))
        )


def read_stats(folder: str) -> dict:
    path = f"{folder.rstrip('/')}/{STATS_FILE}"
    return read_json(filesystem_for(path), path)
