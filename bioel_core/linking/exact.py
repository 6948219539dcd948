"""Exact match: a query links to the names equal to it after normalization (score 1), in name order."""

from __future__ import annotations

import numpy as np

from bioel_core.corpora.records import Candidate
from bioel_core.linking.base import Linker
from bioel_core.names import NameSet


class NameIndex:
    """normalized name -> entry positions, in dictionary order; shared by the linkers' exact paths.

    The distinct names are also the rows the similarity linkers score (a row stands for every entry with
    that name), so `fill` turns ranked rows into candidates the same way for all of them. A row's entries are
    a slice of one array (rows in first-appearance order), not a list each: a UMLS-size KB has ~10M rows.
    """

    def __init__(self, names: NameSet):
        self.row_of: dict[str, int] = {}
        row_at = np.fromiter((self.row_of.setdefault(n, len(self.row_of)) for n in names.names), np.int64, len(names))
        self.row_names = list(self.row_of)
        self._entries = np.argsort(row_at, kind="stable")  # entries grouped by row, each row's in name order
        self._starts = np.searchsorted(row_at[self._entries], np.arange(len(self.row_names) + 1))

    def entries(self, row: int) -> list[int]:
        """The entry positions of a row, in name order."""
        return self._entries[self._starts[row] : self._starts[row + 1]].tolist()

    def entries_of(self, query: str) -> list[int]:
        """The entry positions whose name is `query` (none: [])."""
        row = self.row_of.get(query)
        return [] if row is None else self.entries(row)

    def candidates(self, names: NameSet, query: str, k: int) -> list[Candidate]:
        return [Candidate(names.concept_ids[i], names.names[i], 1.0) for i in self.entries_of(query)[:k]]

    def fill(self, names: NameSet, found: list[Candidate], query: str, ranked_rows, k: int) -> None:
        """Append the entries of `ranked_rows` ((row, score), best first) to `found` up to k, skipping the
        query's own row, which the exact path already gave."""
        skip = self.row_of.get(query)
        for row, score in ranked_rows:
            if row == skip:
                continue
            for e in self.entries(row):
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
