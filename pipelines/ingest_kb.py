"""KB dump -> versioned Parquet `concepts` and `names` tables, dead letters and a reconciled manifest.

    InputGroups | ReadKB ─┬─ concepts | MergeConceptsById ───────────────────────────── | WriteConcepts
                          ├─ names | Normalize | DedupByNameId | [SharedNamePolicy] ──── | WriteNames
                          ├─ dead letters ─────────────────────────────────────────────── | WriteDeadLetters
                          └─ read stats + step counters ───────────────────────────────── | WriteStats
"""

from __future__ import annotations

import logging
from dataclasses import asdict

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from bioel_core import progress
from bioel_core.guards import check_output_folder
from bioel_core.kb import get_reader
from bioel_core.kb.io import CORRUPT_INPUT_POLICY
from bioel_core.normalize import Normalizer, NormalizerConfig, clean_text, name_id
from bioel_core.outputs import Manifest, OutputFolder, check_num_shards
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats
from bioel_core.tables import stable_shard
from pipelines.counting import WriteStats, count_as, read_stats
from pipelines.guards import refuse_empty
from pipelines.options import pipeline_progress, runner_name
from pipelines.outputs import WriteShardFn, expand_inputs, filesystem_for, sha256_of
from schemas import CONCEPTS_SCHEMA, DEAD_LETTER_SCHEMA, NAMES_SCHEMA

log = logging.getLogger(__name__)

SHARED_NAME_POLICIES = ("keep-all", "genbioel")
NAME_TYPE_RANK = {"preferred": 0, "fsn": 1, "synonym": 2, "entry_term": 3, "abbreviation": 4}
TABLES = ("concepts", "names", "dead_letter")


class ReadKBFn(beam.DoFn):
    """Reads one group of input files with the bioel_core reader and routes items by type."""

    def __init__(self, kb_format: str, reader_options: dict):
        self.kb_format, self.reader_options = kb_format, reader_options

    def setup(self):
        self.reader = get_reader(self.kb_format, **self.reader_options)

    def process(self, paths):
        opener = lambda p: FileSystems.open(p, compression_type="uncompressed")  # noqa: E731 - gzip is sniffed by bioel_core
        for item in self.reader.read(paths, opener=opener):
            if isinstance(item, NameRecord):
                yield item
            elif isinstance(item, ConceptRecord):
                yield beam.pvalue.TaggedOutput("concepts", item)
            elif isinstance(item, DeadLetter):
                yield beam.pvalue.TaggedOutput("dead", asdict(item))
            elif isinstance(item, ReadStats):
                yield beam.pvalue.TaggedOutput("stats", ("read_stats", [asdict(item)]))


class NormalizeNameFn(beam.DoFn):
    """Adds name_norm and the stable name_id; a name that normalizes to nothing is dead-lettered."""

    def __init__(self, normalizer_config: NormalizerConfig):
        self.normalizer_config = normalizer_config

    def setup(self):
        self.normalize = Normalizer(self.normalizer_config)

    def process(self, rec: NameRecord):
        progress.advance()
        name = clean_text(rec.name)
        norm = self.normalize(name)
        if not norm:
            why = "of control characters only" if not name else "empty after normalization"
            yield beam.pvalue.TaggedOutput("dead", {
                "source": "normalizer", "location": f"concept {rec.concept_id}", "raw": rec.name,
                "reason": f"name is {why}"})
            yield beam.pvalue.TaggedOutput("stats", ("names.dead_lettered", 1))
            return
        yield {"name_id": name_id(rec.kb, rec.concept_id, norm), "concept_id": rec.concept_id, "kb": rec.kb,
               "name": name, "name_norm": norm, "name_type": rec.name_type}


def _name_preference(row: dict) -> tuple:
    return (NAME_TYPE_RANK.get(row["name_type"], 9), row["name"])


def keep_best_name(element):
    """One row per name_id: the most authoritative type, then the smallest surface form."""
    _, rows = element
    rows = list(rows)
    yield min(rows, key=_name_preference)
    if len(rows) > 1:
        yield beam.pvalue.TaggedOutput("stats", ("names.duplicates_within_concept", len(rows) - 1))


