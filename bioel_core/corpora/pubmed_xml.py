"""NLM PubMed XML (`PubmedArticleSet`, as in the annual baseline and the daily update files), streamed.

One `Document` per `PubmedArticle` (id = MedlineCitation/PMID, `version` = its Version attribute) and per
`PubmedBookArticle` (BookDocument/PMID; title = ArticleTitle, else Book/BookTitle); one `DeletedDocument`
per PMID of a `DeleteCitation`. Passages are laid out as PubTator does, so offsets agree across formats:
title at offset 0, abstract at len(title) + 1; the abstract is the AbstractText sections joined by one
space, a labelled section written `LABEL: text`. Inline markup (<i>, <sup>, MathML, ...) is kept as its
text, and every whitespace run becomes one space (PubTator's texts are single lines).

Faults: an article without a PMID, without any title or abstract text, or an unexpected element in the
set is yielded as a `DeadLetter` (file, article ordinal and PMID, reason, the article's XML) and reading
goes on. Malformed XML, invalid UTF-8, a truncated or corrupt gzip stream, an empty file or another root
element raise `FormatError` naming the file, the article being read and the line; what was yielded
before stands. Memory holds one article: each is cleared once read.
"""

from __future__ import annotations

import codecs
import gzip
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator

from bioel_core.corpora.records import DeletedDocument, Document, FormatError, Passage
from bioel_core.kb.io import Opener, open_binary
from bioel_core.records import DeadLetter

ROOT = "PubmedArticleSet"
ARTICLE, BOOK_ARTICLE, DELETE = "PubmedArticle", "PubmedBookArticle", "DeleteCitation"
CHUNK = 1 << 16
PubmedItem = Document | DeletedDocument | DeadLetter


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


# per record kind: the element holding PMID and texts, the title paths in order of preference, the abstract
_LAYOUTS = {
    ARTICLE: ("MedlineCitation", ("Article/ArticleTitle",), "Article/Abstract/AbstractText"),
    BOOK_ARTICLE: ("BookDocument", ("ArticleTitle", "Book/BookTitle"), "Abstract/AbstractText"),
}


