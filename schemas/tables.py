"""Table schemas. Bump SCHEMA_VERSION when any column changes meaning or type."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = "1.1"  # 1.1: concepts.vocabulary; annotations.vocabulary and alt_ids
VERSION_KEY = b"bioel.schema_version"
TABLE_KEY = b"bioel.table"


def _versioned(table: str, fields: list[pa.Field]) -> pa.Schema:
    return pa.schema(fields, metadata={VERSION_KEY: SCHEMA_VERSION.encode(), TABLE_KEY: table.encode()})


CONCEPTS_SCHEMA = _versioned(
    "concepts",
    [
        pa.field("concept_id", pa.string(), nullable=False),  # bare, in `vocabulary` (D003920, not MESH:D003920)
        pa.field("vocabulary", pa.string(), nullable=False),  # MESH, OMIM, UMLS, SNOMEDCT, or a dictionary's declared one
        pa.field("kb", pa.string(), nullable=False),
        pa.field("preferred_name", pa.string(), nullable=False),
        pa.field("semantic_types", pa.list_(pa.string()), nullable=False),
        pa.field("definition", pa.string()),
        pa.field("alt_ids", pa.list_(pa.string()), nullable=False),  # other ids of the concept, qualified: OMIM:208900
    ],
)

NAMES_SCHEMA = _versioned(
    "names",
    [
        # blake2b of (kb, concept_id, name_norm), 63 bits: stable across runs, usable as a FAISS id
        pa.field("name_id", pa.int64(), nullable=False),
        pa.field("concept_id", pa.string(), nullable=False),
        pa.field("kb", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("name_norm", pa.string(), nullable=False),
        pa.field("name_type", pa.string(), nullable=False),
    ],
)

DEAD_LETTER_SCHEMA = _versioned(
    "dead_letter",
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("location", pa.string(), nullable=False),
        pa.field("raw", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
    ],
)


def embeddings_schema(dimension: int) -> pa.Schema:
    """One row per encoded name; the vector width is the model's dimension, fixed per table."""
    return _versioned(
        "embeddings",
        [
            pa.field("name_id", pa.int64(), nullable=False),
            pa.field("concept_id", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dimension), nullable=False),
        ],
    )


# the embeddings schema is checked against its own width (see check_schema); 384 is MiniLM's (the shipped
# default model, the ResCNN disease-default, writes 300)
EMBEDDINGS_SCHEMA = embeddings_schema(384)

ANNOTATIONS_SCHEMA = _versioned(
    "annotations",
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("start", pa.int32(), nullable=False),  # character offsets into the document text, end exclusive
        pa.field("end", pa.int32(), nullable=False),
        pa.field("mention", pa.string(), nullable=False),  # the text slice [start, end)
        pa.field("link_text", pa.string(), nullable=False),  # what was linked: the mention, or an abbreviation's long form
        pa.field("entity_type", pa.string(), nullable=False),
        pa.field("concept_id", pa.string()),  # null when NIL; bare, as in the concepts table
        pa.field("vocabulary", pa.string()),  # the concept id's vocabulary (null when NIL)
        pa.field("alt_ids", pa.list_(pa.string()), nullable=False),  # the concept's alt ids, qualified (empty when NIL)
        pa.field("matched_name", pa.string()),
        pa.field("score", pa.float32(), nullable=False),
        pa.field("nil", pa.bool_(), nullable=False),  # score below the threshold: not forced onto a concept
        pa.field("model_version", pa.string(), nullable=False),  # encoder fingerprint
        pa.field("kb_version", pa.string(), nullable=False),  # the index's names manifest digest ('' when its type has none)
    ],
)

PASSAGE_TYPE = pa.struct(
    [
        pa.field("kind", pa.string(), nullable=False),
        pa.field("offset", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
    ]
)

# one row per document of the annotated state: what incremental runs compare against, and the text the
# annotations' offsets point into (so quality checks and interchange files need no second read of the inputs)
DOCUMENTS_SCHEMA = _versioned(
    "documents",
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("content_sha256", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),  # annotated | deleted (a DeleteCitation tombstone)
        pa.field("mentions", pa.int32(), nullable=False),
        pa.field("passages", pa.list_(PASSAGE_TYPE), nullable=False),  # empty for a tombstone
        pa.field("model_version", pa.string(), nullable=False),
        pa.field("kb_version", pa.string(), nullable=False),
    ],
)

TABLE_SCHEMAS = {
    "concepts": CONCEPTS_SCHEMA,
    "names": NAMES_SCHEMA,
    "dead_letter": DEAD_LETTER_SCHEMA,
    "embeddings": EMBEDDINGS_SCHEMA,
    "annotations": ANNOTATIONS_SCHEMA,
    "documents": DOCUMENTS_SCHEMA,
}


class SchemaVersionError(ValueError):
    pass


def check_schema(found: pa.Schema, table: str, where: str) -> None:
    """Raise a clear error when a file's schema is not the one this version of bioel writes."""
    expected = TABLE_SCHEMAS[table]
    if table == "embeddings" and "vector" in found.names and pa.types.is_fixed_size_list(found.field("vector").type):
        expected = embeddings_schema(found.field("vector").type.list_size)
    version = (found.metadata or {}).get(VERSION_KEY, b"<none>").decode()
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(f"{where}: {table} table has schema version {version}, this bioel reads {SCHEMA_VERSION}")
    if not found.remove_metadata().equals(expected.remove_metadata()):
        raise SchemaVersionError(f"{where}: columns {found.names} do not match the {table} schema {expected.names}")