def merge_concepts(element):
    """One row per concept id; records met twice (several files, or a dictionary listing a concept on
    several lines) merge deterministically: union of types and alt ids, first definition in sort order."""
    concept_id, records = element
    records = sorted(records, key=lambda r: (r.preferred_name, r.definition or "", r.semantic_types, r.alt_ids))
    first = records[0]
    yield {
        "concept_id": concept_id, "vocabulary": first.vocabulary, "kb": first.kb, "preferred_name": clean_text(first.preferred_name),
        "semantic_types": sorted({t for r in records for t in r.semantic_types}),
        "definition": next((r.definition for r in records if r.definition), None),
        "alt_ids": sorted({a for r in records for a in r.alt_ids} - {concept_id}),
    }
    if len(records) > 1:
        yield beam.pvalue.TaggedOutput("stats", ("concepts.merged_duplicates", len(records) - 1))


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


class WriteSharded(beam.PTransform):
    def __init__(self, folder, schema, num_shards, shard_key, sort_key):
        super().__init__()
        self.folder, self.schema, self.num_shards = folder, schema, num_shards
        self.shard_key, self.sort_key = shard_key, sort_key

    def expand(self, rows):
        n, key = self.num_shards, self.shard_key
        return (rows
                | "KeyByShard" >> beam.Map(lambda r: (stable_shard(str(r[key]), n), r))
                | "GroupShards" >> beam.GroupByKey()
                | "WriteShard" >> beam.ParDo(WriteShardFn(self.folder, self.schema, n, self.sort_key)))


def build_pipeline(p: beam.Pipeline, kb_format: str, input_groups: list[list[str]], staged: OutputFolder, *,
                   reader_options: dict, normalizer: Normalizer, shared_names: str, num_shards: int) -> None:
    read = (p
            | "InputGroups" >> beam.Create(input_groups)
            | "ReadKB" >> beam.ParDo(ReadKBFn(kb_format, reader_options)).with_outputs("concepts", "dead", "stats", main="names"))

    concepts = (read.concepts
                | "KeyConcepts" >> beam.Map(lambda c: (c.concept_id, c))
                | "GroupConcepts" >> beam.GroupByKey()
                | "MergeConceptsById" >> beam.FlatMap(merge_concepts).with_outputs("stats", main="rows"))

    normalized = read.names | "Normalize" >> beam.ParDo(NormalizeNameFn(normalizer.config)).with_outputs("dead", "stats", main="rows")
    deduped = (normalized.rows
               | "KeyByNameId" >> beam.Map(lambda r: (r["name_id"], r))
               | "GroupByNameId" >> beam.GroupByKey()
               | "DedupByNameId" >> beam.FlatMap(keep_best_name).with_outputs("stats", main="rows"))
    names, policy_stats = deduped.rows, []
    if shared_names == "genbioel":
        policy = (deduped.rows
                  | "KeyByConcept" >> beam.Map(lambda r: (r["concept_id"], r))
                  | "GroupByConcept" >> beam.GroupByKey()
                  | "TagConceptSize" >> beam.FlatMap(tag_with_concept_size)
                  | "GroupByNameNorm" >> beam.GroupByKey()
                  | "SharedNamePolicy" >> beam.FlatMap(keep_in_smallest_concept).with_outputs("stats", main="rows"))
        names, policy_stats = policy.rows, [policy.stats]

    dead = (read.dead, normalized.dead) | "AllDeadLetters" >> beam.Flatten()
    _ = concepts.rows | "WriteConcepts" >> WriteSharded(staged.table_dir("concepts"), CONCEPTS_SCHEMA, num_shards, "concept_id", "concept_id")
    _ = names | "WriteNames" >> WriteSharded(staged.table_dir("names"), NAMES_SCHEMA, num_shards, "name_id", "name_id")
    _ = (dead
         | "DeadLetterRows" >> beam.Map(lambda d: (0, d))
         | "GroupDeadLetters" >> beam.GroupByKey()
         | "WriteDeadLetters" >> beam.ParDo(WriteShardFn(staged.table_dir("dead_letter"), DEAD_LETTER_SCHEMA, 1, "location")))

    counters = (
        read.stats, concepts.stats, normalized.stats, deduped.stats, *policy_stats,
        read.concepts | "CountConceptsEmitted" >> count_as("concepts.emitted"),
        read.names | "CountNamesEmitted" >> count_as("names.emitted"),
        concepts.rows | "CountConceptsWritten" >> count_as("concepts.written"),
        names | "CountNamesWritten" >> count_as("names.written"),
    )
    _ = counters | "WriteStats" >> WriteStats(staged.root)


