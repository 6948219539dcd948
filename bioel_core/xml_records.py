"""The records of an XML record file, cut out of its bytes at their tags so that each is parsed on its own and a bad
one costs only itself.

A record file is one root element (the set) whose children are records of known kinds, as NLM writes its dumps
(`<DescriptorRecordSet>` of `<DescriptorRecord>`, `<PubmedArticleSet>` of `<PubmedArticle>`, BioC's `<collection>` of
`<document>`, whose header elements are records that may also stand inside one). `XmlRecords.read`
skips the prolog (the XML declaration, comments, processing instructions and a DOCTYPE with its internal subset,
which is never given to a parser: an entity it declares is never resolved nor expanded, so a record that uses one
fails to parse as an undefined entity), checks the root element, then yields each record as a `Record`: its bytes
from its start tag to its end tag, its ordinal, line, column and offset. Comments, CDATA sections and processing
instructions are skipped as XML does when looking for a record's end: an end tag inside one is no boundary.
`parse_record` parses a record (expat, UTF-8) or raises `RecordError` with the parser's message and the file's line
and column.

What cannot be a record comes out as one `Fault`, and the cutting goes on after it:
- a record not closed before the next record starts or the root's end tag: the record, up to there (with the first
  fault its parser names, `Fault.error`);
- a record longer than `max_record_bytes`: the record, never held whole (its first bytes are kept);
- anything between records other than whitespace, comments and processing instructions (text, a stray end tag,
  an element of another kind): all of it, up to the next record or the root's end tag.
Where the cutting cannot resynchronise, the rest of the file is one Fault marked `unread`, whose reason
(`records.unread_rest_reason`) says how many bytes and lines were not read and why: a file that ends inside a record,
a comment or a CDATA section, or before the root's end tag (truncated), content after the root's end tag, a corrupt
compressed stream, and before any record a missing or foreign root element or a declared encoding that does not write
markup as ASCII does (UTF-16; ISO-8859-n and windows-125x are read, each record decoded as declared). An empty file is a Fault that loses nothing.

Memory holds one record (at most `max_record_bytes`) and a read chunk. A range of an uncompressed file (a
`FileRange` from `split_records`, which cuts at record starts with this same cutting) yields exactly what the whole
file's reading yields for the records that start in it.
"""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from bioel_core.kb import io as kb_io
from bioel_core.kb.io import UTF8_BOM, FileRange, Input, Opener, input_path, is_gzip, open_binary, open_raw
from bioel_core.records import unread_rest_reason

CHUNK = 1 << 16
# far beyond any NLM record (a MeSH descriptor is ~10 KB, a PubMed article rarely 1 MB): guards workers' memory
MAX_RECORD_BYTES = 64 << 20
RAW_BYTES = 2000  # of a fault's bytes, what its Fault keeps (a dead letter's raw)

_NAME = rb"[A-Za-z_:][\w.:-]*"
_END_SPACE = rb"\s{0,64}"  # before an end tag's ">": bounded, so that a token cut by a chunk's end is never longer
_START_TAG_BYTES = 1 << 16  # a record's start tag is a few attributes at most
_ELEMENT = re.compile(rb"<(" + _NAME + rb")")
_START_TAG = re.compile(rb"<" + _NAME + rb"""(?:\s+[^\s=/>]+\s*=\s*(?:"[^"<]*"|'[^'<]*'))*\s*/?>""")
_SPACE = re.compile(rb"[ \t\r\n]*")
_DECLARATION = re.compile(rb"<\?xml[\s?]")
_ENCODING = re.compile(rb"""encoding\s*=\s*["']([A-Za-z][\w.-]*)["']""")
UTF8_NAMES = {"utf-8", "utf8", "us-ascii", "ascii"}  # ASCII is UTF-8
# what XML skips when looking for markup: the opening, the closing and what to call it in a message
_SKIPPED = {b"<!--": (b"-->", "a comment"), b"<![CDATA[": (b"]]>", "a CDATA section"), b"<?": (b"?>", "a processing instruction")}
# in a DOCTYPE, what can hide its closing `>`: an internal subset's brackets, quoted literals, comments, PIs
_DOCTYPE_MARK = re.compile(rb"""<!--|<\?|["'\[\]>]""")
_AT = re.compile(r": line \d+, column \d+$")


