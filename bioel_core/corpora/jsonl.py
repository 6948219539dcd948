"""JSON lines of abstracts: `{"pmid": ..., "title": ..., "abstract": ...}` one per line (other keys ignored).

Documents are laid out as PubTator does (title, one space, abstract), so offsets agree across formats.
A line is read by the rules of bioel_core.corpora.intake: JSON nested no deeper than its limit, a `pmid` that is a
string or an integer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from bioel_core.corpora.intake import document_id, load_json
from bioel_core.corpora.records import Document, FormatError, Passage
from bioel_core.kb.io import open_text_file


def parse_jsonl(lines: Iterable[str], source: str = "<jsonl>") -> Iterator[Document]:
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            rec = load_json(line)
        except ValueError as err:
            raise FormatError(source, where, str(err)) from err
        if not isinstance(rec, dict):
            raise FormatError(source, where, "expected a JSON object")
        try:
            pmid = document_id(rec.get("pmid"))
        except ValueError as err:
            raise FormatError(source, where, f"pmid: {err}") from err
        if not pmid:
            raise FormatError(source, where, "missing pmid")
        title, abstract = rec.get("title") or "", rec.get("abstract") or ""
        if not isinstance(title, str) or not isinstance(abstract, str):
            raise FormatError(source, where, "title and abstract must be strings")
        if not (title or abstract):
            raise FormatError(source, where, f"document {pmid} has neither title nor abstract")
        yield Document(pmid, [Passage("title", 0, title)] + ([Passage("abstract", len(title) + 1, abstract)] if abstract else []))


def read_jsonl(path: str | Path) -> list[Document]:
    with open_text_file(path) as fh:
        return list(parse_jsonl(fh, str(path)))


def write_jsonl(docs: Iterable[Document], path: str | Path) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps({"pmid": doc.doc_id, "title": doc.title, "abstract": doc.abstract}, ensure_ascii=False) + "\n")
            n += 1
    return n
