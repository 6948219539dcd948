"""NLM MeSH descriptor XML (descYYYY.xml, optionally gzipped): one concept per DescriptorRecord.

Parsed with iterparse and each record cleared once used, so memory holds one record. Names are every Term
of every Concept of the record: the record preferred term, abbreviations (LexicalTag ABB/ACR), and entry
terms (permuted terms included). The definition is the preferred concept's ScopeNote; the tree numbers are
the semantic types. Malformed XML ends the file with one DeadLetter naming the record being read and the
parser's line and column; what was emitted before it stands.
"""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Sequence

from bioel_core.kb.base import KBItem, KBReader
from bioel_core.kb.io import Opener, ReaderContext, open_kb_file
from bioel_core.kb.vocab import MESH
from bioel_core.records import ConceptRecord, NameRecord

ABBREVIATION_TAGS = {"ABB", "ACR"}
ROOT = "DescriptorRecordSet"
RECORD = "DescriptorRecord"


class MeshXmlReader(KBReader):
    kb = "mesh"
    vocabulary = MESH
    id_pattern = re.compile(r"D\d{6,9}")

    def read(self, paths: Sequence[str], opener: Opener | None = None) -> Iterator[KBItem]:
        for path in paths:
            ctx = ReaderContext(path)
            yield from self._read_file(path, ctx, opener)
            yield ctx.stats

    def _read_file(self, path: str, ctx: ReaderContext, opener: Opener | None) -> Iterator[KBItem]:
        root = None
        record_no = 0  # records started
        depth = 0
        ui = ""  # DescriptorUI of the record being read, for error locations
        try:
            with open_kb_file(path, opener) as fh:
                for event, elem in ET.iterparse(fh, events=("start", "end")):
                    if event == "start":
                        depth += 1
                        if root is None:
                            root = elem
                            if elem.tag != ROOT:
                                yield ctx.dead("file", "", f"root element is <{elem.tag}>, not <{ROOT}>")
                                return
                        elif depth == 2 and elem.tag == RECORD:
                            record_no += 1
                            ui = ""
                        continue
                    depth -= 1
                    if depth == 2 and elem.tag == "DescriptorUI":
                        ui = (elem.text or "").strip()
                    elif depth == 1 and elem.tag == RECORD:
                        yield from self._record(elem, record_no, ctx)
                        root.clear()  # drops the finished record and keeps the root from growing
        except ET.ParseError as err:
            if root is None:
                yield ctx.dead("file", "", f"empty file or no XML element: {err}")
            else:
                yield ctx.dead(self._location(record_no, ui, depth), "", f"malformed XML: {err}")
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            yield ctx.dead(self._location(record_no, ui, depth), "", f"truncated or corrupt gzip stream: {err}")

    @staticmethod
    def _location(record_no: int, ui: str, depth: int = 2) -> str:
        """Where a fault hit: inside record N, or (depth < 2, between records) where record N+1 would be."""
        if depth < 2:
            return f"record {record_no + 1}"
        return f"record {record_no} (DescriptorUI {ui})" if ui else f"record {record_no}"

    def _record(self, elem: ET.Element, record_no: int, ctx: ReaderContext) -> Iterator[KBItem]:
        ui = (elem.findtext("DescriptorUI") or "").strip()
        name = (elem.findtext("DescriptorName/String") or "").strip()
        if not self.id_pattern.fullmatch(ui) or not name:
            # serialized only here: most records never need their raw text
            location, raw = self._location(record_no, ui), ET.tostring(elem, encoding="unicode")
            yield self.check_id(ui, ctx, location, raw) or ctx.dead(location, raw, "missing DescriptorName/String")
            return
        concepts = elem.findall("ConceptList/Concept")
        preferred = next((c for c in concepts if c.get("PreferredConceptYN") == "Y"), None)
        definition = (preferred.findtext("ScopeNote") or "").strip() if preferred is not None else ""
        tree_numbers = tuple(t.strip() for t in (e.text or "" for e in elem.iterfind("TreeNumberList/TreeNumber")) if t.strip())
        ctx.accept()
        yield ConceptRecord(concept_id=ui, kb=self.kb, preferred_name=name, semantic_types=tree_numbers,
                            definition=definition or None, vocabulary=self.vocabulary)
        for term in (t for c in concepts for t in c.iterfind("TermList/Term")):
            text = (term.findtext("String") or "").strip()
            if not text:
                continue
            if term.get("RecordPreferredTermYN") == "Y":
                name_type = "preferred"
            elif term.get("LexicalTag") in ABBREVIATION_TAGS:
                name_type = "abbreviation"
            else:
                name_type = "entry_term"
            yield NameRecord(ui, self.kb, text, name_type)
