"""The corpus format a file's first bytes plainly are (`looks_like`), and the hint that ends the reasons a file read
as another format fails with (`misnamed_format_hint`): read as the wrong format, a file fails record by record with
reasons that speak of broken records ("line 1: annotation or relation line before any title/abstract line"), never
of the format.

The formats are those `bioel link` reads (read.FORMATS). A file is named only when its start allows
one of them alone; anything else (and `text`, which every file is) gives no hint, never a wrong one:
- `<` and a first element `<collection>`: BioC XML; `<PubmedArticleSet>` or `<MedlineCitationSet>`: PubMed XML.
- `PMID|t|` or `PMID|a|`: PubTator.
- a first line that is a whole JSON object with a `pmid` (the key JSONL's reader requires) and no `passages`:
  JSONL. Not any line of objects: PubTator Central's BioC JSON is one document per line too.
- `{` or `[` with a `"passages": [` key (what every BioC document has) in the head: BioC JSON, in any of its
  layouts (a collection, a bare list, the API's envelope, JSON lines; one line or several).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from bioel_core.corpora.intake import load_json
from bioel_core.corpora.pubmed_xml import ELEMENT_NAME, ROOTS
from bioel_core.kb.io import GZIP_MAGIC, UTF8_BOM, Opener, open_raw

FORMAT_NAMES = {
    "pubmed-xml": "PubMed XML",
    "pubtator": "PubTator",
    "bioc-xml": "BioC XML",
    "bioc-json": "BioC JSON",
    "jsonl": "JSONL",
    "text": "text",
}
HEAD_BYTES = 1 << 16  # holds a JSONL line (an abstract) whole, and a BioC document's first keys
_PUBTATOR_TITLE = re.compile(rb"[^\s|]+\|[ta]\|")
_BIOC_PASSAGES = re.compile(rb'"passages"\s*:\s*\[')


def _head(path: str, opener: Opener | None) -> bytes:
    """The file's first HEAD_BYTES, decompressed (the first of a gzip stream's, without reading it all as
    open_binary's check does), past a byte-order mark and leading white space."""
    with open_raw(path, opener) as fh:
        head = fh.read(HEAD_BYTES)
    if head.startswith(GZIP_MAGIC):
        head = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(head, HEAD_BYTES)
    return head.removeprefix(UTF8_BOM).lstrip()


def _json_format(head: bytes) -> str | None:
    try:
        first = load_json(head.split(b"\n", 1)[0].decode("utf-8", "replace"))
    except ValueError:  # a value over several lines, a line longer than the head, or one nested too deep
        first = None
    if isinstance(first, dict) and "pmid" in first and "passages" not in first:
        return "jsonl"
    return "bioc-json" if _BIOC_PASSAGES.search(head) else None


def looks_like(path: str, opener: Opener | None = None) -> str | None:
    """The format (one of read.FORMATS) a file's first bytes plainly are; None when they allow several, or none, or
    cannot be read (a broken gzip stream, a missing file: the reader's own error says so)."""
    try:
        head = _head(path, opener)
    except (OSError, EOFError, zlib.error):
        return None
    if head.startswith(b"<"):
        root = ELEMENT_NAME.search(head)  # past the XML declaration, DOCTYPE and comments
        name = root.group(1).decode("ascii") if root else None
        return "bioc-xml" if name == "collection" else "pubmed-xml" if name in ROOTS else None
    if head.startswith((b"{", b"[")):
        return _json_format(head)
    return "pubtator" if _PUBTATOR_TITLE.match(head) else None


def misnamed_format_hint(
    path: str, fmt: str, format_flag: str = "", opener: Opener | None = None, flag_formats: Sequence[str] | None = None
) -> str:
    """' (this looks like BioC XML: pass FORMAT_FLAG bioc-xml)' when a file read as `fmt` plainly is another
    format, else ''; `format_flag` is the option that names the format (none: 'format bioc-xml'). `flag_formats`:
    the formats the option takes, when not every one (evaluate-e2e's gold format takes those that carry
    annotations): a file of another format is said to be one, not to be passed."""
    other = looks_like(path, opener)
    if other in (None, fmt):
        return ""
    name = FORMAT_NAMES[other]
    if flag_formats is not None and other not in flag_formats:
        takes = ", ".join(flag_formats[:-1]) + f" or {flag_formats[-1]}" if len(flag_formats) > 1 else flag_formats[0]
        return f" (this looks like {name}, which {format_flag or 'this reader'} does not take: it takes {takes})"
    return f" (this looks like {name}: {f'pass {format_flag}' if format_flag else 'format'} {other})"
