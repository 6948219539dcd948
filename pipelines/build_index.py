"""Embeddings of an embed output -> FAISS shards + id maps + manifest (`bioel build-index`).

    EmbeddingFiles | Spread | SpillByShard ─┬─ (shard, spill file) ─┐
    every shard number, no file ────────────┼───────────────────────┴─ GroupByShard | BuildShard ─ shard records ─┐
                                            └─ vectors read ──────────────────────────────────────────────────────┴─ WriteStats

A row's shard is `shard_of(name_id)`, so a refresh that touches few names rebuilds few shards. Each shard
is built in one DoFn call (the index needs all its vectors at once) from rows put in name_id order, so
runners and worker counts that deliver rows differently write the same files. The rows reach their shard's
builder through spill files (Arrow IPC, one per input file and shard, in the staged generation's `_spill`,
removed before publishing), not as pipeline elements: a runner then shuffles file names, never vectors, and
holds no more than one shard's vectors per worker, whatever the size of the KB. Everything is staged and
published only when the job has finished, by moving the manifest pointer (bioel_core.outputs).
`--embeddings` is a local folder (as `bioel embed` writes); `--output` may be any Beam filesystem.
"""

from __future__ import annotations

import logging
from pathlib import Path

import apache_beam as beam
import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from bioel_core import progress
from bioel_core.embeddings import check_names_unchanged, manifest_sha256, read_embeddings_details, vectors_of
from bioel_core.guards import check_output_folder, refuse_empty
from bioel_core.index import PIPELINE, IndexSpec, build_shard, shard_of
from bioel_core.index.layout import FOLDERS, SHARD_ASSIGNMENT
from bioel_core.outputs import Manifest, OutputFolder, absolute, check_num_shards
from bioel_core.outputs.details import EmbeddingsSource, IndexDetails, IndexParams
from bioel_core.outputs.runs import SPILL
from bioel_core.tables import table_files
from pipelines import logs
from pipelines.counting import WriteStats, read_stats
from pipelines.options import new_pipeline, pipeline_progress, runner_name, worker_threads
from pipelines.outputs import create_stream, delete_files, filesystem_for, open_stream, read_spilled
from schemas import check_schema, embeddings_schema

log = logging.getLogger(__name__)

READ_BATCH_ROWS = 65536


class SpillByShardFn(beam.DoFn):
    """(input number, embeddings file) -> its rows cut by shard into one Arrow IPC file a shard under `spill`,
    a record batch at a time; yields (shard, spill file). A retried bundle rewrites the same files."""

    def __init__(self, num_shards: int, spill: str):
        self.num_shards, self.spill = num_shards, spill

    def process(self, element):
        number, path = element
        open_files = {}  # shard -> (spill file, handle, IPC writer)
        try:
            with open_stream(path) as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=READ_BATCH_ROWS):
                    yield beam.pvalue.TaggedOutput("stats", ("vectors_read", batch.num_rows))
                    shards = shard_of(batch.column("name_id").to_numpy(), self.num_shards)
                    for shard in np.unique(shards).tolist():
                        if shard not in open_files:
                            target = FileSystems.join(self.spill, f"{shard:05d}", f"{number:05d}.arrow")
                            handle = create_stream(target)
                            open_files[shard] = (target, handle, pa.ipc.new_stream(handle, batch.schema))
                        open_files[shard][2].write_batch(batch.filter(pa.array(shards == shard)))
        finally:
            for _, handle, writer in open_files.values():
                writer.close()
                handle.close()
        for shard in sorted(open_files):
            yield shard, open_files[shard][0]


class BuildShardFn(beam.DoFn):
    """(shard, spill files) -> the shard's .faiss file and id map in the staging folder, the spill files removed;
    yields its manifest record."""

    def __init__(self, staging: str, num_shards: int, spec: IndexSpec, dimension: int, threads: int | None):
        self.staging, self.num_shards, self.spec, self.dimension, self.threads = staging, num_shards, spec, dimension, threads

    def setup(self):
        if self.threads:
            faiss.omp_set_num_threads(self.threads)

    def process(self, element):
        shard, spilled = element
        spilled = sorted(f for f in spilled if f)
        tables = [read_spilled(path) for path in spilled]
        if not tables:  # a shard no name hashed to: an empty index keeps the folder's shard count whole
            tables = [embeddings_schema(self.dimension).empty_table()]
        table = pa.concat_tables(tables)
        built = build_shard(
            shard,
            self.num_shards,
            table.column("name_id").to_numpy(),
            table.column("concept_id"),
            vectors_of(table.column("vector"), self.dimension),
            self.spec,
            self.dimension,
        )
        for relative, data in built.files.items():
            path = FileSystems.join(self.staging, relative)
            filesystem_for(path).write(path, data)
        delete_files(spilled)
        progress.advance()
        yield "shards", [built.record]


