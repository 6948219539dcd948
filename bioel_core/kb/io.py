"""Streaming input helpers shared by the KB readers: gzip-transparent opening, per-line UTF-8 decoding and
the bookkeeping that lets every reader account for each input record (accepted, filtered or dead-lettered).
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from bioel_core.records import DeadLetter, ReadStats

Opener = Callable[[str], BinaryIO]
GZIP_MAGIC = b"\x1f\x8b"
# What a compressed input that fails its checksum (CRC, length, truncation) contributes: one dead letter for the
# file and no record, because its decompressed bytes cannot be trusted. The manifests state it.
CORRUPT_INPUT_POLICY = "dead-letter-file"


def open_raw(path: str, opener: Opener | None = None) -> BinaryIO:
    """The file's bytes as stored (no decompression), through `opener` when given."""
    return opener(path) if opener else open(path, "rb")


def open_binary(path: str, opener: Opener | None = None) -> BinaryIO:
    """Open `path` for reading bytes, decompressing gzip when the file starts with the gzip magic number
    (so a misnamed file still works and a `.gz` that is not gzip is read as is)."""
    raw = open_raw(path, opener)
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
    source = stream if seekable else open_raw(path, opener)
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


def open_text_file(path: str | Path, opener: Opener | None = None) -> TextIO:
    """`open_kb_file` as UTF-8 text whose lines end at LF only (the caller strips a CR; a lone CR inside a record
    does not split it): how the readers of a whole text file open it, so a gzipped file or one that starts with a
    byte-order mark reads like the plain file."""
    return io.TextIOWrapper(open_kb_file(str(path), opener), encoding="utf-8", newline="\n")


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

    def dead(self, location: str, raw: str, reason: str, unread: bool = False) -> DeadLetter:
        self.stats.records_read += 1
        self.stats.dead_lettered += 1
        if unread and not self.stats.unread:
            self.stats.unread = f"{location}: {reason}"
        return DeadLetter(source=self.source, location=location, raw=raw[:2000], reason=reason, unread=unread)


@dataclass(frozen=True)
class FileRange:
    """The lines (or records) of an uncompressed `path` that start at byte offsets in [start, end) (end None: to the
    end of the file), the first of them line `first_line`, after `first_record` records of a format that numbers
    them (XML records), the first at byte `first_column` of its line: a piece of a large file that a worker reads on
    its own."""

    path: str
    start: int
    end: int | None
    first_line: int
    first_record: int = 0
    first_column: int = 0


Input = str | FileRange  # what a reader reads: a whole file, or a range of one


def input_path(item: Input) -> str:
    return item.path if isinstance(item, FileRange) else item


# far beyond any line of a KB dump (MEDIC's longest is 3.4 KB, a UMLS definition tens of KB): guards workers' memory
MAX_LINE_BYTES = 1 << 20


@dataclass(frozen=True)
class LongLine:
    """A line longer than a reader's limit, never held whole: its first bytes and its length."""

    head: bytes
    size: int


def _lines(fh: BinaryIO, max_bytes: int | None) -> Iterator[bytes | LongLine]:
    """The lines of `fh`; with `max_bytes`, a longer one as a LongLine, read through without being held."""
    if max_bytes is None:
        yield from fh
        return
    while raw := fh.readline(max_bytes + 1):
        if len(raw) <= max_bytes or raw.endswith(b"\n"):
            yield raw
            continue
        size, head = len(raw), raw[:2000]
        while not raw.endswith(b"\n") and (raw := fh.readline(1 << 16)):
            size += len(raw)
        yield LongLine(head, size)


def raw_lines(item: Input, opener: Opener | None, max_bytes: int | None = None) -> Iterator[tuple[int, bytes | LongLine]]:
    """(line number, bytes) of a whole file (gzip and a byte-order mark handled) or of a range of one; with
    `max_bytes`, a longer line comes as a LongLine."""
    if not isinstance(item, FileRange):
        with open_kb_file(item, opener) as fh:
            yield from enumerate(_lines(fh, max_bytes), start=1)
        return
    if item.start == 0:
        fh = open_kb_file(item.path, opener)
        position = fh.tell() if fh.seekable() else 0  # past a byte-order mark
    else:
        fh = open_raw(item.path, opener)
        fh.seek(item.start)
        position = item.start
    with fh:
        for lineno, raw in enumerate(_lines(fh, max_bytes), start=item.first_line):
            if item.end is not None and position >= item.end:
                return
            position += raw.size if isinstance(raw, LongLine) else len(raw)
            yield lineno, raw


def iter_lines(item: Input, ctx: ReaderContext, opener: Opener | None = None) -> Iterator[tuple[int, str] | DeadLetter]:
    """Yield (line_number, text) for each line of a file or a FileRange (newline stripped; a byte-order mark is
    skipped), or a DeadLetter (already counted) for a line that is not UTF-8 (a lone surrogate's bytes included), a
    line longer than MAX_LINE_BYTES, a truncated or corrupt gzip stream, or an empty file."""
    lineno = 0
    try:
        for lineno, raw in raw_lines(item, opener, MAX_LINE_BYTES):
            if isinstance(raw, LongLine):
                yield ctx.dead(
                    f"line {lineno}",
                    raw.head.decode("utf-8", "replace"),
                    f"line longer than {MAX_LINE_BYTES:,} bytes ({raw.size:,} bytes): not read",
                )
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield ctx.dead(
                    f"line {lineno}", raw.decode("utf-8", "replace"), f"invalid UTF-8: {err.reason} at byte {err.start}"
                )
                continue
            yield lineno, text.rstrip("\r\n")
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        yield ctx.dead(f"after line {lineno}" if lineno else "file", "", f"truncated or corrupt gzip stream: {err}")
        return
    if lineno == 0 and not isinstance(item, FileRange):
        yield ctx.dead("file", "", "empty file")


