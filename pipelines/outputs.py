"""The Beam side of the output layer (bioel_core.outputs): a FileSystem adapter over Beam's FileSystems, so
gs:// and s3:// output folders publish as local ones do, and the DoFn that writes one Parquet shard."""

from __future__ import annotations

import contextlib
import hashlib
import os

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from bioel_core.inputs import GLOB_CHARS, glob_root, is_input_name
from bioel_core.outputs import MANIFEST, FileSystem, LocalFileSystem, is_local, shard_name, write_parquet
from bioel_core.outputs.runs import run_bytes, run_name
from schemas import DEAD_LETTER_SCHEMA


class BeamFileSystem:
    """bioel_core.outputs.FileSystem over Beam's FileSystems (object stores: a folder is a path prefix)."""

    def join(self, *parts: str) -> str:
        return FileSystems.join(*parts)

    def exists(self, path: str) -> bool:
        return FileSystems.exists(path)

    def is_folder(self, path: str) -> bool:
        return _is_folder(path)

    def mkdirs(self, path: str) -> None:
        try:
            FileSystems.mkdirs(path)
        except OSError:  # exists already; object stores have no folders to make
            pass

    def children(self, folder: str) -> list[str]:
        prefix = folder.rstrip("/") + "/"
        found = FileSystems.match([FileSystems.join(folder, "**")])[0].metadata_list
        return sorted({m.path[len(prefix) :].split("/", 1)[0] for m in found if m.path.startswith(prefix)})

    def open(self, path: str):
        return open_stream(path)

    def write(self, path: str, data: bytes) -> None:
        with create_stream(path) as fh:
            fh.write(data)

    def create_new(self, path: str, data: bytes) -> bool:
        # object stores offer no create-if-absent through Beam: check, then write (a narrow race, documented)
        if FileSystems.exists(path):
            return False
        try:
            self.write(path, data)
        except BaseException:
            with contextlib.suppress(Exception):
                self.delete(path)  # an object store writes an object whole or not at all; a mounted disk may not
            raise
        return True

    def modified(self, path: str) -> float | None:
        try:
            return FileSystems.last_updated(path) or None  # 0: the store keeps no time
        except NotImplementedError:
            return None

    def rename(self, source: str, target: str) -> None:
        FileSystems.rename([source], [target])

    def delete(self, path: str) -> None:
        if FileSystems.exists(path):
            FileSystems.delete([path])
            return
        inside = FileSystems.match([FileSystems.join(path, "**")])[0].metadata_list
        if inside:
            FileSystems.delete([m.path for m in inside])


def filesystem_for(path: str) -> FileSystem:
    """The local filesystem for local paths (atomic renames, exclusive lock files), Beam's for the rest."""
    return LocalFileSystem() if is_local(path) else BeamFileSystem()


def _matched_files(pattern: str) -> list[str]:
    return [m.path for m in FileSystems.match([pattern])[0].metadata_list]


def _input_files(pattern: str) -> list[str]:
    """What a glob matches, less what is never an input (bioel_core.inputs.is_input_name)."""
    return [p for p in _matched_files(pattern) if is_input_name(p.rsplit("/", 1)[-1])]


def _is_folder(path: str) -> bool:
    """A local directory, or a remote prefix that is not itself an object but has objects under it."""
    if is_local(path):
        return os.path.isdir(path)
    return path.rstrip("/") not in _matched_files(path) and bool(_matched_files(FileSystems.join(path, "*")))


def expand_inputs(patterns: list[str], flag: str = "--input", output_folder=None) -> list[str]:
    """Input files, globs and folders (local, gs://, s3://, hdfs://, ... through Beam's FileSystems) -> the
    files they name, in the order given: a glob's or folder's files sorted, so outputs do not depend on the
    listing, and a file named again kept at its first place. The order is the one `bioel link` applies records in
    (a PubMed update file given after the baseline replaces its records). `listed_inputs` says which folder each
    was listed from."""
    return list(listed_inputs(patterns, flag, output_folder))


