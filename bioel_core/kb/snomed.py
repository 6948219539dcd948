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
characters only is dead-lettered, so a concept is named by its first usable description of that ranking.

Each active concept row is accounted for once every description is read: a named concept is accepted; one whose
descriptions the language refset or acceptability options all left out is filtered ("no description kept: ..."); one
with no active FSN or synonym description, or whose descriptions were dead-lettered, is a dead letter naming the
concept file's line and why, so no active concept goes missing unsaid.
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
DESCRIPTION_COLUMNS = [
    "id",
    "effectiveTime",
    "active",
    "moduleId",
    "conceptId",
    "languageCode",
    "typeId",
    "term",
    "caseSignificanceId",
]
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


@dataclass(slots=True)
class ActiveConcept:
    """An active concept row, accounted for once the descriptions are read."""

    ctx: ReaderContext  # its concept file's
    lineno: int
    line: str
    left_out_by: str | None = None  # the filter reason of one of its FSN or synonym descriptions
    dead_descriptions: int = 0  # of its FSN and synonym descriptions, those dead-lettered


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
        active: dict[str, ActiveConcept] = {}
        concept_files = [ReaderContext(path) for path in files["concept"]]
        for ctx in concept_files:
            yield from self._read_concepts(ctx, active, opener)
        acceptability: dict[str, str] | None = {} if files["language"] else None
        for path in files["language"]:
            yield from self._read_language(path, acceptability, opener)
        names: dict[str, ConceptNames] = {}
        for path in files["description"]:
            yield from self._read_descriptions(path, active, acceptability, names, opener)
        for concept_id, c in names.items():
            yield ConceptRecord(
                concept_id=concept_id,
                kb=self.kb,
                preferred_name=preferred_name((c.preferred, c.fsn, c.first_synonym)),
                semantic_types=(c.tag,) if c.tag else (),
                vocabulary=self.vocabulary,
            )
        yield from self._account_for(active, names)
        for ctx in concept_files:
            yield ctx.stats

    @staticmethod
    def _account_for(active: dict[str, ActiveConcept], names: dict[str, ConceptNames]) -> Iterator[DeadLetter]:
        """Each active concept row: accepted when the concept is named, else filtered or dead-lettered with why."""
        for concept_id, concept in active.items():
            if concept_id in names:
                concept.ctx.accept()
            elif concept.dead_descriptions:
                yield concept.ctx.dead(
                    f"line {concept.lineno}",
                    concept.line,
                    f"active concept {concept_id} has no name: {concept.dead_descriptions} of its FSN and "
                    "synonym descriptions were dead-lettered",
                )
            elif concept.left_out_by is not None:
                concept.ctx.filtered(f"no description kept: {concept.left_out_by}")
            else:
                yield concept.ctx.dead(
                    f"line {concept.lineno}",
                    concept.line,
                    f"active concept {concept_id} has no name: no active FSN or synonym description",
                )

    def _rows(
        self, path: str, columns: list[str], id_columns: tuple[str, ...], ctx: ReaderContext, opener: Opener | None
    ) -> Iterator[tuple[int, str, dict[str, str]] | DeadLetter]:
        """Active, well-formed rows of one RF2 file; inactive rows are counted as filtered here."""
        for item in tsv_rows(path, ctx, columns, "RF2", opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line, row = item
            bad = next((c for c in id_columns if not self.id_pattern.fullmatch(row[c])), None)
            if bad is not None:
                yield ctx.dead(
                    f"line {lineno}",
                    line,
                    f"{bad} {row[bad]!r} does not match the {self.kb} id pattern {self.id_pattern.pattern}",
                )
                continue
            if row["active"] not in ("0", "1"):
                yield ctx.dead(f"line {lineno}", line, f"active is {row['active']!r}, not 0 or 1")
                continue
            if row["active"] == "0":
                ctx.filtered("inactive")
                continue
            yield lineno, line, row

    def _read_concepts(self, ctx: ReaderContext, active: dict[str, ActiveConcept], opener: Opener | None) -> Iterator[DeadLetter]:
        """Notes the active concepts of one concept file; each is accounted for after the descriptions
        (`_account_for`), its file's stats with it."""
        for item in self._rows(ctx.source, CONCEPT_COLUMNS, ("id",), ctx, opener):
            if isinstance(item, DeadLetter):
                yield item
            elif item[2]["id"] in active:
                ctx.filtered("active concept listed again")
            else:
                active[item[2]["id"]] = ActiveConcept(ctx, item[0], item[1])

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

    def _read_descriptions(
        self,
        path: str,
        active: dict[str, ActiveConcept],
        acceptability: dict[str, str] | None,
        names: dict[str, ConceptNames],
        opener: Opener | None,
    ) -> Iterator[KBItem]:
        ctx = ReaderContext(path)
        for item in self._rows(path, DESCRIPTION_COLUMNS, ("id", "conceptId"), ctx, opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line, row = item
            concept_id, term = row["conceptId"], row["term"].strip()
            concept = active.get(concept_id) if row["typeId"] in (FSN_TYPE, SYNONYM_TYPE) else None  # one that may name it
            if not term:
                if concept is not None:
                    concept.dead_descriptions += 1
                yield ctx.dead(f"line {lineno}", line, "empty term")
                continue
            if concept_id not in active:
                ctx.filtered("concept not active")
                continue
            if concept is None:
                ctx.filtered("other description type")
                continue
            accepted_as = acceptability.get(row["id"]) if acceptability is not None else None
            left_out = None
            if acceptability is not None and accepted_as is None:
                left_out = "not in language refset"
            elif self.acceptability == "preferred" and acceptability is not None and accepted_as != PREFERRED:
                left_out = "not preferred"
            if left_out is not None:
                concept.left_out_by = left_out
                ctx.filtered(left_out)
                continue
            match = SEMANTIC_TAG.fullmatch(term) if row["typeId"] == FSN_TYPE else None
            name, tag = (match[1], match[2]) if match else (term, None)  # an FSN's name is its term less the tag
            if not usable_name(name):  # so a concept's names, and its preferred name, are usable ones
                concept.dead_descriptions += 1
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
