"""Plain UTF-8 text (gzip sniffed from the bytes), in one of two layouts.

- One document per file (default): id = the file's path below the folder it was listed from (a folder given, a
  glob's root; a file given alone: its own folder, so its name) without a trailing `.gz` and then without its last
  extension (`abstracts/12345.txt.gz` -> `12345`; `txt/a/1.txt` listed by `txt/**/*.txt` -> `a/1`, so files of one
  name in two subfolders are two documents: `document_stem`); one passage of kind `text` at offset 0 holding the file's
  text (a leading byte-order mark and trailing whitespace, e.g. the final newline, dropped: nothing before any
  character moves), so offsets are character offsets into the file.
- One document per line (`per_line=True`): a line `ID<TAB>TEXT` gives id ID and text TEXT (everything after
  the first tab); a line without a tab gives id `STEM:LINE` (the file's id as above, 1-based line number).
  Blank lines are skipped; line ends are not part of the text.

Faults: a file (per-file layout) or line (per-line layout) that is not UTF-8 or has no text, and a per-line
`ID<TAB>` with an empty id or text, become `DeadLetter`s and reading goes on. A truncated or corrupt gzip
stream, and an empty per-line file, raise `FormatError` naming the file and the line reached.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator, Mapping
from pathlib import PurePosixPath

from bioel_core.corpora.records import Document, FormatError, Passage
from bioel_core.kb.io import FileRange, Input, Opener, input_path, open_binary, raw_lines
from bioel_core.records import DeadLetter

BOM = "\ufeff"


def document_stem(path: str, folder: str | None = None) -> str:
    """A file's document id: its path below `folder` (the folder it was listed from; None: its own), less a trailing
    `.gz` and then its last extension."""
    from bioel_core.inputs import path_below  # imports pyarrow, which the CLI's help must not

    name = path_below(str(path), folder) if folder is not None else PurePosixPath(str(path).replace("\\", "/")).name
    name = name[:-3] if name.endswith(".gz") else name
    below, _, name = name.rpartition("/")
    name = PurePosixPath(name).stem or name
    return f"{below}/{name}" if below else name


def check_document_ids(listed: Mapping[str, str], flag: str = "input") -> None:
    """Refuse, before any work, two files (each with the folder it was listed from) that would be one document."""
    first: dict[str, str] = {}
    for path, folder in listed.items():
        doc_id = document_stem(path, folder)
        if first.setdefault(doc_id, path) != path:
            raise ValueError(
                f"{flag}: {first[doc_id]} and {path} would both be text document {doc_id!r} (a document is "
                "named by its path below the folder or glob it is listed from, less its extension): list "
                "them from a common folder (DIR/**/*.txt) or rename one"
            )


def decoded_lines(path: Input, opener: Opener | None = None) -> Iterator[tuple[int, str] | DeadLetter]:
    """(line number, text without its line end) per line of a file or a FileRange of one, a DeadLetter for a line
    that is not UTF-8; FormatError for a truncated or corrupt gzip stream or an empty file."""
    source, lineno = input_path(path), 0
    try:
        for lineno, raw in raw_lines(path, opener):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield DeadLetter(
                    source,
                    f"line {lineno}",
                    raw.decode("utf-8", "replace")[:2000],
                    f"invalid UTF-8: {err.reason} at byte {err.start}",
                )
                continue
            yield lineno, text.rstrip("\r\n")
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise FormatError(
            source, f"after line {lineno}" if lineno else "file", f"truncated or corrupt gzip stream: {err}"
        ) from err
    if lineno == 0 and not isinstance(path, FileRange):
        raise FormatError(source, "file", "empty file")


def _read_all(source: str, opener: Opener | None) -> bytes:
    try:
        with open_binary(source, opener) as fh:
            return fh.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise FormatError(source, "file", f"truncated or corrupt gzip stream: {err}") from err


def iter_text(
    path: Input, per_line: bool = False, opener: Opener | None = None, folder: str | None = None
) -> Iterator[Document | DeadLetter]:
    """A FileRange is read only in the per-line layout. `folder`: the one the file was listed from (its document id
    is its path below it); None: its own."""
    source = str(input_path(path))
    stem = document_stem(source, folder)
    if not per_line:
        raw = _read_all(source, opener)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            line = raw[: err.start].count(b"\n") + 1
            yield DeadLetter(
                source,
                f"file (line {line})",
                raw[:2000].decode("utf-8", "replace"),
                f"invalid UTF-8: {err.reason} at byte {err.start}",
            )
            return
        text = text.removeprefix(BOM)
        if not text.strip():
            yield DeadLetter(source, "file", text[:2000], "empty file")
            return
        yield Document(stem, [Passage("text", 0, text.rstrip())])
        return
    for item in decoded_lines(path, opener):
        if isinstance(item, DeadLetter):
            yield item
            continue
        lineno, line = item
        if not line.strip():
            continue
        doc_id, tab, text = line.partition("\t")
        if not tab:
            doc_id, text = f"{stem}:{lineno}", line
        elif not doc_id.strip() or not text.strip():
            yield DeadLetter(source, f"line {lineno}", line[:2000], "'ID<TAB>TEXT' line with an empty id or text")
            continue
        yield Document(doc_id.strip(), [Passage("text", 0, text.rstrip())])


def read_text(path: str, per_line: bool = False, opener: Opener | None = None) -> list[Document | DeadLetter]:
    return list(iter_text(path, per_line, opener))
