"""Positive pairs for metric learning (SapBERT, appendix A.3).

Self-alignment: every 2-combination of a concept's distinct names, trimmed to at most
`max_pairs_per_concept` per concept (random, seeded) so concepts with many synonyms do not dominate.
Fine-tuning: each training mention paired with every name of each of its gold concepts.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    left: str
    right: str
    label: str  # the concept both sides belong to


def alignment_pairs(names_by_concept: Mapping[str, Iterable[str]], max_pairs_per_concept: int = 50, seed: int = 0) -> list[Pair]:
    rng = random.Random(seed)
    pairs: list[Pair] = []
    for concept in sorted(names_by_concept):
        names = sorted(set(names_by_concept[concept]))
        combos = list(itertools.combinations(names, 2))
        if len(combos) > max_pairs_per_concept:
            combos = rng.sample(combos, max_pairs_per_concept)
        pairs.extend(Pair(a, b, concept) for a, b in combos)
    return pairs


def mention_pairs(mentions: Iterable[tuple[str, Iterable[str]]], names_by_concept: Mapping[str, Iterable[str]]) -> list[Pair]:
    """(mention text, gold concept ids) -> mention paired with each KB name of each gold concept.
    A mention whose gold concepts have no names in the KB yields nothing (it cannot be aligned)."""
    pairs: list[Pair] = []
    for mention, gold_ids in mentions:
        for concept in sorted(set(gold_ids)):
            pairs.extend(
                Pair(mention, name, concept) for name in sorted(set(names_by_concept.get(concept, ()))) if name != mention
            )
    return pairs


def names_by_concept(rows: Iterable[Mapping]) -> dict[str, list[str]]:
    """Rows of a names table (concept_id, name_norm) -> concept id -> its normalized names."""
    grouped: dict[str, list[str]] = {}
    for row in rows:
        grouped.setdefault(row["concept_id"], []).append(row["name_norm"])
    return grouped
