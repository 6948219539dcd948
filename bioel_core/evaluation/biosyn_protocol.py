"""The BioSyn evaluation protocol, the one behind published NCBI-disease / BC5CDR-disease accuracies.

- Every query line counts (duplicates included).
- A mention is split on `|` and `+` into sub-mentions; each sub-mention gets its own top k.
- A candidate is correct when its id set shares any id with the gold ids (gold split on `|` and `+`); ids are
  compared without a known vocabulary prefix (`OMIM:208900` = `208900`), since a KB table qualifies its alt ids.
- acc@k: a query is a hit only when every sub-mention has a correct candidate in its top k.
MAP (not part of BioSyn's protocol, reported beside it): per sub-mention, average precision over the
correct candidates in the top k (0 without one); averaged over a query's sub-mentions, then over queries.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bioel_core.corpora.pubtator import split_ids
from bioel_core.corpora.records import Candidate, Mention
from bioel_core.kb.vocab import plain_id
from bioel_core.text.preprocess import QueryPreprocessor, split_composite


@dataclass(frozen=True)
class QueryResult:
    mention: Mention
    sub_mentions: tuple[str, ...]
    gold: frozenset[str]
    candidates: tuple[tuple[Candidate, ...], ...]  # per sub-mention, best first
    sub_ranks: tuple[int | None, ...]  # per sub-mention: 1-based rank of the first correct candidate

    @property
    def rank(self) -> int | None:
        """The rank k from which the query is a hit (the worst sub-mention's), None if never within the top k."""
        return None if any(r is None for r in self.sub_ranks) else max(self.sub_ranks)

    def hit(self, k: int) -> bool:
        return self.rank is not None and self.rank <= k

    @property
    def average_precision(self) -> float:
        aps = []
        for cands in self.candidates:
            correct = [i for i, c in enumerate(cands, start=1) if is_correct(c.concept_ids, self.gold)]
            aps.append(sum(n / i for n, i in enumerate(correct, start=1)) / len(correct) if correct else 0.0)
        return sum(aps) / len(aps)


def gold_ids(mention: Mention) -> frozenset[str]:
    return frozenset(plain_id(i) for field in mention.concept_ids for i in split_ids(field))


def is_correct(candidate_ids: Iterable[str], gold: frozenset[str]) -> bool:
    return any(plain_id(i) in gold for cid in candidate_ids for i in cid.split("|"))


def score_query(mention: Mention, sub_mentions: Sequence[str], candidates: Sequence[Sequence[Candidate]]) -> QueryResult:
    if len(sub_mentions) != len(candidates) or not sub_mentions:
        raise ValueError(f"query {mention.text!r}: {len(candidates)} candidate lists for {len(sub_mentions)} sub-mentions")
    gold = gold_ids(mention)
    ranks = tuple(
        next((i for i, c in enumerate(cands, start=1) if is_correct(c.concept_ids, gold)), None) for cands in candidates
    )
    return QueryResult(mention, tuple(sub_mentions), gold, tuple(tuple(c) for c in candidates), ranks)


def run_protocol(
    linker, queries: Sequence[Mention], k: int = 5, preprocessor: QueryPreprocessor | None = None, batch_size: int = 256
) -> list[QueryResult]:
    """Link every sub-mention of every query (one batched call) and score each query."""
    subs = []
    for q in queries:
        if not q.concept_ids:
            raise ValueError(
                f"query {q.doc_id} {q.start}-{q.end} {q.text!r} has no concept id; BioSyn leaves -1 queries out before scoring"
            )
        parts = split_composite(q.text)
        if preprocessor is not None:
            parts = [p for part in parts for p in preprocessor.sub_mentions(part)]
        if not parts:
            raise ValueError(f"query {q.doc_id} {q.start}-{q.end}: mention {q.text!r} has no sub-mention")
        subs.append(parts)
    flat = [p for parts in subs for p in parts]
    ranked = linker.link(flat, k=k, batch_size=batch_size)
    results, pos = [], 0
    for q, parts in zip(queries, subs):
        results.append(score_query(q, parts, ranked[pos : pos + len(parts)]))
        pos += len(parts)
    return results


def summarize(results: Sequence[QueryResult], k: int) -> dict:
    """{"n", "acc@1", ..., "acc@k", "map"}; accuracies in percent."""
    n = len(results)
    out: dict = {"n": n}
    for i in range(1, k + 1):
        out[f"acc@{i}"] = 100.0 * sum(r.hit(i) for r in results) / n if n else 0.0
    out["map"] = 100.0 * sum(r.average_precision for r in results) / n if n else 0.0
    return out


def evaluate(
    linker, queries: Sequence[Mention], k: int = 5, preprocessor: QueryPreprocessor | None = None
) -> tuple[dict, list[QueryResult]]:
    """Scores (with the linking time in seconds) and the per-query results."""
    t0 = time.perf_counter()
    results = run_protocol(linker, queries, k, preprocessor)
    scores = summarize(results, k)
    scores["seconds"] = time.perf_counter() - t0
    return scores, results
