"""Exact match: a query links to the names equal to it after normalization (score 1), in name order."""

from __future__ import annotations

from bioel_core.corpora.records import Candidate
from bioel_core.linking.base import Linker
from bioel_core.linking.dictionary import NameSet


class NameIndex:
    """normalized name -> entry positions, in dictionary order; shared by the linkers' exact paths."""

    def __init__(self, names: NameSet):
        self.positions: dict[str, list[int]] = {}
        for i, name in enumerate(names.names):
            self.positions.setdefault(name, []).append(i)

    def candidates(self, names: NameSet, query: str, k: int) -> list[Candidate]:
        return [Candidate(names.concept_ids[i], names.names[i], 1.0) for i in self.positions.get(query, ())[:k]]


class ExactLinker(Linker):
    kind = "exact"

    def __init__(self, names: NameSet):
        super().__init__(names)
        self.index = NameIndex(names)

    @classmethod
    def build(cls, names: NameSet, **options) -> ExactLinker:
        if options:
            raise ValueError(f"the exact linker takes no options, got {sorted(options)}")
        return cls(names)

    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        return [self.index.candidates(self.names, q, k) for q in queries]
