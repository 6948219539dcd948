"""NLM MeSH XML, optionally gzipped: descriptors (descYYYY.xml, one concept per DescriptorRecord) and supplementary
concept records (suppYYYY.xml, one concept per SupplementalRecord), told apart by the file's root element.

Each record is cut out of the file and parsed on its own (bioel_core.xml_records), so memory holds one record and a
bad record is one DeadLetter naming the file, the record ordinal (and UI, when it can be found), the line and the
reason, and every later record is still read: malformed XML, invalid UTF-8, an entity the record uses (the DOCTYPE
is never parsed: no external entity is resolved and no entity expanded), a record not closed before the next one
starts, one longer than xml_records.MAX_RECORD_BYTES, text or elements between records (one dead letter up to the next
record). Where the file cannot be resynchronised (it ends inside a record or a comment, content follows the root
element, a root element of another kind) its rest is one dead letter saying how many bytes and lines were not read,
marked `unread`, which fails the run's inputs check (quality.kb_tables.unread_files_suite).

Names are every Term of every Concept of the record: the record preferred term, abbreviations (LexicalTag ABB/ACR),
and entry terms (permuted terms included). The DescriptorName (SupplementalRecordName) names the concept or, when it
is control characters only, the first usable term (a record with neither is dead-lettered). The definition is the
preferred concept's ScopeNote, else the record's Note (a supplementary record's); a descriptor's tree numbers are its
semantic types (a supplementary record has none). A scope's tree filters (bioel_core.kb.scope) judge descriptors by
their tree numbers; a supplementary record, which MeSH files in no tree, is kept by them.

A supplementary record's alt ids are the descriptors it is mapped to (HeadingMappedToList/HeadingMappedTo/
DescriptorReferredTo/DescriptorUI), qualified as `MESH:D...` (kb.vocab.qualify) in the record's order. NLM marks the
preferred mapping with an asterisk before its UI (`*D001569`; on a descriptor/qualifier pair the asterisk sits on the
QualifierUI): it is dropped, and the qualifier, which is no concept, is not read. The other descriptor references of a
record (IndexingInformationList, PharmacologicalActionList) are not alt ids: they say what the concept is indexed
with or does, not what it is. A mapped UI that is not a descriptor UI dead-letters its record; a record with no
mapping is read with no alt ids.

A large uncompressed file (descYYYY.xml is ~300 MB) is cut into FileRanges at record starts, each read by its own
worker with the file's record and line numbers, giving the items a whole-file read gives.
"""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bioel_core.kb.base import KBItem, KBReader, preferred_name
from bioel_core.kb.io import Input, Opener, ReaderContext, input_path
from bioel_core.kb.scope import Scope
from bioel_core.kb.vocab import MESH, qualify
from bioel_core.records import ConceptRecord, NameRecord
from bioel_core.xml_records import Fault, RecordError, parse_record, read_records, split_records

ABBREVIATION_TAGS = {"ABB", "ACR"}
# a supplementary record's descriptor mappings, and the UI each must have once NLM's preferred-mapping mark is dropped
MAPPED_DESCRIPTORS = "HeadingMappedToList/HeadingMappedTo/DescriptorReferredTo/DescriptorUI"
PREFERRED_MAPPING = "*"
DESCRIPTOR_UI = re.compile(r"D\d{6,9}")


@dataclass(frozen=True)
class RecordKind:
    """Where a kind of MeSH record keeps its UI and name, and the UI's shape."""

    ui: str
    name: str
    id_pattern: re.Pattern

    def ui_in(self, raw: bytes) -> str:
        """The record's UI read from its bytes (for a record that does not parse); its own UI is its first child,
        before any UI of a record it refers to."""
        m = re.search(rb"<" + self.ui.encode() + rb">\s*([^<\s]+)", raw)
        return m.group(1).decode("utf-8", "replace") if m else ""


KINDS = {
    "DescriptorRecord": RecordKind("DescriptorUI", "DescriptorName/String", DESCRIPTOR_UI),
    "SupplementalRecord": RecordKind("SupplementalRecordUI", "SupplementalRecordName/String", re.compile(r"C\d{6,9}")),
}
# each root element and the one kind of record it holds
ROOTS = {"DescriptorRecordSet": ("DescriptorRecord",), "SupplementalRecordSet": ("SupplementalRecord",)}


def split_mesh_xml(path: str, opener: Opener | None = None) -> list[Input]:
    """`path` cut into FileRanges of about kb.io's SPLIT_BYTES at record starts; [path] for a small or gzipped file."""
    return split_records(path, ROOTS, opener)


