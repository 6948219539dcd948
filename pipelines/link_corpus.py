"""Corpus files -> linked annotations: Parquet `annotations` + `documents` tables, an interchange copy, dead
letters and a reconciled manifest.

    Inputs | Spread | ReadCorpus ─┬─ documents | KeyByDocId ──────────┐
                                  ├─ deletions | KeyByDocId ─────────┤
     [--incremental]              │   previous documents + annotations ┴─ GroupByDocId | Resolve ─┬─ to link | Batch | DetectAndLink
                                  │                                                              ├─ unchanged / carried (previous rows)
                                  └─ dead letters                                                └─ deleted (tombstones)
    annotations + documents, as (shard, spill file or rows) | GroupShards | WriteShard (Parquet, + PubTator/BioC when asked)

A large uncompressed JSONL, PubTator or per-line text file is read in ranges by several workers
(bioel_core.corpora.corpus_inputs). DetectAndLink cuts each batch's rows by output shard and spills each piece
as an Arrow IPC file in the staged generation's `_spill` (removed before publishing): the runner shuffles file
names to the shard writers, not rows (on a 2-core machine it had taken the linked tables' pickling, decoding and
re-encoding, seconds during which the workers waited).

The output folder holds the whole annotated state. Without --incremental it is this run's inputs only;
with it, the previous state is carried forward and only documents that are new, changed (content hash) or
annotated under another model or KB version are linked again; DeleteCitation entries remove documents.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

import bioel_core
from bioel_core import progress
from bioel_core.corpora import (
    FORMATS,
    FORMATS_WITH_MENTIONS,
    DeletedDocument,
    Document,
    corpus_inputs,
    pubtator_files,
    read_documents,
)
from bioel_core.guards import check_output_folder, refuse_empty
from bioel_core.kb.extra_names import concept_parts
from bioel_core.kb.io import CORRUPT_INPUT_POLICY, input_path
from bioel_core.corpora.interchange import ID_PREFIXES, merge_interchange, unwritable, write_interchange
from bioel_core.corpora.records import Mention, Passage
from bioel_core.corpora.text import check_document_ids
from bioel_core.kb.vocab import qualify
from bioel_core.linking.annotate import AnnotatorSpec, DocumentError, check_document, content_sha256
from bioel_core.outputs import (
    QUALITY,
    Manifest,
    OutputError,
    OutputFolder,
    absolute,
    check_num_shards,
    parquet_rows,
    read_json,
    read_pointer,
    shard_name,
    write_parquet,
)
from bioel_core.outputs.layout import REPORT_SUMMARY
from bioel_core.outputs.runs import SPILL
from bioel_core.records import DeadLetter
from bioel_core.tables import stable_shard
from pipelines import logs
from pipelines.counting import WriteStats, count_as, read_stats
from pipelines.options import in_process, new_pipeline, pipeline_progress, runner_name, worker_threads
from pipelines.outputs import (
    WriteDeadLetters,
    delete_files,
    filesystem_for,
    input_records,
    listed_inputs,
    open_stream,
    read_spilled,
    spill_run,
)
from schemas import ANNOTATIONS_SCHEMA, DOCUMENTS_SCHEMA, SCHEMA_VERSION

log = logging.getLogger(__name__)

TABLES = ("annotations", "documents", "dead_letter")
UNREAD_FILES = "files.unread"  # the stat listing [file, piece index, where and why] of inputs not read to their end
OUTPUT_FORMATS = ("parquet", "pubtator", "bioc-json", "bioc-xml")
INTERCHANGE_SUFFIX = {"pubtator": ".pubtator", "bioc-json": ".bioc.json", "bioc-xml": ".bioc.xml"}


class ReadCorpusFn(beam.DoFn):
    """(index, input file or FileRange, the folder it was listed from) -> (input position, Document), (input
    position, deletion) (tagged), dead letters (tagged) and, tagged "unread", (file, index, where and why) once for
    a piece not read to its end or not of the format named (its dead letters marked `unread`). The input position is (the
    piece's index among `corpus_inputs`, the item's index in the piece): pieces are listed file by file in the order
    given, each file's ranges in file order, so positions order the records as reading the files one after another
    does, whatever the ranges and the workers."""

    def __init__(self, fmt: str, per_line: bool):
        self.fmt, self.per_line = fmt, per_line

    def process(self, element):
        index, path, folder = element
        items = read_documents(
            [path],
            self.fmt,
            per_line=self.per_line,
            opener=open_stream,
            format_flag="--input-format",
            folders={input_path(path): folder},
        )
        unread = False
        for n, item in enumerate(items):
            if isinstance(item, Document):
                yield (index, n), item
            elif isinstance(item, DeletedDocument):
                yield beam.pvalue.TaggedOutput("deleted", ((index, n), item))
            else:
                if item.unread and not unread:
                    unread = True
                    yield beam.pvalue.TaggedOutput("unread", (item.source, index, f"{item.location}: {item.reason}"))
                yield beam.pvalue.TaggedOutput("dead", asdict(item))


def _dead(document: Document, reason: str) -> dict:
    """A document refused at linking, named as a reader's dead letter names a record: its input file, its id."""
    return asdict(
        DeadLetter(source=document.source, location=f"document {document.doc_id}", raw=document.text[:2000], reason=reason)
    )


