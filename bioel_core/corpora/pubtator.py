"""PubTator files: `PMID|t|title`, `PMID|a|abstract`, then tab-separated annotation and relation lines,
documents separated by a blank line.

Annotation: `PMID start end text type [ids [parts]]`; ids joined by `|` (BC5CDR composites, MeSH + OMIM)
or `+` (NCBI composites), `-1` for no concept; BC5CDR states a composite's sub-mentions in a seventh
column. Relation: `PMID kind arg arg ...` (BC5CDR `CID chemical disease`), whose kind never starts like a
number: a line whose second field does (` 5`, `0.0`, `-1`) is an annotation, and refused unless both its
offsets are whole numbers (ASCII digits). The offsets count into
title + ' ' + abstract, and every annotation's text must be exactly that slice: a line that breaks any
rule raises FormatError naming file, line and reason. A file that misses the blank line between two documents is
read as the ids tell (`split_documents`): a title line of another id after a document's lines starts the next
document; where the ids leave it unclear, each document of the block is refused.

Writing (one rule each, in `format_pubtator`):
- Offsets are Unicode code points (Python `str` indices) into title + ' ' + abstract, as on reading.
- A line cannot hold a line break or a tab, so each `\n`, `\r` and `\t` of the text is written as one space:
  same length, so every offset stays valid (the mention texts are the same slices of the written text).
- The `t` line is the document's title passage when it starts the text and a space (or the end) follows it;
  otherwise (plain text, BioC without a title) the whole text is the `t` line and the `a` line is empty, so
  offsets are unchanged. (An empty `t` line would shift every offset by the separator space.)
- Column 6 is the mention's id field as read (`Mention.id_field`) while it still splits to its concept ids,
  else the ids joined by `|` (`-1` for none).
- A document PubTator cannot hold raises UnwritableDocument: an id that is empty or holds `|`, a tab or a
  line break (the `|t|` line ends the id at the first `|`, and PMIDs never hold one, so a reader cannot
  accept it unambiguously), a tab or line break in a type, id field or relation, a mention without a span
  inside the text, a relation whose kind starts like a number (it would read as an annotation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from bioel_core.corpora.intake import whole_number
from bioel_core.corpora.records import Document, FormatError, Mention, Passage, Relation, UnwritableDocument
from bioel_core.corpora.sink import LONE_SURROGATE, Output, strings, text_output
from bioel_core.kb.vocab import is_nil_id

NIL_ID = "-1"
_TEXT_LINE = re.compile(r"^([^|\t]+)\|([ta])\|(.*)$")
_ID_SEPARATORS = re.compile(r"[|+]")
_OFFSET = re.compile(r"[0-9]+")


def _numeric(field: str) -> bool:
    """Whether a line's second field starts like a number: an annotation's start offset, never a relation's kind."""
    return field.strip().lstrip("+-")[:1].isdigit()


def split_ids(field: str) -> tuple[str, ...]:
    """`D001943|D010051`, `D007674+D006222`, ` D007945` -> ids; `-1`, `CUI-less` and '' -> () (no concept)."""
    ids = tuple(i.strip() for i in _ID_SEPARATORS.split(field) if i.strip())
    return () if len(ids) == 1 and is_nil_id(ids[0]) else ids


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
        if self.abstract:  # an empty `a` line adds no passage: the text does not end in the separator space
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
                raise FormatError(
                    source, where, f"document {pmid} starts before document {doc.doc_id} ended (missing blank line)"
                )
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
        if len(fields) >= 3 and not _numeric(fields[1]):
            doc.relations.append(Relation(kind=fields[1], args=tuple(fields[2:])))
        elif len(fields) >= 5:
            if not (_OFFSET.fullmatch(fields[1]) and _OFFSET.fullmatch(fields[2])):
                raise FormatError(source, where, f"annotation offsets must be whole numbers, not {fields[1]!r} {fields[2]!r}")
            doc.mentions.append(_annotation(fields, doc, source, where))
        else:
            raise FormatError(
                source, where, f"neither an annotation (PMID start end text type [ids]) nor a relation line: {line[:200]!r}"
            )
    if doc is not None:
        yield doc.build()


def _document_id(line: str | None) -> tuple[str | None, str | None]:
    """(the id a line names, its kind: "t" or "a" for a text line, None for an annotation or relation line); no id
    for a line that is neither (or could not be read)."""
    m = _TEXT_LINE.match(line or "")
    if m:
        return m.group(1), m.group(2)
    return (line.split("\t", 1)[0], None) if line and "\t" in line else (None, None)


def split_documents(lines: list[str | None]) -> tuple[list[range], str | None]:
    """The documents of one blank-line-separated block, where a file misses the blank line between two: the block
    is cut before each text line (`|t|` or `|a|`) that names another id than the lines before it. Returns the
    lines of each document (one range for a block of one document) and, when the cut leaves it unclear where one
    document ends, the reason each of them is refused: a document that starts with its `|a|` line (an abstract of
    the document before, misnumbered?), a line naming a document of the block other than its own (lines that
    interleave), an id that starts twice. A line without an id (one that could not be read, `None`, or is malformed)
    stays with the lines before it."""
    ids = [_document_id(line) for line in lines]
    starts, heads = [0], []
    for n, (doc_id, kind) in enumerate(ids):
        if doc_id is None:
            continue
        if not heads:
            heads.append(doc_id)
        elif kind and doc_id != heads[-1]:
            starts.append(n)
            heads.append(doc_id)
    pieces = [range(a, b) for a, b in zip(starts, [*starts[1:], len(lines)])]
    if len(pieces) == 1:
        return pieces, None
    first = f"document {heads[1]} starts before document {heads[0]} ended (missing blank line)"
    for piece, head in zip(pieces[1:], heads[1:]):
        if ids[piece.start][1] != "t":
            return (
                pieces,
                f"{first}, and document {head} does not start with its `{head}|t|` title line: where one ends is unclear",
            )
    if len(set(heads)) < len(heads):
        again = next(h for h in heads if heads.count(h) > 1)
        return pieces, f"{first}, and document {again} starts twice: where one ends is unclear"
    for piece, head in zip(pieces, heads):
        other = next((ids[n][0] for n in piece if ids[n][0] not in (None, head) and ids[n][0] in heads), None)
        if other is not None:
            return pieces, f"{first}, and a line of document {other} is among document {head}'s: where one ends is unclear"
    return pieces, None


