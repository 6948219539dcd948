"""NLM MeSH descriptor XML (descYYYY.xml, optionally gzipped): one concept per DescriptorRecord.

Parsed with iterparse and each record cleared once used, so memory holds one record. Names are every Term
of every Concept of the record: the record preferred term, abbreviations (LexicalTag ABB/ACR), and entry
terms (permuted terms included). The DescriptorName names the concept or, when it is control characters only, the
first usable term (a record with neither is dead-lettered). The definition is the preferred concept's ScopeNote; the
tree numbers are the semantic types. Malformed XML ends the file with one DeadLetter naming the record being read and the
parser's line and column; what was emitted before it stands.

A large uncompressed file (descYYYY.xml is ~300 MB) is cut into FileRanges at lines that start a
DescriptorRecord, each read by its own worker as the file's prolog + its records + the set's end tag, with the
file's record numbers and line numbers; malformed XML then ends its range rather than the whole file.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from bioel_core.kb import io as kb_io
from bioel_core.kb.base import KBItem, KBReader, preferred_name
from bioel_core.kb.io import FileRange, Input, Opener, ReaderContext, input_path, is_gzip, open_kb_file, open_raw
from bioel_core.kb.vocab import MESH
from bioel_core.records import ConceptRecord, NameRecord

ABBREVIATION_TAGS = {"ABB", "ACR"}
ROOT = "DescriptorRecordSet"
RECORD = "DescriptorRecord"
_RECORD_START = re.compile(rb"<DescriptorRecord[\s>]")
_ROOT_START = re.compile(rb"<DescriptorRecordSet[\s>][^>]*>")
_PROLOG_BYTES = 1 << 16
_AT_LINE = re.compile(r"line (\d+)(, column \d+)$")


def split_mesh_xml(path: str, opener: Opener | None = None) -> list[Input]:
    """`path` cut into FileRanges of about kb.io's SPLIT_BYTES, each starting on a line whose first tag starts a
    DescriptorRecord; [path] for a small or gzipped file, or one with no such lines (one-line XML)."""
    target = kb_io.SPLIT_BYTES
    with open_raw(path, opener) as fh:
        size = fh.seek(0, 2)
        fh.seek(0)
        if size <= target or is_gzip(fh) or _prolog(fh) is None:
            return [path]
        offsets = [0]
        while (start := _record_line_at_or_after(fh, offsets[-1] + target)) is not None:
            offsets.append(start)
        if len(offsets) == 1:
            return [path]
        ranges, line, records = [], 1, 0
        for start, end in zip(offsets, [*offsets[1:], None]):
            ranges.append(FileRange(path, start, end, line, records))
            if end is not None:
                newlines, started = _lines_and_records(fh, start, end)
                line, records = line + newlines, records + started
        return ranges


def _prolog(fh: BinaryIO) -> bytes | None:
    """The file's bytes up to the end of its DescriptorRecordSet start tag."""
    fh.seek(0)
    head = fh.read(_PROLOG_BYTES)
    m = _ROOT_START.search(head)
    return head[:m.end()] if m else None


def _record_line_at_or_after(fh: BinaryIO, offset: int) -> int | None:
    fh.seek(offset)
    fh.readline()  # to a line start
    while line := fh.readline():
        if _RECORD_START.match(line.lstrip()):
            return fh.tell() - len(line)
    return None


def _lines_and_records(fh: BinaryIO, start: int, end: int) -> tuple[int, int]:
    """Newlines and DescriptorRecord start tags in [start, end), in one read by chunks; a tag across two chunks is
    counted once."""
    fh.seek(start)
    newlines, records, left, carry = 0, 0, end - start, b""
    keep = len(b"<DescriptorRecord")  # a match is a byte longer, so the tail kept never holds a whole one
    while left > 0 and (chunk := fh.read(min(left, 1 << 24))):
        data = carry + chunk
        newlines, records = newlines + chunk.count(b"\n"), records + len(_RECORD_START.findall(data))
        carry, left = data[-keep:], left - len(chunk)
    return newlines, records


@contextlib.contextmanager
def _xml_stream(piece: Input, opener: Opener | None):
    """The XML of a file, or of a range of one (`_RangeStream`), and what to add to the stream's line numbers to
    get the file's."""
    if not isinstance(piece, FileRange):
        with open_kb_file(piece, opener) as fh:
            yield fh, 0
        return
    with open_raw(piece.path, opener) as fh:
        head = _prolog(fh) + b"\n" if piece.start else b""
        yield _RangeStream(fh, head, piece), piece.first_line - head.count(b"\n") - 1