class ResolveFn(beam.DoFn):
    """Everything known about one doc id -> what to do with it this run.

    Every input record is first checked as the annotator would (`check_document`): an invalid one (blank,
    oversized, mentions off the text) is dead-lettered and never chosen. The rest apply in input order (NLM's rule
    for the baseline and update files): the last deletion removes the records before it; among the documents
    after it the highest PubMed version wins, then the one read last (a later file's record replaces an earlier
    file's). The others are counted as superseded. When every record of an id is invalid, its previous state
    (document and annotations) is kept: a bad re-delivery never removes a good document."""

    def __init__(self, with_mentions: bool, versions: tuple[str, str], settings: str = "", max_chars: int | None = None):
        self.with_mentions, self.versions, self.settings = with_mentions, versions, settings
        self.max_chars = max_chars

    def _valid(self, documents: list[tuple[tuple[int, int], Document]]):
        """(valid (input position, copy) pairs, dead letters of the invalid ones)."""
        valid, dead = [], []
        limit = {} if self.max_chars is None else {"max_chars": self.max_chars}
        for position, d in documents:
            try:
                check_document(d, not self.with_mentions, **limit)
                valid.append((position, d))
            except DocumentError as err:
                dead.append(_dead(d, str(err)))
        return valid, dead

    def process(self, element):
        doc_id, grouped = element
        current, deleted = grouped["document"], grouped["deleted"]
        previous, previous_rows = grouped["previous"], grouped["previous_annotations"]
        current, dead = self._valid(list(current))
        for letter in dead:
            yield beam.pvalue.TaggedOutput("dead", letter)
            yield beam.pvalue.TaggedOutput("stats", ("documents.dead_lettered", 1))
        received = len(current) + len(deleted)
        if received > 1:
            yield beam.pvalue.TaggedOutput("stats", ("documents.superseded", received - 1))
        if deleted:
            last_deletion = max(position for position, _ in deleted)
            current = [(position, d) for position, d in current if position > last_deletion]
        if deleted and not current:
            yield beam.pvalue.TaggedOutput("stats", ("documents.deleted", 1))
            yield beam.pvalue.TaggedOutput(
                "documents",
                {
                    "doc_id": doc_id,
                    "content_sha256": "",
                    "status": "deleted",
                    "mentions": 0,
                    "passages": [],
                    "model_version": self.versions[0],
                    "kb_version": self.versions[1],
                },
            )
            return
        if not current:  # not in this run's inputs, or only invalid copies: the previous state stands
            for row in previous:
                yield beam.pvalue.TaggedOutput("stats", ("documents.kept_previous" if dead else "documents.carried", 1))
                yield beam.pvalue.TaggedOutput("documents", row)
            for row in previous_rows:
                yield beam.pvalue.TaggedOutput("annotations", row)
            return
        _, document = max(current, key=lambda pd: (_version(pd[1]), pd[0]))
        sha = content_sha256(document, self.with_mentions, self.settings)
        prev = previous[0] if previous else None
        if (
            prev
            and prev["status"] == "annotated"
            and prev["content_sha256"] == sha
            and (prev["model_version"], prev["kb_version"]) == self.versions
        ):
            yield beam.pvalue.TaggedOutput("stats", ("documents.unchanged", 1))
            yield beam.pvalue.TaggedOutput("documents", prev)
            for row in previous_rows:
                yield beam.pvalue.TaggedOutput("annotations", row)
            return
        yield sha, document


def _version(document: Document) -> int:
    return int(document.version) if document.version.isdigit() else 0


