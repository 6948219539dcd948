"""JSON lines of abstracts: `{"pmid": ..., "title": ..., "abstract": ...}` one per line (other keys ignored).

Documents are laid out as PubTator does (title, one space, abstract), so offsets agree across formats.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from bioel_core.corpora.records import Document, FormatError, Passage
from bioel_core.kb.io import open_text_file


def parse_jsonl(lines: Iterable[str], source: str = "<jsonl>") -> Iterator[Document]:
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise FormatError(source, where, f"not JSON: {err.msg}") from err
        if not isinstance(rec, dict):
            raise FormatError(source, where, "expected a JSON object")
        pmid = str(rec.get("pmid") or "").strip()
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
