"""Writing pipeline outputs so that a partial output never looks complete.

Every table is written under `OUTPUT/_staging-<run>/`; only when the pipeline has finished does the driver
replace the previous tables, and it writes `manifest.json` last. A folder without a manifest is
unfinished, whatever else it holds. Paths go through Beam's FileSystems, so gs:// and s3:// work too.
"""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from collections.abc import Callable

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from bioel_core.tables import MANIFEST


class OutputError(RuntimeError):
    pass


def join(*parts: str) -> str:
    return FileSystems.join(*parts)


def check_writable(output_dir: str) -> None:
    """Fail before any work when the output folder cannot be written."""
    probe = join(output_dir, f".bioel-write-probe-{uuid.uuid4().hex}")
    try:
        FileSystems.mkdirs(output_dir)
    except Exception:  # mkdirs raises when the folder exists; writing the probe is the real test
        pass
    try:
        with FileSystems.create(probe) as fh:
            fh.write(b"ok")
        FileSystems.delete([probe])
    except Exception as err:
        raise OutputError(f"output folder {output_dir} is not writable: {err}") from None


def check_inputs_exist(paths: list[str]) -> None:
    missing = [p for p in paths if not FileSystems.exists(p)]
    if missing:
        raise FileNotFoundError(f"input file not found: {', '.join(missing)}")


def sha256_of(path: str) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with FileSystems.open(path, compression_type="uncompressed") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def write_parquet(path: str, table: pa.Table) -> None:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    with FileSystems.create(path) as fh:
        fh.write(buf.getvalue())


def write_json(path: str, obj) -> None:
    with FileSystems.create(path) as fh:
        fh.write(json.dumps(obj, indent=2, sort_keys=True).encode())


def shard_name(index: int, num_shards: int) -> str:
    return f"part-{index:05d}-of-{num_shards:05d}.parquet"


class WriteShardFn(beam.DoFn):
    """Writes one (shard_index, rows) group as a Parquet file, rows sorted so re-runs are byte-stable."""

    def __init__(self, folder: str, schema: pa.Schema, num_shards: int, sort_key: str):
        self.folder, self.schema, self.num_shards, self.sort_key = folder, schema, num_shards, sort_key

    def process(self, element):
        shard, rows = element
        rows = sorted(rows, key=lambda r: r[self.sort_key])
        path = join(self.folder, shard_name(shard, self.num_shards))
        write_parquet(path, pa.Table.from_pylist(rows, schema=self.schema))
        yield path


class StagedOutput:
    """One run's staging folder inside the output folder, and the commit that publishes it."""

    def __init__(self, output_dir: str, tables: tuple[str, ...], derived: tuple[str, ...] = ()):
        """`derived`: folders computed from the tables afterwards (a quality report), stale once they change."""
        self.output_dir = output_dir.rstrip("/")
        self.tables, self.derived = tables, derived
        self.staging = join(self.output_dir, f"_staging-{uuid.uuid4().hex[:12]}")

    def table_dir(self, table: str) -> str:
        return join(self.staging, table)

    def prepare(self) -> None:
        check_writable(self.output_dir)
        self._remove_stale_staging()
        for table in self.tables:
            FileSystems.mkdirs(self.table_dir(table))

    def files(self, table: str, where: str | None = None) -> list[str]:
        folder = where or self.table_dir(table)
        found = FileSystems.match([join(folder, "*.parquet")])[0].metadata_list
        return sorted(m.path for m in found)

    def publish(self, build: Callable[[], dict]) -> dict:
        """Prepare the staging folder, run `build` (it writes the tables there and returns the manifest) and
        commit; a failure, a kill included, removes the staging folder and re-raises."""
        self.prepare()
        try:
            manifest = build()
        except BaseException:
            self.abandon()
            raise
        self.commit(manifest)
        return manifest

    def commit(self, manifest: dict) -> None:
        """Replace the previous output with the staged one; the manifest goes last."""
        old_manifest = join(self.output_dir, MANIFEST)
        if FileSystems.exists(old_manifest):
            FileSystems.delete([old_manifest])  # from here on the folder reads as unfinished
        for folder in self.derived:
            if FileSystems.exists(join(self.output_dir, folder)):
                FileSystems.delete([join(self.output_dir, folder)])
        for table in self.tables:
            final = join(self.output_dir, table)
            if FileSystems.exists(final):
                FileSystems.delete([final])
            FileSystems.rename([self.table_dir(table)], [final])
        FileSystems.delete([self.staging])
        write_json(old_manifest, manifest)

    def _remove_stale_staging(self) -> None:
        """A killed run leaves its staging folder behind; the re-run that finishes the job clears it."""
        found = FileSystems.match([join(self.output_dir, "_staging-*", "*", "*")])[0].metadata_list
        stale = sorted({m.path[: m.path.index("/", m.path.index("_staging-"))] for m in found})
        if stale:
            FileSystems.delete(stale)

    def abandon(self) -> None:
        if FileSystems.exists(self.staging):
            FileSystems.delete([self.staging])
