"""Exact match: a query links to the names equal to it after normalization (score 1), in name order."""

from __future__ import annotations

from bioel_core.corpora.records import Candidate
from bioel_core.linking.base import Linker
from bioel_core.names import NameSet


class NameIndex:
    """normalized name -> entry positions, in dictionary order; shared by the linkers' exact paths.

    The distinct names are also the rows the similarity linkers score (a row stands for every entry with
    that name), so `fill` turns ranked rows into candidates the same way for all of them.
    """

    def __init__(self, names: NameSet):
        self.positions: dict[str, list[int]] = {}
        for i, name in enumerate(names.names):
            self.positions.setdefault(name, []).append(i)
        self.row_names = list(self.positions)
        self.row_entries = [self.positions[n] for n in self.row_names]
        self.row_of = {n: r for r, n in enumerate(self.row_names)}

    def candidates(self, names: NameSet, query: str, k: int) -> list[Candidate]:
        return [Candidate(names.concept_ids[i], names.names[i], 1.0) for i in self.positions.get(query, ())[:k]]

    def fill(self, names: NameSet, found: list[Candidate], query: str, ranked_rows, k: int) -> None:
        """Append the entries of `ranked_rows` ((row, score), best first) to `found` up to k, skipping the
        query's own row, which the exact path already gave."""
        skip = self.row_of.get(query)
        for row, score in ranked_rows:
            if row == skip:
                continue
            for e in self.row_entries[row]:
                if len(found) == k:
                    return
                found.append(Candidate(names.concept_ids[e], names.names[e], float(score)))
            if len(found) == k:
                return


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
