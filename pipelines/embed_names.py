"""Names table of an ingest-kb output -> one L2-normalized vector per name (`bioel embed`), with RunInference.

    NameFiles | ReadNameChunks ─┬─ chunks | SpreadChunks | Encode (RunInference) | Route ─┬─ run files by shard | GroupShards | WriteEmbeddings
                                │                                                         ├─ failures | WriteDeadLetters
                                └─ names read ─────────────────────────────── + embedded ─┴─ + dead letters counted | WriteStats

Elements are chunks of names from reading to encoding, never single names; their vectors go to the writers as
spill files (bioel_core.outputs.runs), one per chunk and shard, so no step holds the KB's vectors.

The encoded column is `name_norm`, the one NameSet.from_names_table (and so the in-memory dense linker) links
on. `--names` and `--model` are local folders (the encoder loads from local files); `--output` may be any
Beam filesystem.
"""

from __future__ import annotations

import logging
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from bioel_core.embeddings import PIPELINE, TEXT_COLUMN
from bioel_core.guards import check_output_folder, refuse_empty
from bioel_core.models import model_folder, open_model, resolve_device
from bioel_core.outputs.details import EmbedDetails, ModelRecord, NamesSource
from bioel_core.outputs.runs import SPILL
from bioel_core.outputs import (
    Manifest,
    OutputFolder,
    absolute,
    check_num_shards,
    embeddings_table,
    name_chunks,
    shard_name,
    write_parquet,
)
from bioel_core.tables import KB_PIPELINE, read_output_manifest, stable_shard, table_files
from pipelines import logs
from pipelines.counting import WriteStats, count_as, read_stats
from pipelines.handlers import EncodeFailure, EncoderModelHandler
from pipelines.options import new_pipeline, pipeline_progress, runner_name, worker_threads
from pipelines.outputs import WriteDeadLetters, delete_files, filesystem_for, open_stream, read_spilled, spill_run
from schemas import check_schema

log = logging.getLogger(__name__)

TABLES = ("embeddings", "dead_letter")


class ReadNameChunksFn(beam.DoFn):
    """One names shard -> chunks of names of similar length, each ((name_ids as int64 bytes, concept_ids), texts).

    Chunks are made here, by sorting each shard on text length (outputs.name_chunks), rather than by
    RunInference's BatchElements (which fills batches in arrival order): a padded batch costs as much as its
    longest name. This step needs no tokenizer; the encoder orders each chunk by token count and cuts its
    batches. Every run forms the same chunks and batches, so writes the same floats. From here to the writer a
    chunk travels as one element: Beam's per-element cost is paid per chunk, not per name.
    """

    def __init__(self, batch_size: int):
        self.batch_size = batch_size

    def process(self, path: str):
        with open_stream(path) as fh:
            table = pq.read_table(fh, columns=["name_id", "concept_id", TEXT_COLUMN])
        yield beam.pvalue.TaggedOutput("stats", ("names_read", table.num_rows))
        ids = table.column("name_id").to_numpy()
        concepts = table.column("concept_id").to_pylist()
        texts = table.column(TEXT_COLUMN).to_pylist()
        for rows in name_chunks(ids, table.column(TEXT_COLUMN), self.batch_size):
            # raw bytes: Beam codes bytes natively, where an ndarray would be pickled
            yield (ids[rows].astype(np.int64).tobytes(), [concepts[i] for i in rows]), [texts[i] for i in rows]


class RouteChunkFn(beam.DoFn):
    """An encoded chunk -> its vectors cut by output shard, each part spilled as an Arrow IPC run under `spill`
    (shard, run file), and one dead letter per text that failed. The runner groups file names, not vectors: a
    10M-name KB's vectors (12 GB at 300 dimensions) would otherwise all sit in its memory at the GroupByKey."""

    def __init__(self, num_shards: int, dim: int, spill: str):
        self.num_shards, self.dim, self.spill = num_shards, dim, spill

    def process(self, element):
        (id_bytes, concepts), result = element
        ids = np.frombuffer(id_bytes, dtype=np.int64)
        kept = []
        for i, inference in enumerate(result.inference):
            if isinstance(inference, EncodeFailure):
                yield beam.pvalue.TaggedOutput(
                    "dead",
                    {"source": "encoder", "location": f"name_id {ids[i]}", "raw": result.example[i], "reason": inference.reason},
                )
            else:
                kept.append(i)
        yield beam.pvalue.TaggedOutput("stats", ("embedded", len(kept)))
        if not kept:
            return
        ids, concepts = ids[kept], [concepts[i] for i in kept]
        vectors = np.stack([result.inference[i] for i in kept]).astype(np.float32)
        shards = np.array([stable_shard(str(i), self.num_shards) for i in ids])
        for shard in np.unique(shards).tolist():
            part = np.flatnonzero(shards == shard)
            table = embeddings_table(ids[part], [concepts[j] for j in part], vectors[part], self.dim)
            yield shard, spill_run(FileSystems.join(self.spill, f"{shard:05d}"), table, "name_id")


class WriteEmbeddingShardFn(beam.DoFn):
    """Writes one (shard, run files) group as Parquet, sorted by name_id (unique: the same bytes whatever order the
    runs came in), and removes the runs. It holds one shard: `--num-shards` bounds a writer's memory."""

    def __init__(self, folder: str, num_shards: int):
        self.folder, self.num_shards = folder, num_shards

    def process(self, element):
        shard, runs = element
        runs = sorted(set(runs))  # a retried bundle's run is the same file
        table = pa.concat_tables([read_spilled(run) for run in runs]).sort_by("name_id").combine_chunks()
        path = FileSystems.join(self.folder, shard_name(shard, self.num_shards))
        write_parquet(filesystem_for(path), path, table)
        delete_files(runs)
        yield path