class OpenedModels:
    """The models the driver opened to check them (`AnnotatorSpec.versions`), handed to the first worker that sets up
    in the driver's own process (the local runners' workers run there): opening them again is a second load and
    fingerprint of each model, about half a second of every run's start-up. Handed once, as a worker's annotator is
    its own (workers on threads of one process each open theirs). Where the workers run elsewhere (worker processes,
    a cluster) the driver keeps nothing, and each worker opens its own. `held` lasts as long as the pipeline runs."""

    _kept: dict[str, dict] = {}
    _lock = threading.Lock()

    @classmethod
    @contextlib.contextmanager
    def held(cls, models: dict | None) -> Iterator[str | None]:
        """A token a worker takes `models` by while the context lasts; None (nothing held) for no models."""
        if models is None:
            yield None
            return
        token = uuid.uuid4().hex
        with cls._lock:
            cls._kept[token] = models
        try:
            yield token
        finally:
            with cls._lock:
                cls._kept.pop(token, None)

    @classmethod
    def take(cls, token: str | None) -> dict | None:
        with cls._lock:
            return cls._kept.pop(token, None) if token else None


class DetectAndLinkFn(beam.DoFn):
    """A batch of (content hash, Document) -> (shard, annotations spill file) and, tagged, (shard, documents spill
    file): the batch's rows cut by output shard, each piece an Arrow IPC file under `spill` named by its content (a
    retried bundle rewrites the same file). The annotator (encoder, FAISS shards, dictionaries) loads once per
    worker process in setup. `threads`: torch and FAISS threads in this worker (options.worker_threads); `opened`:
    the driver's models (OpenedModels), if this worker runs in its process."""

    def __init__(
        self,
        spec: AnnotatorSpec,
        num_shards: int,
        spill: str,
        copy_formats: tuple[str, ...] = (),
        threads: int | None = None,
        opened: str | None = None,
    ):
        self.spec, self.num_shards, self.spill = spec, num_shards, spill
        self.copy_formats, self.threads, self.opened = copy_formats, threads, opened

    def setup(self):
        if self.threads:
            import faiss
            import torch

            torch.set_num_threads(self.threads)
            faiss.omp_set_num_threads(self.threads)
        self.annotator = self.spec.open(OpenedModels.take(self.opened))

    def process(self, batch):
        good = []
        for sha, document in batch:
            try:
                self.annotator.check(document)
            except DocumentError as err:
                yield beam.pvalue.TaggedOutput("dead", _dead(document, str(err)))
                continue
            # refused before linking, so the document is one dead letter and the counts still reconcile; the
            # interchange copies hold the text and the annotation rows, not the input's own mentions
            reason = next(
                filter(None, (unwritable(Document(document.doc_id, document.passages), fmt) for fmt in self.copy_formats)), None
            )
            if reason:
                yield beam.pvalue.TaggedOutput("dead", _dead(document, reason))
                continue
            good.append((sha, document))
        progress.advance(len(batch) - len(good))
        if not good:
            return
        annotated = self.annotator.annotate([d for _, d in good])
        progress.advance(len(good))
        documents, annotations = {}, {}
        for (sha, document), rows in zip(good, annotated):
            shard = stable_shard(document.doc_id, self.num_shards)
            documents.setdefault(shard, []).append(
                {
                    "doc_id": document.doc_id,
                    "content_sha256": sha,
                    "status": "annotated",
                    "mentions": len(rows),
                    "passages": [{"kind": p.kind, "offset": p.offset, "text": p.text} for p in document.passages],
                    "model_version": self.annotator.model_version,
                    "kb_version": self.annotator.kb_version,
                }
            )
            annotations.setdefault(shard, []).extend(rows)
        mentions = sum(len(rows) for rows in annotated)
        yield beam.pvalue.TaggedOutput("stats", ("documents.linked", len(good)))
        yield beam.pvalue.TaggedOutput("stats", ("mentions.linked", mentions))
        yield beam.pvalue.TaggedOutput("stats", ("mentions.nil", sum(r["nil"] for rows in annotated for r in rows)))
        for entity_type, n in sorted(self.annotator.no_index([r for rows in annotated for r in rows]).items()):
            yield beam.pvalue.TaggedOutput("stats", (NO_INDEX + entity_type, n))
        yield beam.pvalue.TaggedOutput("stats", ("annotations.written", mentions))
        for shard in sorted(documents):
            yield beam.pvalue.TaggedOutput(
                "documents", (shard, self._spilled("documents", shard, documents[shard], DOCUMENTS_SCHEMA))
            )
        for shard in sorted(annotations):
            yield shard, self._spilled("annotations", shard, annotations[shard], ANNOTATIONS_SCHEMA)

    def _spilled(self, table: str, shard: int, rows: list[dict], schema: pa.Schema) -> str:
        return spill_run(FileSystems.join(self.spill, table, f"{shard:05d}"), pa.Table.from_pylist(rows, schema=schema), "doc_id")


