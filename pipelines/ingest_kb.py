"""KB dump -> versioned Parquet `concepts` and `names` tables, dead letters and a reconciled manifest.

    InputGroups | Spread | ReadKB ─┬─ concept tables | SpillConcepts ─────────────────────────── | WriteConcepts (merge)
                                   ├─ name tables | Normalize | SpillNames | [SharedNamePolicy] ─ | WriteNames (merge)
                                   ├─ dead letters ───────────────────────────────────────────── | WriteDeadLetters
                                   └─ read stats + step counters ─────────────────────────────── | WriteStats
    [ExtraNames: extra-names files, their ids looked up in the concept tables ─ name tables ─ into Normalize]

Rows move in Arrow tables of up to READ_BATCH rows, never one by one. A table is cut by output shard into
sorted runs spilled under the staged generation's `_spill` (bioel_core.outputs.runs); each shard's writer
merges its runs, keeping one row a name_id (the most authoritative type) and one a concept id (merged), so a
worker holds one record batch a run, not a shard, whatever the size of the KB. The GenBioEL shared-name
policy needs every name of a concept and of a normalized form together, so with it the deduplicated names
take two row-level shuffles before they are spilled again and written.

Extra names (bioel_core.kb.extra_names) join the KB's names before normalization: the ids their files name are a side
input of one scan of the concept tables, which yields only the concepts answering to them, so the join shuffles the
extra names and their matches, never the KB. A name whose concept the KB lacks is a dead letter of its file, or, with
add_missing_concepts, its names make the concept, which joins the KB's concepts before they are written (counted as
`concepts.made_from_extra_names`).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter, namedtuple
from dataclasses import asdict

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from bioel_core import progress
from bioel_core.guards import check_output_folder, refuse_empty
from bioel_core.kb import get_reader
from bioel_core.kb.extra_names import concept_keys, id_pattern_with, made_kind, new_concept, read_extra_names, resolve
from bioel_core.kb.io import CORRUPT_INPUT_POLICY, ReaderContext
from bioel_core.kb.scope import out_of_scope_counts
from bioel_core.normalize import Normalizer, NormalizerConfig, clean_text, name_id
from bioel_core.outputs import Manifest, OutputFolder, absolute, check_num_shards, shard_name
from bioel_core.outputs.details import IngestDetails
from bioel_core.outputs.runs import (
    MAX_FAN_IN,
    SPILL,
    MergeCounts,
    combine_runs,
    merge_runs,
    read_run,
    rows_table,
    run_name,
    write_rows,
)
from bioel_core.records import EXTRA_NAME_TYPE, ConceptRecord, DeadLetter, NameRecord, ReadStats
from bioel_core.settings import SHARED_NAME_POLICIES
from bioel_core.tables import stable_shard
from pipelines import logs
from pipelines.counting import WriteStats, read_stats
from pipelines.options import new_pipeline, pipeline_progress, runner_name
from pipelines.outputs import (
    WriteDeadLetters,
    create_stream,
    delete_files,
    expand_inputs,
    filesystem_for,
    open_stream,
    sha256_of,
    spill_run,
)
from schemas import CONCEPTS_SCHEMA, NAMES_SCHEMA

log = logging.getLogger(__name__)

# an extra name first: where the KB names its concept so too, its file's word that the name means this concept must
# survive the deduplication (bioel_core.names.NameSet links a name first to the concept of its extra row)
NAME_TYPE_RANK = {EXTRA_NAME_TYPE: 0, "preferred": 1, "fsn": 2, "synonym": 3, "entry_term": 4, "abbreviation": 5}
TABLES = ("concepts", "names", "dead_letter")
READ_BATCH = 50_000  # names (or concepts) a reader hands on as one element
MADE_IN = "made_in_vocabulary."  # stats counter prefix: concepts made from extra names, per vocabulary


class ReadKBFn(beam.DoFn):
    """Reads one group of input files with the bioel_core reader and routes items by type: names and concepts as
    tables of up to READ_BATCH rows (cheap for a runner to move and size, unlike lists of records)."""

    def __init__(self, kb_format: str, reader_options: dict):
        self.kb_format, self.reader_options = kb_format, reader_options

    def setup(self):
        self.reader = get_reader(self.kb_format, **self.reader_options)

    def process(self, paths):
        names, concepts = [], []
        for item in self.reader.read(paths, opener=open_stream):
            if isinstance(item, NameRecord):
                names.append(item)
                if len(names) == READ_BATCH:
                    yield read_names_table(names)
                    names = []
            elif isinstance(item, ConceptRecord):
                concepts.append(item)
                if len(concepts) == READ_BATCH:
                    yield beam.pvalue.TaggedOutput("concepts", concepts_table(concepts))
                    concepts = []
            elif isinstance(item, DeadLetter):
                yield beam.pvalue.TaggedOutput("dead", asdict(item))
            elif isinstance(item, ReadStats):
                yield beam.pvalue.TaggedOutput("stats", ("read_stats", [asdict(item)]))
        if names:
            yield read_names_table(names)
        if concepts:
            yield beam.pvalue.TaggedOutput("concepts", concepts_table(concepts))


class NormalizeNamesFn(beam.DoFn):
    """A table of names as read -> a names table (name_norm and the stable name_id added); a name that normalizes
    to nothing is dead-lettered."""

    def __init__(self, normalizer_config: NormalizerConfig):
        self.normalizer_config = normalizer_config

    def setup(self):
        self.normalize = Normalizer(self.normalizer_config)

    def process(self, read: pa.Table):
        progress.advance(read.num_rows)
        rows = []
        for concept_id, kb, raw, name_type in zip(*(read.column(c).to_pylist() for c in READ_NAMES_SCHEMA.names)):
            name = clean_text(raw)
            norm = self.normalize(name)
            if norm:
                rows.append((name_id(kb, concept_id, norm), concept_id, kb, name, norm, name_type))
                continue
            why = "of control characters only" if not name else "empty after normalization"
            yield beam.pvalue.TaggedOutput(
                "dead", {"source": "normalizer", "location": f"concept {concept_id}", "raw": raw, "reason": f"name is {why}"}
            )
            yield beam.pvalue.TaggedOutput("stats", ("names.dead_lettered", 1))
        yield beam.pvalue.TaggedOutput("stats", ("names.emitted", read.num_rows))
        if rows:
            yield rows_table(rows, NAMES_SCHEMA)


class ReadExtraNamesFn(beam.DoFn):
    """An extra-names file -> (key, ExtraName) per name, dead letters, the file's read stats."""

    def process(self, path: str):
        ctx = ReaderContext(path)
        for item in read_extra_names(path, ctx, opener=open_stream):
            if isinstance(item, DeadLetter):
                yield beam.pvalue.TaggedOutput("dead", asdict(item))
            else:
                yield item.key, item
        yield beam.pvalue.TaggedOutput("stats", ("read_stats", [asdict(ctx.stats)]))


