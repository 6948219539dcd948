"""BioSyn dictionaries (`ID||name`) and the raw BioSyn MEDIC file (`MESH[|OMIM]||preferred|syn|...`).

An id field joins the ids of one concept with `|` (MeSH + OMIM in MEDIC). MEDIC's concept id is its MeSH id
whatever the order on the line (some lines list the OMIM id first); the other ids become alt ids, qualified
`OMIM:...`. Whitespace around ids is stripped (two NCBI test lines have it).

A dictionary (`biosyn-dict`) takes ids of any scheme. Its vocabulary is declared (`vocabulary="SNOMEDCT"`:
every id of the file is in it; a written `SNOMEDCT:` prefix is dropped) or, by default, read from each id:
MeSH and OMIM ids by their shape (MeSH first, as in MEDIC), other ids by a `VOCAB:` prefix (dropped for UMLS,
SNOMEDCT, OMIM and MESH, part of the id otherwise: `HP:0000118`), and an id with neither is in the dictionary's own
vocabulary `LOCAL`. A NIL label (`-1`, `CUI-less`) is no concept: its line is dead-lettered. A composite line (`D008581+D012008||recurrent
meningitis`, BioSyn's composite mentions) gives its name to each of its concepts: BioSyn's evaluation counts
a name right when any of its ids is gold, and a name linked to several concepts keeps all their ids.
A dictionary line whose name is control characters only is dead-lettered (the concept's next usable line creates it);
a MEDIC concept is named by its first usable name.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence

from bioel_core.kb.base import KBItem, KBReader, preferred_name, usable_name
from bioel_core.kb.io import Opener, ReaderContext, parse_lines
from bioel_core.kb.vocab import MESH, MESH_UI, is_nil_id, medic_vocabulary, mesh_first, split_prefix, vocabulary_of
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord

# MeSH descriptor/supplementary ids or OMIM numbers, optionally prefixed (BioSyn strips the prefixes);
# MEDIC's root concept "Diseases" has the bare MeSH category id C.
MEDIC_ID = re.compile(rf"(?:MESH:)?(?:{MESH_UI}|C)|(?:OMIM:)?\d{{6}}")
LOCAL = "LOCAL"  # the vocabulary of a dictionary id that names none


def split_ids(field: str) -> list[str]:
    return [i.strip() for i in field.split("|") if i.strip()]


def bad_id(reader: KBReader, ids: list[str], ctx: ReaderContext, lineno: int, line: str) -> DeadLetter | None:
    """The dead letter for the first id of a line that does not match the KB's pattern, if any."""
    bad = next((i for i in ids if not reader.id_pattern.fullmatch(i)), None)
    return None if bad is None else reader.check_id(bad, ctx, f"line {lineno}", line)


def extra_separator(ctx: ReaderContext, lineno: int, line: str, after_ids: str) -> DeadLetter | None:
    """The dead letter of a line with a second '||' (a field too many: BioSyn's own loader refuses it), if any."""
    if "||" not in after_ids:
        return None
    return ctx.dead(f"line {lineno}", line, f"expected one '||' between the ids and the names, found {line.count('||')}")