def _annotation(fields: list[str], doc: _DocBuilder, source: str, where: str) -> Mention:
    if len(fields) > 7:
        raise FormatError(source, where, f"annotation has {len(fields)} tab-separated fields, at most 7 expected")
    try:  # the shared rule (intake): digits counted before they are read, so 5,000 of them are refused, not a crash
        start, end = whole_number(fields[1]), whole_number(fields[2])
    except ValueError as err:
        raise FormatError(source, where, f"annotation offsets: {err}") from err
    text, etype = fields[3], fields[4]
    full = doc.text()
    if not start < end <= len(full):
        raise FormatError(source, where, f"span {start}-{end} is outside document {doc.doc_id} (length {len(full)})")
    if full[start:end] != text:
        # The NCBI training release pads one annotation text with spaces; the span is the authority then.
        if full[start:end].strip() != text.strip():
            raise FormatError(
                source, where, f"annotation text {text!r} differs from the document text {full[start:end]!r} at {start}-{end}"
            )
        text = full[start:end]
    id_field = fields[5] if len(fields) > 5 else ""
    parts = tuple(p for p in fields[6].split("|") if p) if len(fields) > 6 else ()
    return Mention(
        text=text,
        doc_id=doc.doc_id,
        start=start,
        end=end,
        entity_type=etype,
        concept_ids=split_ids(id_field),
        parts=parts,
        id_field=id_field,
    )


_LINE_BREAKS = str.maketrans("\n\r\t", "   ")
_FIELD_BREAKS = re.compile(r"[\t\n\r]")


def one_line(text: str) -> str:
    """A document's text as PubTator writes it: each line break or tab one space, so its offsets stay the same."""
    return text.translate(_LINE_BREAKS)


def id_field(m: Mention) -> str:
    """The id field to write: the corpus' own while it still means `concept_ids`, else the ids joined by `|`."""
    if m.id_field is not None and split_ids(m.id_field) == m.concept_ids:
        return m.id_field
    return "|".join(m.concept_ids) or NIL_ID


def format_pubtator(doc: Document) -> str:
    """One document as PubTator text, ending with the blank separator line; UnwritableDocument if it cannot be."""

    def refuse(reason: str) -> UnwritableDocument:
        return UnwritableDocument(f"document {doc.doc_id!r} cannot be written as PubTator: {reason}")

    if not doc.doc_id.strip() or "|" in doc.doc_id or _FIELD_BREAKS.search(doc.doc_id):
        raise refuse("the id is empty or holds '|', a tab or a line break")
    if any(LONE_SURROGATE.search(x) for x in strings([p.text for p in doc.passages] + [m.entity_type for m in doc.mentions])):
        raise refuse("a lone surrogate, which has no UTF-8 form")
    try:
        text = one_line(doc.text)
    except ValueError as err:
        raise refuse(str(err)) from err
    first = min(doc.passages, key=lambda p: p.offset, default=None)
    starts = first is not None and first.kind == "title" and first.offset == 0
    title = text[: len(first.text)] if starts else text
    if text[len(title) : len(title) + 1] not in ("", " "):  # no separator space after the title: keep offsets
        title = text
    lines = [f"{doc.doc_id}|t|{title}", f"{doc.doc_id}|a|{text[len(title) + 1 :]}"]
    for m in doc.mentions:
        if m.start is None or m.end is None or not 0 <= m.start < m.end <= len(text):
            raise refuse(f"mention {m.text!r} has no span inside the text ({m.start}-{m.end}, length {len(text)})")
        row = [doc.doc_id, str(m.start), str(m.end), text[m.start : m.end], m.entity_type, id_field(m)]
        if m.parts:
            row.append("|".join(m.parts))
        elif not row[-1]:
            row.pop()  # the corpus stated no id column
        if any(_FIELD_BREAKS.search(f) for f in row[4:]):
            raise refuse(f"mention {m.text!r}: a tab or line break in its type, ids or parts")
        lines.append("\t".join(row))
    for r in doc.relations:
        if _numeric(r.kind) or not r.args or any(_FIELD_BREAKS.search(f) for f in (r.kind, *r.args)):
            raise refuse(
                f"relation {r.kind!r} {r.args!r}: a kind that starts like a number, no arguments, or a tab or line break"
            )
        lines.append("\t".join([doc.doc_id, r.kind, *r.args]))
    return "\n".join(lines) + "\n\n"


def write_pubtator(docs: Iterable[Document], out: Output) -> int:
    """Write documents; returns how many. `out` is a path or an open text stream."""
    n = 0
    with text_output(out) as fh:
        for doc in docs:
            fh.write(format_pubtator(doc))
            n += 1
    return n
