"""The rules every corpus reader applies where input enters, each in one place, so a bad record is a dead letter
in every format and never a crash later on.

- JSON (JSONL, BioC JSON, the format sniffer) is parsed by `load_json`, which refuses a value nested deeper than
  MAX_JSON_DEPTH before parsing it (Python's parser raises RecursionError at a depth that depends on the caller's
  stack, so the same line would pass on one worker and fail on another), and a number the parser refuses (an
  integer of more than 4,300 digits). Every refusal is a ValueError whose message is the dead letter's reason.
- A document id is a string or an integer (`document_id`): `{"a": 1}`, `[1, 2]`, `true` or `NaN` is no id.
- An offset or length is a whole number from 0 to records.MAX_TEXT_CHARS (`whole_number`): `1e15`, `true`, `3.5`
  or a string of 5,000 digits is refused before any text is sliced or laid out at it (Document.text bounds the
  text it lays out by the same limit).
- Text that no UTF-8 output can hold, a lone surrogate (`\\ud800`), makes its document a dead letter
  (`unencodable`, applied to every document `read_documents` yields, whatever its format). Chosen over replacing
  the character with U+FFFD and counting it: a replaced character would publish, hash and link text that the
  source never held, and an unpaired half of a UTF-16 pair means the producer broke the text, as invalid UTF-8
  does, which every reader dead-letters. Bytes decoded as UTF-8 cannot hold one (Python's decoder refuses an
  encoded surrogate, expat a character reference to one: those records are dead letters of invalid UTF-8 or
  malformed XML); a JSON escape, or a file name read with `surrogateescape` (the text format's ids), can.
- What a dead letter quotes (its file, place, record text) is made writable by `encodable`: a lone surrogate is
  written as its `\\udXXX` escape.
- A fault after which a reader cannot find the next record ends its file with one dead letter whose reason says
  how much was not read (`not_read`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate

from bioel_core.corpora.records import MAX_TEXT_CHARS, Document
from bioel_core.corpora.sink import LONE_SURROGATE

MAX_JSON_DEPTH = 64  # a BioC collection nests 8 deep (collection, documents, passage, annotations, location, ...)
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")
_WHOLE = re.compile(r"\s*[0-9]+\s*")


class NotJson(ValueError):
    """A text that is no JSON value: str() is the reason; `position` the character offset where reading failed."""

    def __init__(self, reason: str, position: int = 0):
        super().__init__(reason)
        self.position = position


def _nests_deeper(text: str, limit: int) -> bool:
    """Whether the arrays and objects of a JSON text nest deeper than `limit` (brackets inside strings not counted)."""
    if text.count("[") + text.count("{") <= limit:  # the common case, at the cost of two counts
        return False
    brackets = _BRACKETS.findall(_JSON_STRING.sub("", text))
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0) > limit


def load_json(text: str) -> object:
    """The value of a JSON text; NotJson naming why it is none (its message is a dead letter's reason)."""
    if _nests_deeper(text, MAX_JSON_DEPTH):
        raise NotJson(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise NotJson(f"not JSON: {err.msg}", err.pos) from err
    except ValueError as err:  # the one other refusal: an integer of more than 4,300 digits (sys.int_info)
        raise NotJson("not JSON: an integer of more than 4,300 digits") from err


def document_id(value: object) -> str:
    """A document id as read: a string or an integer (not a boolean); '' for none (missing, null or blank)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"an id is a string or an integer, not {type(value).__name__} {json.dumps(value)[:50]}")


def whole_number(value: object) -> int:
    """An offset or length as read: an integer, or a string of ASCII digits (XML attributes, PubTator columns), from
    0 to MAX_TEXT_CHARS; ValueError otherwise. A string's digits are counted before int() reads them."""
    if isinstance(value, str) and _WHOLE.fullmatch(value):
        digits = value.strip()
        if len(digits) > len(str(MAX_TEXT_CHARS)):
            raise ValueError(f"{_shown(digits)} is not an offset from 0 to {MAX_TEXT_CHARS:,}")
        value = int(digits)
    elif isinstance(value, float) and value.is_integer():  # 12.0: a producer that writes every number as a float
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"not a whole number: {value!r}"[:100])
    if not 0 <= value <= MAX_TEXT_CHARS:
        raise ValueError(f"{_shown(str(value))} is not an offset from 0 to {MAX_TEXT_CHARS:,}")
    return value


def _shown(digits: str) -> str:
    return digits if len(digits) <= 20 else f"{digits[:20]}... ({len(digits):,} digits)"


def _document_strings(doc: Document) -> Iterator[tuple[str, str]]:
    """(where in the document, text) for every text a document holds."""
    yield "id", doc.doc_id
    yield "version", doc.version
    for p in doc.passages:
        for text in (p.kind, p.text, *(s for kv in p.infons for s in kv)):
            yield f"passage {encodable(p.kind)!r}", text
    for m in doc.mentions:
        for text in (
            m.text,
            m.entity_type,
            *m.concept_ids,
            *m.parts,
            m.ann_id,
            m.link_text,
            m.id_field or "",
            *(s for kv in m.infons for s in kv),
        ):
            yield f"annotation {encodable(m.ann_id or m.text)!r}", text
    for r in doc.relations:
        for text in (r.kind, *r.args, *r.roles, r.rel_id, *(s for kv in r.infons for s in kv)):
            yield f"relation {encodable(r.rel_id or r.kind)!r}", text


def unencodable(doc: Document) -> str | None:
    """Why no output can hold the document (a lone surrogate in its id, text, annotations or relations), else None."""
    for where, text in _document_strings(doc):
        found = LONE_SURROGATE.search(text)
        if found:
            return (
                f"a lone surrogate U+{ord(found.group()):04X} in its {where} (half of a UTF-16 pair, e.g. a JSON "
                f"escape), which no UTF-8 output can hold"
            )
    return None


def encodable(text: str) -> str:
    """`text` with each lone surrogate written as its backslash escape, so a dead letter quoting it can be written."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if LONE_SURROGATE.search(text) else text


def not_read(size: int, lines: int, line: int) -> str:
    """What a fault that ends a file adds to its reason: how much of the file, from `line` on, was not read."""

    def count(n: int, word: str) -> str:
        return f"{n:,} {word}{'' if n == 1 else 's'}"

    return f"; {count(size, 'byte')} ({count(lines, 'line')}) from line {line} on not read" if size else ""