@dataclass(frozen=True)
class Record:
    """One record's bytes, from its start tag to its end tag (both included)."""

    tag: str
    ordinal: int  # the first record of the file is 1
    line: int  # the file line its start tag is on
    column: int  # the byte column of its start tag on that line
    offset: int
    data: bytes
    encoding: str = "utf-8"  # the file's declared encoding (ASCII-compatible, so its tags were cut as bytes)


@dataclass(frozen=True)
class Fault:
    """Input that yields no record. `scope`: "record" (it is record `record`, a `tag` element), "between" (it lies
    between records, after `after` of them) or "file" (before the root element's start tag). `data`: its first
    RAW_BYTES bytes. `unread`: it is the rest of the file, which could not be read (its reason says how much and why)."""

    reason: str
    scope: str
    line: int
    data: bytes
    record: int = 0
    tag: str = ""
    after: int = 0
    unread: bool = False
    offset: int = 0
    column: int = 0
    # of a record not closed: the first fault its parser names, in the file's terms (an exception: equal only to itself)
    error: RecordError | None = field(default=None, compare=False)


def _lines(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first}-{last}"


class RecordError(ValueError):
    """A record the parser refuses: its message, and the line and column of the fault in the file."""

    def __init__(self, message: str, line: int, column: int):
        super().__init__(f"{message}: line {line}, column {column}")
        self.message, self.line, self.column = message, line, column


def parse_record(record: Record) -> ET.Element:
    """The record's element (decoded as its file declares; no DTD is in scope, so only XML's five entities exist),
    or RecordError in the file's terms."""
    # a declaration on the record's first line, without a line break: the parser's lines stay the file's
    declaration = b"" if record.encoding in UTF8_NAMES else f'<?xml version="1.0" encoding="{record.encoding}"?>'.encode()
    try:
        return ET.fromstring(declaration + record.data)
    except ET.ParseError as err:
        row, column = err.position
        # the parser counts from the record's start, which is `record.column` bytes into its first line
        first_line = record.column - len(declaration)
        raise RecordError(_AT.sub("", str(err)), record.line + row - 1, column + (first_line if row == 1 else 0)) from None


def ascii_compatible(encoding: str) -> bool:
    """Whether `encoding` writes markup as ASCII does (ISO-8859-n, windows-125x, ...): then records can be cut as bytes."""
    probe = "<>/=\"'!?[]-: \n\tazAZ09_."
    try:
        return probe.encode(encoding) == probe.encode("ascii")
    except (LookupError, UnicodeError):
        return False


class _StreamBroken(Exception):
    """A compressed stream that fails to decompress part way."""