def interchange_ids(row: dict, id_prefix: str) -> tuple[str, ...]:
    """The ids an interchange file gets for a linked row: its concept's, or a composite concept's parts' (as BC5CDR
    writes a composite mention), bare (`D003920`) or qualified with their vocabulary as PubTator3 writes them
    (`MESH:D003920`) when `id_prefix` is "vocabulary" (an id of no known vocabulary stays bare)."""
    ids = tuple(concept_parts(row["concept_id"]))
    if id_prefix == "vocabulary" and row.get("vocabulary"):
        return tuple(qualify(row["vocabulary"], i) for i in ids)
    return ids


def as_linked_documents(documents: list[dict], annotations: list[dict], id_prefix: str = "none") -> list[Document]:
    """Documents-table rows with their annotation rows -> Documents whose mentions are the annotations
    (NIL: no concept id), for the interchange writers. Tombstones are left out."""
    if id_prefix not in ID_PREFIXES:
        raise ValueError(f"--id-prefix must be one of {ID_PREFIXES}, got {id_prefix!r}")
    by_doc: dict[str, list[Mention]] = {}
    for r in annotations:
        by_doc.setdefault(r["doc_id"], []).append(
            Mention(
                text=r["mention"],
                doc_id=r["doc_id"],
                start=r["start"],
                end=r["end"],
                entity_type=r["entity_type"],
                concept_ids=() if r["nil"] else interchange_ids(r, id_prefix),
            )
        )
    return [
        Document(d["doc_id"], [Passage(p["kind"], p["offset"], p["text"]) for p in d["passages"]], by_doc.get(d["doc_id"], []))
        for d in documents
        if d["status"] == "annotated"
    ]


def sorted_table(parts, schema: pa.Schema, keys: tuple[str, ...]) -> pa.Table:
    """A shard's parts, spill files from DetectAndLink and lists of rows kept or carried by Resolve, as one table
    sorted by `keys` in one chunk, so the file is the same whatever the parts and their order."""
    parts = list(parts)
    rows = [r for part in parts if isinstance(part, list) for r in part]
    spilled = sorted(part for part in parts if isinstance(part, str))  # in a fixed order: sort_by keeps ties' order
    tables = [pa.Table.from_pylist(rows, schema=schema)] + [read_spilled(path) for path in spilled]
    return pa.concat_tables(tables).sort_by([(key, "ascending") for key in keys]).combine_chunks()


class WriteLinkedShardFn(beam.DoFn):
    """One shard: annotations and documents Parquet files (rows sorted so re-runs are byte-stable) and the same
    documents and annotations in each interchange copy format asked."""

    def __init__(self, root: str, num_shards: int, copy_formats: tuple[str, ...], id_prefix: str = "none"):
        self.root, self.num_shards, self.copy_formats, self.id_prefix = root, num_shards, copy_formats, id_prefix

    def process(self, element):
        shard, grouped = element
        fs = filesystem_for(self.root)
        parts = {table: list(grouped[table]) for table in ("annotations", "documents")}
        annotations = sorted_table(parts["annotations"], ANNOTATIONS_SCHEMA, ("doc_id", "start", "end", "entity_type"))
        documents = sorted_table(parts["documents"], DOCUMENTS_SCHEMA, ("doc_id",))
        for name, table in (("annotations", annotations), ("documents", documents)):
            write_parquet(fs, fs.join(self.root, name, shard_name(shard, self.num_shards)), table)
        linked = as_linked_documents(documents.to_pylist(), annotations.to_pylist(), self.id_prefix) if self.copy_formats else []
        for fmt in self.copy_formats:
            text = write_interchange(linked, fmt)
            if text:  # a PubTator part of no document would be an empty file, which every PubTator reader refuses
                fs.write(fs.join(self.root, fmt, shard_name(shard, self.num_shards, INTERCHANGE_SUFFIX[fmt])), text.encode())
        # this shard's spill files are read: freeing them now keeps `_spill` from holding a second copy of the run
        delete_files([part for table_parts in parts.values() for part in table_parts if isinstance(part, str)])
        yield shard


class ReadPreviousFn(beam.DoFn):
    """A Parquet file of the previous output -> (doc_id, row)."""

    def process(self, path: str):
        with open_stream(path) as fh:
            for row in pq.read_table(fh).to_pylist():
                yield row["doc_id"], row


def published_state(output_dir: str) -> dict | None:
    """The manifest of the `bioel link` state published in `output_dir`, which --incremental continues (None if
    nothing is published there)."""
    pointer = read_pointer(filesystem_for(output_dir), output_dir)
    if pointer is not None and (pointer.get("pipeline") != "link" or not pointer.get("complete")):
        raise OutputError(f"--output {output_dir}: holds no finished `bioel link` state to continue with --incremental")
    return pointer