def build_pipeline(
    p: beam.Pipeline,
    name_files: list[str],
    staged: OutputFolder,
    handler: EncoderModelHandler,
    *,
    dim: int,
    batch_size: int,
    num_shards: int,
) -> None:
    read = (
        p
        | "NameFiles" >> beam.Create(name_files)
        | "ReadNameChunks" >> beam.ParDo(ReadNameChunksFn(batch_size)).with_outputs("stats", main="chunks")
    )
    results = (
        read.chunks
        # a fusion break: the chunks of one names shard spread over every worker
        | "SpreadChunks" >> beam.Reshuffle()
        | "Encode" >> RunInference(KeyedModelHandler(handler))
        | "Route"
        >> beam.ParDo(RouteChunkFn(num_shards, dim, FileSystems.join(staged.root, SPILL))).with_outputs(
            "dead", "stats", main="runs"
        )
    )
    _ = (
        results.runs
        | "GroupShards" >> beam.GroupByKey()
        | "WriteEmbeddings" >> beam.ParDo(WriteEmbeddingShardFn(staged.table_dir("embeddings"), num_shards))
    )
    _ = results.dead | "WriteDeadLetters" >> WriteDeadLetters(staged.table_dir("dead_letter"))
    counters = (read.stats, results.stats, results.dead | "CountDeadLettered" >> count_as("dead_lettered"))
    _ = counters | "WriteStats" >> WriteStats(staged.root)


def check_names_folder(names_dir: Path) -> tuple[dict, list[str]]:
    """The names folder's manifest and shard files, refused before any work when unfinished or of another version."""
    manifest = read_output_manifest(names_dir, KB_PIPELINE, "--input")
    files = table_files(names_dir, "names")
    for f in files:
        check_schema(pq.read_schema(f), "names", str(f))
    return manifest, [str(f) for f in files]


def build_manifest(
    stats: dict,
    *,
    staged: OutputFolder,
    model: ModelRecord,
    names_dir: Path,
    names_manifest: dict,
    options: PipelineOptions,
    device: str,
    batch_size: int,
    num_shards: int,
) -> Manifest:
    details = EmbedDetails(
        kb=names_manifest.get("kb"),
        model=model,
        names=NamesSource.of(names_dir, names_manifest),
        device=device,
        batch_size=batch_size,
        num_shards=num_shards,
    )
    return details.manifest(
        stats,
        {table: staged.table_outputs(table) for table in TABLES},
        runner_name(options),
        options.get_all_options(drop_default=True),
    )


def open_checked_model(model_dir: str | None, pooling: str | None, device: str) -> ModelRecord:
    """The model the job will run, loaded once in the driver: fails before any work when it is missing or
    unusable, and gives the fingerprints (the whole model's, and what of it makes the vectors), config and dimension
    for the manifest."""
    resolve_device(device)
    folder = model_folder(model_dir)
    encoder = open_model(model_dir, pooling, "cpu")
    return ModelRecord(
        path=str(folder),
        fingerprint=encoder.fingerprint(),
        config=encoder.config(),
        dim=encoder.dim,
        pooling=pooling,
        vectors_fingerprint=encoder.vectors_fingerprint(),
    )


def run(
    model_dir: str | None,
    names_dir: str,
    output_dir: str,
    options: PipelineOptions,
    *,
    pooling: str | None = None,
    device: str = "cpu",
    batch_size: int = 256,
    num_shards: int = 4,
    gate=None,
) -> dict:
    """Runs the embed pipeline and publishes its output if it passes `gate` (a quality.QualityGate; None: unchecked);
    returns the manifest. `model_dir` None = the shipped default."""
    check_num_shards(num_shards)
    if batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, got {batch_size}")
    names, output_dir = Path(names_dir).resolve(), absolute(output_dir)  # as the workers must see them
    names_manifest, name_files = check_names_folder(names)
    model = open_checked_model(model_dir, pooling, device)
    check_output_folder(output_dir, PIPELINE, [("--input", str(names)), ("--model", model.path)])
    # the default model goes by no path: each worker opens its own installed copy (a --setup_file or image worker has
    # nothing at the launcher's checkout path); the fingerprint still pins it to the model checked here
    handler = EncoderModelHandler(
        model.path if model_dir else None,
        pooling=pooling,
        device=device,
        batch_size=batch_size,
        fingerprint=model.fingerprint,
        torch_threads=worker_threads(options),
    )
    staged = OutputFolder(filesystem_for(output_dir), output_dir, TABLES)
    stage = logs.Stage("embed")
    stage.info(
        "embedding %s names of %s with %s on %s into %s",
        f"{names_manifest['outputs']['names']['rows']:,}",
        names,
        model.path,
        device,
        output_dir,
    )

    def build() -> Manifest:
        with pipeline_progress(options, "embed", "names", names_manifest["outputs"]["names"]["rows"]), new_pipeline(options) as p:
            build_pipeline(p, name_files, staged, handler, dim=model.dim, batch_size=batch_size, num_shards=num_shards)
        staged.fs.delete(staged.fs.join(staged.root, SPILL))  # emptied by the writers; the folders stay
        return refuse_empty(
            build_manifest(
                read_stats(staged.root),
                staged=staged,
                model=model,
                names_dir=names,
                names_manifest=names_manifest,
                options=options,
                device=device,
                batch_size=batch_size,
                num_shards=num_shards,
            ),
            staged,
        )

    manifest = staged.publish(build, gate).to_dict()
    stage.done(
        "embedded %s names, %s dead-lettered; published %s",
        f"{manifest['counts']['embedded']:,}",
        f"{manifest['counts']['dead_lettered']:,}",
        manifest["generation"],
    )
    return manifest
