"""The records of an XML file (the child elements of its root element), cut out of its byte stream one by one so
each is parsed on its own and a damaged one costs itself alone.

The cut reads only the markup that text can never hold: a `<` that starts a tag. It steps over comments, CDATA
sections and processing instructions as XML does (an end tag inside one is text, not the record's end), and never
reads the DOCTYPE's declarations: no entity that a DTD declares is expanded or fetched (an external entity or an
entity bomb is an undefined entity to the record's parser: a dead letter of that record).

`XmlRecords(stream, source, roots, record_tags)` yields a `Piece` per child of the root, in file order: a record (its
tag; its bytes from its start tag's `<` through its end tag's `>`; its line and column), or what lies between the
records and is none (text, a stray end tag, a record cut short), with its fault. A record ends at its end tag, or
(unclosed) where a record of `record_tags` or of its own tag starts again or where the root's end tag stands. A
comment, CDATA section or processing instruction that never ends is read as text (the record's parser then names
it), so a stray `<!--` costs its record only (memory then holds the rest of the file, searched for its end).

A fault after which the file cannot be cut again ends it, saying how many bytes and lines were not read: a stream
that ends inside a record is that record's last piece, with its fault; an empty file, a prolog without a root
element or with another root than `roots`, an encoding that is not ASCII-compatible (records are cut as bytes), a
stream that ends before the root's end tag, and content after it raise FormatError naming the line. `encoding` is the one the XML declaration names (default UTF-8), for the
caller to decode records with. Memory holds one record.
"""

from __future__ import annotations

import codecs
import gzip
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from bioel_core.corpora.intake import not_read
from bioel_core.corpora.records import FormatError
from bioel_core.kb.io import UTF8_BOM