class FindExtraConceptsFn(beam.DoFn):
    """A concepts table -> (key, (concept_id, kb, via an alt id)) for each concept answering to a wanted key."""

    def process(self, table: pa.Table, wanted: list[str]):
        wanted = set(wanted)
        for concept_id, kb, alt_ids in zip(*(table.column(c).to_pylist() for c in ("concept_id", "kb", "alt_ids"))):
            for key, via_alt in concept_keys(concept_id, alt_ids):
                if key in wanted:
                    yield key, (concept_id, kb, via_alt)


class ResolveExtraNamesFn(beam.DoFn):
    """(key, {names, concepts}) -> each name as a read-names row of its concept, or a dead letter; per file the names
    accepted and dead-lettered (its read stats, summed with those of the reading); with `add_missing_concepts`, the
    concept a key no KB concept answers to makes (bioel_core.kb.extra_names.new_concept)."""

    def __init__(self, kb_format: str, reader_options: dict, add_missing_concepts: bool):
        self.kb_format, self.reader_options, self.add_missing_concepts = kb_format, reader_options, add_missing_concepts

    def setup(self):
        self.reader = get_reader(self.kb_format, **self.reader_options)

    def process(self, element):
        key, grouped = element
        names = sorted(grouped["names"], key=lambda n: (n.source, n.line))
        found = list(grouped["concepts"])
        chosen = resolve(key, found)
        if not found and self.add_missing_concepts:
            made = new_concept(names, self.reader)
            if isinstance(made, ConceptRecord):
                yield beam.pvalue.TaggedOutput("concepts", made)
                chosen = (made.concept_id, made.kb)
            else:
                chosen = made
        for name in names:
            if isinstance(chosen, str):
                yield beam.pvalue.TaggedOutput("dead", asdict(name.dead(chosen)))
                yield beam.pvalue.TaggedOutput("counts", (name.source, (0, 1)))
            else:
                concept_id, kb = chosen
                yield concept_id, kb, name.name, EXTRA_NAME_TYPE
                yield beam.pvalue.TaggedOutput("counts", (name.source, (1, 0)))


