"""Each verb's own manifest fields (the `details` of its Manifest), typed: one class per stage, with the one builder
of that stage's manifest (used by its pipeline and by `bioel refresh` alike) and a reader (`from_dict`) for the
stages that read it.

The JSON is the layout schemas/manifest.md documents: `to_dict` writes the same keys as always, and `from_dict`
reads a manifest written by an older bioel: a key it lacks reads as None (a section it lacks, as empty), so a
folder made before a field existed still opens. Nested sections that later stages read are typed too (the model
an embedding was made with, the names or embeddings folder a stage was made from); sections only recorded (a
model's config, an index's requested parameters, shard records, refresh's account) stay dicts.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

from bioel_core.outputs.fs import LOCAL, FileSystem
from bioel_core.outputs.manifest import Manifest
from bioel_core.outputs.versions import manifest_sha256

INGEST, EMBED, INDEX = "ingest-kb", "embed", "build-index"
TEXT_COLUMN = "name_norm"  # the names-table column `bioel embed` encodes: what NameSet.from_names_table links on


def _from_dict(cls, data: dict | None, **nested):
    """An instance of the dataclass `cls` from a manifest section: its own keys only, a missing one None (or its
    default), the sections named in `nested` (field -> class with from_dict) read as those classes."""
    data = data or {}
    values = {}
    for f in fields(cls):
        if f.name in data:
            value = data[f.name]
            values[f.name] = nested[f.name].from_dict(value) if f.name in nested and isinstance(value, dict) else value
        elif f.default is MISSING and f.default_factory is MISSING:
            values[f.name] = None
    return cls(**values)


class _Section:
    @classmethod
    def from_dict(cls, data: dict | None):
        return _from_dict(cls, data, **getattr(cls, "_NESTED", {}))

    def to_dict(self) -> dict:
        return asdict(self)  # type: ignore[call-overload]  # every section is a dataclass


@dataclass(frozen=True)
class IngestDetails(_Section):
    """An ingest-kb output's own fields: which KB, read how, its names normalized how."""

    kb: str
    format: str
    id_pattern: str
    reader_options: dict
    normalizer: dict  # bioel_core.normalize.Normalizer.to_dict(): its `version` is what embed records of the names
    shared_name_policy: str
    corrupt_input_policy: str | None = None
    extra_names: list[str] | None = None  # extra-names files (bioel_core.kb.extra_names), also among the inputs
    # whether an extra name whose id the KB lacks made that concept; None, and not written, where it did not
    add_missing_concepts: bool | None = None
    # the records the entity type's scope left out, by reason (each names its setting: bioel_core.kb.scope); they are
    # among the `filtered` records, not dead letters. None, and not written, where no scope was declared
    out_of_scope: dict | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        for optional in ("out_of_scope", "add_missing_concepts"):  # without them a KB keeps the manifest (and table
            if out[optional] is None:  # version) it always had
                del out[optional]
        return out

    def manifest(
        self,
        inputs: list[dict],
        records: dict,
        concepts: dict,
        names: dict,
        outputs: dict,
        runner: str,
        options: dict | None = None,
    ) -> Manifest:
        """The ingest-kb manifest: `inputs` the files read; `records` records_read, records_accepted, dead_lettered,
        filtered; `concepts` and `names` the table counters (a missing one 0); `outputs` the tables' entries."""
        c = {k: concepts.get(k, 0) for k in ("emitted", "merged_duplicates", "written")} | concepts
        n = {
            k: names.get(k, 0) for k in ("emitted", "duplicates_within_concept", "dropped_shared", "dead_lettered", "written")
        } | names
        reconciliation = {
            "records": records["records_read"] == records["records_accepted"] + records["dead_lettered"] + records["filtered"],
            "concepts": c["emitted"] == c["written"] + c["merged_duplicates"] and c["written"] == outputs["concepts"]["rows"],
            "names": n["emitted"] == n["written"] + n["duplicates_within_concept"] + n["dropped_shared"] + n["dead_lettered"]
            and n["written"] == outputs["names"]["rows"],
            "dead_letter": outputs["dead_letter"]["rows"] == records["dead_lettered"] + n["dead_lettered"],
        }
        return Manifest(
            pipeline=INGEST,
            inputs=inputs,
            counts={**records, "concepts": c, "names": n},
            reconciliation=reconciliation,
            outputs=outputs,
            runner=runner,
            options=options or {},
            details=self.to_dict(),
        )


@dataclass(frozen=True)
class ModelRecord(_Section):
    """The model a table's name vectors were made with: `fingerprint` identifies it wherever it lies;
    `vectors_fingerprint` what of it makes the vectors (its `vectors_fingerprint()`: a collective model's name
    encoder), absent from tables made before it was recorded."""

    path: str
    fingerprint: str
    config: dict
    dim: int
    pooling: str | None = None
    vectors_fingerprint: str | None = None

    def vectors(self) -> str:
        """The fingerprint a model must have to use these vectors: the whole model's where only it was recorded."""
        return self.vectors_fingerprint or self.fingerprint

    def vectors_of(self, model) -> str:
        """`model`'s fingerprint comparable with `vectors()`: a model makes the same vectors when they are equal."""
        return model.vectors_fingerprint() if self.vectors_fingerprint else model.fingerprint()


