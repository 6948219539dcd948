"""The interchange output formats as one table: writers by format name, and which documents a format cannot hold."""

from __future__ import annotations

import heapq
import io
from collections.abc import Iterable, Iterator

from bioel_core.corpora.bioc import document_element, document_to_dict, write_bioc_json, write_bioc_xml
from bioel_core.corpora.pubtator import format_pubtator, write_pubtator
from bioel_core.corpora.records import Document, UnwritableDocument
from bioel_core.kb.io import Opener

# ids in the interchange copies: bare (D003920), or with their vocabulary as PubTator3 writes them (MESH:D003920)
ID_PREFIXES = ("none", "vocabulary")
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


def merge_interchange(paths: Iterable[str], fmt: str, opener: Opener | None = None) -> str:
    """Interchange files whose documents are each in doc-id order (the link output's parts) -> one text of the
    same format, every document in doc-id order: read back with the corpus readers, merged, written by the
    same writer, so the result is what one writer call over all documents would give."""
    from bioel_core.corpora.read import read_documents

    def documents(path: str) -> Iterator[Document]:
        for item in read_documents([path], fmt, opener=opener):
            if not isinstance(item, Document):  # bioel wrote these parts: any other item is a fault, not data
                raise ValueError(f"{path}: cannot merge a part that does not read back as documents: {item}")
            yield item

    return write_interchange(heapq.merge(*(documents(p) for p in paths), key=lambda d: d.doc_id), fmt)
