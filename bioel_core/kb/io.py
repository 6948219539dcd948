"""Streaming input helpers shared by the KB readers: gzip-transparent opening, per-line UTF-8 decoding and
the bookkeeping that lets every reader account for each input record (accepted, filtered or dead-lettered).
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

from bioel_core.records import DeadLetter, ReadStats

Opener = Callable[[str], BinaryIO]
GZIP_MAGIC = b"\x1f\x8b"
# What a compressed input that fails its checksum (CRC, length, truncation) contributes: one dead letter for the
# file and no record, because its decompressed bytes cannot be trusted. The manifests state it.
CORRUPT_INPUT_POLICY = "dead-letter-file"


def open_binary(path: str, opener: Opener | None = None) -> BinaryIO:
    """Open `path` for reading bytes, decompressing gzip when the file starts with the gzip magic number
    (so a misnamed file still works and a `.gz` that is not gzip is read as is)."""
    raw = (opener or (lambda p: open(p, "rb")))(path)
    head = raw.read(2)
    seekable = hasattr(raw, "seek") and raw.seekable()
    if seekable:
        raw.seek(0)
        stream: BinaryIO = raw
    else:  # e.g. a remote stream: re-prepend the two bytes
        stream = io.BufferedReader(_Prepended(head, raw))  # type: ignore[arg-type]
    if head != GZIP_MAGIC:
        return stream
    _verify_gzip(path, opener, stream, seekable)
    return gzip.GzipFile(fileobj=stream)


def _verify_gzip(path: str, opener: Opener | None, stream: BinaryIO, seekable: bool) -> None:
    """Decompress the whole gzip stream once and check its CRC and length before any record is read
    (CORRUPT_INPUT_POLICY): gzip checks them only at the end of a member, after every record was yielded.
    Raises what a broken stream raises (EOFError, gzip.BadGzipFile, zlib.error), which the readers dead-letter."""
    # a remote stream cannot rewind: verify from a second opening of the same path
    source = stream if seekable else (opener or (lambda p: open(p, "rb")))(path)
    try:
        with gzip.GzipFile(fileobj=source) as check:
            while check.read(1 << 20):
                pass
    except BaseException:
        stream.close()
        raise
    finally:
        if not seekable:
            source.close()
    if seekable:
        stream.seek(0)


UTF8_BOM = b"\xef\xbb\xbf"


def open_kb_file(path: str, opener: Opener | None = None) -> BinaryIO:
    """`open_binary` for KB dumps, past a UTF-8 byte-order mark: files saved by Windows tools start with one,
    which would otherwise stick to the first id or column name (a dead-lettered first record, an unrecognised
    header). Every KB reader opens its files here."""
    stream = open_binary(path, opener)
    if not hasattr(stream, "peek"):
        stream = io.BufferedReader(stream)  # type: ignore[arg-type]
    if stream.peek(3)[:3] == UTF8_BOM:
        stream.read(3)
    return stream


class _Prepended:
    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self._head:
            n = min(len(buf), len(self._head))
            buf[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._rest.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    @property
    def closed(self) -> bool:
        return False


class ReaderContext:
    """Counts for one input file; every record goes through exactly one of accept/filtered/dead."""

    def __init__(self, source: str):
        self.source = source
        self.stats = ReadStats(source=source)

    def accept(self) -> None:
        self.stats.records_read += 1
        self.stats.records_accepted += 1

    def filtered(self, reason: str) -> None:
        self.stats.records_read += 1
        self.stats.skip(reason)

    def dead(self, location: str, raw: str, reason: str) -> DeadLetter:
        self.stats.records_read += 1
        self.stats.dead_lettered += 1
        return DeadLetter(source=self.source, location=location, raw=raw[:2000], reason=reason)


def iter_lines(path: str, ctx: ReaderContext, opener: Opener | None = None) -> Iterator[tuple[int, str] | DeadLetter]:
    """Yield (line_number, text) for each line (newline stripped; a byte-order mark is skipped), or a DeadLetter
    (already counted) for a line that is not UTF-8, a truncated or corrupt gzip stream, or an empty file."""
    lineno = 0
    try:
        with open_kb_file(path, opener) as fh:
            for lineno, raw in enumerate(fh, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    yield ctx.dead(f"line {lineno}", raw.decode("utf-8", "replace"), f"invalid UTF-8: {err.reason} at byte {err.start}")
                    continue
                yield lineno, text.rstrip("\r\n")
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        yield ctx.dead(f"after line {lineno}" if lineno else "file", "", f"truncated or corrupt gzip stream: {err}")
        return
    if lineno == 0:
        yield ctx.dead("file", "", "empty file")


def parse_lines(path: str, ctx: ReaderContext, parse: Callable[[int, str], Iterator], opener: Opener | None = None) -> Iterator:
    """`parse(line_number, text)` over every non-blank decodable line of `path`; decoding dead letters pass
    through and blank lines are counted as filtered, so a reader's own code sees only lines with content."""
    for item in iter_lines(path, ctx, opener):
        if isinstance(item, DeadLetter):
            yield item
        elif not item[1].strip():
            ctx.filtered("blank line")
        else:
            yield from parse(*item)


def tsv_rows(path: str, ctx: ReaderContext, columns: list[str], header_name: str,
             opener: Opener | None = None) -> Iterator[tuple[int, str, dict[str, str]] | DeadLetter]:
    """(line number, line, {column: value}) for the data rows of a TSV file whose first line is `columns`.
    A different header is dead-lettered once (it usually means a wrong file) and reading goes on; a row with
    another column count is dead-lettered."""
    def parse(lineno: int, line: str):
        cols = line.split("\t")
        if lineno == 1:
            if cols != columns:
                yield ctx.dead("line 1", line, f"header is not the {header_name} header {columns}")
        elif len(cols) != len(columns):
            yield ctx.dead(f"line {lineno}", line, f"expected {len(columns)} tab-separated columns, found {len(cols)}")
        else:
            yield lineno, line, dict(zip(columns, cols))

    yield from parse_lines(path, ctx, parse, opener)
