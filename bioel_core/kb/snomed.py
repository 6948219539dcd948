"""SNOMED CT RF2 Snapshot files: concepts, descriptions and, optionally, a language reference set.

Files are told apart by basename (sct2_Concept_Snapshot_*, sct2_Description_Snapshot-<lang>_*,
der2_cRefset_LanguageSnapshot-<lang>_*, each .txt, optionally gzipped) and read together: concepts first,
then the language refset, then descriptions. Not constant memory: the active concept ids, the refset's
acceptability per description id and, per named concept, its preferred name and semantic tag are held in
memory, because RF2 descriptions are not sorted by concept and a concept's preferred name is known only
once all its descriptions are read. Names stream out as descriptions are read; the one ConceptRecord per
concept follows the last description file.

When a language refset file is given, only descriptions it lists are kept (language_refset_ids narrows
which refsets count; a description preferred in any counted refset is preferred); its preferred synonym is
the concept's preferred name and `acceptability="preferred"` drops merely acceptable descriptions.
Without one, the preferred name is the FSN without its semantic tag. A description whose name is control
characters only is dead-lettered, so a concept is named by its first usable description of that ranking and a
concept with none is not written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bioel_core.kb.base import KBItem, KBReader, preferred_name, usable_name
from bioel_core.kb.io import Opener, ReaderContext, tsv_rows
from bioel_core.kb.vocab import SNOMEDCT
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord

CONCEPT_COLUMNS = ["id", "effectiveTime", "active", "moduleId", "definitionStatusId"]
DESCRIPTION_COLUMNS = ["id", "effectiveTime", "active", "moduleId", "conceptId", "languageCode", "typeId", "term",
                       "caseSignificanceId"]
LANGUAGE_COLUMNS = ["id", "effectiveTime", "active", "moduleId", "refsetId", "referencedComponentId", "acceptabilityId"]
FILE_KINDS = {
    "concept": re.compile(r"sct2_Concept_Snapshot_.*\.txt(?:\.gz)?"),
    "description": re.compile(r"sct2_Description_Snapshot-[A-Za-z-]+_.*\.txt(?:\.gz)?"),
    "language": re.compile(r"der2_cRefset_LanguageSnapshot-[A-Za-z-]+_.*\.txt(?:\.gz)?"),
}
FSN_TYPE = "900000000000003001"
SYNONYM_TYPE = "900000000000013009"
PREFERRED = "900000000000548007"
ACCEPTABLE = "900000000000549004"
SEMANTIC_TAG = re.compile(r"(.+?)\s+\(([^()]+)\)")  # "Myocardial infarction (disorder)"


@dataclass
class ConceptNames:
    preferred: str | None = None
    fsn: str | None = None
    tag: str | None = None
    first_synonym: str | None = None


class SnomedReader(KBReader):
    kb = "snomed"
    vocabulary = SNOMEDCT
    id_pattern = re.compile(r"\d{6,18}")

    def __init__(self, language_refset_ids: Sequence[str] | None = None, acceptability: str = "any"):
        if acceptability not in ("any", "preferred"):
            raise ValueError(f"acceptability must be 'any' or 'preferred', not {acceptability!r}")
        self.language_refset_ids = {str(i) for i in language_refset_ids} if language_refset_ids else None
        self.acceptability = acceptability

    def input_groups(self, paths: Sequence[str], opener: Opener | None = None) -> list[list[str]]:
        return [list(paths)]

    def read(self, paths: Sequence[str], opener: Opener | None = None) -> Iterator[KBItem]:
        files: dict[str, list[str]] = {kind: [] for kind in FILE_KINDS}
        for path in paths:
            base = path.rsplit("/", 1)[-1]
            kind = next((k for k, pattern in FILE_KINDS.items() if pattern.fullmatch(base)), None)
            if kind is None:
                ctx = ReaderContext(path)
                yield ctx.dead("file", "", "not an RF2 Snapshot concept, description or language refset file")
                yield ctx.stats
            else:
                files[kind].append(path)
        if self.language_refset_ids and not files["language"]:
            raise ValueError("language_refset_ids given but no der2_cRefset_LanguageSnapshot file among the inputs")
        active: set[str] = set()
        for path in files["concept"]:
            yield from self._read_concepts(path, active, opener)
        acceptability: dict[str, str] | None = {} if files["language"] else None
        for path in files["language"]:
            yield from self._read_language(path, acceptability, opener)
        names: dict[str, ConceptNames] = {}
        for path in files["description"]:
            yield from self._read_descriptions(path, active, acceptability, names, opener)
        for concept_id, c in names.items():
            yield ConceptRecord(concept_id=concept_id, kb=self.kb, preferred_name=preferred_name((c.preferred, c.fsn, c.first_synonym)),
                                semantic_types=(c.tag,) if c.tag else (), vocabulary=self.vocabulary)

    def _rows(self, path: str, columns: list[str], id_columns: tuple[str, ...], ctx: ReaderContext,
              opener: Opener | None) -> Iterator[tuple[int, str, dict[str, str]] | DeadLetter]:
        """Active, well-formed rows of one RF2 file; inactive rows are counted as filtered here."""
        for item in tsv_rows(path, ctx, columns, "RF2", opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line, row = item
            bad = next((c for c in id_columns if not self.id_pattern.fullmatch(row[c])), None)
            if bad is not None:
                yield ctx.dead(f"line {lineno}", line, f"{bad} {row[bad]!r} does not match the {self.kb} id pattern {self.id_pattern.pattern}")
                continue
            if row["active"] not in ("0", "1"):
                yield ctx.dead(f"line {lineno}", line, f"active is {row['active']!r}, not 0 or 1")
                continue
            if row["active"] == "0":
                ctx.filtered("inactive")
                continue
            yield lineno, line, row

    def _read_concepts(self, path: str, active: set[str], opener: Opener | None) -> Iterator[KBItem]:
        ctx = ReaderContext(path)
        for item in self._rows(path, CONCEPT_COLUMNS, ("id",), ctx, opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            ctx.accept()
            active.add(item[2]["id"])
        yield ctx.stats

    def _read_language(self, path: str, acceptability: dict[str, str], opener: Opener | None) -> Iterator[KBItem]:
        ctx = ReaderContext(path)
        for item in self._rows(path, LANGUAGE_COLUMNS, ("refsetId", "referencedComponentId"), ctx, opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line, row = item
            if row["acceptabilityId"] not in (PREFERRED, ACCEPTABLE):
                yield ctx.dead(f"line {lineno}", line, f"unknown acceptabilityId {row['acceptabilityId']!r}")
                continue
            if self.language_refset_ids is not None and row["refsetId"] not in self.language_refset_ids:
                ctx.filtered("language refset not selected")
                continue
            ctx.accept()
            description_id = row["referencedComponentId"]
            if acceptability.get(description_id) != PREFERRED:  # preferred in any counted refset wins
                acceptability[description_id] = row["acceptabilityId"]
        yield ctx.stats

    def _read_descriptions(self, path: str, active: set[str], acceptability: dict[str, str] | None,
                           names: dict[str, ConceptNames], opener: Opener | None) -> Iterator[KBItem]:
        ctx = ReaderContext(path)
        for item in self._rows(path, DESCRIPTION_COLUMNS, ("id", "conceptId"), ctx, opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line, row = item
            concept_id, term = row["conceptId"], row["term"].strip()
            if not term:
                yield ctx.dead(f"line {lineno}", line, "empty term")
                continue
            if concept_id not in active:
                ctx.filtered("concept not active")
                continue
            if row["typeId"] not in (FSN_TYPE, SYNONYM_TYPE):
                ctx.filtered("other description type")
                continue
            accepted_as = acceptability.get(row["id"]) if acceptability is not None else None
            if acceptability is not None and accepted_as is None:
                ctx.filtered("not in language refset")
                continue
            if self.acceptability == "preferred" and acceptability is not None and accepted_as != PREFERRED:
                ctx.filtered("not preferred")
                continue
            match = SEMANTIC_TAG.fullmatch(term) if row["typeId"] == FSN_TYPE else None
            name, tag = (match[1], match[2]) if match else (term, None)  # an FSN's name is its term less the tag
            if not usable_name(name):  # so a concept's names, and its preferred name, are usable ones
                yield self.no_name(ctx, f"line {lineno}", line, "term less its semantic tag is" if match else "term is")
                continue
            ctx.accept()
            concept = names.setdefault(concept_id, ConceptNames())
            if row["typeId"] == FSN_TYPE:
                if concept.fsn is None:
                    concept.fsn, concept.tag = name, tag
                yield NameRecord(concept_id, self.kb, name, "fsn")
            elif accepted_as == PREFERRED:
                concept.preferred = concept.preferred or term
                yield NameRecord(concept_id, self.kb, term, "preferred")
            else:
                concept.first_synonym = concept.first_synonym or term
                yield NameRecord(concept_id, self.kb, term, "synonym")
        yield ctx.stats