class MeshXmlReader(KBReader):
    kb = "mesh"
    vocabulary = MESH
    # descriptors and supplementary concept records; each record is checked against its own kind's pattern
    id_pattern = re.compile(r"[CD]\d{6,9}")

    def __init__(self, scope: Scope | dict | None = None):
        self.scope = Scope.of(scope)

    def input_groups(self, paths: Sequence[str], opener: Opener | None = None) -> list[list[Input]]:
        """A group a file, or a range of one: a large uncompressed file is read by several workers."""
        return [[piece] for path in paths for piece in split_mesh_xml(path, opener)]

    def read(self, paths: Sequence[Input], opener: Opener | None = None) -> Iterator[KBItem]:
        for piece in paths:
            ctx = ReaderContext(input_path(piece))
            yield from self._read_file(piece, ctx, opener)
            yield ctx.stats

    def _read_file(self, piece: Input, ctx: ReaderContext, opener: Opener | None) -> Iterator[KBItem]:
        try:
            for item in read_records(piece, ROOTS, opener):
                if isinstance(item, Fault):
                    yield ctx.dead(self._fault_location(item), item.data.decode("utf-8", "replace"), item.reason, item.unread)
                    continue
                kind = KINDS[item.tag]
                try:
                    elem = parse_record(item)
                except RecordError as err:
                    yield ctx.dead(
                        self._location(item.ordinal, kind, kind.ui_in(item.data)),
                        item.data.decode("utf-8", "replace"),
                        f"malformed XML: {err}",
                    )
                    continue
                yield from self._record(elem, kind, item.ordinal, ctx)
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:  # a gzip that fails its check gives no record
            yield ctx.dead("file", "", f"truncated or corrupt gzip stream: {err}")

    @staticmethod
    def _location(ordinal: int, kind: RecordKind, ui: str) -> str:
        return f"record {ordinal} ({kind.ui} {ui})" if ui else f"record {ordinal}"

    def _fault_location(self, fault: Fault) -> str:
        if fault.scope == "record":
            kind = KINDS[fault.tag]
            return self._location(fault.record, kind, kind.ui_in(fault.data))
        if fault.scope == "between":
            return f"after record {fault.after}" if fault.after else "before record 1"
        return "file"

    def _record(self, elem: ET.Element, kind: RecordKind, ordinal: int, ctx: ReaderContext) -> Iterator[KBItem]:
        ui = (elem.findtext(kind.ui) or "").strip()
        name = (elem.findtext(kind.name) or "").strip()
        if not kind.id_pattern.fullmatch(ui) or not name:
            # serialized only here: most records never need their raw text
            location, raw = self._location(ordinal, kind, ui), ET.tostring(elem, encoding="unicode")
            yield self.check_id(ui, ctx, location, raw, kind.id_pattern) or ctx.dead(location, raw, f"missing {kind.name}")
            return
        concepts = elem.findall("ConceptList/Concept")
        terms = [
            (term, text)
            for term in (t for c in concepts for t in c.iterfind("TermList/Term"))
            if (text := (term.findtext("String") or "").strip())
        ]
        if (concept_name := preferred_name([name, *(text for _, text in terms)])) is None:
            location, raw = self._location(ordinal, kind, ui), ET.tostring(elem, encoding="unicode")
            yield self.no_name(ctx, location, raw, f"{kind.name} and every term are")
            return
        preferred = next((c for c in concepts if c.get("PreferredConceptYN") == "Y"), None)
        scope_note = preferred.findtext("ScopeNote") if preferred is not None else None
        definition = (scope_note or elem.findtext("Note") or "").strip()
        tree_numbers = tuple(t.strip() for t in (e.text or "" for e in elem.iterfind("TreeNumberList/TreeNumber")) if t.strip())
        mapped = [(e.text or "").strip().removeprefix(PREFERRED_MAPPING) for e in elem.iterfind(MAPPED_DESCRIPTORS)]
        if (bad := next((m for m in mapped if not DESCRIPTOR_UI.fullmatch(m)), None)) is not None:
            location, raw = self._location(ordinal, kind, ui), ET.tostring(elem, encoding="unicode")
            yield ctx.dead(location, raw, f"HeadingMappedTo DescriptorUI {bad!r} is not a descriptor UI {DESCRIPTOR_UI.pattern}")
            return
        if kind is KINDS["DescriptorRecord"] and (why := self.scope.tree_reason(tree_numbers)) is not None:
            ctx.filtered(why)
            return
        ctx.accept()
        yield ConceptRecord(
            concept_id=ui,
            kb=self.kb,
            preferred_name=concept_name,
            semantic_types=tree_numbers,
            definition=definition or None,
            alt_ids=tuple(qualify(MESH, m) for m in dict.fromkeys(mapped)),
            vocabulary=self.vocabulary,
        )
        for term, text in terms:
            if term.get("RecordPreferredTermYN") == "Y":
                name_type = "preferred"
            elif term.get("LexicalTag") in ABBREVIATION_TAGS:
                name_type = "abbreviation"
            else:
                name_type = "entry_term"
            yield NameRecord(ui, self.kb, text, name_type)
