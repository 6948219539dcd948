"""The contract every KB reader keeps.

A reader is constructed with its format options, then `read(paths)` streams `ConceptRecord`,
`NameRecord` and `DeadLetter` items in any order and ends each input file with its `ReadStats`.
`input_groups` says which input files must be read together (UMLS's MRCONSO + MRSTY + MRDEF) and which
can be read in parallel (one CTD file each).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from bioel_core.kb.io import Input, Opener, ReaderContext
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats

KBItem = ConceptRecord | NameRecord | DeadLetter | ReadStats


class KBReader:
    #: value written in the `kb` column
    kb: str = ""
    #: the vocabulary of the concept ids this reader writes (the concepts table's `vocabulary` column)
    vocabulary: str = ""
    #: a concept id that does not match is dead-lettered
    id_pattern: re.Pattern = re.compile(r".+")

    def input_groups(self, paths: Sequence[str], opener: Opener | None = None) -> list[list[Input]]:
        """Default: every file is independent. A reader may also cut a large file into FileRanges read by
        different groups (`opener` opens the inputs for that planning)."""
        return [[p] for p in paths]

    def read(self, paths: Sequence[Input], opener: Opener | None = None) -> Iterator[KBItem]:
        raise NotImplementedError

    def check_id(self, concept_id: str, ctx: ReaderContext, location: str, raw: str) -> DeadLetter | None:
        """None when the id is well formed, else the DeadLetter to emit (already counted)."""
        if self.id_pattern.fullmatch(concept_id):
            return None
        return ctx.dead(location, raw, f"concept id {concept_id!r} does not match the {self.kb} id pattern {self.id_pattern.pattern}")
