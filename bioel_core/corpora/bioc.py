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

from bioel_core.corpora.pubtator import id_field, split_ids
from bioel_core.corpora.records import Document, FormatError, Mention, Passage, Relation, UnwritableDocument
from bioel_core.corpora.sink import LONE_SURROGATE, Output, strings, text_output
from bioel_core.kb.io import open_kb_file, open_text_file

DEFAULT_ID_KEYS = ("identifier", "MESH", "MeSH", "Identifier")
_ARG_KEY = re.compile(r"arg\d+")  # role names the writer invents for relations stated without roles
_KIND_KEYS = ("relation", "type")


# ---- dict shape <-> Document -------------------------------------------------------------------------

def document_from_dict(d: dict, source: str, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> Document:
    doc_id = str(d.get("id") or d.get("pmid") or "").strip()  # PubTator Central documents also carry `pmid`
    where = f"document {doc_id or '?'}"
    if not doc_id:
        raise FormatError(source, where, "document has no id")
    passages, relations = [], list(d.get("relations") or [])
    for p in d.get("passages") or []:
        offset = _int(p, "offset", source, where)
        infons = _str_infons(p)
        kind = infons.pop("type", "")
        rest = tuple(infons.items())
        sentences = p.get("sentences") or []
        whole = p.get("text") or ""
        for s in sentences:  # BioC: a passage holds its text or its sentences
            s_offset, s_text = _int(s, "offset", source, where), s.get("text") or ""
            # some producers state both; accepted while they agree, as the sentences are then the same text
            if whole and whole[s_offset - offset:s_offset - offset + len(s_text)] != s_text:
                raise FormatError(source, f"{where}, passage at {offset}",
                                  f"the sentence at {s_offset} differs from the passage text at that offset")
            passages.append(Passage(kind, s_offset, s_text, rest, sentence_of=offset))
            relations.extend(s.get("relations") or [])
        if not sentences:
            passages.append(Passage(kind, offset, p.get("text") or "", rest))
        relations.extend(p.get("relations") or [])
    # passage annotations first, in file order, then the document's own
    annotations = [a for p in d.get("passages") or [] for a in _passage_annotations(p)] + list(d.get("annotations") or [])
    doc = Document(doc_id, passages, [], [_relation(r) for r in relations])
    try:
        full = doc.text
    except ValueError as err:
        raise FormatError(source, where, str(err)) from err
    # in span order: BioC may state one annotation in its passage, sentence or document, and a round trip
    # (which puts each in the innermost unit holding it) must give the same list
    mentions = [_mention(a, doc_id, full, source, where, id_keys) for a in annotations]
    doc.mentions.extend(sorted(mentions, key=lambda m: (m.start, m.end)))
    return doc


def _passage_annotations(p: dict) -> list:
    return list(p.get("annotations") or []) + [a for s in p.get("sentences") or [] for a in s.get("annotations") or []]


def _int(d: dict, key: str, source: str, where: str) -> int:
    try:
        return int(d[key])
    except (KeyError, TypeError, ValueError) as err:
        raise FormatError(source, where, f"passage or sentence without a numeric {key}: {err!r}") from err


def _str_infons(d: dict) -> dict:
    return {str(k): "" if v is None else str(v) for k, v in (d.get("infons") or {}).items()}


def _mention(a: dict, doc_id: str, full: str, source: str, where: str, id_keys: tuple[str, ...]) -> Mention:
    ann_where = f"{where}, annotation {a.get('id', '?')}"
    infons = _str_infons(a)
    try:
        locs = [(int(loc["offset"]), int(loc["length"])) for loc in a.get("locations") or []]
    except (KeyError, TypeError, ValueError) as err:
        raise FormatError(source, ann_where, f"location without numeric offset/length: {err}") from err
    if not locs:
        raise FormatError(source, ann_where, "annotation has no location")
    start, end = min(o for o, _ in locs), max(o + n for o, n in locs)
    text = a.get("text") or ""
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
    return Mention(text=full[start:end], doc_id=doc_id, start=start, end=end,
                   entity_type=infons.get("type", ""), concept_ids=split_ids(id_field), parts=parts,
                   ann_id=str(a.get("id", "")), link_text=link_text, id_field=id_field, infons=rest)


def _relation(r: dict) -> Relation:
    infons = _str_infons(r)
    kept = tuple(infons.items())
    kind = next((infons.pop(k) for k in _KIND_KEYS if k in infons), "")
    nodes = r.get("nodes") or []
    if nodes:
        return Relation(kind, tuple(str(n.get("refid", "")) for n in nodes), tuple(str(n.get("role", "")) for n in nodes),
                        str(r.get("id", "")), kept, nodes=True)
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
            last = {"infons": {"type": p.kind, **dict(p.infons)}, "offset": p.sentence_of, "annotations": [], "sentences": [],
                    "relations": [], "_key": (p.kind, p.infons)}
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
        ann = {"id": m.ann_id or str(n), "infons": infons, "text": m.text, "locations": [{"offset": m.start, "length": m.end - m.start}]}
        owner = next((u for s, e, u in units if s <= m.start and m.end <= e), None)
        (owner["annotations"] if owner is not None else loose).append(ann)
    for p in passages:
        p.pop("_key", None)
    if any(LONE_SURROGATE.search(x) for x in strings([doc.doc_id, passages, loose])):
        raise UnwritableDocument(f"document {doc.doc_id!r} holds a lone surrogate, which has no UTF-8 form")
    return {"id": doc.doc_id, "infons": {}, "passages": passages, "annotations": loose,
            "relations": [_relation_dict(r, i) for i, r in enumerate(doc.relations)]}


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


def iter_bioc_json_text(text: str, source: str) -> Iterator[tuple[str, object, str | None] | FormatError]:
    """(location, document value, its source line or None) per document of a BioC JSON text, or a FormatError
    for a line or value that is not one; FormatError raised when the whole text is neither JSON nor JSON lines."""
    try:
        values = [("file", json.loads(text), None)]
    except json.JSONDecodeError as whole:
        values = []
        # "\n" only: str.splitlines would also cut at U+2028 and friends, which JSON strings hold unescaped
        for lineno, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                try:
                    values.append((f"line {lineno}", json.loads(line), line))
                except json.JSONDecodeError as err:
                    if lineno == 1:
                        raise FormatError(source, f"line {whole.lineno}", f"neither JSON nor JSON lines: {whole.msg}") from whole
                    values.append((f"line {lineno}", err, line))
    for where, value, line in values:
        if isinstance(value, json.JSONDecodeError):
            yield FormatError(source, where, f"not JSON: {value.msg}")
            continue
        try:
            docs = documents_in(value)
        except ValueError as err:
            yield FormatError(source, where, str(err))
            continue
        for doc in docs:
            yield where, doc, line if len(docs) == 1 else None


def read_bioc_json(path: str | Path, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> list[Document]:
    """Every document of a BioC JSON file in any layout above; FormatError on the first bad one."""
    source, out = str(path), []
    with open_text_file(path) as fh:
        text = fh.read()
    for item in iter_bioc_json_text(text, source):
        if isinstance(item, FormatError):
            raise item
        if not isinstance(item[1], dict):
            raise FormatError(source, item[0], "a BioC document must be a JSON object")
        out.append(document_from_dict(item[1], source, id_keys))
    return out


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
    return [{"id": a.get("id", ""), "infons": _infons(a), "text": a.findtext("text", ""),
             "locations": [{"offset": loc.get("offset"), "length": loc.get("length")} for loc in a.findall("location")]}
            for a in el.findall("annotation")]


def _xml_unit(el: ET.Element) -> dict:
    """A passage or sentence element -> its dict (the two share infons, offset, text, annotations, relations)."""
    unit = {"infons": _infons(el), "offset": el.findtext("offset"), "text": el.findtext("text", ""),
            "annotations": _xml_annotations(el), "relations": [_xml_relation_dict(r) for r in el.findall("relation")]}
    sentences = el.findall("sentence")
    if sentences:
        unit["sentences"] = [_xml_unit(s) for s in sentences]
    return unit


def _xml_document_dict(el: ET.Element) -> dict:
    return {"id": el.findtext("id", ""), "passages": [_xml_unit(p) for p in el.findall("passage")],
            "annotations": _xml_annotations(el), "relations": [_xml_relation_dict(r) for r in el.findall("relation")]}


def _xml_relation_dict(r: ET.Element) -> dict:
    return {"id": r.get("id", ""), "infons": _infons(r),
            "nodes": [{"refid": n.get("refid", ""), "role": n.get("role", "")} for n in r.findall("node")]}


def document_elements(fh, source: str) -> Iterator[ET.Element]:
    """The <document> elements of a BioC XML stream, each cleared once the caller moves on (memory: one document).
    XML that holds no document under another root than <collection> is another format read as BioC (PubMed XML):
    a FormatError, not an empty corpus."""
    elements, documents = ET.iterparse(fh, events=("end",)), 0
    for _, el in elements:
        if el.tag == "document":
            documents += 1
            yield el
            el.clear()
    if not documents and elements.root.tag != "collection":
        raise FormatError(source, "file", f"root element is <{elements.root.tag}>, not <collection>")


def iter_bioc_xml(path: str | Path, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> Iterator[Document]:
    """Stream the documents of a BioC XML collection (memory: one document at a time)."""
    source = str(path)
    try:
        with open_kb_file(source) as fh:
            for el in document_elements(fh, source):
                yield document_from_dict(_xml_document_dict(el), source, id_keys)
    except ET.ParseError as err:
        line, col = err.position
        raise FormatError(source, f"line {line}, column {col}", f"not well-formed XML: {err}") from err


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
        raise UnwritableDocument(f"document {doc.doc_id!r} cannot be written as BioC XML: it holds {bad.group()!r}, "
                                 "which XML 1.0 cannot represent")
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
