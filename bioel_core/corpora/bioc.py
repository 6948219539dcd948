"""BioC documents, XML and JSON (the BioC spec's layouts, PubTator Central's and the PubTator3 API's).

Both formats go through one dict shape (the BioC JSON one), so the mapping to `Document` exists once:
XML elements are turned into that shape on reading and written from it.

Read as BioC states them: passages holding `text` or `sentence`s (each sentence a Passage at its own offset,
see `Passage.sentence_of`); annotations of a passage, a sentence or the document; relations of any of the
three, with their nodes and infons (`Relation.nodes`, `Relation.infons`). All offsets (passages, sentences,
locations) are document offsets in Unicode code points (Python `str` indices), the same as PubTator's; a
producer that counts UTF-16 units or bytes disagrees only on text beyond U+FFFF or non-ASCII text.
JSON: a collection `{"source":.., "documents": [..]}`, a bare list of documents, one document, an API
envelope holding one list (PubTator3's `{"PubTator3": [..]}`), or one of those per line (PubTator Central's
JSON lines).

Concept ids come from the first annotation infon among `id_keys` (`identifier` in PubTator Central,
`MESH` in the BC5CDR release), kept verbatim (`Mention.id_field`) and split like PubTator ids. An annotation
with several locations (a discontinuous mention) gets the span from its first start to its last end, that span's
text, and its own text as `Mention.link_text` (what it is linked by).

Reading recovers per document: a damaged document is one dead letter (`iter_bioc_xml_items`,
`iter_bioc_json_items`) and the documents after it are read. XML is cut into its documents in the byte stream
(bioel_core.xml_records: CDATA sections and comments are stepped over as XML does, the DTD is never read,
so an external entity or an entity bomb is an undefined entity of its document). JSON that does not parse whole is
read as JSON lines, or cut into the documents of its one value by its brackets. Values are checked by the rules of
bioel_core.corpora.intake (ids, offsets, nesting) and by type (a text that is a number, infons that are a list)
before anything is built from them.

The `bioc` package (PyPI) reads and writes these layouts too, but it is not used here: its loaders fail the
whole collection on one bad document (ValueError on one bad offset) and refuse the API envelope and bare
lists (KeyError 'source'), while this reader must dead-letter one document and read the rest. The tests use
it as an independent check that what is written here is BioC.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path

from bioel_core.corpora.intake import NotJson, document_id, load_json, not_read, whole_number
from bioel_core.corpora.pubtator import id_field, split_ids
from bioel_core.corpora.records import Document, FormatError, Mention, Passage, Relation, UnwritableDocument
from bioel_core.corpora.sink import LONE_SURROGATE, Output, strings, text_output
from bioel_core.kb.io import Opener, open_text_file
from bioel_core.records import DeadLetter
from bioel_core.xml_records import UTF8_NAMES, Fault, Record, RecordError, parse_record, read_records

DEFAULT_ID_KEYS = ("identifier", "MESH", "MeSH", "Identifier")
_ARG_KEY = re.compile(r"arg\d+")  # role names the writer invents for relations stated without roles
_KIND_KEYS = ("relation", "type")


# ---- dict shape <-> Document -------------------------------------------------------------------------


def document_from_dict(d: dict, source: str, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS, record: str = "") -> Document:
    """The Document of a BioC document dict; FormatError naming `record` (default `document ID`) for a document that
    is not BioC: a value of the wrong type, an offset that is no whole number (intake.whole_number), an id that is no
    string or integer, passages that overlap, an annotation off its text."""
    try:
        doc_id = document_id(d.get("id")) or document_id(d.get("pmid"))  # PubTator Central documents also carry `pmid`
    except ValueError as err:
        raise FormatError(source, record or "document ?", f"document id: {err}") from err
    where = record or f"document {doc_id or '?'}"
    if not doc_id:
        raise FormatError(source, where, "document has no id")
    passages, relations = [], list(_objects(d, "relations", source, where))
    annotations = []  # passage annotations first, in file order, then the document's own
    for p in _objects(d, "passages", source, where):
        offset = _offset(p, source, where)
        infons = _str_infons(p, source, where)
        kind = infons.pop("type", "")
        rest = tuple(infons.items())
        whole = _text(p, source, where)
        sentences = _objects(p, "sentences", source, where)
        annotations.extend(_objects(p, "annotations", source, where))
        for s in sentences:  # BioC: a passage holds its text or its sentences
            s_offset, s_text = _offset(s, source, where), _text(s, source, where)
            # some producers state both; accepted while they agree, as the sentences are then the same text
            if whole and whole[s_offset - offset : s_offset - offset + len(s_text)] != s_text:
                raise FormatError(
                    source,
                    f"{where}, passage at {offset}",
                    f"the sentence at {s_offset} differs from the passage text at that offset",
                )
            passages.append(Passage(kind, s_offset, s_text, rest, sentence_of=offset))
            relations.extend(_objects(s, "relations", source, where))
            annotations.extend(_objects(s, "annotations", source, where))
        if not sentences:
            passages.append(Passage(kind, offset, whole, rest))
        relations.extend(_objects(p, "relations", source, where))
    annotations.extend(_objects(d, "annotations", source, where))
    doc = Document(doc_id, passages, [], [_relation(r, source, where) for r in relations])
    try:
        full = doc.text
    except ValueError as err:
        raise FormatError(source, where, str(err)) from err
    # in span order: BioC may state one annotation in its passage, sentence or document, and a round trip
    # (which puts each in the innermost unit holding it) must give the same list
    mentions = [_mention(a, doc_id, full, source, where, id_keys) for a in annotations]
    doc.mentions.extend(sorted(mentions, key=lambda m: (m.start, m.end)))
    return doc


def _objects(d: dict, key: str, source: str, where: str) -> list[dict]:
    """d[key] as a list of objects ([] when absent or null); FormatError for any other value."""
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise FormatError(source, where, f"{key} must be a list of objects, not {json.dumps(value)[:80]}")
    return value


def _text(d: dict, source: str, where: str) -> str:
    value = d.get("text")
    if value is not None and not isinstance(value, str):
        raise FormatError(source, where, f"a text must be a string, not {type(value).__name__} {json.dumps(value)[:50]}")
    return value or ""


def _offset(d: dict, source: str, where: str) -> int:
    if d.get("offset") is None:
        raise FormatError(source, where, "passage or sentence without an offset")
    try:
        return whole_number(d["offset"])
    except ValueError as err:
        raise FormatError(source, where, f"passage or sentence offset: {err}") from err


def _str_infons(d: dict, source: str, where: str) -> dict:
    infons = d.get("infons") or {}
    if not isinstance(infons, dict):
        raise FormatError(source, where, f"infons must be an object, not {json.dumps(infons)[:80]}")
    return {str(k): "" if v is None else str(v) for k, v in infons.items()}


def _mention(a: dict, doc_id: str, full: str, source: str, where: str, id_keys: tuple[str, ...]) -> Mention:
    ann_where = f"{where}, annotation {a.get('id', '?')}"
    infons = _str_infons(a, source, ann_where)
    try:
        locs = [
            (whole_number(loc.get("offset")), whole_number(loc.get("length")))
            for loc in _objects(a, "locations", source, ann_where)
        ]
    except ValueError as err:
        raise FormatError(source, ann_where, f"location without a whole offset and length: {err}") from err
    if not locs:
        raise FormatError(source, ann_where, "annotation has no location")
    start, end = min(o for o, _ in locs), max(o + n for o, n in locs)
    text = _text(a, source, ann_where)
    if not 0 <= start < end <= len(full):
        raise FormatError(source, ann_where, f"span {start}-{end} is outside the document (length {len(full)})")
    if len(locs) == 1 and full[start:end].strip() != text.strip():
        raise FormatError(source, ann_where, f"annotation text {text!r} differs from the document text {full[start:end]!r}")
    id_key = next((k for k in id_keys if infons.get(k)), None)
    id_field = infons[id_key] if id_key else ""
    parts = tuple(x for x in infons.get("parts", "").split("|") if x)
    rest = tuple((k, v) for k, v in infons.items() if k not in ("type", "parts", id_key))
    # a discontinuous mention's text is its span's, as every mention's; the annotation's own text is what it links by
    link_text = text if len(locs) > 1 and text and text != full[start:end] else ""
    return Mention(
        text=full[start:end],
        doc_id=doc_id,
        start=start,
        end=end,
        entity_type=infons.get("type", ""),
        concept_ids=split_ids(id_field),
        parts=parts,
        ann_id=str(a.get("id", "")),
        link_text=link_text,
        id_field=id_field,
        infons=rest,
    )


def _relation(r: dict, source: str, where: str) -> Relation:
    infons = _str_infons(r, source, where)
    kept = tuple(infons.items())
    kind = next((infons.pop(k) for k in _KIND_KEYS if k in infons), "")
    nodes = _objects(r, "nodes", source, where)
    if nodes:
        return Relation(
            kind,
            tuple(str(n.get("refid", "")) for n in nodes),
            tuple(str(n.get("role", "")) for n in nodes),
            str(r.get("id", "")),
            kept,
            nodes=True,
        )
    roles = tuple(infons)
    args = tuple(infons.values())
    if all(_ARG_KEY.fullmatch(k) for k in roles):
        roles = ()
    return Relation(kind, args, roles, str(r.get("id", "")), kept)


def document_to_dict(doc: Document, id_key: str = "identifier") -> dict:
    """The BioC JSON shape of a document: sentence Passages regrouped into their passage, each mention put in
    the innermost passage or sentence holding its span (else at document level), relations at document level."""
    passages: list[dict] = []
    units: list[tuple[int, int, dict]] = []  # (start, end, passage or sentence dict) that can hold annotations
    for p in doc.passages:
        # every key present, as the BioC JSON spec (and the `bioc` package's reader) expects
        unit = {"offset": p.offset, "text": p.text, "annotations": []}
        if p.sentence_of is None:
            passages.append({"infons": {"type": p.kind, **dict(p.infons)}, **unit, "sentences": [], "relations": []})
            units.append((p.offset, p.offset + len(p.text), passages[-1]))
            continue
        last = passages[-1] if passages else None
        if not (last and last["sentences"] and last["offset"] == p.sentence_of and last["_key"] == (p.kind, p.infons)):
            last = {
                "infons": {"type": p.kind, **dict(p.infons)},
                "offset": p.sentence_of,
                "annotations": [],
                "sentences": [],
                "relations": [],
                "_key": (p.kind, p.infons),
            }
            passages.append(last)
        last["sentences"].append({"infons": {}, **unit, "relations": []})
        units.append((p.offset, p.offset + len(p.text), last["sentences"][-1]))
    loose: list[dict] = []
    for n, m in enumerate(doc.mentions):
        if m.start is None or m.end is None:
            raise UnwritableDocument(f"document {doc.doc_id!r}: mention {m.text!r} has no span; BioC needs offsets")
        infons = {"type": m.entity_type}
        ids = id_field(m)
        if ids:
            infons[id_key] = ids
        if m.parts:
            infons["parts"] = "|".join(m.parts)
        infons.update(m.infons)
        ann = {
            "id": m.ann_id or str(n),
            "infons": infons,
            "text": m.text,
            "locations": [{"offset": m.start, "length": m.end - m.start}],
        }
        owner = next((u for s, e, u in units if s <= m.start and m.end <= e), None)
        (owner["annotations"] if owner is not None else loose).append(ann)
    for p in passages:
        p.pop("_key", None)
    if any(LONE_SURROGATE.search(x) for x in strings([doc.doc_id, passages, loose])):
        raise UnwritableDocument(f"document {doc.doc_id!r} holds a lone surrogate, which has no UTF-8 form")
    return {
        "id": doc.doc_id,
        "infons": {},
        "passages": passages,
        "annotations": loose,
        "relations": [_relation_dict(r, i) for i, r in enumerate(doc.relations)],
    }


def _relation_dict(r: Relation, i: int) -> dict:
    if r.infons:
        infons = dict(r.infons)
    elif r.nodes:
        infons = {"type": r.kind}
    else:
        # BC5CDR style (role -> value infons), so relations over concept ids survive the trip
        roles = r.roles or tuple(f"arg{j + 1}" for j in range(len(r.args)))
        infons = {"relation": r.kind, **dict(zip(roles, r.args))}
    nodes = [{"refid": a, "role": role} for a, role in zip(r.args, r.roles or ("",) * len(r.args))] if r.nodes else []
    return {"id": r.rel_id or f"R{i}", "infons": infons, "nodes": nodes}


# ---- JSON ---------------------------------------------------------------------------------------------


def documents_in(value: object) -> list:
    """The documents of one parsed JSON value in any layout the module docstring names."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("documents"), list):
            return value["documents"]
        if "passages" in value or "id" in value:
            return [value]
        if len(value) == 1 and isinstance(next(iter(value.values())), list):  # {"PubTator3": [...]}
            return next(iter(value.values()))
    raise ValueError("expected a BioC collection, a list of documents, a document, or an envelope holding a list")