SPLIT_BYTES = 64 << 20  # a range of a large line file: a worker's share, big enough that planning costs little
_COUNT_CHUNK = 16 << 20


def _newlines(fh: BinaryIO, start: int, end: int) -> int:
    fh.seek(start)
    count, left = 0, end - start
    while left > 0:
        chunk = fh.read(min(left, _COUNT_CHUNK))
        if not chunk:
            break
        count, left = count + chunk.count(b"\n"), left - len(chunk)
    return count


def _line_start_at_or_after(fh: BinaryIO, offset: int) -> int:
    if offset == 0:
        return 0
    fh.seek(offset - 1)
    fh.readline()
    return fh.tell()


def _ranges_at(path: str, fh: BinaryIO, offsets: list[int]) -> list[FileRange]:
    """Ranges of `path` from line-start offsets (0 first, ascending), with the line number each begins at."""
    ranges, lineno = [], 1
    for i, start in enumerate(offsets):
        if i:
            lineno += _newlines(fh, offsets[i - 1], start)
        ranges.append(FileRange(path, start, offsets[i + 1] if i + 1 < len(offsets) else None, lineno))
    return ranges


def is_gzip(fh: BinaryIO) -> bool:
    """Whether a file opened at its start holds a gzip stream (left at its start)."""
    head = fh.read(2)
    fh.seek(0)
    return head == GZIP_MAGIC


def is_gzip_file(path: str, opener: Opener | None = None) -> bool:
    with open_raw(path, opener) as fh:
        return is_gzip(fh)


def split_lines(
    path: str,
    opener: Opener | None = None,
    same_record: Callable[[bytes, bytes], bool] | None = None,
    target_bytes: int | None = None,
) -> list[Input]:
    """`path` cut into ranges of about `target_bytes` (default SPLIT_BYTES) that start on a line, never between two
    lines that `same_record(previous, line)` says belong together; [path] for a small or gzipped file (gzip cannot
    be entered in the middle). Every line of the file is in exactly one range, so counts reconcile."""
    with open_raw(path, opener) as fh:
        size = fh.seek(0, io.SEEK_END)
        fh.seek(0)
        target_bytes = target_bytes or SPLIT_BYTES
        if size <= target_bytes or is_gzip(fh):
            return [path]
        offsets = [0]
        while (start := _line_start_at_or_after(fh, offsets[-1] + target_bytes)) < size:
            if same_record is not None:  # move past the lines that belong with the one before
                previous = fh.readline()
                start = fh.tell()
                while start < size and same_record(previous, line := fh.readline()):
                    previous, start = line, fh.tell()
                if start >= size:
                    break
            offsets.append(start)
        return [path] if len(offsets) == 1 else _ranges_at(path, fh, offsets)


def split_at_keys(path: str, keys: list[str], key_of: Callable[[bytes], str], opener: Opener | None = None) -> list[Input]:
    """A file sorted by `key_of(line)` cut before the first line of each of `keys` (ascending): len(keys) + 1
    ranges, some possibly empty, together every line once. Binary search, so a range costs a few reads."""
    with open_raw(path, opener) as fh:
        size = fh.seek(0, io.SEEK_END)
        fh.seek(0)
        if is_gzip(fh):
            raise ValueError(f"{path}: a gzipped file cannot be cut into ranges")

        def key_at(offset: int) -> str | None:
            start = _line_start_at_or_after(fh, offset)
            if start >= size:
                return None
            fh.seek(start)
            return key_of(fh.readline().removeprefix(UTF8_BOM))

        offsets = [0]
        for key in keys:
            lo, hi = offsets[-1], size
            while lo < hi:
                mid = (lo + hi) // 2
                found = key_at(mid)
                if found is None or found >= key:
                    hi = mid
                else:
                    lo = mid + 1
            offsets.append(max(_line_start_at_or_after(fh, lo), offsets[-1]))
        return _ranges_at(path, fh, offsets)


def parse_lines(path: Input, ctx: ReaderContext, parse: Callable[[int, str], Iterator], opener: Opener | None = None) -> Iterator:
    """`parse(line_number, text)` over every non-blank decodable line of `path`; decoding dead letters pass
    through and blank lines are counted as filtered, so a reader's own code sees only lines with content."""
    for item in iter_lines(path, ctx, opener):
        if isinstance(item, DeadLetter):
            yield item
        elif not item[1].strip():
            ctx.filtered("blank line")
        else:
            yield from parse(*item)


def tsv_rows(
    path: Input, ctx: ReaderContext, columns: list[str], header_name: str, opener: Opener | None = None
) -> Iterator[tuple[int, str, dict[str, str]] | DeadLetter]:
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