class XmlRecords:
    """Cuts the records out of one file; `roots` maps each root element it may have to the record kinds its children
    are (a child of another kind is a Fault). `headers`: kinds of children that are yielded as records too but may
    also stand inside a record (BioC's <infon>), so that one never ends a record that is not closed."""

    def __init__(self, roots: Mapping[str, Sequence[str]], max_record_bytes: int = MAX_RECORD_BYTES, headers: Sequence[str] = ()):
        self.roots, self.max_record_bytes, self.headers = dict(roots), max_record_bytes, tuple(headers)
        self.data = bytearray()  # unread bytes; data[0] is at `offset` of the file, on `line`, at `column`
        self.offset, self.line, self.column = 0, 1, 0
        self.encoding = "utf-8"  # as the XML declaration names it
        self.eof = False
        self.ordinal = 0  # records started
        self.root = ""  # the root element's name, once read
        self.empty = False  # the root is an empty set, <Set/>
        self._head: bytes | None = None  # the first bytes of a piece whose bytes were dropped (too long)

    # ---- bytes in ----------------------------------------------------------------------------------------

    def _more(self) -> bool:
        """Appends a chunk to the buffer; False at the end of the stream."""
        if self.eof:
            return False
        try:
            chunk = self._read(CHUNK)
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise _StreamBroken(str(err)) from err
        self.eof = not chunk
        self.data += chunk
        return bool(chunk)

    def _fill(self, n: int) -> None:
        while len(self.data) < n and self._more():
            pass

    def _consume(self, n: int) -> bytes:
        taken = bytes(self.data[:n])
        del self.data[:n]
        newline = taken.rfind(b"\n")
        if newline >= 0:
            self.line += taken.count(b"\n")
            self.column = n - newline - 1
        else:
            self.column += n
        self.offset += n
        return taken

    def _peek(self) -> bytes:
        """The buffer's first RAW_BYTES bytes, read as needed."""
        self._fill(RAW_BYTES)
        return bytes(self.data[:RAW_BYTES])

    def _skip_space(self) -> None:
        while True:
            self._consume(_SPACE.match(self.data).end())
            if self.data or not self._more():
                return

    def _drop(self, pos: int) -> int:
        """Past max_record_bytes buffered, drops the piece's bytes before `pos` (keeping its first RAW_BYTES in
        `_head`); the position `pos` then has."""
        if len(self.data) <= self.max_record_bytes or pos == 0:
            return pos
        taken = self._consume(pos)
        if self._head is None:
            self._head = taken[:RAW_BYTES]
        return 0

    def _skip(self, close: bytes, pos: int) -> bool:
        """Consumes through the first `close` at or after `pos` (a comment's or PI's bytes are never needed, so a long
        one is dropped as it is read); False when the stream ends first."""
        while (at := self.data.find(close, pos)) < 0:
            self._consume(max(pos, len(self.data) - len(close) + 1))
            pos = 0
            if not self._more():
                return False
        self._consume(at + len(close))
        return True

    def _scan(self, pattern: re.Pattern, pos: int) -> tuple[str, int, str]:
        """The first match of `pattern`'s "end" or "next" group at or after `pos` outside comments, CDATA sections and
        processing instructions: ("end", the index after it) or ("next", its index); ("eof", -1, what it ended
        inside, "" when in none) when the stream ends first."""
        while True:
            m = pattern.search(self.data, pos)
            if m is None:  # a token cut by the chunk's end starts in its last _token_max bytes
                pos = self._drop(max(pos, len(self.data) - self._token_max))
                if not self._more():
                    return "eof", -1, ""
                continue
            if m.lastgroup != "skip":
                return m.lastgroup, m.end() if m.lastgroup == "end" else m.start(), ""
            close, name = _SKIPPED[bytes(m.group())]
            opened = self.line + self.data.count(b"\n", 0, m.start())
            pos = m.end()
            while (at := self.data.find(close, pos)) < 0:
                pos = self._drop(max(pos, len(self.data) - len(close) + 1))
                if not self._more():
                    return "eof", -1, f"{name} opened on line {opened}"
            pos = at + len(close)

    def _start_tag_end(self) -> int | None:
        """The index after the well-formed start tag that begins the buffer; None when it is malformed."""
        while True:
            m = _START_TAG.match(self.data)
            if m is not None:
                return m.end()
            if self.data.find(b"<", 1) >= 0 or len(self.data) > _START_TAG_BYTES or not self._more():
                return None

    def _rest(self, why: str, scope: str, offset: int, line: int, head: bytes, record: int = 0, tag: str = "") -> Fault:
        """The rest of the file from `offset` (on `line`) as one unread Fault: read to the end, counted, not held."""
        column = self.column if offset == self.offset else 0
        while self.data or self._more():
            self._consume(len(self.data))
        size = self.offset - offset
        lines = self.line - line + (1 if self.column else 0) if size else 0
        return Fault(
            unread_rest_reason(why, line, size, lines),
            scope,
            line,
            head[:RAW_BYTES],
            record=record,
            tag=tag,
            after=record - 1 if record else self.ordinal,
            unread=True,
            offset=offset,
            column=column,
        )

    # ---- the file ------------------------------------------------------------------------------------------

    def read(self, stream: BinaryIO, piece: FileRange | None = None) -> Iterator[Record | Fault]:
        """The records and faults of `stream`, or of `piece` of it (an uncompressed, seekable file): the file's prolog
        is read, then the records that start in [piece.start, piece.end)."""
        # read1: a buffered read(n) would hold back the bytes decompressed before a corrupt gzip's fault
        self._read = getattr(stream, "read1", stream.read)
        try:
            fault = self._prolog()
            if fault is not None:
                yield fault
                return
            if self.empty:  # <Set/>
                yield from self._after_root()
                return
            if piece is not None and piece.start:
                stream.seek(piece.start)
                self.data, self.eof = bytearray(), False
                self.offset, self.line, self.column, self.ordinal = (
                    piece.start,
                    piece.first_line,
                    piece.first_column,
                    piece.first_record,
                )
            yield from self._records(piece.end if piece is not None else None)
        except _StreamBroken as err:
            yield Fault(
                unread_rest_reason(f"truncated or corrupt gzip stream: {err}", self.line),
                "between",
                self.line,
                b"",
                after=self.ordinal,
                unread=True,
                offset=self.offset,
            )

    def _prolog(self) -> Fault | None:
        """Skips what precedes the root element and reads its start tag (self.root, self.empty); a Fault when there
        is no root element to read."""
        self._more()
        if self.data.startswith(UTF8_BOM):
            self._consume(len(UTF8_BOM))
        first = True  # nothing but whitespace read yet
        while True:
            self._skip_space()
            self._fill(len(b"<!DOCTYPE"))
            offset, line, head = self.offset, self.line, self._peek()
            if not self.data:  # whitespace only loses nothing; a prolog with no element may have lost its records
                return Fault("empty file", "file", 1, b"") if first else self._rest("no root element", "file", 0, 1, b"")
            if first and _DECLARATION.match(self.data):
                self._fill(1024)
                m = _ENCODING.search(self.data, 0, max(self.data.find(b"?>"), 0))
                declared = m.group(1).decode().lower() if m is not None else "utf-8"
                if declared not in UTF8_NAMES and not ascii_compatible(declared):
                    return self._rest(
                        f"the file declares encoding {declared!r}, which does not write markup as ASCII "
                        "does; records are cut as bytes",
                        "file",
                        offset,
                        line,
                        head,
                    )
                self.encoding = declared
            first = False
            opening = next((o for o in (b"<!--", b"<?") if self.data.startswith(o)), None)
            if opening is not None:
                close, name = _SKIPPED[opening]
                if not self._skip(close, len(opening)):
                    return self._rest(f"the file ends inside {name} before the root element", "file", offset, line, head)
            elif self.data.startswith(b"<!DOCTYPE"):
                if not self._skip_doctype():
                    return self._rest("the file ends inside its DOCTYPE", "file", offset, line, head)
            else:
                break
        m = _ELEMENT.match(self.data)
        if m is None:
            return self._rest("no root element: the file does not start with an XML element", "file", 0, 1, head)
        name = m.group(1).decode("utf-8", "replace")
        if name not in self.roots:
            expected = " or ".join(f"<{root}>" for root in self.roots)
            return self._rest(f"root element is <{name}>, not {expected}", "file", 0, 1, head)
        end = self._start_tag_end()
        if end is None:
            return self._rest(f"malformed XML: the <{name}> start tag on line {line} is not well formed", "file", 0, 1, head)
        self.root, self.empty = name, self._consume(end).endswith(b"/>")
        self._compile(name)
        return None

    def _skip_doctype(self) -> bool:
        """Consumes the DOCTYPE that begins the buffer, whose closing `>` is the first one outside its internal
        subset, quoted literals, comments and PIs; False when the stream ends first."""
        pos, in_subset = len(b"<!DOCTYPE"), False
        while True:
            m = _DOCTYPE_MARK.search(self.data, pos)
            if m is None:
                self._consume(max(pos, len(self.data) - 3))  # "<!-" cut by the chunk's end is kept
                pos = 0
                if not self._more():
                    return False
                continue
            mark = bytes(m.group())
            if mark == b">" and not in_subset:
                self._consume(m.end())
                return True
            if mark in (b"[", b"]"):
                in_subset, pos = mark == b"[", m.end()
            elif mark != b">":
                close = _SKIPPED[mark][0] if mark in _SKIPPED else mark  # a literal ends at its own quote
                self._consume(m.start())
                if not self._skip(close, len(mark)):
                    return False
                pos = 0
            else:
                pos = m.end()

    def _compile(self, root: str) -> None:
        kinds = self.roots[root]
        names = b"|".join(re.escape(k.encode()) for k in kinds)
        self._kind_start = re.compile(rb"<(" + b"|".join(re.escape(k.encode()) for k in (*kinds, *self.headers)) + rb")[\s>/]")
        root_end = rb"/" + re.escape(root.encode()) + _END_SPACE + rb">"
        self._root_end = re.compile(rb"<" + root_end)
        # every scan starts with its literal "<", which lets `re` skip to each "<" at memchr speed
        skip, start = rb"(?P<skip>!--|!\[CDATA\[|\?)", rb"(?:" + names + rb")[\s>/]"
        # a record ends at its end tag, or (not closed) where the next record starts or the root ends
        self._record_scan = {
            kind: re.compile(
                rb"<(?:"
                + skip
                + rb"|(?P<end>/"
                + re.escape(kind.encode())
                + _END_SPACE
                + rb">)|(?P<next>"
                + start
                + rb"|"
                + root_end
                + rb"))"
            )
            for kind in (*kinds, *self.headers)
        }
        self._junk_scan = re.compile(rb"<(?:" + skip + rb"|(?P<next>" + self._kind_start.pattern[1:] + rb"|" + root_end + rb"))")
        self._kinds = " or ".join(f"<{k}>" for k in kinds)
        # the longest token the scans look for: one cut by a chunk's end starts in the buffer's last this many bytes
        self._token_max = max(len(b"<![CDATA["), len(root) + 67, *(len(k) + 67 for k in (*kinds, *self.headers)))

    # ---- the records -----------------------------------------------------------------------------------------

    def _records(self, stop_at: int | None) -> Iterator[Record | Fault]:
        while True:
            self._skip_space()
            if stop_at is not None and self.offset >= stop_at:  # the next range's first record starts here
                return
            if not self.data:
                yield self._rest(f"the file ends before </{self.root}> (truncated?)", "between", self.offset, self.line, b"")
                return
            self._fill(self._token_max)
            opening = next((o for o in (b"<!--", b"<?") if self.data.startswith(o)), None)
            if opening is not None:
                close, name = _SKIPPED[opening]
                offset, line, head = self.offset, self.line, self._peek()
                if not self._skip(close, len(opening)):
                    yield self._rest(f"the file ends inside {name} (truncated?)", "between", offset, line, head)
                    return
                continue
            if (m := self._root_end.match(self.data)) is not None:
                self._consume(m.end())
                yield from self._after_root()
                return
            m = self._kind_start.match(self.data)
            go_on = yield from (self._record(m.group(1).decode()) if m else self._junk())
            if not go_on:
                return

    def _record(self, kind: str) -> Iterator[Record | Fault]:
        """The record that starts the buffer, or its Fault; returns False when the file ends inside it."""
        self.ordinal += 1
        offset, line, column, self._head = self.offset, self.line, self.column, None
        end = self._start_tag_end()
        if end is not None and self.data[end - 2 : end] == b"/>":  # <Record .../>
            yield Record(kind, self.ordinal, line, column, offset, self._consume(end), self.encoding)
            return True
        how, at, inside = self._scan(self._record_scan[kind], end or len(kind) + 1)
        if how == "eof":
            head = self._head if self._head is not None else bytes(self.data[:RAW_BYTES])
            why = f"the file ends inside {inside or 'the record'} (truncated?)"
            if not inside and self._head is None:  # the parser names what is left open
                try:
                    parse_record(Record(kind, self.ordinal, line, column, offset, bytes(self.data), self.encoding))
                except RecordError as err:
                    why += f": {err}"
            yield self._rest(why, "record", offset, line, head, record=self.ordinal, tag=kind)
            return False
        size = self.offset + at - offset
        data = self._consume(at)
        head = self._head if self._head is not None else data[:RAW_BYTES]
        if how == "next":
            before = f"</{self.root}>" if self.data.startswith(b"</") else "the next record starts"
            error = None
            if self._head is None:
                try:
                    parse_record(Record(kind, self.ordinal, line, column, offset, data, self.encoding))
                except RecordError as err:
                    error = err
            yield Fault(
                f"malformed XML: <{kind}> on line {line} is not closed before {before} on line {self.line}",
                "record",
                line,
                head,
                record=self.ordinal,
                tag=kind,
                offset=offset,
                column=column,
                error=error,
            )
        elif self._head is not None or size > self.max_record_bytes:
            yield Fault(
                f"record longer than {self.max_record_bytes:,} bytes ({size:,} bytes on {_lines(line, self.line)}): not parsed",
                "record",
                line,
                head,
                record=self.ordinal,
                tag=kind,
                offset=offset,
                column=column,
            )
        else:
            yield Record(kind, self.ordinal, line, column, offset, data, self.encoding)
        return True

    def _junk(self) -> Iterator[Fault]:
        """What lies between records up to the next record or the root's end tag, as one Fault; returns False when the
        file ends first."""
        offset, line, column, self._head = self.offset, self.line, self.column, None
        how, at, inside = self._scan(self._junk_scan, 0)  # neither a record nor the root's end starts here
        head = self._head if self._head is not None else bytes(self.data[: min(RAW_BYTES, len(self.data) if at < 0 else at)])
        if how == "eof":
            why = f"the file ends inside {inside}" if inside else f"the file ends before </{self.root}>"
            yield self._rest(
                f"{why} (truncated?), after text or markup that is no {self._kinds} record", "between", offset, line, head
            )
            return False
        size = self.offset + at - offset
        end_line = self.line + self.data.count(b"\n", 0, max(at - 1, 0))  # of its last byte
        self._consume(at)
        yield Fault(
            f"not a {self._kinds} record: {size:,} bytes of text or markup between records on {_lines(line, end_line)}",
            "between",
            line,
            head,
            after=self.ordinal,
            offset=offset,
            column=column,
        )
        return True

    def _after_root(self) -> Iterator[Fault]:
        """After the root element only whitespace, comments and PIs may follow; anything else (a second document
        appended, records after the end tag) is the unread rest of the file."""
        while True:
            self._skip_space()
            if not self.data:
                return
            offset, line, head = self.offset, self.line, self._peek()
            opening = next((o for o in (b"<!--", b"<?") if self.data.startswith(o)), None)
            if opening is None:
                yield self._rest(f"content after the root element <{self.root}>", "between", offset, line, head)
                return
            close, name = _SKIPPED[opening]
            if not self._skip(close, len(opening)):
                yield self._rest(f"the file ends inside {name} (truncated?)", "between", offset, line, head)
                return