def iter_bioc_json_text(text: str, source: str) -> Iterator[tuple[str, object, str | None]]:
    """(location, document value, its source text or None) per document of a BioC JSON text, in file order; the value
    is a ValueError (its message the reason) for a line or document that is not one. A text that is no JSON value is
    read as JSON lines when one of its lines is a document layout on its own, else cut into the documents of its one
    value (`_cut_documents`); FormatError for a text neither reading can follow."""
    try:
        value = _load(text)
    except NotJson as whole:  # invalid UTF-8 too: read record by record, so a bad byte costs its own record only
        lines = _json_lines(text)
        yield from lines if lines is not None else _cut_documents(text, source, whole)
        return
    yield from _documents_of("file", value, None)


def _load(text: str) -> object:
    """intake.load_json of a text that may have been decoded with `surrogateescape` (`bioel_core.corpora.read` reads
    BioC JSON files so): NotJson too for bytes that are not UTF-8, each of which became a lone surrogate character,
    which decoding UTF-8 never gives otherwise (a JSON escape such as `\\ud800` is six ASCII characters until parsed)."""
    found = LONE_SURROGATE.search(text)
    if found:
        try:
            text.encode("utf-8", "surrogateescape").decode("utf-8")
        except UnicodeDecodeError as err:
            raise NotJson(f"invalid UTF-8: {err.reason} at byte {err.start}", found.start()) from err
    return load_json(text)


