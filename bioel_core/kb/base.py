"""The contract every KB reader keeps.

A reader is constructed with its format options, then `read(paths)` streams `ConceptRecord`,
`NameRecord` and `DeadLetter` items in any order and ends each input file with its `ReadStats`.
`input_groups` says which input files must be read together (UMLS's MRCONSO + MRSTY + MRDEF) and which
can be read in parallel (one CTD file each).

A name is usable when `clean_text` (the rule ingest-kb writes names by) leaves something of it. A concept's preferred
name is its first usable name in the order its format ranks them (`preferred_name`); a record with no usable name is
dead-lettered by its reader (`KBReader.no_name`), so a dump's stray line of control characters is one dead letter,
not a concept with an empty preferred name that fails the KB's quality checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from bioel_core.kb.io import Input, Opener, ReaderContext
from bioel_core.kb.scope import Scope
from bioel_core.kb.vocab import vocabulary_of
from bioel_core.normalize import clean_text
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats

KBItem = ConceptRecord | NameRecord | DeadLetter | ReadStats


def usable_name(name: str | None) -> bool:
    """Whether `name` keeps a printable character once cleaned (control characters only, it is written as nothing)."""
    return bool(name) and bool(clean_text(name))


def preferred_name(names: Iterable[str | None]) -> str | None:
    """A concept's preferred name: the first usable one of `names`, given in the order the format ranks them; None
    when none is usable (the reader dead-letters the record with `KBReader.no_name`)."""
    return next((name for name in names if usable_name(name)), None)


class KBReader:
    #: value written in the `kb` column
    kb: str = ""
    #: the vocabulary of the concept ids this reader writes (the concepts table's `vocabulary` column)
    vocabulary: str = ""
    #: a concept id that does not match is dead-lettered
    id_pattern: re.Pattern = re.compile(r".+")
    #: which of the dump's concepts the entity type holds (readers of formats that can judge set theirs; empty: all)
    scope: Scope = Scope()

    def input_groups(self, paths: Sequence[str], opener: Opener | None = None) -> list[list[Input]]:
        """Default: every file is independent. A reader may also cut a large file into FileRanges read by
        different groups (`opener` opens the inputs for that planning)."""
        return [[p] for p in paths]

    def read(self, paths: Sequence[Input], opener: Opener | None = None) -> Iterator[KBItem]:
        raise NotImplementedError

    def classify(self, raw_id: str) -> tuple[str, str]:
        """(vocabulary, the id as the concepts table stores it) of an id written outside the dump (an extra-names
        file's): a known vocabulary's prefix is dropped (bioel_core.kb.vocab), a bare id is of the reader's vocabulary."""
        prefix, concept_id = vocabulary_of(raw_id)
        return prefix or self.vocabulary, concept_id

    def check_id(
        self, concept_id: str, ctx: ReaderContext, location: str, raw: str, pattern: re.Pattern | None = None
    ) -> DeadLetter | None:
        """None when the id is well formed (matches `pattern`, by default the reader's), else the DeadLetter to emit
        (already counted)."""
        pattern = pattern or self.id_pattern
        if pattern.fullmatch(concept_id):
            return None
        return ctx.dead(location, raw, f"concept id {concept_id!r} does not match the {self.kb} id pattern {pattern.pattern}")

    def no_name(self, ctx: ReaderContext, location: str, raw: str, names: str) -> DeadLetter:
        """The DeadLetter (counted) of a record none of whose names is usable; `names` says which were read and
        ends in its verb ("every name is")."""
        return ctx.dead(location, raw, f"no name with a printable character: {names} control characters only")