def previous_files(output_dir: str, pointer: dict | None) -> dict[str, list[str]]:
    """The annotations and documents files of the published state `pointer` (none if there is none), as its manifest
    lists them."""
    if pointer is None:
        return {"annotations": [], "documents": []}
    fs = filesystem_for(output_dir)
    root = fs.join(output_dir, pointer["generation"]) if pointer.get("generation") else output_dir
    return {t: sorted(fs.join(root, f) for f in pointer["outputs"][t]["files"]) for t in ("annotations", "documents")}


def copy_formats_of(asked, pointer: dict | None) -> tuple[str, ...]:
    """The interchange copies a run writes, in INTERCHANGE_SUFFIX order: those asked (`parquet` asks for none: the
    tables are always written) and, continuing a published state (--incremental), every copy it has, so that a copy
    is never dropped by a run that did not name it. A run without --incremental writes the copies asked only."""
    unknown = sorted(set(asked) - set(OUTPUT_FORMATS))
    if unknown:
        raise ValueError(f"--output-format must be among {', '.join(OUTPUT_FORMATS)}, got {', '.join(unknown)}")
    kept = set((pointer or {}).get("outputs", {})) & set(INTERCHANGE_SUFFIX)  # a state's copies are among its outputs
    return tuple(fmt for fmt in INTERCHANGE_SUFFIX if fmt in set(asked) | kept)


def build_pipeline(
    p: beam.Pipeline,
    inputs: dict[str, str],
    fmt: str,
    staged: OutputFolder,
    spec: AnnotatorSpec,
    *,
    per_line: bool,
    previous: dict[str, list[str]],
    copy_formats: tuple[str, ...],
    num_shards: int,
    batch_size: int,
    versions: tuple[str, str],
    id_prefix: str = "none",
    settings: str = "",
    threads: int | None = None,
    opened: str | None = None,
) -> None:
    """`inputs`: each input file with the folder it was listed from (pipelines.outputs.listed_inputs); `opened`: the
    driver's models held for a worker in its process (OpenedModels)."""
    pieces = corpus_inputs(list(inputs), fmt, per_line=per_line, opener=open_stream)
    read = (
        p
        | "Inputs" >> beam.Create([(n, piece, inputs[input_path(piece)]) for n, piece in enumerate(pieces)])
        | "Spread" >> beam.Reshuffle()
        | "ReadCorpus" >> beam.ParDo(ReadCorpusFn(fmt, per_line)).with_outputs("deleted", "dead", "unread", main="documents")
    )

    def previous_rows(table: str):
        return (
            p
            | f"Previous{table.title()}Files" >> beam.Create(previous[table])
            | f"ReadPrevious{table.title()}" >> beam.ParDo(ReadPreviousFn())
        )

    resolved = (
        {
            "document": read.documents | "KeyDocuments" >> beam.Map(lambda pd: (pd[1].doc_id, pd)),
            "deleted": read.deleted | "KeyDeletions" >> beam.Map(lambda pd: (pd[1].doc_id, pd)),
            "previous": previous_rows("documents"),
            "previous_annotations": previous_rows("annotations"),
        }
        | "GroupByDocId" >> beam.CoGroupByKey()
        | "Resolve"
        >> beam.ParDo(ResolveFn(not spec.detect, versions, settings, spec.max_chars)).with_outputs(
            "documents", "annotations", "dead", "stats", main="to_link"
        )
    )

    linked = (
        resolved.to_link
        # fixed-size batches: the annotator searches each index once a batch, so small adaptive batches cost
        | "Batch" >> beam.BatchElements(min_batch_size=batch_size, max_batch_size=batch_size)
        | "DetectAndLink"
        >> beam.ParDo(
            DetectAndLinkFn(spec, num_shards, FileSystems.join(staged.root, SPILL), copy_formats, threads, opened)
        ).with_outputs("documents", "dead", "stats", main="annotations")
    )

    def by_shard(label, rows):  # the rows Resolve keeps or carries, one at a time, as the linked ones come: (shard, [row])
        return rows | label >> beam.Map(lambda r: (stable_shard(r["doc_id"], num_shards), [r]))

    annotations = (
        by_shard("ShardKeptAnnotations", resolved.annotations),
        linked.annotations,
    ) | "AllAnnotations" >> beam.Flatten()
    documents = (by_shard("ShardKeptDocuments", resolved.documents), linked.documents) | "AllDocuments" >> beam.Flatten()
    shards = {
        "annotations": annotations,
        "documents": documents,
        # every shard gets a group, and so its files, even without rows: a missing file is then an error
        "seed": p | "ShardSeeds" >> beam.Create([(s, None) for s in range(num_shards)]),
    } | "GroupShards" >> beam.CoGroupByKey()
    _ = shards | "WriteShard" >> beam.ParDo(WriteLinkedShardFn(staged.root, num_shards, copy_formats, id_prefix))

    dead = (read.dead, resolved.dead, linked.dead) | "AllDeadLetters" >> beam.Flatten()
    _ = dead | "WriteDeadLetters" >> WriteDeadLetters(staged.table_dir("dead_letter"))

    counters = (
        resolved.stats,
        linked.stats,
        read.documents | "CountDocumentsRead" >> count_as("records.documents"),
        read.deleted | "CountDeletionsRead" >> count_as("records.deletions"),
        read.dead | "CountReadDeadLetters" >> count_as("records.dead_lettered"),
        linked.dead | "CountLinkDeadLetters" >> count_as("documents.dead_lettered"),
        resolved.annotations | "CountAnnotationsKept" >> count_as("annotations.written"),
        read.unread | "ListUnreadFiles" >> beam.Map(lambda unread: (UNREAD_FILES, [list(unread)])),
    )
    _ = counters | "WriteStats" >> WriteStats(staged.root)


