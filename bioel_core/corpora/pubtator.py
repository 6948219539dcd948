"""PubTator files: `PMID|t|title`, `PMID|a|abstract`, then tab-separated annotation and relation lines,
documents separated by a blank line.

Annotation: `PMID start end text type [ids [parts]]`; ids joined by `|` (BC5CDR composites, MeSH + OMIM)
or `+` (NCBI composites), `-1` for no concept; BC5CDR states a composite's sub-mentions in a seventh
column. Relation: `PMID kind arg arg ...` (BC5CDR `CID chemical disease`). The offsets count into
title + ' ' + abstract, and every annotation's text must be exactly that slice: a line that breaks any
rule raises FormatError naming file, line and reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from bioel_core.corpora.records import Document, FormatError, Mention, Passage, Relation

NIL_ID = "-1"
_TEXT_LINE = re.compile(r"^([^|\t]+)\|([ta])\|(.*)$")
_ID_SEPARATORS = re.compile(r"[|+]")


def split_ids(field: str) -> tuple[str, ...]:
    """`D001943|D010051`, `D007674+D006222`, ` D007945` -> ids; `-1` and '' -> () (no concept)."""
    ids = tuple(i.strip() for i in _ID_SEPARATORS.split(field) if i.strip())
    return () if ids == (NIL_ID,) else ids


class _DocBuilder:
    def __init__(self, doc_id: str):
        self.doc_id = doc_id
        self.title: str | None = None
        self.abstract: str | None = None
        self.mentions: list[Mention] = []
        self.relations: list[Relation] = []

    def text(self) -> str:
        return (self.title or "") + " " + (self.abstract or "")

    def build(self) -> Document:
        passages = [Passage("title", 0, self.title or "")]
        if self.abstract is not None:
            passages.append(Passage("abstract", len(self.title or "") + 1, self.abstract))
        return Document(self.doc_id, passages, self.mentions, self.relations)


def parse_pubtator(lines: Iterable[str], source: str = "<pubtator>") -> Iterator[Document]:
    doc: _DocBuilder | None = None
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        where = f"line {lineno}"
        if not line.strip():
            if doc is not None:
                yield doc.build()
                doc = None
            continue
        m = _TEXT_LINE.match(line)
        if m:
            pmid, kind, text = m.groups()
            if doc is not None and doc.doc_id != pmid:
                raise FormatError(source, where, f"document {pmid} starts before document {doc.doc_id} ended (missing blank line)")
            doc = doc or _DocBuilder(pmid)
            if kind == "t":
                if doc.title is not None or doc.mentions:
                    raise FormatError(source, where, f"second title for document {pmid}")
                doc.title = text
            else:
                if doc.abstract is not None or doc.mentions:
                    raise FormatError(source, where, f"abstract for document {pmid} is repeated or follows its annotations")
                doc.abstract = text
            continue
        fields = line.split("\t")
        if doc is None:
            raise FormatError(source, where, "annotation or relation line before any title/abstract line")
        if fields[0] != doc.doc_id:
            raise FormatError(source, where, f"line names document {fields[0]!r} inside document {doc.doc_id}")
        if len(fields) >= 5 and fields[1].isdigit() and fields[2].isdigit():
            doc.mentions.append(_annotation(fields, doc, source, where))
        elif len(fields) >= 3 and not fields[1].isdigit():
            doc.relations.append(Relation(kind=fields[1], args=tuple(fields[2:])))
        else:
            raise FormatError(source, where, f"neither an annotation (PMID start end text type [ids]) nor a relation line: {line[:200]!r}")
    if doc is not None:
        yield doc.build()


def _annotation(fields: list[str], doc: _DocBuilder, source: str, where: str) -> Mention:
    if len(fields) > 7:
        raise FormatError(source, where, f"annotation has {len(fields)} tab-separated fields, at most 7 expected")
    start, end, text, etype = int(fields[1]), int(fields[2]), fields[3], fields[4]
    full = doc.text()
    if not start < end <= len(full):
        raise FormatError(source, where, f"span {start}-{end} is outside document {doc.doc_id} (length {len(full)})")
    if full[start:end] != text:
        # The NCBI training release pads one annotation text with spaces; the span is the authority then.
        if full[start:end].strip() != text.strip():
            raise FormatError(source, where, f"annotation text {text!r} differs from the document text {full[start:end]!r} at {start}-{end}")
        text = full[start:end]
    ids = split_ids(fields[5]) if len(fields) > 5 else ()
    parts = tuple(p for p in fields[6].split("|") if p) if len(fields) > 6 else ()
    return Mention(text=text, doc_id=doc.doc_id, start=start, end=end, entity_type=etype, concept_ids=ids, parts=parts)


def read_pubtator(path: str | Path) -> list[Document]:
    with open(path, encoding="utf-8") as fh:
        return list(parse_pubtator(fh, str(path)))


def format_pubtator(doc: Document) -> str:
    """One document as PubTator text, ending with the blank separator line."""
    text = doc.text
    title = doc.title
    if "\n" in text or "\t" in text or "\n" in title:
        raise ValueError(f"document {doc.doc_id}: PubTator cannot hold text with newlines or tabs")
    if text[: len(title)] != title:
        raise ValueError(f"document {doc.doc_id}: the title passage must start the document for PubTator")
    lines = [f"{doc.doc_id}|t|{title}", f"{doc.doc_id}|a|{text[len(title) + 1:]}"]
    for m in doc.mentions:
        if m.start is None or m.end is None:
            raise ValueError(f"document {doc.doc_id}: mention {m.text!r} has no span; PubTator needs offsets")
        row = [doc.doc_id, str(m.start), str(m.end), m.text, m.entity_type, "|".join(m.concept_ids) or NIL_ID]
        if m.parts:
            row.append("|".join(m.parts))
        lines.append("\t".join(row))
    lines.extend("\t".join([doc.doc_id, r.kind, *r.args]) for r in doc.relations)
    return "\n".join(lines) + "\n\n"


def write_pubtator(docs: Iterable[Document], out: str | Path | TextIO) -> int:
    """Write documents; returns how many. `out` is a path or an open text file."""
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8") as fh:
            return write_pubtator(docs, fh)
    n = 0
    for doc in docs:
        out.write(format_pubtator(doc))
        n += 1
    return n
