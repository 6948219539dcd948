"""Arrow/Parquet schemas of every table bioel writes, and the manifest layout.

Each table schema carries its version in the schema metadata (`bioel.schema_version`), so a reader can
refuse a table written under another version before doing any work.
"""

from schemas.tables import (
    ANNOTATIONS_SCHEMA,
    CONCEPTS_SCHEMA,
    DEAD_LETTER_SCHEMA,
    DOCUMENTS_SCHEMA,
    EMBEDDINGS_SCHEMA,
    NAMES_SCHEMA,
    SCHEMA_VERSION,
    TABLE_SCHEMAS,
    SchemaVersionError,
    check_schema,
    embeddings_schema,
)

__all__ = [
    "ANNOTATIONS_SCHEMA",
    "CONCEPTS_SCHEMA",
    "DEAD_LETTER_SCHEMA",
    "DOCUMENTS_SCHEMA",
    "EMBEDDINGS_SCHEMA",
    "NAMES_SCHEMA",
    "SCHEMA_VERSION",
    "TABLE_SCHEMAS",
    "SchemaVersionError",
    "check_schema",
    "embeddings_schema",
]