class ExtraNames(beam.PTransform):
    """The names of extra-names files (bioel_core.kb.extra_names) joined to the concept tables they name -> tables
    of names as read, tables of the concepts they make (add_missing_concepts), dead letters, read stats."""

    def __init__(self, paths: list[str], kb_format: str, reader_options: dict, add_missing_concepts: bool):
        super().__init__()
        self.paths = paths
        self.resolve = ResolveExtraNamesFn(kb_format, reader_options, add_missing_concepts)

    def expand(self, concepts):
        read = (
            concepts.pipeline
            | "ExtraNameFiles" >> beam.Create(self.paths)
            | "ReadExtraNames" >> beam.ParDo(ReadExtraNamesFn()).with_outputs("dead", "stats", main="names")
        )
        wanted = read.names | "WantedIds" >> beam.Keys() | "DistinctWantedIds" >> beam.Distinct()
        found = concepts | "FindExtraConcepts" >> beam.ParDo(FindExtraConceptsFn(), beam.pvalue.AsList(wanted))
        resolved = (
            {"names": read.names, "concepts": found}
            | "JoinExtraNames" >> beam.CoGroupByKey()
            | "ResolveExtraNames" >> beam.ParDo(self.resolve).with_outputs("concepts", "dead", "counts", main="rows")
        )
        tables = (
            resolved.rows
            | "BatchExtraNames" >> beam.BatchElements(min_batch_size=READ_BATCH, max_batch_size=READ_BATCH)
            | "ExtraNamesTable" >> beam.Map(lambda rows: rows_table(rows, READ_NAMES_SCHEMA))
        )
        made = (
            resolved.concepts
            | "BatchMadeConcepts" >> beam.BatchElements(min_batch_size=READ_BATCH, max_batch_size=READ_BATCH)
            | "MadeConceptsTable" >> beam.Map(concepts_table)
        )
        resolved_stats = (
            resolved.counts
            | "SumExtraNameCounts" >> beam.CombinePerKey(lambda counts: tuple(map(sum, zip(*counts))) or (0, 0))
            | "ExtraNameStats"
            >> beam.Map(lambda kv: ("read_stats", [asdict(ReadStats(kv[0], records_accepted=kv[1][0], dead_lettered=kv[1][1]))]))
        )
        made_stats = resolved.concepts | "CountMadeConcepts" >> beam.FlatMap(
            lambda c: [("concepts.made_from_extra_names", 1), (f"{MADE_IN}{made_kind(c)}", 1)]
        )
        dead = (read.dead, resolved.dead) | "ExtraNameDeadLetters" >> beam.Flatten()
        stats = (read.stats, resolved_stats, made_stats) | "ExtraNameReadStats" >> beam.Flatten()
        return tables, made, dead, stats


READ_NAMES_SCHEMA = pa.schema([NAMES_SCHEMA.field(c) for c in ("concept_id", "kb", "name", "name_type")])


def read_names_table(records: list[NameRecord]) -> pa.Table:
    return rows_table([(r.concept_id, r.kb, r.name, r.name_type) for r in records], READ_NAMES_SCHEMA)