@dataclass(frozen=True)
class NamesSource(_Section):
    """The names folder (an ingest-kb output) embeddings were made from, by its table version."""

    path: str
    manifest_sha256: str
    column: str
    normalizer_version: str | None
    rows: int

    @classmethod
    def of(cls, folder: str | Path, manifest: dict, fs: FileSystem = LOCAL) -> NamesSource:
        """The record of the ingest-kb output at `folder`, whose manifest is `manifest`."""
        return cls(
            str(folder),
            manifest_sha256(folder, fs),
            TEXT_COLUMN,
            (IngestDetails.from_dict(manifest).normalizer or {}).get("version"),
            manifest["outputs"]["names"]["rows"],
        )


@dataclass(frozen=True)
class EmbeddingsSource(_Section):
    """The embeddings folder (an embed output) an index was built from, by its table version."""

    path: str
    manifest_sha256: str
    rows: int
    files: list  # its embeddings files, relative to its generation


def _input(source) -> dict:
    """The manifest's `inputs` entry of a folder a stage read."""
    return {"path": source.path, "manifest_sha256": source.manifest_sha256}


@dataclass(frozen=True)
class EmbedDetails(_Section):
    """An embed output's own fields (`bioel embed`, and `bioel refresh`'s new embeddings with `refresh` set)."""

    kb: str | None
    model: ModelRecord
    names: NamesSource
    device: str
    batch_size: int
    num_shards: int
    refresh: dict | None = None  # refresh's account of what it carried and re-encoded; absent from a full embed
    _NESTED = {"model": ModelRecord, "names": NamesSource}

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.refresh is None:
            del out["refresh"]
        return out

    def manifest(self, counts: dict, outputs: dict, runner: str, options: dict | None = None) -> Manifest:
        """The embed manifest: `counts` names_read, embedded, dead_lettered (a missing one 0); `outputs` the
        embeddings and dead_letter tables' entries (OutputFolder.table_outputs)."""
        counts = {k: counts.get(k, 0) for k in ("names_read", "embedded", "dead_lettered")}
        reconciliation = {
            "names": counts["names_read"] == counts["embedded"] + counts["dead_lettered"],
            "names_table": counts["names_read"] == self.names.rows,
            "embeddings": counts["embedded"] == outputs["embeddings"]["rows"],
            "dead_letter": counts["dead_lettered"] == outputs["dead_letter"]["rows"],
        }
        return Manifest(
            pipeline=EMBED,
            inputs=[_input(self.names)],
            counts=counts,
            reconciliation=reconciliation,
            outputs=outputs,
            runner=runner,
            options=options or {},
            details=self.to_dict(),
        )


@dataclass(frozen=True)
class IndexParams(_Section):
    """How an index's shards were built: `requested` the IndexSpec; `faiss_threads` a run field (manifest.INDEX_RUN_FIELDS)."""

    kind: str
    dimension: int
    faiss_version: str
    faiss_threads: int | None
    requested: dict
    shard_assignment: str
    metric: str = "inner_product"
    normalized: bool = True


@dataclass(frozen=True)
class IndexDetails(_Section):
    """A build-index output's own fields (`bioel build-index`, and `bioel refresh`'s new index with `refresh` set)."""

    kb: str | None
    index: IndexParams
    num_shards: int
    vectors: int
    shards: list  # one record per shard, in shard order (bioel_core.index.build: files, sizes, sha256)
    embeddings: EmbeddingsSource
    model: ModelRecord
    model_fingerprint: str
    names: NamesSource
    refresh: dict | None = None
    _NESTED = {"index": IndexParams, "embeddings": EmbeddingsSource, "model": ModelRecord, "names": NamesSource}

    @classmethod
    def of(
        cls,
        *,
        embedded: EmbedDetails,
        embeddings: EmbeddingsSource,
        index: IndexParams,
        num_shards: int,
        shards: list[dict],
        refresh: dict | None = None,
    ) -> IndexDetails:
        """The details of an index built from the embeddings `embeddings` whose details are `embedded`."""
        shards = sorted(shards, key=lambda r: r["shard"])
        return cls(
            kb=embedded.kb,
            index=index,
            num_shards=num_shards,
            vectors=sum(r["vectors"] for r in shards),
            shards=shards,
            embeddings=embeddings,
            model=embedded.model,
            model_fingerprint=embedded.model.fingerprint,
            names=embedded.names,
            refresh=refresh,
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.refresh is None:
            del out["refresh"]
        return out

    def manifest(self, vectors_read: int, outputs: dict, runner: str, options: dict | None = None) -> Manifest:
        """The build-index manifest: `vectors_read` the embeddings rows the job read; `outputs` its folders' entries."""
        counts = {"vectors_read": vectors_read, "embeddings_rows": self.embeddings.rows, "indexed": self.vectors}
        reconciliation = {
            "vectors": vectors_read == self.embeddings.rows == self.vectors,
            "shards": [r["shard"] for r in self.shards] == list(range(self.num_shards)),
        }
        return Manifest(
            pipeline=INDEX,
            inputs=[_input(self.embeddings)],
            counts=counts,
            reconciliation=reconciliation,
            outputs=outputs,
            runner=runner,
            options=options or {},
            details=self.to_dict(),
        )


__all__ = ["EmbedDetails", "IngestDetails", "EmbeddingsSource", "IndexDetails", "IndexParams", "ModelRecord", "NamesSource"]
