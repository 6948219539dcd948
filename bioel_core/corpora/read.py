"""One entry point over every corpus format, for the bulk-linking stage: `read_documents(paths, fmt)`.

Contract, the same for every format:
- Items are `Document`, `DeletedDocument` (PubMed update files only) or `DeadLetter`, streamed file by file
  in the order of `paths`; memory holds one document (BioC JSON, a single JSON value, holds one file). Each
  `Document.source` is the file it was read from.
- Every input may be gzip-compressed (sniffed from the bytes); `opener` opens a path as a binary stream
  (e.g. Beam's FileSystems.open for remote paths).
- Bad input data never raises. A bad record becomes a DeadLetter(source, location, raw, reason) and
  reading goes on with the next record: a PubMed article, a PubTator document (its blank-line-separated
  block; where a blank line is missing, each document its ids tell apart: pubtator.split_documents), a BioC
  document (XML: cut out of the byte stream, so malformed XML, invalid UTF-8 or an undefined entity
  costs that document alone; JSON: a line, or a document of a collection that does not parse whole), a JSONL line,
  a text file or line. Every reader applies the rules of bioel_core.corpora.intake where input enters: JSON nested
  no deeper than its limit, ids that are strings or integers, offsets checked as whole numbers below the longest
  text before any text is laid out, and a document holding a lone surrogate (which no UTF-8 output can hold) is
  a dead letter, checked here for every format; what a dead letter quotes is made writable. A fault after which
  the file cannot be cut into records again (a truncated gzip stream, an empty file, a broken prolog or another
  root than the format's, a stream that ends inside a record, JSON whose brackets stop matching) ends that file
  with one DeadLetter that says how much was not read; what was yielded before it stands and the next file is
  read. When the file's start plainly is another format (a BioC XML file read as PubTator), each of its dead
  letters' reasons ends with the format to name instead (bioel_core.corpora.sniff).
  The dead letters of a file not read to its end, or not of `fmt`, are marked `unread` (records.DeadLetter): they
  stand for records that were never counted, so a run with one fails its checks
  (bioel_core.quality.kb_tables.unread_files_suite) where a few bad records would not.
- Caller errors raise: an unknown format (ValueError), a path that cannot be opened (OSError).

The per-format readers behave differently on their own (PubTator and JSONL raise FormatError on the first bad
record, as do read_bioc_xml and read_bioc_json; PubMed XML, BioC's iter_bioc_xml_items and iter_bioc_json_items,
and text yield record dead letters and raise for file faults): this module feeds them one record at a time and
turns their FormatErrors into dead letters.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from bioel_core.corpora.bioc import iter_bioc_json_items, iter_bioc_xml_items
from bioel_core.corpora.intake import encodable, unencodable
from bioel_core.corpora.jsonl import parse_jsonl
from bioel_core.corpora.pubmed_xml import iter_pubmed_xml, split_pubmed_xml
from bioel_core.corpora.pubtator import parse_pubtator, split_documents
from bioel_core.corpora.records import DeletedDocument, Document, FormatError
from bioel_core.corpora.sniff import misnamed_format_hint
from bioel_core.corpora.text import BOM, decoded_lines, iter_text
from bioel_core.kb.io import FileRange, Input, Opener, input_path, open_binary, split_lines
from bioel_core.records import DeadLetter


CorpusItem = Document | DeletedDocument | DeadLetter
_LINE = re.compile(r"line (\d+)")
DOCUMENT_DROPPED = "document dropped: "  # a PubTator dead letter's reason for a document spoilt by one undecodable line


def _pubtator(path: Input, opener: Opener | None) -> Iterator[CorpusItem]:
    source = input_path(path)
    block: list[tuple[int, str | DeadLetter]] = []  # (line number, its text or why it could not be read)
    for item in decoded_lines(path, opener):
        if isinstance(item, DeadLetter):
            block.append((int(_LINE.match(item.location).group(1)), item))
        elif item[1].strip():
            block.append(item)
        else:
            yield from _pubtator_block(source, block)
            block = []
    yield from _pubtator_block(source, block)


def _pubtator_block(source: str, block: list[tuple[int, str | DeadLetter]]) -> Iterator[CorpusItem]:
    """The documents of one blank-line-separated block (more than one where the file misses a blank line:
    pubtator.split_documents), each a Document or one DeadLetter; an undecodable line spoils its document."""
    if not block:
        return
    pieces, unclear = split_documents([line if isinstance(line, str) else None for _, line in block])
    for piece in pieces:
        lines = block[piece.start : piece.stop]
        raw = "\n".join(line if isinstance(line, str) else line.raw for _, line in lines)[:2000]
        bad = next((line for _, line in lines if isinstance(line, DeadLetter)), None)
        if unclear:
            yield DeadLetter(source, f"line {lines[0][0]}", raw, unclear)
        elif bad is not None:
            yield DeadLetter(source, bad.location, bad.raw, DOCUMENT_DROPPED + bad.reason)
        else:
            try:
                yield from parse_pubtator([line for _, line in lines], source)
            except FormatError as err:
                # the parser counts lines from the document's start; name the file's line
                m = _LINE.match(err.location)
                where = f"line {lines[int(m.group(1)) - 1][0]}" if m else f"lines {lines[0][0]}-{lines[-1][0]}"
                yield DeadLetter(source, where, raw, err.reason)


def _jsonl(path: Input, opener: Opener | None) -> Iterator[CorpusItem]:
    source = input_path(path)
    for item in decoded_lines(path, opener):
        if isinstance(item, DeadLetter):
            yield item
        elif item[1].strip():
            lineno, line = item
            try:
                yield from parse_jsonl([line], source)
            except FormatError as err:
                yield DeadLetter(source, f"line {lineno}", line[:2000], err.reason)


def _bioc_xml(path: str, opener: Opener | None) -> Iterator[CorpusItem]:
    try:
        yield from iter_bioc_xml_items(path, opener)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise FormatError(path, "file", f"truncated or corrupt gzip stream: {err}") from err


def _bioc_json(path: str, opener: Opener | None) -> Iterator[CorpusItem]:
    """Every layout read_bioc_json reads; a bad line or document is one dead letter."""
    try:
        with open_binary(path, opener) as fh:
            raw = fh.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise FormatError(path, "file", f"truncated or corrupt gzip stream: {err}") from err
    text = raw.decode("utf-8", "surrogateescape")  # bytes that are not UTF-8 dead-letter their own document
    if not text.strip():
        raise FormatError(path, "file", "empty file")
    yield from iter_bioc_json_items(text.removeprefix(BOM), path)


FORMATS = ("pubmed-xml", "pubtator", "bioc-xml", "bioc-json", "jsonl", "text")
FORMATS_WITH_MENTIONS = ("pubtator", "bioc-xml", "bioc-json")  # the others carry text only


def _after_blank_line(previous: bytes, line: bytes) -> bool:
    return bool(previous.strip())


def corpus_inputs(paths: Iterable[str], fmt: str, *, per_line: bool = False, opener: Opener | None = None) -> list[Input]:
    """The pieces `read_documents` can read apart, for parallel workers: a file as is, or a large line-format
    file (jsonl, per-line text; pubtator, whose documents end at a blank line) or PubMed XML file (cut at
    article starts) as FileRanges that never cut a record. Together they read every record of every file once,
    and a document keeps its line numbers (and so a per-line text document its id, a PubMed article its
    ordinal). BioC XML and BioC JSON files are read whole."""
    if fmt == "pubmed-xml":
        return [piece for path in paths for piece in split_pubmed_xml(path, opener)]
    if fmt == "pubtator":
        same_record = _after_blank_line
    elif fmt == "jsonl" or (fmt == "text" and per_line):
        same_record = None
    else:
        return list(paths)
    return [piece for path in paths for piece in split_lines(path, opener, same_record)]


def read_documents(
    paths: str | Path | Input | Iterable[str | Path | Input],
    fmt: str,
    *,
    per_line: bool = False,
    opener: Opener | None = None,
    format_flag: str = "",
    flag_formats: Sequence[str] | None = None,
    folders: Mapping[str, str] | None = None,
) -> Iterator[CorpusItem]:
    """Documents, DeletedDocuments and DeadLetters of `paths` (files, or FileRanges from `corpus_inputs`) read as
    `fmt` (one of FORMATS); `per_line` is the text format's one-document-per-line layout (see
    bioel_core.corpora.text). A dead letter of a file whose start plainly is another format ends its reason with
    the flag to pass (sniff.misnamed_format_hint; `format_flag` names the option, e.g. the link's input format, and
    `flag_formats` what it takes when not every format): a range of a file is hinted by the file's start, so every
    piece of a file says the same. `folders`: the folder each file was listed from, below which a text document's
    path is its id (bioel_core.corpora.text; a file not in it: its own folder)."""
    readers = {
        "pubmed-xml": lambda p: iter_pubmed_xml(p, opener),
        "pubtator": lambda p: _pubtator(p, opener),
        "bioc-xml": lambda p: _bioc_xml(p, opener),
        "bioc-json": lambda p: _bioc_json(p, opener),
        "jsonl": lambda p: _jsonl(p, opener),
        "text": lambda p: iter_text(p, per_line, opener, (folders or {}).get(input_path(p))),
    }
    if fmt not in readers:
        raise ValueError(f"unknown corpus format {fmt!r}; expected one of {FORMATS}")
    if per_line and fmt != "text":
        raise ValueError("per_line applies to the text format only")
    for path in [paths] if isinstance(paths, (str, Path, FileRange)) else paths:
        path = path if isinstance(path, FileRange) else str(path)
        hint = None  # sniffed at the file's first dead letter only: a file that reads well is not opened again
        for item in _dead_lettering_faults(readers[fmt], path):
            if isinstance(item, Document):
                item.source = input_path(path)
                reason = unencodable(item)
                if reason is None:
                    yield item
                    continue
                raw = " ".join(p.text for p in item.passages)[:2000]
                item = DeadLetter(item.source, f"document {item.doc_id}", raw, reason)
            if isinstance(item, DeadLetter):
                if hint is None:
                    hint = misnamed_format_hint(input_path(path), fmt, format_flag, opener, flag_formats)
                # what a dead letter quotes is written out: a lone surrogate in it as its escape (intake.encodable);
                # a file of another format: none of its records was read
                item = DeadLetter(
                    *map(encodable, (item.source, item.location, item.raw, item.reason + hint)), unread=bool(hint) or item.unread
                )
            yield item


def _dead_lettering_faults(reader: Callable[[Input], Iterator[CorpusItem]], path: Input) -> Iterator[CorpusItem]:
    """The reader's items; a fault that ends the file (its FormatError) is the file's last dead letter."""
    try:
        yield from reader(path)
    except FormatError as err:
        yield DeadLetter(err.source, err.location, "", err.reason, unread=True)