def concepts_table(records: list[ConceptRecord]) -> pa.Table:
    """ConceptRecords as concepts rows, each already in its written form (a concept met once is written as is)."""
    return rows_table(
        [
            (
                r.concept_id,
                r.vocabulary,
                r.kb,
                clean_text(r.preferred_name),
                sorted(set(r.semantic_types)),
                r.definition,
                sorted(set(r.alt_ids) - {r.concept_id}),
            )
            for r in records
        ],
        CONCEPTS_SCHEMA,
    )


NameRow = namedtuple("NameRow", NAMES_SCHEMA.names)
ConceptRow = namedtuple("ConceptRow", CONCEPTS_SCHEMA.names)


def keep_best_name(rows: list[tuple]) -> tuple:
    """One row per name_id: the most authoritative type (NAME_TYPE_RANK), then the smallest surface form."""
    if len(rows) == 1:
        return rows[0]
    return min(map(NameRow._make, rows), key=lambda r: (NAME_TYPE_RANK.get(r.name_type, 9), r.name))


def merge_concepts(rows: list[tuple]) -> tuple:
    """One row per concept id; records met twice (several files, or a dictionary listing a concept on several
    lines) merge deterministically: union of types and alt ids, first definition in sort order."""
    if len(rows) == 1:
        return rows[0]
    rows = sorted(
        map(ConceptRow._make, rows),
        key=lambda r: (r.preferred_name, r.definition or "", r.semantic_types, r.alt_ids, r.vocabulary),
    )
    first = rows[0]
    return first._replace(
        semantic_types=sorted({t for r in rows for t in r.semantic_types}),
        definition=next((r.definition for r in rows if r.definition), None),
        alt_ids=sorted({a for r in rows for a in r.alt_ids} - {first.concept_id}),
    )


class SpillRunsFn(beam.DoFn):
    """A table of rows -> one sorted run a shard under `spill` (bioel_core.outputs.runs); yields (shard, run file).
    A row's shard is stable_shard(str(key)), as every table's."""

    def __init__(self, spill: str, num_shards: int, key: str):
        self.spill, self.num_shards, self.key = spill, num_shards, key

    def process(self, table: pa.Table):
        shards = np.array([stable_shard(str(k), self.num_shards) for k in table.column(self.key).to_pylist()])
        for shard in np.unique(shards).tolist():
            yield (
                shard,
                spill_run(FileSystems.join(self.spill, f"{shard:05d}"), table.filter(pa.array(shards == shard)), self.key),
            )


class MergeShardFn(beam.DoFn):
    """(shard, run files) -> the shard's Parquet file in `folder`, its rows in key order and one a key (`reduce`),
    the runs removed; counts rows written and rows reduced away. Without a folder, yields the rows as dicts
    instead (for a step that still needs them one by one)."""

    def __init__(self, folder: str | None, schema: pa.Schema, num_shards: int, reduce, written: str | None, reduced: str):
        self.folder, self.schema, self.num_shards, self.reduce = folder, schema, num_shards, reduce
        self.written, self.reduced = written, reduced

    def process(self, element):
        shard, spilled = element
        spilled = sorted(p for p in spilled if p)
        while len(spilled) > MAX_FAN_IN:
            combined = [self._combine(spilled[i : i + MAX_FAN_IN]) for i in range(0, len(spilled), MAX_FAN_IN)]
            delete_files(spilled)  # after the pass: a run spilled twice (two identical inputs) may sit in two groups
            spilled = combined
        counts = MergeCounts()
        with _opened(spilled) as handles:
            rows = merge_runs([read_run(h) for h in handles], 0, self.reduce, counts)
            if self.folder is None:
                yield from (dict(zip(self.schema.names, row)) for row in rows)
            else:
                path = FileSystems.join(self.folder, shard_name(shard, self.num_shards))
                with create_stream(path) as sink:
                    write_rows(rows, self.schema, sink)
                yield beam.pvalue.TaggedOutput("stats", (self.written, counts.rows_out))
        delete_files(spilled)
        yield beam.pvalue.TaggedOutput("stats", (self.reduced, counts.rows_in - counts.rows_out))

    def _combine(self, runs: list[str]) -> str:
        """MAX_FAN_IN runs -> one, beside them, named after them (a retry rewrites the same file)."""
        target = FileSystems.join(runs[0].rsplit("/", 1)[0], run_name("\n".join(runs).encode()))
        with _opened(runs) as handles, create_stream(target) as sink:
            combine_runs([read_run(h) for h in handles], 0, self.schema, sink)
        return target