CHUNK = 1 << 16
_NAME = re.compile(rb"[A-Za-z_:][\w.:-]*")
_SPACE = re.compile(rb"\s*")
_ENCODING = re.compile(rb"""\sencoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
_START_TAG_END = re.compile(rb"""(?:[^<>"']|"[^"<]*"|'[^'<]*')*>""")  # a start tag's rest: attributes hold no '<'
_DOCTYPE_TOKEN = re.compile(rb"""<!--.*?-->|"[^"]*"|'[^']*'|[\[\]>]""", re.S)
_MARKUP_ENDS = ((b"<!--", b"-->"), (b"<![CDATA[", b"]]>"), (b"<?", b"?>"))
_AT = re.compile(r": line \d+, column \d+$")


def parse_error_message(err: ET.ParseError) -> str:
    """The parser's message without its position, which counts from the record's start (`Piece.position` gives it in
    file terms)."""
    return _AT.sub("", str(err))


@dataclass(frozen=True)
class Piece:
    """A child of the root: a record to parse (`fault` ''), or something that is none, and why."""

    raw: bytes
    line: int
    column: int  # of its first byte on its line, from 0 (as expat counts)
    tag: str = ""  # the element's name; '' for what is no element (text, a stray end tag)
    fault: str = ""  # why the markup is malformed here, e.g. "<document> is not closed before </collection>"

    def position(self, row: int, column: int) -> str:
        """A parser's (row, column) in this piece's bytes as the file's line and column."""
        return f"line {self.line + row - 1}, column {column + (self.column if row == 1 else 0)}"


class XmlRecords:
    def __init__(self, stream: BinaryIO, source: str, roots: tuple[str, ...], record_tags: tuple[str, ...]):
        # read1: a buffered read(n) would drop the bytes decompressed before a truncated gzip stream's end
        self._read = getattr(stream, "read1", stream.read)
        self.source, self.roots, self.record_tags = source, roots, record_tags
        self.root = ""
        self.encoding = "utf-8"
        self.buf = bytearray()  # unread bytes (appended to in place); buf[0] is byte `offset`, on line `line`
        self.offset, self.line, self.line_start = 0, 1, 0
        self.eof = False
        self.cut_short = False  # the stream ended inside a record

    # ---- bytes in -------------------------------------------------------------------------------------

    def _more(self) -> bool:
        if self.eof:
            return False
        try:
            chunk = self._read(CHUNK)
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise FormatError(self.source, f"line {self.line}", f"truncated or corrupt gzip stream: {err}") from err
        self.eof = not chunk
        self.buf += chunk
        return bool(chunk)

    def _ensure(self, n: int) -> bool:
        """Whether `n` bytes are buffered, reading on as needed."""
        while len(self.buf) < n and self._more():
            pass
        return len(self.buf) >= n

    def _find(self, needle: bytes, start: int) -> int:
        """Index of `needle` at or after `start`, reading on as needed; -1 at the end of the stream."""
        while True:
            at = self.buf.find(needle, start)
            if at >= 0:
                return at
            start = max(start, len(self.buf) - len(needle) + 1)
            if not self._more():
                return -1

    def _consume(self, n: int) -> tuple[bytes, int, int]:
        """The next `n` bytes, with the line and column they start at."""
        taken, line, column = bytes(self.buf[:n]), self.line, self.offset - self.line_start
        del self.buf[:n]
        newlines = taken.count(b"\n")
        if newlines:
            self.line += newlines
            self.line_start = self.offset + taken.rindex(b"\n") + 1
        self.offset += n
        return taken, line, column

    def _skip_space(self) -> None:
        while True:
            self._consume(_SPACE.match(self.buf).end())
            if self.buf or not self._more():
                return

    def _name_at(self, at: int) -> bytes | None:
        self._ensure(at + 256)
        m = _NAME.match(self.buf, at)
        return m.group() if m else None

    def _markup_end(self, at: int) -> int:
        """For a comment, CDATA section or processing instruction at `at`: the index past its end; -1 for none
        there, or for one that never ends (read as text)."""
        self._ensure(at + 9)
        for opening, close in _MARKUP_ENDS:
            if self.buf.startswith(opening, at):
                end = self._find(close, at + len(opening))
                return end + len(close) if end >= 0 else -1
        return -1

    def _unread(self, reason: str) -> str:
        """`reason`, for a fault that ends the file here, with how much of it (the buffer on) was not read."""
        size, newlines, last = len(self.buf), self.buf.count(b"\n"), self.buf[-1:]
        try:
            while not self.eof and (chunk := self._read(CHUNK)):
                size, newlines, last = size + len(chunk), newlines + chunk.count(b"\n"), chunk[-1:]
        except (EOFError, gzip.BadGzipFile, zlib.error):
            reason += " (and the gzip stream is cut)"
        self.eof = True
        return reason + not_read(size, newlines + (1 if last and last != b"\n" else 0), self.line)

    def _ends_file(self, reason: str) -> FormatError:
        return FormatError(self.source, f"line {self.line}", self._unread(reason))

    # ---- the file -------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Piece]:
        if not self._prolog():
            return
        while not self.cut_short:
            self._skip_space()
            if not self.buf:
                raise FormatError(self.source, f"line {self.line}", f"malformed XML: the file ends before </{self.root}> (truncated?)")
            if self.buf.startswith(b"</"):
                end = self._find(b">", 2)
                if end >= 0 and self._name_at(2) == self.root.encode() and not self.buf[2 + len(self.root):end].strip():
                    self._consume(end + 1)
                    self._after_root()
                    return
                raw, line, column = self._consume(end + 1 if end >= 0 else len(self.buf))
                yield Piece(raw, line, column, fault=f"stray end tag in <{self.root}>")
            elif self.buf.startswith((b"<!--", b"<?")) and (end := self._markup_end(0)) >= 0:
                self._consume(end)
            elif self.buf.startswith(b"<") and self._name_at(1):
                yield self._record()
            else:  # text, a CDATA section, a declaration: character data the root holds outside any record
                end = self._markup_end(0)
                if end < 0:
                    end = self._find(b"<", 1)
                raw, line, column = self._consume(end if end >= 0 else len(self.buf))
                yield Piece(raw, line, column, fault=f"text outside any record of <{self.root}>")

    def _prolog(self) -> bool:
        """Reads up to the root's start tag past the XML declaration, DOCTYPE, comments and processing instructions;
        False for an empty root (`<collection/>`)."""
        self._ensure(len(UTF8_BOM))
        if self.buf.startswith(UTF8_BOM):
            self._consume(len(UTF8_BOM))
        seen = False
        while True:
            self._skip_space()
            if not self.buf:
                raise FormatError(self.source, "file", "malformed XML: no root element" if seen else "empty file")
            seen = True
            if self.buf.startswith(b"<?xml") and self._ensure(6) and self.buf[5:6].isspace():
                end = self._find(b"?>", 0)
                if end < 0:
                    raise self._ends_file("malformed XML: the XML declaration never ends")
                self._declared_encoding(self.buf[:end])
                self._consume(end + 2)
            elif self.buf.startswith((b"<!--", b"<?")):
                end = self._markup_end(0)
                if end < 0:
                    raise self._ends_file("malformed XML: a comment or processing instruction never ends")
                self._consume(end)
            elif self.buf.startswith(b"<!DOCTYPE"):
                self._consume(self._doctype_end())
            else:
                break
        name = self._name_at(1) if self.buf.startswith(b"<") else None
        if name is None or name.decode("ascii", "replace") not in self.roots:
            shown = f"<{name.decode('utf-8', 'replace')}>" if name else f"{self.buf[:20].decode('utf-8', 'replace')!r}"
            raise self._ends_file(f"root element is {shown}, not {' or '.join(f'<{r}>' for r in self.roots)}")
        self.root = name.decode("ascii")
        tag_end = self._start_tag_end(1 + len(name))
        if tag_end < 0:
            raise self._ends_file(f"malformed XML: the start tag <{self.root}> never ends")
        tag, _, _ = self._consume(tag_end)
        return not tag.endswith(b"/>")

    def _declared_encoding(self, declaration: bytes) -> None:
        m = _ENCODING.search(declaration)
        if not m:
            return
        name = m.group(1).decode("ascii")
        try:
            codecs.lookup(name)
            ascii_compatible = "<>/?![]-\n".encode(name) == b"<>/?![]-\n"
        except (LookupError, UnicodeError):
            ascii_compatible = False
        if not ascii_compatible:
            raise self._ends_file(f"encoding {name!r} is not read (UTF-8 or another encoding that writes ASCII as ASCII)")
        self.encoding = name

    def _doctype_end(self) -> int:
        """Index past the DOCTYPE at the buffer's start (its internal subset skipped, never read)."""
        while True:
            subset = False
            for m in _DOCTYPE_TOKEN.finditer(self.buf):
                token = m.group()
                if token == b"[":
                    subset = True
                elif token == b"]":
                    subset = False
                elif token == b">" and not subset:
                    return m.end()
            if not self._more():
                raise self._ends_file("malformed XML: the DOCTYPE never ends")

    def _start_tag_end(self, at: int) -> int:
        """Index past the start tag whose attributes begin at `at`; -1 when no '>' ends it before the next '<'."""
        while True:
            m = _START_TAG_END.match(self.buf, at)
            if m:
                return m.end()
            if self.buf.find(b"<", at) >= 0 or not self._more():
                return -1

    def _after_root(self) -> None:
        """Only white space, comments and processing instructions may follow the root."""
        while True:
            self._skip_space()
            if not self.buf:
                return
            end = self._markup_end(0) if self.buf.startswith((b"<!--", b"<?")) else -1
            if end < 0:
                raise self._ends_file(f"malformed XML: content after </{self.root}>")
            self._consume(end)

    # ---- one record -----------------------------------------------------------------------------------

    def _record(self) -> Piece:
        """The element starting the buffer: through its end tag, or (unclosed) up to the next record or the root's
        end, or (the stream ends inside it) the rest of the file, the last piece."""
        name = self._name_at(1)
        tag = name.decode("utf-8", "replace")
        scan = self._start_tag_end(1 + len(name))
        if scan >= 0 and self.buf[scan - 2:scan] == b"/>":
            return Piece(*self._consume(scan), tag=tag)
        scan = scan if scan >= 0 else 1 + len(name)
        next_record = {t.encode() for t in self.record_tags} | {name}
        while True:
            at = self._find(b"<", scan)
            if at < 0:
                fault = self._unread(f"the file ends inside <{tag}> (truncated?)")
                self.cut_short = True
                return Piece(*self._consume(len(self.buf)), tag=tag, fault=fault)
            end = self._markup_end(at)
            if end >= 0:  # a comment, CDATA section or processing instruction: its '<'s are text
                scan = end
                continue
            closing = self.buf.startswith(b"</", at)
            other = self._name_at(at + 2 if closing else at + 1)
            after = at + (2 if closing else 1) + len(other or b"")
            if closing and other == name:
                close = self._find(b">", after)
                if close >= 0 and not self.buf[after:close].strip():
                    return Piece(*self._consume(close + 1), tag=tag)
            elif closing and other == self.root.encode():
                return Piece(*self._consume(at), tag=tag, fault=f"<{tag}> is not closed before </{self.root}>")
            elif not closing and other in next_record and self._ensure(after + 1) and self.buf[after:after + 1] in b" \t\r\n/>":
                return Piece(*self._consume(at), tag=tag, fault=f"<{tag}> is not closed before the next record starts")
            scan = at + 1