class _Reader:
    def __init__(self, source: str):
        self.source = source
        self.ordinal = 0  # articles (records of the set) started
        self.pmid = ""  # PMID of the record being read, once seen
        self.depth = 0
        self.root: ET.Element | None = None

    def where(self) -> str:
        """The record a fault hit: the one being read, or (between records) the next one."""
        if self.depth < 2:
            return f"after article {self.ordinal}" if self.ordinal else "before the first article"
        return f"article {self.ordinal} (PMID {self.pmid})" if self.pmid else f"article {self.ordinal}"

    def dead(self, el: ET.Element, reason: str) -> DeadLetter:
        return DeadLetter(self.source, self.where(), ET.tostring(el, encoding="unicode")[:2000], reason)

    def record(self, el: ET.Element) -> Iterator[PubmedItem]:
        if el.tag == DELETE:
            for pmid_el in el.iterfind("PMID"):
                pmid = (pmid_el.text or "").strip()
                if pmid:
                    yield DeletedDocument(pmid, (pmid_el.get("Version") or "").strip(), self.source)
                else:
                    yield self.dead(el, "DeleteCitation has an empty PMID")
            return
        if el.tag not in _LAYOUTS:
            yield self.dead(el, f"unexpected element <{el.tag}> in <{ROOT}>")
            return
        body_path, title_paths, abstract_path = _LAYOUTS[el.tag]
        body = el.find(body_path)
        pmid_el = body.find("PMID") if body is not None else None
        if pmid_el is None or not (pmid_el.text or "").strip():
            yield self.dead(el, f"{el.tag} has no {body_path}/PMID")
            return
        title = next((t for t in (_text(body.find(p)) for p in title_paths) if t), "")
        abstract = _abstract(body.iterfind(abstract_path))
        if not (title or abstract):
            yield self.dead(el, "neither a title nor an abstract with text")
            return
        yield Document(pmid_el.text.strip(), [Passage("title", 0, title), Passage("abstract", len(title) + 1, abstract)],
                       version=(pmid_el.get("Version") or "").strip())

    def read(self, stream) -> Iterator[PubmedItem]:
        # iterparse's own engine, fed by hand so each chunk is checked as UTF-8 before expat sees it
        parser = ET.XMLPullParser(events=("start", "end"))
        utf8 = codecs.getincrementaldecoder("utf-8")()  # expat's own message for bad bytes does not say so
        lines = 1  # line at the start of the current chunk
        seen_text = False
        # read1: a buffered read(n) would drop the text decompressed before a truncated gzip's end
        read = getattr(stream, "read1", stream.read)
        while True:
            try:
                chunk = read(CHUNK)
            except (EOFError, gzip.BadGzipFile, zlib.error) as err:
                raise FormatError(self.source, self.where(), f"truncated or corrupt gzip stream: {err}") from err
            bad_utf8 = None
            try:
                utf8.decode(chunk, final=not chunk)
            except UnicodeDecodeError as err:
                # err.object is the decoder's undecoded tail of the last chunk + this one; parse up to the bad
                # byte first, so the fault is placed in the article that holds it
                bad_utf8 = (lines + err.object[:err.start].count(b"\n"),
                            f"invalid UTF-8: {err.reason} (byte {err.object[err.start:err.start + 1]!r})")
                chunk = chunk[:max(0, err.start - (len(err.object) - len(chunk)))]
            lines += chunk.count(b"\n")
            seen_text = seen_text or bool(chunk.strip())
            if chunk:
                parser.feed(chunk)  # a syntax error is queued and raised by read_events after the events before it
            elif bad_utf8 is None:
                if not seen_text:
                    raise FormatError(self.source, "file", "empty file")
                try:
                    parser.close()
                except ET.ParseError as err:  # truncated XML: an element left open
                    raise self.malformed(err) from err
            yield from self.events(parser)
            if bad_utf8 is not None:
                raise FormatError(self.source, f"{self.where()}, line {bad_utf8[0]}", bad_utf8[1])
            if not chunk:
                return

    def events(self, parser: ET.XMLPullParser) -> Iterator[PubmedItem]:
        try:
            for event, el in parser.read_events():
                if event == "start":
                    self.depth += 1
                    if self.root is None:
                        self.root = el
                        if el.tag != ROOT:
                            raise FormatError(self.source, "line 1", f"root element is <{el.tag}>, not <{ROOT}>")
                    elif self.depth == 2:
                        self.ordinal += 1
                        self.pmid = ""
                    continue
                # the record's own PMID: MedlineCitation's or BookDocument's (depth 4), DeleteCitation's (3)
                if el.tag == "PMID" and self.depth in (3, 4) and not self.pmid:
                    self.pmid = (el.text or "").strip()
                elif self.depth == 2:
                    yield from self.record(el)
                    self.root.clear()  # drops the finished article: memory stays at one article
                self.depth -= 1
        except ET.ParseError as err:
            raise self.malformed(err) from err

    def malformed(self, err: ET.ParseError) -> FormatError:
        line, col = err.position
        return FormatError(self.source, f"{self.where()}, line {line}, column {col}", f"malformed XML: {err}")


def iter_pubmed_xml(path: str, opener: Opener | None = None) -> Iterator[PubmedItem]:
    """Documents, DeletedDocuments and DeadLetters of one PubMed XML file (gzip sniffed from its bytes)."""
    reader = _Reader(str(path))
    try:
        stream = open_binary(str(path), opener)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:  # a gzip that fails its checksum gives no document
        raise FormatError(str(path), "file", f"truncated or corrupt gzip stream: {err}") from err
    with stream:
        yield from reader.read(stream)


def read_pubmed_xml(path: str, opener: Opener | None = None) -> list[PubmedItem]:
    return list(iter_pubmed_xml(path, opener))