@contextlib.contextmanager
def _opened(paths: list[str]):
    handles = [open_stream(p) for p in paths]
    try:
        yield handles
    finally:
        for handle in handles:
            handle.close()


class MergeByShard(beam.PTransform):
    """(shard, run file) -> MergeShardFn over every shard, one with no rows included, so a table's shard count is
    whole."""

    def __init__(self, merge: MergeShardFn):
        super().__init__()
        self.merge = merge

    def expand(self, runs):
        every_shard = runs.pipeline | "EveryShard" >> beam.Create([(s, "") for s in range(self.merge.num_shards)])
        return (
            (runs, every_shard)
            | "WithEveryShard" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "MergeShard" >> beam.ParDo(self.merge).with_outputs("stats", main="rows")
        )


def tag_with_concept_size(element):
    """(concept_id, rows) -> ((kb, name_norm), (names in the concept, row)) for the GenBioEL rule."""
    _, rows = element
    rows = list(rows)
    for row in rows:
        yield (row["kb"], row["name_norm"]), (len(rows), row)


def keep_in_smallest_concept(element):
    """GenBioEL: a name shared by several concepts stays only with the concept that has fewest names
    (ties: the smallest concept id), so every name points to one concept."""
    _, sized_rows = element
    sized_rows = sorted(sized_rows, key=lambda sr: (sr[0], sr[1]["concept_id"]))
    yield sized_rows[0][1]
    if len(sized_rows) > 1:
        yield beam.pvalue.TaggedOutput("stats", ("names.dropped_shared", len(sized_rows) - 1))


def build_pipeline(
    p: beam.Pipeline,
    kb_format: str,
    input_groups: list[list[str]],
    staged: OutputFolder,
    *,
    reader_options: dict,
    normalizer: Normalizer,
    shared_names: str,
    num_shards: int,
    extra_names: list[str] = (),
    add_missing_concepts: bool = False,
) -> None:
    spill = FileSystems.join(staged.root, SPILL)
    read = (
        p
        | "InputGroups" >> beam.Create(input_groups)
        | "Spread" >> beam.Reshuffle()
        | "ReadKB" >> beam.ParDo(ReadKBFn(kb_format, reader_options)).with_outputs("concepts", "dead", "stats", main="names")
    )

    concepts_read, names_read, extra_dead, extra_stats = read.concepts, read.names, [], []
    if extra_names:
        extra_tables, made, dead, stats = read.concepts | "ExtraNames" >> ExtraNames(
            list(extra_names), kb_format, reader_options, add_missing_concepts
        )
        names_read = (read.names, extra_tables) | "WithExtraNames" >> beam.Flatten()
        concepts_read = (read.concepts, made) | "WithMadeConcepts" >> beam.Flatten()
        extra_dead, extra_stats = [dead], [stats]
    concepts = (
        concepts_read
        | "SpillConcepts" >> beam.ParDo(SpillRunsFn(FileSystems.join(spill, "concepts"), num_shards, "concept_id"))
        | "WriteConcepts"
        >> MergeByShard(
            MergeShardFn(
                staged.table_dir("concepts"),
                CONCEPTS_SCHEMA,
                num_shards,
                merge_concepts,
                "concepts.written",
                "concepts.merged_duplicates",
            )
        )
    )

    normalized = names_read | "Normalize" >> beam.ParDo(NormalizeNamesFn(normalizer.config)).with_outputs(
        "dead", "stats", main="tables"
    )
    name_runs = normalized.tables | "SpillNames" >> beam.ParDo(
        SpillRunsFn(FileSystems.join(spill, "names"), num_shards, "name_id")
    )
    policy_stats = []
    if shared_names == "genbioel":
        deduped = name_runs | "DedupByNameId" >> MergeByShard(
            MergeShardFn(None, NAMES_SCHEMA, num_shards, keep_best_name, None, "names.duplicates_within_concept")
        )
        policy = (
            deduped.rows
            | "KeyByConcept" >> beam.Map(lambda r: (r["concept_id"], r))
            | "GroupByConcept" >> beam.GroupByKey()
            | "TagConceptSize" >> beam.FlatMap(tag_with_concept_size)
            | "GroupByNameNorm" >> beam.GroupByKey()
            | "SharedNamePolicy" >> beam.FlatMap(keep_in_smallest_concept).with_outputs("stats", main="rows")
        )
        name_runs = (
            policy.rows
            | "BatchKeptNames" >> beam.BatchElements(min_batch_size=READ_BATCH, max_batch_size=READ_BATCH)
            | "KeptNamesTable" >> beam.Map(lambda rows: pa.Table.from_pylist(rows, schema=NAMES_SCHEMA))
            | "SpillKeptNames" >> beam.ParDo(SpillRunsFn(FileSystems.join(spill, "kept_names"), num_shards, "name_id"))
        )
        policy_stats = [deduped.stats, policy.stats]
    names = name_runs | "WriteNames" >> MergeByShard(
        MergeShardFn(
            staged.table_dir("names"),
            NAMES_SCHEMA,
            num_shards,
            keep_best_name,
            "names.written",
            "names.duplicates_within_concept",
        )
    )

    dead = (read.dead, normalized.dead, *extra_dead) | "AllDeadLetters" >> beam.Flatten()
    _ = dead | "WriteDeadLetters" >> WriteDeadLetters(staged.table_dir("dead_letter"))

    counters = (
        read.stats,
        *extra_stats,
        normalized.stats,
        concepts.stats,
        names.stats,
        *policy_stats,
        concepts_read | "CountConceptsEmitted" >> beam.Map(lambda table: ("concepts.emitted", table.num_rows)),
    )
    _ = counters | "WriteStats" >> WriteStats(staged.root)