def _documents_of(where: str, value: object, raw: str | None) -> Iterator[tuple[str, object, str | None]]:
    try:
        docs = documents_in(value)
    except ValueError as err:
        yield where, err, raw
        return
    for doc in docs:
        yield where, doc, raw if len(docs) == 1 else None


def _json_lines(text: str) -> list[tuple[str, object, str | None]] | None:
    """The items of a JSON-lines text (PubTator Central's: a document per line), None when no line is a document
    layout on its own (one JSON value over several lines, or none)."""
    items, layout = [], False
    # "\n" only: str.splitlines would also cut at U+2028 and friends, which JSON strings hold unescaped
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = _load(line)
        except NotJson as err:
            items.append((f"line {lineno}", err, line))
            continue
        found = list(_documents_of(f"line {lineno}", value, line))
        layout = layout or bool(found) and not any(isinstance(v, ValueError) for _, v, _ in found)
        items.extend(found)
    return items if layout else None


_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')  # strings (skipped whole) and structure
_OPENS = {"]": "[", "}": "{"}
_BLANKS = re.compile(r"\s*")


def _cut_documents(text: str, source: str, whole: NotJson) -> Iterator[tuple[str, object, str | None]]:
    """The documents of one JSON value that does not parse whole, each parsed on its own so a bad one costs itself
    alone: the elements of the root list, of a collection's `documents` list, or of an envelope's one list, told
    apart by the value's brackets. A fault outside the documents (another key of the collection, a comma between
    documents) is one more item. Where the brackets stop matching, the documents cut before stand and the rest is one
    FormatError saying how much was not read; a value with no such list (one document) is the FormatError of `whole`."""
    lists, keys, broken = _element_spans(text)
    spans = _documents_list(lists, keys)
    if spans is None:
        where = f"line {text.count(chr(10), 0, whole.position) + 1}"
        raise FormatError(
            source,
            where,
            "neither JSON nor JSON lines: "
            + str(whole).removeprefix("not JSON: ")
            + not_read(len(text.encode("utf-8", "surrogatepass")), _line_count(text), 1),
        )
    line, counted = 1, 0
    for start, end in spans:
        line, counted = line + text.count("\n", counted, start), start
        raw = text[start:end]
        try:
            yield from _documents_of(f"line {line}", _load(raw), raw)
        except NotJson as err:
            yield f"line {line}", err, raw
    if broken is not None:
        line += text.count("\n", counted, broken)
        rest = text[broken:]
        raise FormatError(
            source,
            f"line {line}",
            "malformed JSON: its brackets stop matching, so the documents from "
            "here on cannot be told apart" + not_read(len(rest.encode("utf-8", "surrogatepass")), _line_count(rest), line),
        )
    # with each document a 0, what remains is the collection around them
    parts, marks, previous, shift = [], [], 0, 0  # marks: (offset in the skeleton past a 0, the shift from there on)
    for start, end in spans:
        parts += [text[previous:start], "0"]
        marks.append((start - shift + 1, shift + end - start - 1))
        shift, previous = shift + end - start - 1, end
    parts.append(text[previous:])
    try:
        _load("".join(parts))
    except NotJson as err:
        at = err.position + max((s for edge, s in marks if err.position >= edge), default=0)
        yield f"line {text.count(chr(10), 0, at) + 1}", NotJson(f"{err} (outside the documents)"), None


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _element_spans(text: str) -> tuple[dict[str | None, list[tuple[int, int]]], list[str], int | None]:
    """For one JSON value, read by its brackets alone (strings skipped): the (start, end) of each element, blanks
    trimmed, of every list that is the root or a value of the root object (keyed by that key's JSON text; None for
    the root list), the root object's keys, and the offset from which the brackets stop matching (None: they match)."""
    stack: list[str] = []
    lists: dict[str | None, list[tuple[int, int]]] = {}
    keys: list[str] = []
    key_next = ended = False  # the next string is a key of the root object; the root value has ended
    cutting: list[tuple[int, int]] | None = None  # the spans of the list being cut, whose elements are at depth `level`
    level = start = 0
    closed = False  # an element of the list being cut has just closed (a comma should follow)

    def element(end: int) -> None:
        piece = text[start:end]
        if piece.strip():
            cutting.append((first(), start + len(piece.rstrip())))

    def first() -> int:  # where the element being cut starts, past blanks
        return _BLANKS.match(text, start).end()

    for m in _JSON_TOKEN.finditer(text):
        token, at = m.group(), m.start()
        if token[0] == '"':
            if key_next:
                keys.append(token)
                key_next = False
        elif token in "[{":
            if ended:  # a second value after the root's end
                return lists, keys, at
            if cutting is not None and len(stack) == level and closed:  # no comma between two elements
                element(at)
                start = at
            stack.append(token)
            if token == "[" and cutting is None and (len(stack) == 1 or (len(stack) == 2 and stack[0] == "{" and keys)):
                cutting, level, start = lists.setdefault(keys[-1] if len(stack) == 2 else None, []), len(stack), m.end()
            key_next = token == "{" and len(stack) == 1
        elif token in "]}":
            if not stack or stack[-1] != _OPENS[token]:
                return lists, keys, first() if cutting is not None else at
            if cutting is not None and len(stack) == level:
                element(at)
                cutting = None
            stack.pop()
            ended = not stack
            closed = cutting is not None and len(stack) == level
        else:  # ","
            if cutting is not None and len(stack) == level:
                element(at)
                start = m.end()
            key_next = len(stack) == 1 and stack[0] == "{"
        if token != "}" and token != "]":
            closed = False
    # brackets left open: the element being cut and all after it are lost; otherwise the skeleton check names it
    return lists, keys, first() if cutting is not None else None


