"""NLM PubMed XML (`PubmedArticleSet`, as in the annual baseline and the daily update files, and the legacy
`MedlineCitationSet` of pre-2016 MEDLINE files), streamed.

One `Document` per `PubmedArticle` (id = MedlineCitation/PMID, `version` = its Version attribute; title =
Article/ArticleTitle, else the original-language Article/VernacularTitle, which NLM leaves alone when it has
no English title), per
`PubmedBookArticle` (BookDocument/PMID; title = ArticleTitle, else Book/BookTitle) and per bare
`MedlineCitation` of a `MedlineCitationSet`; one `DeletedDocument` per PMID of a `DeleteCitation` (either set).
Passages are laid out as PubTator does, so offsets agree across formats:
title at offset 0, abstract at len(title) + 1 (no abstract passage without abstract text); the abstract
is the AbstractText sections joined by one space, a labelled section written `LABEL: text`. Inline markup
(<i>, <sup>, MathML, ...) is kept as its text, and every whitespace run becomes one space (PubTator's texts
are single lines).

Each record (a child element of the set) is cut out of the byte stream at its start and end tags and parsed
on its own, so a damaged record is one `DeadLetter` and the records after it are still read. Cutting reads markup as
XML does: a CDATA section, comment or processing instruction is skipped whole, so a `</PubmedArticle>` or
`<PubmedArticle>` written inside one (a CDATA abstract quoting XML) neither ends the record nor starts another; between
records a comment or processing instruction is no record, and a CDATA section is text outside any record. One never
closed within the record's file (or UNPARSED_REACH bytes) is taken as damage: the record is cut as if it were text, and
its dead letter names the unclosed section. Each record is parsed without the file's DTD, so an entity the DTD
declares (an external entity, an entity bomb) is never fetched or expanded: a record that uses one is a dead letter
("undefined entity &name;") and the others are read.
Dead letters: malformed XML (mismatched or unclosed tags, a bare `<` or `&`), invalid UTF-8, an article not closed
before the next one starts, no PMID, no title or abstract text, an unexpected element. The dead letter names the file, the
record ordinal and PMID (when it can be found), the line and column, and holds the record's text.
(lxml's recovering parser was tried for this and rejected: on a mismatched tag or a bare `<` it silently
truncates the text and folds the following articles into the damaged one, with no error to report.)
A fault that leaves the rest of the file unreadable raises `FormatError` naming the file, the record being
read and the line: a truncated or corrupt gzip stream, a file that ends inside a record or before the set's
end tag, an empty file, another root element; what was yielded before stands. Memory holds one record (and at most
UNPARSED_REACH bytes past an unclosed section).

A large uncompressed file can be read by several workers: `split_pubmed_xml` skims it once with the same record
cutting (no XML parsing) and cuts it at record starts into FileRanges that carry the line and the record ordinal
they begin at, so a range's reader yields exactly what the whole file's reader yields for those records.
"""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator

from bioel_core.corpora.records import DeletedDocument, Document, FormatError, Passage
from bioel_core.kb import io as kb_io
from bioel_core.kb.io import FileRange, Input, Opener, is_gzip, open_binary, open_raw
from bioel_core.records import DeadLetter, unread_rest_reason

ROOTS = ("PubmedArticleSet", "MedlineCitationSet")
ARTICLE, BOOK_ARTICLE, CITATION, DELETE = "PubmedArticle", "PubmedBookArticle", "MedlineCitation", "DeleteCitation"
CHUNK = 1 << 16
PubmedItem = Document | DeletedDocument | DeadLetter

ELEMENT_NAME = re.compile(rb"<([A-Za-z_][\w.:-]*)")
# markup whose content is not markup, with what ends it
_UNPARSED = {b"<![CDATA[": b"]]>", b"<!--": b"-->", b"<?": b"?>"}
_OPENING = max(map(len, _UNPARSED))  # bytes enough to tell these from a tag
# inside a record, how far to look for one's close before taking the opening as damage (memory holds this much more)
UNPARSED_REACH = 1 << 24
_PMID = re.compile(rb"<PMID[^>]*>\s*([^<\s]+)")
_SPACE = re.compile(rb"\s*")
_AT = re.compile(r": line \d+, column \d+$")
_UNDEFINED_ENTITY = 11  # expat's XML_ERROR_UNDEFINED_ENTITY
_ENTITY = re.compile(r"&[^;\s<&]{1,100};?")


