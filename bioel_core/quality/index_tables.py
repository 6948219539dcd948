"""Checks of a build-index output: the index holds every vector of its embeddings table once, in the shard
its name_id belongs to, and every id resolves to its concept in the names table the embeddings reference.

Two frames: `id_map` (one row per indexed vector: its name_id, concept_id, shard, and the derived facts),
and `shards` (one row per shard: vectors by the manifest, the FAISS file and the id map; checksums).
FAISS files are opened memory-mapped: only their headers are read. Every file is read through the output's
FileSystem (bioel_core.outputs), so a gs:// index is checked as a local one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import faiss
import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd

from bioel_core.embeddings import read_embeddings_manifest
from bioel_core.index import read_index_manifest, shard_of
from bioel_core.index.layout import shard_bytes, shard_files
from bioel_core.index.sharded import file_sha256
from bioel_core.outputs.fs import LOCAL, FileSystem, is_local
from bioel_core.outputs.details import IndexDetails
from bioel_core.outputs.layout import parquet_rows
from bioel_core.quality.frames import Tally, distribution
from bioel_core.quality.kb_tables import CRITICAL, _tag
from bioel_core.tables import data_root, parquet_file, read_table, table_files


def _mapped_header(path: str) -> tuple[int, int]:
    index = faiss.read_index(path, faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    return int(index.ntotal), int(index.d)


def _faiss_shard(path: str, fs: FileSystem) -> tuple[int, int, str]:
    """(vectors, dimension, sha256) of the FAISS shard at `path`, opened memory-mapped (only its header is read).
    FAISS maps local files only: a remote shard is copied to a temporary file as it is hashed, in the one pass that
    reads it."""
    if is_local(path):
        return *_mapped_header(path), file_sha256(path, fs=fs)
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "shard.faiss")
        sha256 = file_sha256(path, copy, fs)
        return *_mapped_header(copy), sha256


def _shard_row(folder: str, record: dict, fs: FileSystem) -> tuple[dict, pd.DataFrame | None]:
    paths = {key: fs.join(folder, relative) for key, relative in shard_files(record).items()}
    row = {
        "shard": record["shard"],
        "vectors": record["vectors"],
        "index_vectors": None,
        "dimension": None,
        "id_map_rows": None,
        "files_present": all(fs.exists(p) for p in paths.values()),
        "checksums_match": False,
    }
    if not row["files_present"]:
        return row, None
    vectors, dimension, index_sha256 = _faiss_shard(paths["index"], fs)
    with parquet_file(paths["id_map"], fs) as id_map:
        ids = id_map.read(columns=["name_id", "concept_id"]).to_pandas()
    ids["shard"] = record["shard"]
    found = {key: index_sha256 if key == "index" else file_sha256(p, fs=fs) for key, p in paths.items()}
    row.update(
        index_vectors=vectors,
        dimension=dimension,
        id_map_rows=len(ids),
        checksums_match=all(found[key] == record[f"{key}_sha256"] for key in paths),
    )
    return row, ids


def load_frames(index_dir: str | Path, fs: FileSystem = LOCAL) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    manifest = read_index_manifest(index_dir, fs=fs)
    details = IndexDetails.from_dict(manifest)
    emb_dir = details.embeddings.path
    read_embeddings_manifest(emb_dir, fs=fs)
    embeddings_rows = parquet_rows(fs, [str(f) for f in table_files(emb_dir, "embeddings", fs)])
    names_dir = details.names.path
    names = read_table(names_dir, "names", ["name_id", "concept_id"], fs).to_pandas().set_index("name_id")["concept_id"]

    rows, maps = [], []
    for record in sorted(details.shards, key=lambda r: r["shard"]):
        row, ids = _shard_row(str(data_root(index_dir, manifest, fs)), record, fs)
        rows.append(row)
        if ids is not None:
            maps.append(ids)
    shards = pd.DataFrame(rows)
    id_map = pd.concat(maps, ignore_index=True) if maps else pd.DataFrame({"name_id": [], "concept_id": [], "shard": []})
    known = id_map["name_id"].isin(names.index)
    id_map["unknown_name_id"] = id_map["name_id"].where(~known)
    id_map["concept_mismatch_name_id"] = id_map["name_id"].where(known & (id_map["name_id"].map(names) != id_map["concept_id"]))
    home = shard_of(id_map["name_id"].to_numpy(dtype="int64"), details.num_shards)
    id_map["misplaced_name_id"] = id_map["name_id"].where(home != id_map["shard"].to_numpy())
    counts = {
        "kind": details.index.kind,
        "dimension": details.index.dimension,
        "num_shards": details.num_shards,
        "vectors": details.vectors,
        "embeddings_rows": embeddings_rows,
        "names_dir": str(names_dir),
        "index_bytes": sum(shard_bytes(r) for r in details.shards),
    }
    return id_map, shards, counts


def id_map_suite(embeddings_rows: int) -> gx.ExpectationSuite:
    return gx.ExpectationSuite(
        name="id_map",
        expectations=[
            _tag(gxe.ExpectColumnValuesToNotBeNull(column="name_id"), CRITICAL),
            _tag(
                gxe.ExpectColumnValuesToBeUnique(
                    column="name_id", description="A name_id is in the index once, across all shards."
                ),
                CRITICAL,
            ),
            _tag(gxe.ExpectColumnValuesToNotBeNull(column="concept_id"), CRITICAL),
            _tag(
                gxe.ExpectTableRowCountToEqual(
                    value=embeddings_rows,
                    description="The index holds as many vectors as the embeddings table it was "
                    f"built from has rows ({embeddings_rows:,}).",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="unknown_name_id",
                    description="Every indexed name_id is in the names table the embeddings reference "
                    "(listed: ids missing from it).",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="concept_mismatch_name_id",
                    description="Each indexed name's concept_id is its concept_id in the names table.",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="misplaced_name_id",
                    description="Each name_id is in the shard shard_of(name_id) assigns it, "
                    "so a refresh rebuilding that shard replaces it.",
                ),
                CRITICAL,
            ),
        ],
    )


def shards_suite(num_shards: int, dimension: int) -> gx.ExpectationSuite:
    return gx.ExpectationSuite(
        name="shards",
        expectations=[
            _tag(gxe.ExpectTableRowCountToEqual(value=num_shards, description="The manifest lists every shard."), CRITICAL),
            _tag(
                gxe.ExpectColumnValuesToBeInSet(
                    column="files_present", value_set=[True], description="Every shard's FAISS file and id map exist."
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeInSet(
                    column="checksums_match",
                    value_set=[True],
                    description="Every shard file's sha256 is the one in the manifest.",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnValuesToBeBetween(
                    column="dimension",
                    min_value=dimension,
                    max_value=dimension,
                    description=f"Every FAISS shard has the manifest's dimension ({dimension}).",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnPairValuesToBeEqual(
                    column_A="vectors",
                    column_B="index_vectors",
                    description="Each FAISS shard holds the vectors the manifest says.",
                ),
                CRITICAL,
            ),
            _tag(
                gxe.ExpectColumnPairValuesToBeEqual(
                    column_A="vectors", column_B="id_map_rows", description="Each id map has one row per vector of its shard."
                ),
                CRITICAL,
            ),
        ],
    )


def checks(index_dir: str | Path, fs: FileSystem = LOCAL) -> tuple[dict, dict]:
    """({table: suite}, (table, frame) pairs, stats) for the report."""
    id_map, shards, counts = load_frames(index_dir, fs)
    stats = {
        **counts,
        "vectors_per_shard": distribution(Tally.of(shards["vectors"])),
        "shard_vectors": {str(r.shard): int(r.vectors) for r in shards.itertuples(index=False)},
    }
    return (
        {"id_map": id_map_suite(counts["embeddings_rows"]), "shards": shards_suite(counts["num_shards"], counts["dimension"])},
        [("id_map", id_map), ("shards", shards)],
        stats,
    )