NO_INDEX = "mentions.no_index."  # the counter of a type's given mentions left NIL for want of an --index: + the type


def build_manifest(
    stats: dict,
    *,
    inputs: list[dict],
    fmt: str,
    copy_formats: tuple[str, ...],
    staged: OutputFolder,
    spec: AnnotatorSpec,
    versions: tuple[str, str],
    incremental: bool,
    previous_documents: int,
    options: PipelineOptions,
    id_prefix: str = "none",
    single_file: bool = False,
    run_key: str = "",
) -> Manifest:
    """`inputs`: the input files' records (pipelines.outputs.input_records); `run_key`: the run's `run_key`."""
    get = lambda k: stats.get(k, 0)  # noqa: E731
    records = {
        "documents": get("records.documents"),
        "deletions": get("records.deletions"),
        "dead_lettered": get("records.dead_lettered"),
    }
    docs = {
        k: get(f"documents.{k}")
        for k in ("linked", "unchanged", "deleted", "dead_lettered", "superseded", "carried", "kept_previous")
    }
    outputs = {table: staged.table_outputs(table) for table in TABLES}
    for copy_format in copy_formats:
        outputs[copy_format] = {
            **staged.table_outputs(copy_format, rows=False),
            "documents": outputs["documents"]["rows"] - docs["deleted"],
        }
    received = records["documents"] + records["deletions"]
    reconciliation = {
        # every record read is linked, unchanged, a deletion, superseded by another record of its id, or dead-lettered
        "documents": received
        == docs["linked"] + docs["unchanged"] + docs["deleted"] + docs["superseded"] + docs["dead_lettered"],
        # kept_previous: an earlier document whose every copy this run was dead-lettered keeps its state
        "documents_table": outputs["documents"]["rows"]
        == docs["linked"] + docs["unchanged"] + docs["deleted"] + docs["carried"] + docs["kept_previous"],
        "annotations": outputs["annotations"]["rows"] == get("annotations.written"),
        "dead_letter": outputs["dead_letter"]["rows"] == records["dead_lettered"] + docs["dead_lettered"],
    }
    unread: dict[str, str] = {}  # a file read in ranges may say so from each: the first range's reason
    for path, _, why in sorted(stats.get(UNREAD_FILES, [])):
        unread.setdefault(path, why)
    return Manifest(
        pipeline="link",
        reconciliation=reconciliation,
        outputs=outputs,
        inputs=[{**record, **({"unread": unread[record["path"]]} if record["path"] in unread else {})} for record in inputs],
        counts={
            "records": records,
            "documents": docs,
            "mentions": {
                "linked": get("mentions.linked"),
                "nil": get("mentions.nil"),
                "no_index": {k[len(NO_INDEX) :]: n for k, n in sorted(stats.items()) if k.startswith(NO_INDEX)},
            },
            "files": {"given": len(inputs), "unread": len(unread)},
        },
        runner=runner_name(options),
        options=options.get_all_options(drop_default=True),
        details={
            "corrupt_input_policy": CORRUPT_INPUT_POLICY,
            "input_format": fmt,
            "copy_formats": list(copy_formats),
            "single_file": single_file,
            "id_prefix": id_prefix,
            "incremental": incremental,
            "run_key": run_key,
            "previous_documents": previous_documents,
            "annotator": spec.describe(),
            "model_version": versions[0],
            "kb_version": versions[1],
        },
    )


SINGLE_FILE_STEM = "linked"  # OUTPUT/gen-.../pubtator/linked.pubtator with --single-file