def _message(err: ET.ParseError, text: str = "") -> str:
    """The parser's message without its position, which counts from the record and is given in file terms; an
    undefined entity named, with why a DTD's entity is one."""
    message = _AT.sub("", str(err))
    if err.code == _UNDEFINED_ENTITY and text:
        row, col = err.position
        entity = _ENTITY.match(text.split("\n")[row - 1], col)
        message += (
            f" {entity.group() if entity else ''} (records are read without the file's DTD, whose entities are never expanded)"
        )
    return message


def _text(el: ET.Element | None) -> str:
    return " ".join("".join(el.itertext()).split()) if el is not None else ""


def _abstract(sections: Iterator[ET.Element]) -> str:
    parts = []
    for sec in sections:
        text = _text(sec)
        if text:
            label = " ".join((sec.get("Label") or "").split())
            parts.append(f"{label}: {text}" if label else text)
    return " ".join(parts)


# per record kind: the element holding PMID and texts ("." = the record), the title paths in order of preference,
# the abstract
_LAYOUTS = {
    ARTICLE: ("MedlineCitation", ("Article/ArticleTitle", "Article/VernacularTitle"), "Article/Abstract/AbstractText"),
    BOOK_ARTICLE: ("BookDocument", ("ArticleTitle", "Book/BookTitle"), "Abstract/AbstractText"),
    CITATION: (".", ("Article/ArticleTitle", "Article/VernacularTitle"), "Article/Abstract/AbstractText"),
}
_RECORDS = {"PubmedArticleSet": (ARTICLE, BOOK_ARTICLE, DELETE), "MedlineCitationSet": (CITATION, DELETE)}