class _RangeStream:
    """`head` (the file's prolog, for a range that does not start the file), the range's bytes and (unless it is
    the last range) the set's end tag."""

    def __init__(self, fh: BinaryIO, head: bytes, piece: FileRange):
        fh.seek(piece.start)
        self._fh, self._left = fh, None if piece.end is None else piece.end - piece.start
        self._head, self._tail = head, b"" if piece.end is None else f"</{ROOT}>\n".encode()

    def read(self, n: int = -1) -> bytes:
        n = n if n is not None and n >= 0 else 1 << 30
        if self._head:
            out, self._head = self._head[:n], self._head[n:]
            return out
        if self._left is None or self._left > 0:
            data = self._fh.read(n if self._left is None else min(n, self._left))
            if self._left is not None:
                self._left -= len(data)
            if data:
                return data
            self._left = 0
        out, self._tail = self._tail[:n], self._tail[n:]
        return out


class MeshXmlReader(KBReader):
    kb = "mesh"
    vocabulary = MESH
    id_pattern = re.compile(r"D\d{6,9}")

    def input_groups(self, paths: Sequence[str], opener: Opener | None = None) -> list[list[Input]]:
        """A group a file, or a range of one: a large uncompressed file is read by several workers."""
        return [[piece] for path in paths for piece in split_mesh_xml(path, opener)]

    def read(self, paths: Sequence[Input], opener: Opener | None = None) -> Iterator[KBItem]:
        for piece in paths:
            ctx = ReaderContext(input_path(piece))
            yield from self._read_file(piece, ctx, opener)
            yield ctx.stats

    def _read_file(self, piece: Input, ctx: ReaderContext, opener: Opener | None) -> Iterator[KBItem]:
        root = None
        record_no = piece.first_record if isinstance(piece, FileRange) else 0  # records started
        depth = 0
        ui = ""  # DescriptorUI of the record being read, for error locations
        try:
            with _xml_stream(piece, opener) as (fh, line_shift):  # a range's stream line + line_shift = the file's
                for event, elem in ET.iterparse(fh, events=("start", "end")):
                    if event == "start":
                        depth += 1
                        if root is None:
                            root = elem
                            if elem.tag != ROOT:
                                yield ctx.dead("file", "", f"root element is <{elem.tag}>, not <{ROOT}>")
                                return
                        elif depth == 2 and elem.tag == RECORD:
                            record_no += 1
                            ui = ""
                        continue
                    depth -= 1
                    if depth == 2 and elem.tag == "DescriptorUI":
                        ui = (elem.text or "").strip()
                    elif depth == 1 and elem.tag == RECORD:
                        yield from self._record(elem, record_no, ctx)
                        root.clear()  # drops the finished record and keeps the root from growing
        except ET.ParseError as err:
            if root is None:
                yield ctx.dead("file", "", f"empty file or no XML element: {err}")
            else:
                at = _AT_LINE.sub(lambda m: f"line {int(m.group(1)) + line_shift}{m.group(2)}", str(err))
                yield ctx.dead(self._location(record_no, ui, depth), "", f"malformed XML: {at}")
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            yield ctx.dead(self._location(record_no, ui, depth), "", f"truncated or corrupt gzip stream: {err}")

    @staticmethod
    def _location(record_no: int, ui: str, depth: int = 2) -> str:
        """Where a fault hit: inside record N, or (depth < 2, between records) where record N+1 would be."""
        if depth < 2:
            return f"record {record_no + 1}"
        return f"record {record_no} (DescriptorUI {ui})" if ui else f"record {record_no}"

    def _record(self, elem: ET.Element, record_no: int, ctx: ReaderContext) -> Iterator[KBItem]:
        ui = (elem.findtext("DescriptorUI") or "").strip()
        name = (elem.findtext("DescriptorName/String") or "").strip()
        if not self.id_pattern.fullmatch(ui) or not name:
            # serialized only here: most records never need their raw text
            location, raw = self._location(record_no, ui), ET.tostring(elem, encoding="unicode")
            yield self.check_id(ui, ctx, location, raw) or ctx.dead(location, raw, "missing DescriptorName/String")
            return
        concepts = elem.findall("ConceptList/Concept")
        terms = [(term, text) for term in (t for c in concepts for t in c.iterfind("TermList/Term"))
                 if (text := (term.findtext("String") or "").strip())]
        if (concept_name := preferred_name([name, *(text for _, text in terms)])) is None:
            location, raw = self._location(record_no, ui), ET.tostring(elem, encoding="unicode")
            yield self.no_name(ctx, location, raw, "DescriptorName/String and every term are")
            return
        preferred = next((c for c in concepts if c.get("PreferredConceptYN") == "Y"), None)
        definition = (preferred.findtext("ScopeNote") or "").strip() if preferred is not None else ""
        tree_numbers = tuple(t.strip() for t in (e.text or "" for e in elem.iterfind("TreeNumberList/TreeNumber")) if t.strip())
        ctx.accept()
        yield ConceptRecord(concept_id=ui, kb=self.kb, preferred_name=concept_name, semantic_types=tree_numbers,
                            definition=definition or None, vocabulary=self.vocabulary)
        for term, text in terms:
            if term.get("RecordPreferredTermYN") == "Y":
                name_type = "preferred"
            elif term.get("LexicalTag") in ABBREVIATION_TAGS:
                name_type = "abbreviation"
            else:
                name_type = "entry_term"
            yield NameRecord(ui, self.kb, text, name_type)
