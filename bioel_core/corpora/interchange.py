"""The interchange output formats as one table: writers by format name, and which documents a format cannot hold."""

from __future__ import annotations

import io
from collections.abc import Iterable

from bioel_core.corpora.bioc import document_element, document_to_dict, write_bioc_json, write_bioc_xml
from bioel_core.corpora.pubtator import format_pubtator, write_pubtator
from bioel_core.corpora.records import Document, UnwritableDocument

WRITERS = {"pubtator": write_pubtator, "bioc-json": write_bioc_json, "bioc-xml": write_bioc_xml}
# the check of each format is its own formatting of one document, so it cannot drift from what is written
_CHECKS = {"pubtator": format_pubtator, "bioc-json": document_to_dict, "bioc-xml": document_element}


def unwritable(doc: Document, fmt: str) -> str | None:
    """Why `fmt` cannot hold `doc` (the reason for its dead letter), or None when it can."""
    try:
        _CHECKS[fmt](doc)
    except UnwritableDocument as err:
        return str(err)
    return None


def write_interchange(docs: Iterable[Document], fmt: str) -> str:
    """Documents in one interchange format, as text (UnwritableDocument for one it cannot hold)."""
    buf = io.StringIO()
    WRITERS[fmt](docs, buf)
    return buf.getvalue()