def merge_into_single_file(staged: OutputFolder, output_format: str) -> None:
    """Replace the interchange parts of a staged generation by one file, documents in doc-id order (each part
    is sorted and the merge is by id, so the bytes do not depend on the shard or worker count)."""
    parts = staged.files(output_format)
    merged = merge_interchange(parts, output_format, opener=staged.fs.open)
    staged.fs.write(
        staged.fs.join(staged.table_dir(output_format), SINGLE_FILE_STEM + INTERCHANGE_SUFFIX[output_format]), merged.encode()
    )
    for part in parts:
        staged.fs.delete(part)


def run_key(
    inputs: list[dict], fmt: str, spec: AnnotatorSpec, *, per_line: bool, num_shards: int, id_prefix: str, single_file: bool
) -> str:
    """sha256 of everything a link run's tables depend on besides the state it continues, read without opening a
    model: the input files (path, sha256, in their order), how they are read, the linker
    (`AnnotatorSpec.linker_sha256`), the output's layout and the package that writes it. An --incremental run with
    the key of the state it continues finds every document unchanged and every deletion applied: it would publish
    that state's tables again (`nothing_changed`)."""
    payload = {
        "inputs": inputs,
        "input_format": fmt,
        "per_line": per_line,
        "linker": spec.linker_sha256(),
        "num_shards": num_shards,
        "id_prefix": id_prefix,
        "single_file": single_file,
        "package_version": bioel_core.__version__,
        "schema_version": SCHEMA_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


NOTHING_CHANGED = "nothing_changed"  # the key of run()'s result when it published nothing, the state being up to date


def nothing_changed(pointer: dict | None, key: str, copy_formats: tuple[str, ...], report: str | None) -> bool:
    """Whether an --incremental run would publish the tables of the state `pointer` names again: the same run key,
    the same copies, every input file read to its end, and the state's own quality report there when the run is
    checked (`report`: the generation the folder's report was written for, `report_generation`; "" when unchecked)."""
    return (
        pointer is not None
        and pointer.get("run_key") == key
        and copy_formats_of((), pointer) == copy_formats
        and not pointer["counts"]["files"]["unread"]
        and report in ("", pointer["generation"])
    )


def report_generation(output_dir: str) -> str | None:
    """The generation the output folder's quality report was written for; None when it has none (a run killed after
    moving the pointer leaves the previous generation's report, or none)."""
    fs = filesystem_for(output_dir)
    path = fs.join(output_dir, QUALITY, REPORT_SUMMARY)
    return read_json(fs, path).get("generation") if fs.exists(path) else None


def unchanged_result(pointer: dict) -> dict:
    """What a run that found nothing changed returns: the manifest in force, counted as re-running it would count
    (each document linked or unchanged then is unchanged now, nothing is linked), marked NOTHING_CHANGED."""
    docs = dict(pointer["counts"]["documents"])
    docs["unchanged"], docs["linked"] = docs["unchanged"] + docs["linked"], 0
    mentions = {"linked": 0, "nil": 0, "no_index": {}}
    return {**pointer, "counts": {**pointer["counts"], "documents": docs, "mentions": mentions}, NOTHING_CHANGED: True}


def run(
    inputs: list[str],
    fmt: str,
    output_dir: str,
    spec: AnnotatorSpec,
    options: PipelineOptions,
    *,
    output_formats: Sequence[str] = (),
    per_line: bool = False,
    incremental: bool = False,
    num_shards: int = 4,
    batch_size: int = 64,
    id_prefix: str = "none",
    single_file: bool = False,
    gate=None,
    labels: Mapping[str, str] | None = None,
) -> dict:
    """Runs the linking pipeline on `inputs` (files, folders, globs: pipelines.outputs.listed_inputs) and publishes
    its output if it passes `gate` (a quality.QualityGate; None: unchecked); returns the manifest. `output_formats`:
    the interchange copies written beside the Parquet tables (with --incremental, also every copy the state has:
    `copy_formats_of`); `single_file`: each copy is one file in doc-id order, not parts.

    An --incremental run on inputs, linker and settings that the published state was made with (`run_key`) publishes
    nothing: that state stands as it is, its generation, manifest and quality report untouched (a scheduled job's
    consumers see no new state), and the result is marked NOTHING_CHANGED. It is found before any model is opened."""
    if fmt not in FORMATS:
        raise ValueError(f"--input-format must be one of {FORMATS}")
    if id_prefix not in ID_PREFIXES:
        raise ValueError(f"--id-prefix must be one of {ID_PREFIXES}")
    if per_line and fmt != "text":
        raise ValueError(f"--text-per-line applies to --input-format text, not {fmt}")
    if not spec.detect and fmt not in FORMATS_WITH_MENTIONS:
        raise ValueError(
            f"--mentions given links the corpus's own mentions, and --input-format {fmt} carries none "
            f"(formats with mentions: {', '.join(FORMATS_WITH_MENTIONS)})"
        )
    copy_formats_of(output_formats, None)  # an unknown format refused before any work
    check_num_shards(num_shards)
    stage = logs.Stage("link")
    inputs, output_dir = [absolute(p) for p in inputs], absolute(output_dir)  # as the workers must see them

    # refusals name the inputs and output in the caller's words (`labels`: the CLI's flags), default the settings'
    def label(name: str) -> str:
        return (labels or {}).get(name, name)

    check_output_folder(output_dir, "link", [(label("input"), p) for p in inputs] + spec.inputs(labels), label("output"))
    # a finished `bioel link` output given as PubTator input is read for its PubTator copy
    listed = listed_inputs(
        inputs, output_folder=(lambda folder: pubtator_files(folder, label("input"))) if fmt == "pubtator" else None
    )
    if fmt == "text" and not per_line:
        check_document_ids(listed, label("input"))
    inputs = list(listed)
    pointer = published_state(output_dir) if incremental else None
    copy_formats = copy_formats_of(output_formats, pointer)
    if single_file and not copy_formats:
        raise ValueError("--single-file needs an interchange --output-format (pubtator, bioc-json, bioc-xml)")
    records = input_records(inputs)
    stage.info(
        "reading %s input file(s), %s bytes of %s, into %s (%s; copies: %s)",
        f"{len(records):,}",
        f"{sum(r['bytes'] for r in records):,}",
        fmt,
        output_dir,
        "incremental" if pointer else "a new state",
        ", ".join(copy_formats) or "none",
    )
    key = run_key(records, fmt, spec, per_line=per_line, num_shards=num_shards, id_prefix=id_prefix, single_file=single_file)
    fs = filesystem_for(output_dir)
    if nothing_changed(pointer, key, copy_formats, "" if gate is None else report_generation(output_dir)):
        # what a killed run left goes, as any run's publish removes it; the state in force must be the one checked
        if OutputFolder(fs, output_dir, TABLES + copy_formats).tidy() != pointer:
            raise OutputError(f"--output {output_dir}: another run published there while this one started; run again")
        stage.done(
            "nothing changed: the inputs, linker and settings are those of the state published %s (%s); it "
            "stands, nothing published",
            pointer["created_utc"],
            pointer["generation"],
        )
        return unchanged_result(pointer)
    models = spec.open_models()
    versions = spec.versions(models)  # checks the models against the indexes' manifests before any work
    handed = models if in_process(options) else None  # kept for a worker only where one runs in this process
    del models
    settings = spec.settings_sha256()
    previous = previous_files(output_dir, pointer)
    staged = OutputFolder(fs, output_dir, TABLES + copy_formats)
    stage.info("linker opened and checked; linking on %s into %s shard(s)", runner_name(options), f"{num_shards:,}")

    def build() -> Manifest:
        with OpenedModels.held(handed) as opened, pipeline_progress(options, "link", "documents"), new_pipeline(options) as p:
            build_pipeline(
                p,
                listed,
                fmt,
                staged,
                spec,
                per_line=per_line,
                previous=previous,
                copy_formats=copy_formats,
                num_shards=num_shards,
                batch_size=batch_size,
                versions=versions,
                id_prefix=id_prefix,
                settings=settings,
                threads=worker_threads(options),
                opened=opened,
            )
        staged.fs.delete(staged.fs.join(staged.root, SPILL))  # the linked rows' spill files, all read by the writers
        if single_file:
            for copy_format in copy_formats:
                merge_into_single_file(staged, copy_format)
        manifest = refuse_empty(
            build_manifest(
                read_stats(staged.root),
                inputs=records,
                fmt=fmt,
                copy_formats=copy_formats,
                staged=staged,
                spec=spec,
                versions=versions,
                incremental=incremental,
                previous_documents=parquet_rows(staged.fs, previous["documents"]),
                options=options,
                id_prefix=id_prefix,
                single_file=single_file,
                run_key=key,
            ),
            staged,
        )
        stage.info(
            "pipeline done: %s document rows, %s annotation rows; %s",
            f"{manifest.outputs['documents']['rows']:,}",
            f"{manifest.outputs['annotations']['rows']:,}",
            "checking quality" if gate else "publishing",
        )
        return manifest

    manifest = staged.publish(build, gate).to_dict()
    docs, mentions = manifest["counts"]["documents"], manifest["counts"]["mentions"]
    stage.done(
        "linked %s documents, %s mentions (%s NIL); unchanged %s, deleted %s, carried %s; published %s",
        f"{docs['linked']:,}",
        f"{mentions['linked']:,}",
        f"{mentions['nil']:,}",
        f"{docs['unchanged']:,}",
        f"{docs['deleted']:,}",
        f"{docs['carried']:,}",
        manifest["generation"],
    )
    return manifest