def build_manifest(stats: dict, *, kb_format: str, kb: str, id_pattern: str, inputs: list[str], staged: OutputFolder,
                   options: PipelineOptions, normalizer: Normalizer, shared_names: str, reader_options: dict) -> Manifest:
    read_stats = sorted(stats.get("read_stats", []), key=lambda s: s["source"])
    files_in = []
    for path in inputs:
        sha, size = sha256_of(path)
        per_file = next((s for s in read_stats if s["source"] == path), {})
        files_in.append({"path": path, "sha256": sha, "bytes": size, **{k: v for k, v in per_file.items() if k != "source"}})
    records = {k: sum(s[k] for s in read_stats) for k in ("records_read", "records_accepted", "dead_lettered")}
    records["filtered"] = sum(sum(s["skipped_by_filter"].values()) for s in read_stats)
    c = {k.split(".", 1)[1]: v for k, v in stats.items() if k.startswith("concepts.")}
    n = {k.split(".", 1)[1]: v for k, v in stats.items() if k.startswith("names.")}
    for key in ("emitted", "merged_duplicates", "written"):
        c.setdefault(key, 0)
    for key in ("emitted", "duplicates_within_concept", "dropped_shared", "dead_lettered", "written"):
        n.setdefault(key, 0)
    outputs = {table: staged.table_outputs(table) for table in TABLES}
    reconciliation = {
        "records": records["records_read"] == records["records_accepted"] + records["dead_lettered"] + records["filtered"],
        "concepts": c["emitted"] == c["written"] + c["merged_duplicates"] and c["written"] == outputs["concepts"]["rows"],
        "names": n["emitted"] == n["written"] + n["duplicates_within_concept"] + n["dropped_shared"] + n["dead_lettered"]
                 and n["written"] == outputs["names"]["rows"],
        "dead_letter": outputs["dead_letter"]["rows"] == records["dead_lettered"] + n["dead_lettered"],
    }
    return Manifest(
        pipeline="ingest-kb", inputs=files_in, counts={**records, "concepts": c, "names": n},
        reconciliation=reconciliation, outputs=outputs, runner=runner_name(options),
        options=options.get_all_options(drop_default=True),
        details={"corrupt_input_policy": CORRUPT_INPUT_POLICY, "kb": kb, "format": kb_format, "id_pattern": id_pattern, "reader_options": reader_options,
                 "normalizer": normalizer.to_dict(), "shared_name_policy": shared_names})


def run(kb_format: str, inputs: list[str], output_dir: str, options: PipelineOptions, *, reader_options: dict | None = None,
        normalizer: Normalizer | None = None, shared_names: str = "keep-all", num_shards: int = 4) -> dict:
    """Runs the ingest pipeline on `inputs` (files, folders, globs: pipelines.outputs.expand_inputs) and publishes
    its output; returns the manifest."""
    reader_options = reader_options or {}
    normalizer = normalizer or Normalizer()
    if shared_names not in SHARED_NAME_POLICIES:
        raise ValueError(f"--shared-names must be one of {SHARED_NAME_POLICIES}")
    check_num_shards(num_shards)
    inputs = expand_inputs(inputs)
    check_output_folder(output_dir, "ingest-kb", [("--input", p) for p in inputs])
    reader = get_reader(kb_format, **reader_options)
    staged = OutputFolder(filesystem_for(output_dir), output_dir, TABLES)

    def build() -> Manifest:
        with pipeline_progress(options, "ingest-kb", "names"), beam.Pipeline(options=options) as p:
            build_pipeline(p, kb_format, reader.input_groups(inputs), staged, reader_options=reader_options, normalizer=normalizer,
                           shared_names=shared_names, num_shards=num_shards)
        return refuse_empty(build_manifest(read_stats(staged.root), kb_format=kb_format, kb=reader.kb,
                              id_pattern=reader.id_pattern.pattern, inputs=inputs, staged=staged, options=options,
                              normalizer=normalizer, shared_names=shared_names, reader_options=reader_options), staged)

    return staged.publish(build).to_dict()