def read_stats_by_file(read_stats: list[dict]) -> dict[str, dict]:
    """The read stats of each input file, summed over the ranges it was read in."""
    by_file: dict[str, dict] = {}
    for s in read_stats:
        total = by_file.setdefault(
            s["source"], {"records_read": 0, "records_accepted": 0, "dead_lettered": 0, "skipped_by_filter": {}}
        )
        for key in ("records_read", "records_accepted", "dead_lettered"):
            total[key] += s[key]
        for reason, n in s["skipped_by_filter"].items():
            total["skipped_by_filter"][reason] = total["skipped_by_filter"].get(reason, 0) + n
        if s.get("unread") and not total.get("unread"):  # the manifest's inputs[].unread, as bioel link writes it
            total["unread"] = s["unread"]
    for total in by_file.values():
        total["skipped_by_filter"] = dict(sorted(total["skipped_by_filter"].items()))
    return by_file


def build_manifest(
    stats: dict,
    *,
    kb_format: str,
    kb: str,
    id_pattern: str,
    inputs: list[str],
    staged: OutputFolder,
    options: PipelineOptions,
    normalizer: Normalizer,
    shared_names: str,
    reader_options: dict,
    extra_names: list[str] = (),
    add_missing_concepts: bool = False,
) -> Manifest:
    read_stats = sorted(stats.get("read_stats", []), key=lambda s: s["source"])
    by_file = read_stats_by_file(read_stats)
    files_in = []
    for path in [*inputs, *extra_names]:
        sha, size = sha256_of(path)
        files_in.append({"path": path, "sha256": sha, "bytes": size, **by_file.get(path, {})})
    records = {k: sum(s[k] for s in read_stats) for k in ("records_read", "records_accepted", "dead_lettered")}
    records["filtered"] = sum(sum(s["skipped_by_filter"].values()) for s in read_stats)
    out_of_scope: Counter[str] = Counter()
    for s in read_stats:
        out_of_scope.update(out_of_scope_counts(s["skipped_by_filter"]))
    details = IngestDetails(
        kb=kb,
        format=kb_format,
        id_pattern=id_pattern_with(id_pattern, [k.removeprefix(MADE_IN) for k in stats if k.startswith(MADE_IN)]),
        reader_options=reader_options,
        normalizer=normalizer.to_dict(),
        shared_name_policy=shared_names,
        corrupt_input_policy=CORRUPT_INPUT_POLICY,
        extra_names=list(extra_names),
        add_missing_concepts=add_missing_concepts or None,
        out_of_scope=dict(sorted(out_of_scope.items())) if reader_options.get("scope") else None,
    )
    return details.manifest(
        files_in,
        records,
        concepts={k.split(".", 1)[1]: v for k, v in stats.items() if k.startswith("concepts.")},
        names={k.split(".", 1)[1]: v for k, v in stats.items() if k.startswith("names.")},
        outputs={table: staged.table_outputs(table) for table in TABLES},
        runner=runner_name(options),
        options=options.get_all_options(drop_default=True),
    )