class _Reader:
    def __init__(self, source: str, *, skim_cuts_every: int = 0):
        """`skim_cuts_every` > 0: records are cut out but not parsed, and a cut (offset, line, ordinal) is noted at
        the first record start after every that many bytes (`split_pubmed_xml`)."""
        self.source = source
        self.ordinal = 0  # records of the set started
        self.buf = b""  # unread bytes; buf[0] is on line self.line, at byte self.offset of the file
        self.line = 1
        self.offset = 0
        self.eof = False
        self.seen_text = False
        self.skim_cuts_every = skim_cuts_every
        self.cuts: list[tuple[int, int, int]] = []
        self.boundaries: dict[bytes, re.Pattern] = {}  # per record name (`record_boundary`)

    # ---- bytes in -------------------------------------------------------------------------------------

    def more(self, stream) -> bool:
        """Appends a chunk to the buffer; False at the end of the stream."""
        if self.eof:
            return False
        try:
            chunk = self.read(CHUNK)
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise FormatError(self.source, self.where_partial(), f"truncated or corrupt gzip stream: {err}") from err
        self.eof = not chunk
        self.seen_text = self.seen_text or bool(chunk.strip())
        self.buf += chunk
        return bool(chunk)

    def need(self, stream, pattern: bytes | re.Pattern, start: int = 0, reach: int | None = None) -> int:
        """Index of `pattern` in the buffer at or after `start` (reading on as needed), -1 at the end of the stream
        or, given `reach`, once that many bytes after `start` are buffered without it."""
        while True:
            at = (
                self.buf.find(pattern, start)
                if isinstance(pattern, bytes)
                else (m.start() if (m := pattern.search(self.buf, start)) else -1)
            )
            if at >= 0 or (reach is not None and len(self.buf) - start > reach) or not self.more(stream):
                return at

    def consume(self, n: int) -> bytes:
        taken, self.buf = self.buf[:n], self.buf[n:]
        self.line += taken.count(b"\n")
        self.offset += len(taken)
        return taken

    def skip_space(self, stream) -> None:
        while True:
            self.consume(_SPACE.match(self.buf).end())
            if self.buf or not self.more(stream):
                return

    def unparsed_end(self, stream, at: int, openings=tuple(_UNPARSED), reach: int | None = None) -> int | None:
        """Where the CDATA section, comment or processing instruction (those of `openings`) starting at buf[at] ends:
        the index past its close, -1 when the stream ends first (or `reach` bytes pass); None when none starts
        there."""
        for opening in openings:
            if self.buf.startswith(opening, at):
                close = _UNPARSED[opening]
                end = self.need(stream, close, at + len(opening), reach)
                return end + len(close) if end >= 0 else -1
        return None

    # ---- places ---------------------------------------------------------------------------------------

    def where(self, ordinal: int, raw: bytes) -> str:
        m = _PMID.search(raw)
        return f"article {ordinal} (PMID {m.group(1).decode('utf-8', 'replace')})" if m else f"article {ordinal}"

    def where_partial(self) -> str:
        """The record a stream fault hit: the one whose bytes are buffered, or (between records) the next one."""
        rest = self.buf.lstrip()
        if rest.startswith(b"<") and not rest.startswith((b"</", b"<!", b"<?")):
            return self.where(self.ordinal + 1, rest)
        return f"after article {self.ordinal}" if self.ordinal else "before the first article"

    # ---- records --------------------------------------------------------------------------------------

    def record(self, el: ET.Element, where: str, raw: str) -> Iterator[PubmedItem]:
        def dead(reason: str) -> DeadLetter:
            return DeadLetter(self.source, where, raw[:2000], reason)

        if el.tag == DELETE:
            for pmid_el in el.iterfind("PMID"):
                pmid = (pmid_el.text or "").strip()
                if pmid:
                    yield DeletedDocument(pmid, (pmid_el.get("Version") or "").strip(), self.source)
                else:
                    yield dead("DeleteCitation has an empty PMID")
            return
        if el.tag not in self.kinds or el.tag not in _LAYOUTS:
            yield dead(f"unexpected element <{el.tag}> in <{self.root}>")
            return
        body_path, title_paths, abstract_path = _LAYOUTS[el.tag]
        body = el.find(body_path)
        pmid_el = body.find("PMID") if body is not None else None
        if pmid_el is None or not (pmid_el.text or "").strip():
            yield dead(f"{el.tag} has no {'PMID' if body_path == '.' else body_path + '/PMID'}")
            return
        title = next((t for t in (_text(body.find(p)) for p in title_paths) if t), "")
        abstract = _abstract(body.iterfind(abstract_path))
        if not (title or abstract):
            yield dead("neither a title nor an abstract with text")
            return
        passages = [Passage("title", 0, title)] + ([Passage("abstract", len(title) + 1, abstract)] if abstract else [])
        yield Document(pmid_el.text.strip(), passages, version=(pmid_el.get("Version") or "").strip())

    def parse(self, raw: bytes, line: int) -> Iterator[PubmedItem]:
        """One record's bytes (starting on `line` of the file) -> its items, or one dead letter."""
        self.ordinal += 1
        if self.skim_cuts_every:
            return
        where = self.where(self.ordinal, raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            at = line + raw[: err.start].count(b"\n")
            yield DeadLetter(
                self.source,
                f"{where}, line {at}",
                raw[:2000].decode("utf-8", "replace"),
                f"invalid UTF-8: {err.reason} (byte {raw[err.start : err.start + 1]!r})",
            )
            return
        try:
            el = ET.fromstring(text)
        except ET.ParseError as err:
            yield DeadLetter(
                self.source, f"{where}, {self.position(err, line, raw)}", text[:2000], f"malformed XML: {_message(err, text)}"
            )
            return
        yield from self.record(el, where, text)

    @staticmethod
    def position(err: ET.ParseError, line: int, raw: bytes) -> str:
        row, col = err.position
        # ParseError's column on the record's first line counts from the record's start, not the file line's
        first = raw.find(b"<")
        return f"line {line + row - 1}, column {col + (first if row == 1 else 0)}"

    def read(self, stream, piece: FileRange | None = None) -> Iterator[PubmedItem]:
        """The records of `stream`, or of `piece` of it (an uncompressed, seekable file): its prolog is read, then
        the records that start in [piece.start, piece.end)."""
        # read1: a buffered read(n) would drop the text decompressed before a truncated gzip's end
        self.read = getattr(stream, "read1", stream.read)
        self.root = self.prolog(stream)
        if self.root is None:
            return
        self.kinds = _RECORDS[self.root]
        if piece is not None and piece.start:
            stream.seek(piece.start)
            self.buf, self.eof = b"", False
            self.offset, self.line, self.ordinal = piece.start, piece.first_line, piece.first_record
        stop_at = piece.end if piece is not None else None
        next_cut = self.skim_cuts_every
        while True:
            self.skip_space(stream)
            if stop_at is not None and self.offset >= stop_at:  # the next range's first record starts here
                return
            while len(self.buf) < _OPENING and self.more(stream):  # enough to tell "<![CDATA[" from "<" + name
                pass
            if not self.buf:
                raise FormatError(
                    self.source,
                    f"after article {self.ordinal}, line {self.line}",
                    f"malformed XML: the file ends before </{self.root}> (truncated?)",
                )
            if self.buf.startswith(b"</"):
                end = self.need(stream, b">")
                tag = self.consume(end + 1 if end >= 0 else len(self.buf))
                if tag[2:-1].strip() == self.root.encode():
                    return
                yield DeadLetter(
                    self.source,
                    f"after article {self.ordinal}, line {self.line}",
                    tag.decode("utf-8", "replace"),
                    f"malformed XML: stray end tag in <{self.root}>",
                )
            elif (end := self.unparsed_end(stream, 0)) is not None:
                line = self.line
                skipped = self.consume(end if end >= 0 else len(self.buf))
                if skipped.startswith(b"<![CDATA[") and skipped[9:].removesuffix(b"]]>").strip():
                    yield DeadLetter(
                        self.source,
                        f"after article {self.ordinal}, line {line}",
                        skipped[:2000].decode("utf-8", "replace"),
                        f"text outside any record of <{self.root}>",
                    )
            elif self.buf.startswith(b"<"):
                if next_cut and self.offset >= next_cut:
                    self.cuts.append((self.offset, self.line, self.ordinal))
                    next_cut = self.offset + self.skim_cuts_every
                yield from self.element(stream)
            else:
                end = self.need(stream, b"<")
                line = self.line
                junk = self.consume(end if end >= 0 else len(self.buf))
                yield DeadLetter(
                    self.source,
                    f"after article {self.ordinal}, line {line}",
                    junk[:2000].decode("utf-8", "replace"),
                    f"text outside any record of <{self.root}>",
                )

    def element(self, stream) -> Iterator[PubmedItem]:
        """The record starting the buffer: up to its end tag, or (unclosed) up to the next record's start."""
        self.need(stream, b">")
        m = ELEMENT_NAME.match(self.buf)
        line = self.line
        if m is None:  # "<" not starting a tag: let the parser name the fault
            end = self.need(stream, b"<", 1)
            yield from self.parse(self.consume(end if end >= 0 else len(self.buf)), line)
            return
        name = m.group(1)
        start_end = self.need(stream, b">")
        if start_end >= 0 and self.buf[start_end - 1 : start_end] == b"/":  # <Tag .../>
            yield from self.parse(self.consume(start_end + 1), line)
            return
        # its end tag; or the same start tag again, or any record kind's: a record it never closed ends there
        at = self.record_boundary(stream, name, m.end())
        if at >= 0 and self.buf.startswith(b"</", at):
            yield from self.parse(self.consume(self.buf.index(b">", at) + 1), line)
            return
        if at >= 0:
            raw = self.consume(at)
            self.ordinal += 1
            yield DeadLetter(
                self.source,
                f"{self.where(self.ordinal, raw)}, line {line}",
                raw[:2000].decode("utf-8", "replace"),
                f"malformed XML: <{name.decode()}> is not closed before the next record starts",
            )
            return
        # the stream ended inside the record: the file is cut
        raw = self.consume(len(self.buf))
        where = self.where(self.ordinal + 1, raw)
        try:
            ET.fromstring(raw)
            reason, at = "", f"line {line}"
        except ET.ParseError as err:
            reason, at = f": {_message(err)}", self.position(err, line, raw)
        why = f"the file ends inside the record (truncated?){reason}"
        raise FormatError(self.source, f"{where}, {at}", unread_rest_reason(why, line, len(raw), raw.count(b"\n") + 1))

    def record_boundary(self, stream, name: bytes, start: int) -> int:
        """Index of the first end tag `</name>` or record start tag at or after `start` that is markup (CDATA sections,
        comments and processing instructions skipped whole); -1 when the stream ends first."""
        boundary = self.boundaries.get(name)
        if boundary is None:
            starts = b"|".join(re.escape(k) for k in sorted({*(k.encode() for k in self.kinds), name}))
            # "<" factored out: a literal prefix the regex engine scans for quickly
            boundary = self.boundaries[name] = re.compile(
                rb"<(?:/" + re.escape(name) + rb"\s*>|(?:" + starts + rb")[\s>/]|!\[CDATA\[|!--|\?)"
            )
        at = start
        while (at := self.need(stream, boundary, at)) >= 0:
            past = self.unparsed_end(stream, at, reach=UNPARSED_REACH)
            if past is None:
                return at
            # one never closed (or not within reach) is cut as if it were text: the parser names it in the record's
            # dead letter, and the records after it are read
            at = past if past >= 0 else at + 1
        return -1

    def prolog(self, stream) -> str | None:
        """Skips the XML declaration, DOCTYPE and comments; returns the root's name (None: an empty set)."""
        self.more(stream)
        if self.buf.startswith(b"\xef\xbb\xbf"):
            self.consume(3)
        while True:
            self.skip_space(stream)
            while len(self.buf) < 4 and self.more(stream):  # enough to tell "<!--" from "<" + name
                pass
            if not self.buf:
                raise FormatError(self.source, "file", "empty file" if not self.seen_text else "no root element")
            end = self.unparsed_end(stream, 0, (b"<?", b"<!--"))
            if end is not None:
                self.consume(end if end >= 0 else len(self.buf))
            else:
                if self.buf.startswith(b"<!DOCTYPE"):
                    end = self.need(stream, b">")
                    bracket = self.buf.find(b"[", 0, end if end >= 0 else len(self.buf))
                    if bracket >= 0:  # an internal subset: the DOCTYPE ends at "]>"
                        end = self.need(stream, re.compile(rb"\]\s*>"), bracket)
                        end = self.buf.find(b">", end) if end >= 0 else -1
                    self.consume(end + 1 if end >= 0 else len(self.buf))
                    continue
                break
        end = self.need(stream, b">")
        m = ELEMENT_NAME.match(self.buf)
        name = m.group(1).decode("utf-8", "replace") if m else self.buf[:40].decode("utf-8", "replace")
        if name not in ROOTS:
            raise FormatError(self.source, f"line {self.line}", f"root element is <{name}>, not <{ROOTS[0]}> or <{ROOTS[1]}>")
        tag = self.consume(end + 1 if end >= 0 else len(self.buf))
        return None if tag.endswith(b"/>") else name


def split_pubmed_xml(path: str, opener: Opener | None = None) -> list[Input]:
    """`path` cut at record starts into FileRanges of about kb.io's SPLIT_BYTES; [path] for a small or gzipped file
    (gzip cannot be entered in the middle) and for one the reader cannot get through (the whole-file read then
    reports the fault where it is)."""
    target = kb_io.SPLIT_BYTES
    with open_raw(path, opener) as fh:
        size = fh.seek(0, 2)
        fh.seek(0)
        if size <= target or is_gzip(fh):
            return [path]
        reader = _Reader(path, skim_cuts_every=target)
        try:
            for _ in reader.read(fh):
                pass
        except FormatError:
            return [path]
    starts = [(0, 1, 0), *reader.cuts]
    return (
        [path]
        if len(starts) == 1
        else [
            FileRange(path, offset, starts[i + 1][0] if i + 1 < len(starts) else None, line, ordinal)
            for i, (offset, line, ordinal) in enumerate(starts)
        ]
    )


def iter_pubmed_xml(path: Input, opener: Opener | None = None) -> Iterator[PubmedItem]:
    """Documents, DeletedDocuments and DeadLetters of one PubMed XML file (gzip sniffed from its bytes), or of a
    FileRange of one from `split_pubmed_xml`."""
    if isinstance(path, FileRange):
        with open_raw(path.path, opener) as stream:
            yield from _Reader(path.path).read(stream, path)
        return
    reader = _Reader(str(path))
    try:
        stream = open_binary(str(path), opener)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:  # a gzip that fails its checksum gives no document
        raise FormatError(str(path), "file", f"truncated or corrupt gzip stream: {err}") from err
    with stream:
        yield from reader.read(stream)


def read_pubmed_xml(path: str, opener: Opener | None = None) -> list[PubmedItem]:
    return list(iter_pubmed_xml(path, opener))