def listed_inputs(patterns: list[str], flag: str = "--input", output_folder=None) -> dict[str, str]:
    """`expand_inputs`' files, each with the folder it was listed from (a plain-text document is named by its path
    below it, bioel_core.corpora.text.document_stem): a glob's root (bioel_core.inputs.glob_root), the folder given,
    or a file's own folder.

    A folder contributes its input files (bioel_core.inputs: directly inside it, no hidden, bookkeeping or
    checksum files); a glob (`DIR/*.xml.gz`, `gs://b/baseline/*.xml.gz`, `**` for subfolders) the input files
    it matches. A glob or folder without any, or a missing file, is an error naming it. A local folder that is
    a finished bioel output (it holds manifest.json) goes to `output_folder(path) -> files` when given (a
    `bioel link` output read for its PubTator copy), else it is refused."""
    files: dict[str, str] = {}  # ordered, without repeats: file -> the folder it was listed from
    for pattern in patterns:
        root = pattern
        if GLOB_CHARS & set(pattern):
            found, root = _input_files(pattern), glob_root(pattern)
            if not found:
                raise FileNotFoundError(f"{flag} {pattern}: no input file matches this pattern")
        elif is_local(pattern) and os.path.isfile(os.path.join(pattern, MANIFEST)):
            if output_folder is None:
                raise ValueError(f"{flag} {pattern}: is a bioel output folder, not a folder of input files")
            found = output_folder(pattern)
        elif _is_folder(pattern):
            found = _input_files(FileSystems.join(pattern, "*"))
            if not found:
                raise FileNotFoundError(f"{flag} {pattern}: the folder holds no input file")
        elif FileSystems.exists(pattern):
            found, root = [pattern], pattern.replace("\\", "/").rpartition("/")[0]
        else:
            raise FileNotFoundError(f"{flag} {pattern}: no such file or folder")
        for path in sorted(found):
            files.setdefault(path, root)
    return files


def open_stream(path: str):
    """A file's bytes as stored, on any Beam filesystem: Beam must not decompress (bioel_core sniffs gzip itself,
    and spill and Parquet files are not compressed streams)."""
    return FileSystems.open(path, compression_type="uncompressed")


def create_stream(path: str):
    return FileSystems.create(path, compression_type="uncompressed")


def spill_run(folder: str, table: pa.Table, key: str) -> str:
    """`table` sorted by `key` as an Arrow IPC run file in `folder` (bioel_core.outputs.runs), named by its content so
    that a retried bundle rewrites the same file; returns its path."""
    data = run_bytes(table, key)
    path = FileSystems.join(folder, run_name(data))
    with create_stream(path) as fh:
        fh.write(data)
    return path


def read_spilled(path: str) -> pa.Table:
    """A spilled Arrow IPC stream file as one table."""
    with open_stream(path) as fh:
        return pa.ipc.open_stream(fh).read_all()


def delete_files(paths: list[str]) -> None:
    """Removes files named once or more (a run spilled twice by identical inputs is one file)."""
    if paths:
        FileSystems.delete(sorted(set(paths)))


def sha256_of(path: str) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open_stream(path) as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def input_records(paths: list[str]) -> list[dict]:
    """The manifest's `inputs` for input files: path, sha256 and size of each."""
    return [{"path": p, **dict(zip(("sha256", "bytes"), sha256_of(p)))} for p in paths]


class WriteShardFn(beam.DoFn):
    """Writes one (shard_index, rows) group as a Parquet file, rows sorted so re-runs are byte-stable."""

    def __init__(self, folder: str, schema: pa.Schema, num_shards: int, sort_key):
        """`sort_key`: a column name, or a function of a row."""
        self.folder, self.schema, self.num_shards, self.sort_key = folder, schema, num_shards, sort_key

    def process(self, element):
        shard, rows = element
        key = self.sort_key if callable(self.sort_key) else (lambda r, c=self.sort_key: r[c])
        path = FileSystems.join(self.folder, shard_name(shard, self.num_shards))
        write_parquet(filesystem_for(path), path, pa.Table.from_pylist(sorted(rows, key=key), schema=self.schema))
        yield path


def dead_letter_order(row: dict) -> tuple:
    """A total order, so dead letters that share a location (one line number in two files) write the same bytes."""
    return row["source"], row["location"], row["raw"], row["reason"]


class WriteDeadLetters(beam.PTransform):
    """Dead-letter dicts -> the one-shard dead_letter table in `folder`."""

    def __init__(self, folder: str):
        super().__init__()
        self.folder = folder

    def expand(self, dead):
        return (
            dead
            | "DeadLetterRows" >> beam.Map(lambda d: (0, d))
            | "GroupDeadLetters" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(WriteShardFn(self.folder, DEAD_LETTER_SCHEMA, 1, dead_letter_order))
        )
