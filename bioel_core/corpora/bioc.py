"""BioC documents, XML and JSON (the PubTator Central / PubTator3 layouts).

Both formats go through one dict shape (the BioC JSON one), so the mapping to `Document` exists once:
XML elements are turned into that shape on reading and written from it.

Concept ids come from the first annotation infon among `id_keys` (`identifier` in PubTator Central,
`MESH` in the BC5CDR release) and split like PubTator ids. An annotation with several locations
(a discontinuous mention) gets the span from its first start to its last end.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path

from bioel_core.corpora.pubtator import NIL_ID, split_ids
from bioel_core.corpora.records import Document, FormatError, Mention, Passage, Relation

DEFAULT_ID_KEYS = ("identifier", "MESH", "MeSH", "Identifier")
_ARG_KEY = re.compile(r"arg\d+")  # role names the writer invents for relations stated without roles
_KIND_KEYS = ("relation", "type")


# ---- dict shape <-> Document -------------------------------------------------------------------------

def document_from_dict(d: dict, source: str, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> Document:
    doc_id = str(d.get("id", "")).strip()
    where = f"document {doc_id or '?'}"
    if not doc_id:
        raise FormatError(source, where, "document has no id")
    passages, mentions, relations = [], [], []
    for p in d.get("passages", []):
        try:
            offset, text = int(p["offset"]), p.get("text") or ""
        except (KeyError, TypeError, ValueError) as err:
            raise FormatError(source, where, f"passage without a numeric offset: {err}") from err
        passages.append(Passage(kind=(p.get("infons") or {}).get("type", ""), offset=offset, text=text))
        relations.extend(_relation(r) for r in p.get("relations", []))
    doc = Document(doc_id, passages, mentions, relations)
    try:
        full = doc.text
    except ValueError as err:
        raise FormatError(source, where, str(err)) from err
    for p in d.get("passages", []):
        for a in p.get("annotations", []):
            mentions.append(_mention(a, doc_id, full, source, where, id_keys))
    relations.extend(_relation(r) for r in d.get("relations", []))
    return doc


def _mention(a: dict, doc_id: str, full: str, source: str, where: str, id_keys: tuple[str, ...]) -> Mention:
    ann_where = f"{where}, annotation {a.get('id', '?')}"
    infons = a.get("infons") or {}
    try:
        locs = [(int(loc["offset"]), int(loc["length"])) for loc in a.get("locations", [])]
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
    id_field = next((str(infons[k]) for k in id_keys if infons.get(k) not in (None, "")), "")
    parts = tuple(x for x in str(infons.get("parts", "")).split("|") if x)
    return Mention(text=full[start:end] if len(locs) == 1 else text, doc_id=doc_id, start=start, end=end,
                   entity_type=str(infons.get("type", "")), concept_ids=split_ids(id_field), parts=parts,
                   ann_id=str(a.get("id", "")))


def _relation(r: dict) -> Relation:
    infons = dict(r.get("infons") or {})
    kind = next((infons.pop(k) for k in _KIND_KEYS if k in infons), "")
    nodes = r.get("nodes") or []
    if nodes:
        return Relation(kind, tuple(str(n.get("refid", "")) for n in nodes), tuple(str(n.get("role", "")) for n in nodes), str(r.get("id", "")))
    roles = tuple(infons)
    args = tuple(str(v) for v in infons.values())
    if all(_ARG_KEY.fullmatch(k) for k in roles):
        roles = ()
    return Relation(kind, args, roles, str(r.get("id", "")))


def document_to_dict(doc: Document, id_key: str = "identifier") -> dict:
    by_passage: dict[int, list[Mention]] = {}
    starts = sorted(p.offset for p in doc.passages)
    for m in doc.mentions:
        if m.start is None or m.end is None:
            raise ValueError(f"document {doc.doc_id}: mention {m.text!r} has no span; BioC needs offsets")
        owner = max((s for s in starts if s <= m.start), default=starts[0] if starts else 0)
        by_passage.setdefault(owner, []).append(m)
    passages, n = [], 0
    for p in sorted(doc.passages, key=lambda p: p.offset):
        anns = []
        for m in by_passage.get(p.offset, []):
            infons = {"type": m.entity_type, id_key: "|".join(m.concept_ids) or NIL_ID}
            if m.parts:
                infons["parts"] = "|".join(m.parts)
            anns.append({"id": m.ann_id or str(n), "infons": infons, "text": m.text,
                         "locations": [{"offset": m.start, "length": m.end - m.start}]})
            n += 1
        passages.append({"infons": {"type": p.kind}, "offset": p.offset, "text": p.text, "annotations": anns, "relations": []})
    relations = []
    for i, r in enumerate(doc.relations):
        roles = r.roles or tuple(f"arg{j + 1}" for j in range(len(r.args)))
        infons = {"relation": r.kind, **dict(zip(roles, r.args))}
        # Written BC5CDR style (role -> value infons), so relations over concept ids survive the trip.
        relations.append({"id": r.rel_id or f"R{i}", "infons": infons, "nodes": []})
    return {"id": doc.doc_id, "infons": {}, "passages": passages, "relations": relations}


# ---- JSON ---------------------------------------------------------------------------------------------

def read_bioc_json(path: str | Path, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> list[Document]:
    """A BioC JSON collection, a list of documents, a single document, or one document per line."""
    source = str(path)
    raw = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as first_err:
        data = []
        for lineno, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise FormatError(source, f"line {lineno}", f"not JSON ({err.msg}); whole file: {first_err.msg}") from err
    if isinstance(data, dict):
        data = data["documents"] if "documents" in data else [data]
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise FormatError(source, "top level", "expected a BioC collection, a list of documents or a document")
    return [document_from_dict(d, source, id_keys) for d in data]


def write_bioc_json(docs: Iterable[Document], path: str | Path, source: str = "bioel", id_key: str = "identifier") -> int:
    documents = [document_to_dict(d, id_key) for d in docs]
    collection = {"source": source, "date": "", "key": "", "infons": {}, "documents": documents}
    Path(path).write_text(json.dumps(collection, ensure_ascii=False, indent=1), encoding="utf-8")
    return len(documents)


# ---- XML ----------------------------------------------------------------------------------------------

def _infons(el: ET.Element) -> dict:
    return {i.get("key", ""): i.text or "" for i in el.findall("infon")}


def _xml_document_dict(el: ET.Element) -> dict:
    passages = []
    for p in el.findall("passage"):
        anns = [{"id": a.get("id", ""), "infons": _infons(a), "text": a.findtext("text", ""),
                 "locations": [{"offset": loc.get("offset"), "length": loc.get("length")} for loc in a.findall("location")]}
                for a in p.findall("annotation")]
        passages.append({"infons": _infons(p), "offset": p.findtext("offset"), "text": p.findtext("text", ""),
                         "annotations": anns, "relations": [_xml_relation_dict(r) for r in p.findall("relation")]})
    return {"id": el.findtext("id", ""), "passages": passages, "relations": [_xml_relation_dict(r) for r in el.findall("relation")]}


def _xml_relation_dict(r: ET.Element) -> dict:
    return {"id": r.get("id", ""), "infons": _infons(r),
            "nodes": [{"refid": n.get("refid", ""), "role": n.get("role", "")} for n in r.findall("node")]}


def iter_bioc_xml(path: str | Path, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> Iterator[Document]:
    """Stream the documents of a BioC XML collection (memory: one document at a time)."""
    source = str(path)
    try:
        for _, el in ET.iterparse(str(path), events=("end",)):
            if el.tag == "document":
                yield document_from_dict(_xml_document_dict(el), source, id_keys)
                el.clear()
    except ET.ParseError as err:
        line, col = err.position
        raise FormatError(source, f"line {line}, column {col}", f"not well-formed XML: {err}") from err


def read_bioc_xml(path: str | Path, id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> list[Document]:
    return list(iter_bioc_xml(path, id_keys))


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    if text is not None:
        el.text = text
    return el


def _add_infons(parent: ET.Element, infons: dict) -> None:
    for k, v in infons.items():
        _sub(parent, "infon", str(v), key=k)


def write_bioc_xml(docs: Iterable[Document], path: str | Path, source: str = "bioel", id_key: str = "identifier") -> int:
    root = ET.Element("collection")
    for tag, value in (("source", source), ("date", ""), ("key", "")):
        _sub(root, tag, value)
    n = 0
    for doc in docs:
        d = document_to_dict(doc, id_key)
        doc_el = _sub(root, "document")
        _sub(doc_el, "id", d["id"])
        for p in d["passages"]:
            pel = _sub(doc_el, "passage")
            _add_infons(pel, p["infons"])
            _sub(pel, "offset", str(p["offset"]))
            _sub(pel, "text", p["text"])
            for a in p["annotations"]:
                ael = _sub(pel, "annotation", id=a["id"])
                _add_infons(ael, a["infons"])
                for loc in a["locations"]:
                    _sub(ael, "location", offset=str(loc["offset"]), length=str(loc["length"]))
                _sub(ael, "text", a["text"])
        for r in d["relations"]:
            rel = _sub(doc_el, "relation", id=r["id"])
            _add_infons(rel, r["infons"])
        n += 1
    ET.indent(root)
    with open(path, "wb") as fh:
        fh.write(b"<?xml version='1.0' encoding='UTF-8'?>\n<!DOCTYPE collection SYSTEM 'BioC.dtd'>\n")
        fh.write(ET.tostring(root, encoding="utf-8"))
    return n
