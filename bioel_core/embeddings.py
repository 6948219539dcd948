"""Reading the output of `bioel embed`: name vectors, and the check that a model is the one that made them.

An embed output folder holds `embeddings/*.parquet` (name_id, concept_id, vector: fixed_size_list<float32>[dim],
rows sorted by name_id within each shard), `dead_letter/` and `manifest.json` (see schemas/manifest.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from bioel_core.outputs.details import TEXT_COLUMN, EmbedDetails, IndexDetails  # noqa: F401 (TEXT_COLUMN re-exported)
from bioel_core.outputs.fs import LOCAL, FileSystem
from bioel_core.outputs.reading import read_manifest, read_output_manifest
from bioel_core.outputs.versions import check_unchanged_source, is_version_of, manifest_sha256  # noqa: F401 (re-exported)
from bioel_core.tables import read_table

log = logging.getLogger(__name__)

PIPELINE = "embed"
NORM_TOLERANCE = 1e-3


class ModelMismatchError(ValueError):
    """A model that is not the one an embeddings table was made with."""


@dataclass(frozen=True)
class EncodeFailure:
    """What a text that could not be encoded gets instead of its vector, with why (a dead letter's reason)."""

    reason: str


class Embeddings(NamedTuple):
    name_ids: np.ndarray  # int64, (n,)
    concept_ids: list[str]
    vectors: np.ndarray  # float32, (n, dim), L2-normalized


def read_embeddings_manifest(emb_dir: str | Path, flag: str = "", fs: FileSystem = LOCAL) -> dict:
    """The manifest of a finished embed output; any other folder (an ingest output, an unfinished run) is an error."""
    return read_output_manifest(emb_dir, PIPELINE, flag, fs)


def read_embeddings_details(emb_dir: str | Path, flag: str = "", fs: FileSystem = LOCAL) -> EmbedDetails:
    """The embed-specific fields of a finished embed output's manifest (its model, its names folder...)."""
    return EmbedDetails.from_dict(read_embeddings_manifest(emb_dir, flag, fs))


def vectors_of(column: pa.ChunkedArray | pa.Array, dim: int) -> np.ndarray:
    """A fixed_size_list<float32>[dim] column as an (n, dim) float32 array."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = np.empty((sum(len(c) for c in chunks), dim), dtype=np.float32)
    start = 0
    for chunk in chunks:
        # flatten() honours slice offsets, unlike .values
        out[start : start + len(chunk)] = chunk.flatten().to_numpy(zero_copy_only=False).reshape(len(chunk), dim)
        start += len(chunk)
    return out


def read_embeddings(emb_dir: str | Path) -> Embeddings:
    """Every vector of an embed output, in shard order (each shard sorted by name_id)."""
    dim = read_embeddings_details(emb_dir).model.dim
    table = read_table(emb_dir, "embeddings")
    if table.num_rows and table.schema.field("vector").type.list_size != dim:
        raise ValueError(
            f"{emb_dir}: vectors have {table.schema.field('vector').type.list_size} dimensions, the manifest says {dim}"
        )
    return Embeddings(
        table.column("name_id").to_numpy(), table.column("concept_id").to_pylist(), vectors_of(table.column("vector"), dim)
    )


def check_model_matches(emb_dir: str | Path, encoder) -> None:
    """Raise `ModelMismatchError` unless `encoder` (a bioel_core Encoder) makes the vectors of `emb_dir` (its
    `vectors_fingerprint`, as the manifest's): queries encoded by another model are not comparable with them."""
    model = read_embeddings_details(emb_dir).model
    found = model.vectors_of(encoder)
    if found != model.vectors():
        raise ModelMismatchError(
            f"{emb_dir}: the embeddings were made with the model at {model.path} (fingerprint "
            f"{model.vectors()[:12]}, {model.config}); this model has fingerprint {found[:12]} "
            f"({encoder.config()}). Re-run `bioel embed` with this model, or use that one."
        )


def check_names_unchanged(emb_dir: str | Path, fs: FileSystem = LOCAL, at: str | Path | None = None) -> Path | str:
    """The names folder the embeddings were made from (`at`: where it lies now, if moved), checked to be the same
    table version."""
    return check_unchanged_source(
        emb_dir,
        read_embeddings_details(emb_dir, fs=fs).names,
        read_manifest,
        "names table",
        "these embeddings were made",
        "embed",
        fs,
        at,
    )


def check_embeddings_unchanged(
    index_dir: str | Path, index_manifest: dict, fs: FileSystem = LOCAL, at: str | Path | None = None
) -> Path | str:
    """The embeddings folder a `bioel build-index` output was built from, checked to be the same table version: an
    index left from an earlier embeddings generation (a new KB release ingested and embedded into the same folders,
    or a refresh killed between its two outputs) has names and concepts the current tables no longer hold, and
    lacks theirs."""
    return check_unchanged_source(
        index_dir,
        IndexDetails.from_dict(index_manifest).embeddings,
        read_embeddings_manifest,
        "embeddings",
        "this index was built",
        "build-index",
        fs,
        at,
    )


def encode_checked(encoder, texts: list[str], batch_size: int | None = None) -> list:
    """One L2-normalized float32 vector or `EncodeFailure` per text, in input order, the texts encoded in
    batches of `batch_size` (None: one batch) in the encoder's own order (`encoder`: a bioel_core Encoder).
    Failures: an empty text; a text that failed alone after its batch failed; a vector that is not finite or
    not of unit norm. `bioel embed` and `bioel refresh` both encode
    through here, so a name is dead-lettered by the same rules in either."""
    out: list = [EncodeFailure("empty text")] * len(texts)
    todo = [i for i, t in enumerate(texts) if t and t.strip()]
    try:
        vectors = encoder.encode([texts[i] for i in todo], batch_size=batch_size or max(len(todo), 1))
    except Exception as err:  # one bad text (or a batch too big for the device) must not lose the others
        log.warning("encoding a batch of %d texts failed (%s: %s); retrying one by one", len(todo), type(err).__name__, err)
        vectors = [_encode_one(encoder, texts[i]) for i in todo]
    for i, vector in zip(todo, vectors):
        out[i] = vector if isinstance(vector, EncodeFailure) else _checked(vector)
    return out


def _encode_one(encoder, text: str):
    try:
        return encoder.encode([text], batch_size=1)[0]
    except Exception as err:
        return EncodeFailure(f"encoder raised {type(err).__name__}: {err}")


def _checked(vector: np.ndarray):
    norm = float(np.linalg.norm(vector))
    if not np.isfinite(vector).all() or abs(norm - 1.0) > NORM_TOLERANCE:
        return EncodeFailure(f"encoder returned a vector that is not finite and of unit norm (norm {norm})")
    return vector