def run(
    kb_format: str,
    inputs: list[str],
    output_dir: str,
    options: PipelineOptions,
    *,
    reader_options: dict | None = None,
    normalizer: Normalizer | None = None,
    shared_names: str = "keep-all",
    num_shards: int = 4,
    extra_names: list[str] = (),
    add_missing_concepts: bool = False,
    gate=None,
) -> dict:
    """Runs the ingest pipeline on `inputs` (files, folders, globs: pipelines.outputs.expand_inputs) and publishes
    its output if it passes `gate` (a quality.QualityGate; None: unchecked); returns the manifest. `extra_names`:
    extra-names files (bioel_core.kb.extra_names) whose names join the KB's; `add_missing_concepts`: a name whose id
    the KB lacks makes that concept rather than a dead letter."""
    reader_options = reader_options or {}
    normalizer = normalizer or Normalizer()
    if shared_names not in SHARED_NAME_POLICIES:
        raise ValueError(f"--shared-names must be one of {SHARED_NAME_POLICIES}")
    check_num_shards(num_shards)
    inputs, output_dir = [absolute(p) for p in inputs], absolute(output_dir)  # as the workers must see them
    extra_names = sorted({absolute(p) for p in extra_names})
    check_output_folder(output_dir, "ingest-kb", [("--input", p) for p in inputs] + [("--extra-names", p) for p in extra_names])
    inputs = sorted(expand_inputs(inputs))  # a KB's tables do not depend on the order its files are given
    for path in extra_names:
        if not FileSystems.exists(path):
            raise FileNotFoundError(f"extra names file {path}: no such file")
    reader = get_reader(kb_format, **reader_options)
    staged = OutputFolder(filesystem_for(output_dir), output_dir, TABLES)
    stage = logs.Stage("ingest-kb")
    stage.info("reading %s %s file(s) into %s", f"{len(inputs):,}", kb_format, output_dir)

    def build() -> Manifest:
        with pipeline_progress(options, "ingest-kb", "names"), new_pipeline(options) as p:
            build_pipeline(
                p,
                kb_format,
                reader.input_groups(inputs, opener=open_stream),
                staged,
                reader_options=reader_options,
                normalizer=normalizer,
                shared_names=shared_names,
                num_shards=num_shards,
                extra_names=extra_names,
                add_missing_concepts=add_missing_concepts,
            )
        staged.fs.delete(staged.fs.join(staged.root, SPILL))  # emptied by the writers; the folders stay
        return refuse_empty(
            build_manifest(
                read_stats(staged.root),
                kb_format=kb_format,
                kb=reader.kb,
                id_pattern=reader.id_pattern.pattern,
                inputs=inputs,
                staged=staged,
                options=options,
                normalizer=normalizer,
                shared_names=shared_names,
                reader_options=reader_options,
                extra_names=extra_names,
                add_missing_concepts=add_missing_concepts,
            ),
            staged,
        )

    manifest = staged.publish(build, gate).to_dict()
    outputs = manifest["outputs"]
    stage.done(
        "ingested %s records: %s concepts, %s names, %s dead-lettered; published %s",
        f"{manifest['counts']['records_read']:,}",
        f"{outputs['concepts']['rows']:,}",
        f"{outputs['names']['rows']:,}",
        f"{outputs['dead_letter']['rows']:,}",
        manifest["generation"],
    )
    return manifest