def read_records(
    item: Input, roots: Mapping[str, Sequence[str]], opener: Opener | None = None, headers: Sequence[str] = ()
) -> Iterator[Record | Fault]:
    """The records and faults of a whole file (gzip sniffed from its bytes) or of a FileRange from `split_records`.
    Opening a gzip that fails its check raises what kb.io.open_binary raises (the caller's policy decides)."""
    path = input_path(item)
    if isinstance(item, FileRange):
        with open_raw(path, opener) as stream:
            yield from XmlRecords(roots, headers=headers).read(stream, item)
        return
    with open_binary(path, opener) as stream:
        yield from XmlRecords(roots, headers=headers).read(stream)


def split_records(path: str, roots: Mapping[str, Sequence[str]], opener: Opener | None = None) -> list[Input]:
    """`path` cut at record starts into FileRanges of about kb.io's SPLIT_BYTES, skimmed once with the same cutting
    (no parsing); [path] for a small or gzipped file (gzip cannot be entered in the middle) and for one whose rest
    cannot be read (the whole-file read reports it where it is)."""
    target = kb_io.SPLIT_BYTES
    with open_raw(path, opener) as fh:
        size = fh.seek(0, 2)
        fh.seek(0)
        if size <= target or is_gzip(fh):
            return [path]
        cuts, next_cut = [], target
        for piece in XmlRecords(roots).read(fh):
            if isinstance(piece, Fault) and piece.unread:
                return [path]
            starts_record = isinstance(piece, Record) or piece.scope == "record"
            if starts_record and piece.offset >= next_cut:
                ordinal = piece.ordinal if isinstance(piece, Record) else piece.record
                cuts.append((piece.offset, piece.line, piece.column, ordinal - 1))
                next_cut = piece.offset + target
    starts = [(0, 1, 0, 0), *cuts]
    return (
        [path]
        if len(starts) == 1
        else [
            FileRange(path, offset, starts[i + 1][0] if i + 1 < len(starts) else None, line, ordinal, column)
            for i, (offset, line, column, ordinal) in enumerate(starts)
        ]
    )