class BioSynDictionaryReader(KBReader):
    """One name per line; concepts are emitted on first sight of their id within a file."""

    kb = "medic"
    vocabulary = ""  # "" = read from each id (see the module doc)

    def __init__(self, kb: str = "medic", id_pattern: str | None = None, vocabulary: str | None = None):
        self.kb = kb
        self.vocabulary = (vocabulary or "").upper()
        if id_pattern:
            try:
                self.id_pattern = re.compile(id_pattern)
            except re.error as err:
                from bioel_core.settings.fields import SettingsError

                raise SettingsError("reader.id_pattern", f"{id_pattern!r} is not a regular expression: {err}") from None

    def read(self, paths: Sequence[str], opener: Opener | None = None) -> Iterator[KBItem]:
        for path in paths:
            ctx = ReaderContext(path)
            seen: set[str] = set()  # O(concepts) memory: names stream through
            yield from parse_lines(path, ctx, lambda lineno, line: self._parse(ctx, seen, lineno, line), opener)
            yield ctx.stats

    def classify(self, raw_id: str) -> tuple[str, str]:
        """(vocabulary, bare id) of one id as the dictionary writes it."""
        if self.vocabulary:
            prefix, bare = split_prefix(raw_id)
            return self.vocabulary, bare if prefix == self.vocabulary else raw_id
        prefix, concept_id = vocabulary_of(raw_id)
        return medic_vocabulary(raw_id) or ((prefix, concept_id) if prefix else (LOCAL, raw_id))

    def _parse(self, ctx: ReaderContext, seen: set[str], lineno: int, line: str) -> Iterator[KBItem]:
        ids_field, sep, name = line.partition("||")
        concepts = [split_ids(part) for part in ids_field.split("+")]
        if not sep or not all(concepts) or not name.strip():
            yield ctx.dead(f"line {lineno}", line, "expected 'ID[|ALT][+ID...]||name' with non-empty ids and name")
            return
        if (dead := extra_separator(ctx, lineno, line, name)) is not None:
            yield dead
            return
        nil = next((i for ids in concepts for i in ids if is_nil_id(i)), None)
        if nil is not None:
            yield ctx.dead(
                f"line {lineno}", line, f"id {nil!r} labels a mention with no concept (NIL); a dictionary line names a concept"
            )
            return
        if (dead := bad_id(self, [i for ids in concepts for i in ids], ctx, lineno, line)) is not None:
            yield dead
            return
        name = name.strip()
        if not usable_name(name):  # dead here, so that the concept's next usable line creates it
            yield self.no_name(ctx, f"line {lineno}", line, "the name is")
            return
        ctx.accept()
        for ids in concepts:
            vocabulary, concept_id, alt_ids = mesh_first([self.classify(i) for i in ids])
            if concept_id not in seen:
                seen.add(concept_id)
                yield ConceptRecord(
                    concept_id=concept_id, kb=self.kb, preferred_name=name, alt_ids=alt_ids, vocabulary=vocabulary
                )
                yield NameRecord(concept_id, self.kb, name, "preferred")
            else:
                yield NameRecord(concept_id, self.kb, name, "synonym")


class MedicBioSynReader(KBReader):
    """Raw BioSyn MEDIC: one concept per line, preferred name first, then synonyms (the first usable one names the
    concept)."""

    kb = "medic"
    vocabulary = MESH
    id_pattern = MEDIC_ID

    def read(self, paths: Sequence[str], opener: Opener | None = None) -> Iterator[KBItem]:
        for path in paths:
            ctx = ReaderContext(path)
            yield from parse_lines(path, ctx, lambda lineno, line: self._parse(ctx, lineno, line), opener)
            yield ctx.stats

    def _parse(self, ctx: ReaderContext, lineno: int, line: str) -> Iterator[KBItem]:
        ids_field, sep, names_field = line.partition("||")
        ids = split_ids(ids_field)
        written = [n for n in names_field.split("|") if n.strip()]
        # the 2012 MEDIC dump writes some names with HTML entities ("Parkinson&apos;s Disease")
        names = [html.unescape(n).strip() for n in written]
        if not sep or not ids or not names:
            yield ctx.dead(f"line {lineno}", line, "expected 'ID[|ALT]||preferred name|synonym|...'")
            return
        if (dead := extra_separator(ctx, lineno, line, names_field)) is not None:
            yield dead
            return
        # html.unescape reads a reference to no character (a surrogate, 0, beyond U+10FFFF) as U+FFFD, unsaid
        broken = next((w for w, n in zip(written, names) if "\ufffd" in n and "\ufffd" not in w), None)
        if broken is not None:
            yield ctx.dead(
                f"line {lineno}",
                line,
                f"name {broken.strip()!r} has a character reference to no character (a surrogate, 0 or beyond U+10FFFF)",
            )
            return
        if (dead := bad_id(self, ids, ctx, lineno, line)) is not None:
            yield dead
            return
        if (preferred := preferred_name(names)) is None:
            yield self.no_name(ctx, f"line {lineno}", line, "every name is")
            return
        ctx.accept()
        # every id matched MEDIC_ID, so each is MeSH or OMIM
        vocabulary, concept_id, alt_ids = mesh_first([medic_vocabulary(i) for i in ids])
        yield ConceptRecord(concept_id=concept_id, kb=self.kb, preferred_name=preferred, alt_ids=alt_ids, vocabulary=vocabulary)
        yield NameRecord(concept_id, self.kb, names[0], "preferred")
        for syn in names[1:]:
            yield NameRecord(concept_id, self.kb, syn, "synonym")