def _documents_list(lists: dict[str | None, list[tuple[int, int]]], keys: list[str]) -> list[tuple[int, int]] | None:
    """The spans of the documents, by the layouts `documents_in` reads: the root list, a collection's `documents`,
    an envelope's one list; None for a value with none of them (one document)."""
    if None in lists:
        return lists[None]
    named = {_key(k): k for k in keys}
    if "documents" in named:
        return lists.get(named["documents"])
    if "passages" in named or "id" in named:
        return None
    return lists.get(keys[0]) if len(keys) == 1 else None


def _key(token: str) -> str:
    try:
        return json.loads(token)
    except ValueError:
        return token


def iter_bioc_json_items(text: str, source: str, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> Iterator[Document | DeadLetter]:
    """Documents and dead letters of a BioC JSON text (`iter_bioc_json_text`); FormatError for a fault that ends it."""
    for where, value, raw in iter_bioc_json_text(text, source):

        def dead(location: str, reason: str) -> DeadLetter:
            return DeadLetter(
                source, location, (raw if raw is not None else json.dumps(value, ensure_ascii=False))[:2000], reason
            )

        if isinstance(value, ValueError):
            yield DeadLetter(source, where, (raw or "")[:2000], str(value))
        elif not isinstance(value, dict):
            yield dead(where, "a BioC document must be a JSON object")
        else:
            try:
                yield document_from_dict(value, source, id_keys)
            except FormatError as err:
                yield dead(err.location if where == "file" else f"{where}, {err.location}", err.reason)


def read_bioc_json(path: str | Path, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> list[Document]:
    """Every document of a BioC JSON file in any layout above; FormatError on the first bad one."""
    with open_text_file(path) as fh:
        text = fh.read()
    return [_strict(item) for item in iter_bioc_json_items(text, str(path), id_keys)]


def _strict(item: Document | DeadLetter) -> Document:
    if isinstance(item, DeadLetter):
        raise FormatError(item.source, item.location, item.reason)
    return item


def write_bioc_json(docs: Iterable[Document], out: Output, source: str = "bioel", id_key: str = "identifier") -> int:
    documents = [document_to_dict(d, id_key) for d in docs]
    collection = {"source": source, "date": "", "key": "", "infons": {}, "documents": documents}
    with text_output(out) as fh:
        fh.write(json.dumps(collection, ensure_ascii=False, indent=1))
    return len(documents)


# ---- XML ----------------------------------------------------------------------------------------------


def _infons(el: ET.Element) -> dict:
    return {i.get("key", ""): i.text or "" for i in el.findall("infon")}


def _xml_annotations(el: ET.Element) -> list[dict]:
    return [
        {
            "id": a.get("id", ""),
            "infons": _infons(a),
            "text": a.findtext("text", ""),
            "locations": [{"offset": loc.get("offset"), "length": loc.get("length")} for loc in a.findall("location")],
        }
        for a in el.findall("annotation")
    ]


def _xml_unit(el: ET.Element) -> dict:
    """A passage or sentence element -> its dict (the two share infons, offset, text, annotations, relations)."""
    unit = {
        "infons": _infons(el),
        "offset": el.findtext("offset"),
        "text": el.findtext("text", ""),
        "annotations": _xml_annotations(el),
        "relations": [_xml_relation_dict(r) for r in el.findall("relation")],
    }
    sentences = el.findall("sentence")
    if sentences:
        unit["sentences"] = [_xml_unit(s) for s in sentences]
    return unit


def _xml_document_dict(el: ET.Element) -> dict:
    return {
        "id": el.findtext("id", ""),
        "passages": [_xml_unit(p) for p in el.findall("passage")],
        "annotations": _xml_annotations(el),
        "relations": [_xml_relation_dict(r) for r in el.findall("relation")],
    }


def _xml_relation_dict(r: ET.Element) -> dict:
    return {
        "id": r.get("id", ""),
        "infons": _infons(r),
        "nodes": [{"refid": n.get("refid", ""), "role": n.get("role", "")} for n in r.findall("node")],
    }


_HEADER = ("source", "date", "key", "infon")  # what a collection holds besides its documents (BioC.dtd)
_COLLECTION = {"collection": ("document",)}
_XML_ID = re.compile(rb"<id>\s*([^<]*?)\s*</id>")


def iter_bioc_xml_items(
    path: str, opener: Opener | None = None, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS
) -> Iterator[Document | DeadLetter]:
    """Documents and dead letters of a BioC XML file (gzip sniffed from its bytes), each <document> cut out of the
    byte stream and parsed on its own (bioel_core.xml_records, UTF-8), so a damaged one is one dead letter naming its
    ordinal, id (when it can be found), line and reason, and the documents after it are read. The collection's
    <source>, <date>, <key> and <infon> are checked and passed over. A fault that ends the file (no <collection>
    root, a broken prolog, a stream cut inside a document, content after </collection>) is its last dead letter,
    marked `unread` and saying how much was not read; FormatError for an empty file."""
    documents = 0
    for piece in read_records(path, _COLLECTION, opener, headers=_HEADER):
        if piece.tag == "document" and (isinstance(piece, Record) or piece.scope == "record"):
            documents += 1
            found = _XML_ID.search(piece.data)
            name = f"document {documents}" + (f" (id {found.group(1).decode('utf-8', 'replace')})" if found else "")
        elif isinstance(piece, Record) or piece.scope == "record":
            name = f"<{piece.tag}> of the collection"
        else:  # before the root element's start tag, or between the records
            name = f"after document {documents}" if piece.scope == "between" else ""
        if isinstance(piece, Record):
            item = _xml_record(piece, name, path, id_keys)
            if item is not None:
                yield item
        elif piece.scope == "file" and not piece.unread:  # an empty file
            raise FormatError(path, "file", piece.reason)
        else:
            yield _xml_fault(piece, name, path)


def _place(name: str, line: int, column: int | None = None) -> str:
    place = f"line {line}" + ("" if column is None else f", column {column}")
    return f"{name}, {place}" if name else place


def _xml_fault(fault: Fault, name: str, source: str) -> DeadLetter:
    """What the cutter could not make a record of; for a document not closed, the parser names where it breaks."""
    raw = fault.data.decode("utf-8", "replace")
    if fault.error is not None:
        return DeadLetter(
            source,
            _place(name, fault.error.line, fault.error.column),
            raw,
            f"malformed XML: {fault.error.message}; {fault.reason.removeprefix('malformed XML: ')}",
        )
    return DeadLetter(source, _place(name, fault.line), raw, fault.reason, unread=fault.unread)


def _xml_record(record: Record, name: str, source: str, id_keys: tuple[str, ...]) -> Document | DeadLetter | None:
    """A record of a collection as a Document, a DeadLetter, or None for a header element."""

    def dead(location: str, reason: str) -> DeadLetter:
        return DeadLetter(source, location, record.data[:8000].decode(record.encoding, "replace")[:2000], reason)

    where = _place(name, record.line)
    try:
        record.data.decode(record.encoding)
    except UnicodeDecodeError as err:
        line = record.line + record.data[: err.start].count(b"\n")
        label = "UTF-8" if record.encoding in UTF8_NAMES else record.encoding
        return dead(_place(name, line), f"invalid {label}: {err.reason} (byte {record.data[err.start : err.start + 1]!r})")
    try:
        el = parse_record(record)
    except RecordError as err:
        return dead(_place(name, err.line, err.column), f"malformed XML: {err.message}")
    if record.tag in _HEADER:
        return None
    try:
        return document_from_dict(_xml_document_dict(el), source, id_keys, where)
    except FormatError as err:
        return dead(err.location, err.reason)


def iter_bioc_xml(path: str | Path, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> Iterator[Document]:
    """Stream the documents of a BioC XML collection (memory: one document at a time); FormatError on the first bad one."""
    for item in iter_bioc_xml_items(str(path), id_keys=id_keys):
        yield _strict(item)


def read_bioc_xml(path: str | Path, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> list[Document]:
    return list(iter_bioc_xml(path, id_keys))


# characters XML 1.0 cannot hold, escaped or not (ElementTree would write them and produce unreadable XML)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    if text is not None:
        el.text = text
    return el


def _add_infons(parent: ET.Element, infons: dict) -> None:
    for k, v in infons.items():
        _sub(parent, "infon", str(v), key=k)


def _add_annotations(parent: ET.Element, annotations: list[dict]) -> None:
    for a in annotations:
        ael = _sub(parent, "annotation", id=a["id"])
        _add_infons(ael, a["infons"])
        for loc in a["locations"]:
            _sub(ael, "location", offset=str(loc["offset"]), length=str(loc["length"]))
        _sub(ael, "text", a["text"])


def _add_relations(parent: ET.Element, relations: list[dict]) -> None:
    for r in relations:
        rel = _sub(parent, "relation", id=r["id"])
        _add_infons(rel, r["infons"])
        for node in r["nodes"]:
            _sub(rel, "node", refid=node["refid"], role=node["role"])


def _add_unit(parent: ET.Element, tag: str, unit: dict) -> None:
    """A passage or sentence in the DTD's order: infon*, offset, (text?, annotation* | sentence*), relation*."""
    el = _sub(parent, tag)
    _add_infons(el, unit["infons"])
    _sub(el, "offset", str(unit["offset"]))
    if unit.get("sentences"):
        for s in unit["sentences"]:
            _add_unit(el, "sentence", s)
    else:
        _sub(el, "text", unit["text"])
        _add_annotations(el, unit["annotations"])
    _add_relations(el, unit["relations"])


def document_element(doc: Document, id_key: str = "identifier") -> ET.Element:
    """One document as a BioC XML element; UnwritableDocument if it holds characters XML cannot."""
    d = document_to_dict(doc, id_key)
    bad = next((m for m in map(_NOT_XML.search, strings(d)) if m), None)
    if bad:
        raise UnwritableDocument(
            f"document {doc.doc_id!r} cannot be written as BioC XML: it holds {bad.group()!r}, which XML 1.0 cannot represent"
        )
    el = ET.Element("document")
    _sub(el, "id", d["id"])
    _add_infons(el, d["infons"])
    for p in d["passages"]:
        _add_unit(el, "passage", p)
    _add_annotations(el, d["annotations"])
    _add_relations(el, d["relations"])
    return el


def write_bioc_xml(docs: Iterable[Document], out: Output, source: str = "bioel", id_key: str = "identifier") -> int:
    root = ET.Element("collection")
    for tag, value in (("source", source), ("date", ""), ("key", "")):
        _sub(root, tag, value)
    n = 0
    for doc in docs:
        root.append(document_element(doc, id_key))
        n += 1
    ET.indent(root)
    with text_output(out) as fh:
        fh.write("<?xml version='1.0' encoding='UTF-8'?>\n<!DOCTYPE collection SYSTEM 'BioC.dtd'>\n")
        fh.write(ET.tostring(root, encoding="unicode"))
        fh.write("\n")
    return n