def build_pipeline(
    p: beam.Pipeline,
    files: list[str],
    staged: OutputFolder,
    *,
    num_shards: int,
    spec: IndexSpec,
    dimension: int,
    threads: int | None,
) -> None:
    read = (
        p
        | "EmbeddingFiles" >> beam.Create(list(enumerate(files)))
        | "Spread" >> beam.Reshuffle()
        | "SpillByShard"
        >> beam.ParDo(SpillByShardFn(num_shards, FileSystems.join(staged.root, SPILL))).with_outputs("stats", main="spilled")
    )
    every_shard = p | "EveryShard" >> beam.Create([(s, "") for s in range(num_shards)])
    records = (
        (read.spilled, every_shard)
        | "WithEveryShard" >> beam.Flatten()
        | "GroupByShard" >> beam.GroupByKey()
        | "BuildShard" >> beam.ParDo(BuildShardFn(staged.root, num_shards, spec, dimension, threads))
    )
    _ = (read.stats, records) | "WriteStats" >> WriteStats(staged.root)


def check_embeddings_folder(emb_dir: Path, names_at: str | Path | None = None) -> dict:
    """Everything build-index needs to know of its input, refused before any work when unusable; `names_at`: where the
    names the embeddings were made from lie now, when not where their manifest says (a moved bundle's own)."""
    details = read_embeddings_details(emb_dir, "--input")
    check_names_unchanged(emb_dir, at=names_at)
    files = table_files(emb_dir, "embeddings")
    if not files:
        raise ValueError(f"--input {emb_dir}: no embeddings/*.parquet shards")
    dims, rows = {}, 0
    for f in files:
        meta = pq.ParquetFile(f)
        check_schema(meta.schema_arrow, "embeddings", str(f))
        dims[f.name] = meta.schema_arrow.field("vector").type.list_size
        rows += meta.metadata.num_rows
    if len(set(dims.values())) > 1:
        raise ValueError(f"--input {emb_dir}: shards of mixed dimension: {dims}")
    dimension = next(iter(dims.values()))
    if dimension != details.model.dim:
        raise ValueError(f"--input {emb_dir}: vectors have {dimension} dimensions, the manifest's model {details.model.dim}")
    if rows == 0:
        raise ValueError(f"--input {emb_dir}: the embeddings table is empty; nothing to index")
    return {"details": details, "files": [str(f) for f in files], "dimension": dimension, "rows": rows}


def build_manifest(
    stats: dict,
    source: dict,
    *,
    staged: OutputFolder,
    emb_dir: Path,
    num_shards: int,
    spec: IndexSpec,
    threads: int | None,
    options: PipelineOptions,
) -> Manifest:
    index = IndexParams(
        kind=spec.kind,
        dimension=source["dimension"],
        faiss_version=faiss.__version__,
        faiss_threads=threads,
        requested=spec.to_dict(),
        shard_assignment=SHARD_ASSIGNMENT,
    )
    embeddings = EmbeddingsSource(
        path=str(emb_dir),
        manifest_sha256=manifest_sha256(emb_dir),
        rows=source["rows"],
        files=[f"embeddings/{Path(f).name}" for f in source["files"]],
    )
    details = IndexDetails.of(
        embedded=source["details"], embeddings=embeddings, index=index, num_shards=num_shards, shards=stats.get("shards", [])
    )
    return details.manifest(
        stats.get("vectors_read", 0),
        {table: staged.table_outputs(table, rows=False) for table in FOLDERS},
        runner_name(options),
        options.get_all_options(drop_default=True),
    )


def run(
    embeddings_dir: str,
    output_dir: str,
    options: PipelineOptions,
    *,
    num_shards: int,
    spec: IndexSpec,
    faiss_threads: int | None = None,
    gate=None,
    names_at: str | None = None,
) -> dict:
    """Builds the index and publishes it if it passes `gate` (a quality.QualityGate; None: unchecked); returns the
    manifest. `faiss_threads` None: FAISS's default in
    process, the cores shared out among local worker processes otherwise. `names_at`: check_embeddings_folder's."""
    check_num_shards(num_shards)
    if faiss_threads is not None and faiss_threads < 1:
        raise ValueError(f"--faiss-threads must be at least 1, got {faiss_threads}")
    emb_dir, output_dir = Path(embeddings_dir).resolve(), absolute(output_dir)  # as the workers must see them
    source = check_embeddings_folder(emb_dir, names_at)
    spec.check_dimension(source["dimension"])
    check_output_folder(output_dir, PIPELINE, [("--input", str(emb_dir))])
    threads = faiss_threads or worker_threads(options)
    staged = OutputFolder(filesystem_for(output_dir), output_dir, FOLDERS)
    stage = logs.Stage("build-index")
    stage.info(
        "indexing %s vectors of %s: %s, %s shard(s), into %s",
        f"{source['rows']:,}",
        emb_dir,
        spec.kind,
        f"{num_shards:,}",
        output_dir,
    )

    def build() -> Manifest:
        with pipeline_progress(options, "build-index", "shards", num_shards), new_pipeline(options) as p:
            build_pipeline(
                p, source["files"], staged, num_shards=num_shards, spec=spec, dimension=source["dimension"], threads=threads
            )
        staged.fs.delete(staged.fs.join(staged.root, SPILL))  # emptied by the builders; the folders stay
        return refuse_empty(
            build_manifest(
                read_stats(staged.root),
                source,
                staged=staged,
                emb_dir=emb_dir,
                num_shards=num_shards,
                spec=spec,
                threads=threads,
                options=options,
            ),
            staged,
        )

    manifest = staged.publish(build, gate).to_dict()
    stage.done(
        "indexed %s vectors in %s shard(s); published %s",
        f"{manifest['counts']['indexed']:,}",
        f"{num_shards:,}",
        manifest["generation"],
    )
    return manifest
