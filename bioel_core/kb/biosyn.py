"""BioSyn dictionaries (`ID||name`) and the raw BioSyn MEDIC file (`MESH[|OMIM]||preferred|syn|...`).

A dictionary id field may join several ids of one concept with `|` (MeSH + OMIM); the first is the
concept id and the rest are alt ids. Whitespace around ids is stripped (two NCBI test lines have it).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence

from bioel_core.kb.base import KBItem, KBReader
from bioel_core.kb.io import Opener, ReaderContext, parse_lines
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord

# MeSH descriptor/supplementary ids, optionally prefixed, or OMIM numbers (BioSyn strips the prefixes);
# MEDIC's root concept "Diseases" has the bare MeSH category id C.
MEDIC_ID = re.compile(r"(?:MESH:)?(?:[CD]\d{6,9}|C)|(?:OMIM:)?\d{6}")


def split_ids(field: str) -> list[str]:
    return [i.strip() for i in field.split("|") if i.strip()]


def bad_id(reader: KBReader, ids: list[str], ctx: ReaderContext, lineno: int, line: str) -> DeadLetter | None:
    """The dead letter for the first id of a line that does not match the KB's pattern, if any."""
    bad = next((i for i in ids if not reader.id_pattern.fullmatch(i)), None)
    return None if bad is None else reader.check_id(bad, ctx, f"line {lineno}", line)


class BioSynDictionaryReader(KBReader):
    """One name per line; concepts are emitted on first sight of their id within a file."""

    kb = "medic"
    id_pattern = MEDIC_ID

    def __init__(self, kb: str = "medic", id_pattern: str | None = None):
        self.kb = kb
        if id_pattern:
            self.id_pattern = re.compile(id_pattern)

    def read(self, paths: Sequence[str], opener: Opener | None = None) -> Iterator[KBItem]:
        for path in paths:
            ctx = ReaderContext(path)
            seen: set[str] = set()  # O(concepts) memory: names stream through
            yield from parse_lines(path, ctx, lambda lineno, line: self._parse(ctx, seen, lineno, line), opener)
            yield ctx.stats

    def _parse(self, ctx: ReaderContext, seen: set[str], lineno: int, line: str) -> Iterator[KBItem]:
        ids_field, sep, name = line.partition("||")
        ids = split_ids(ids_field)
        if not sep or not ids or not name.strip():
            yield ctx.dead(f"line {lineno}", line, "expected 'ID||name' with a non-empty id and name")
            return
        if (dead := bad_id(self, ids, ctx, lineno, line)) is not None:
            yield dead
            return
        ctx.accept()
        concept_id, name = ids[0], name.strip()
        if concept_id not in seen:
            seen.add(concept_id)
            yield ConceptRecord(concept_id=concept_id, kb=self.kb, preferred_name=name, alt_ids=tuple(ids[1:]))
            yield NameRecord(concept_id, self.kb, name, "preferred")
        else:
            yield NameRecord(concept_id, self.kb, name, "synonym")


class MedicBioSynReader(KBReader):
    """Raw BioSyn MEDIC: one concept per line, preferred name first, then synonyms."""

    kb = "medic"
    id_pattern = MEDIC_ID

    def read(self, paths: Sequence[str], opener: Opener | None = None) -> Iterator[KBItem]:
        for path in paths:
            ctx = ReaderContext(path)
            yield from parse_lines(path, ctx, lambda lineno, line: self._parse(ctx, lineno, line), opener)
            yield ctx.stats

    def _parse(self, ctx: ReaderContext, lineno: int, line: str) -> Iterator[KBItem]:
        ids_field, sep, names_field = line.partition("||")
        ids = split_ids(ids_field)
        # the 2012 MEDIC dump writes some names with HTML entities ("Parkinson&apos;s Disease")
        names = [html.unescape(n).strip() for n in names_field.split("|") if n.strip()]
        if not sep or not ids or not names:
            yield ctx.dead(f"line {lineno}", line, "expected 'ID[|ALT]||preferred name|synonym|...'")
            return
        if (dead := bad_id(self, ids, ctx, lineno, line)) is not None:
            yield dead
            return
        ctx.accept()
        concept_id = ids[0]
        yield ConceptRecord(concept_id=concept_id, kb=self.kb, preferred_name=names[0], alt_ids=tuple(ids[1:]))
        yield NameRecord(concept_id, self.kb, names[0], "preferred")
        for syn in names[1:]:
            yield NameRecord(concept_id, self.kb, syn, "synonym")
