"""Fine-tuning batches built around each mention's nearest wrong concepts.

With random batches of 64 pairs the in-batch negatives of a mention are unrelated diseases: the miner finds
few hard triplets and the loss barely moves (measured: 300 CPU steps left NCBI dev unchanged). BioSyn's
remedy is to rank the dictionary with the current model and train against the top wrong candidates. Here
each mention brings into its batch one pair (mention, a gold name) and, for each of its top wrong concepts,
a pair of that concept's names, so the miner sees exactly the confusions the model makes. Negatives are
mined again with the current weights at the start of every epoch and kept in a JSON file, so a resumed
run trains on the same batches as an uninterrupted one.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import faiss
import numpy as np

from bioel_core.training.pairs import Pair


def mine_negatives(
    encoder,
    mentions: Sequence[tuple[str, Sequence[str]]],
    names_by_concept: Mapping[str, Sequence[str]],
    per_mention: int,
    batch_size: int = 256,
    progress: bool = False,
) -> list[list[tuple[str, str]]]:
    """For each (mention, gold ids): the `per_mention` nearest concepts that are not gold, as
    (concept id, its nearest name), best first."""
    names, owners = [], []
    for concept in sorted(names_by_concept):
        for name in sorted(set(names_by_concept[concept])):
            names.append(name)
            owners.append(concept)
    index = faiss.IndexFlatIP(encoder.dim)
    index.add(encoder.encode(names, batch_size=batch_size, show_progress=progress))
    queries = encoder.encode([m for m, _ in mentions], batch_size=batch_size, show_progress=progress)
    # enough neighbours to skip the gold concept's names and repeated concepts
    depth = min(index.ntotal, 8 * per_mention + 32)
    _, rows = index.search(np.ascontiguousarray(queries, dtype=np.float32), depth)
    out = []
    for (_, gold), ranked in zip(mentions, rows):
        seen, found = set(gold), []
        for row in ranked:
            if row < 0 or owners[row] in seen:
                continue
            seen.add(owners[row])
            found.append((owners[row], names[row]))
            if len(found) == per_mention:
                break
        out.append(found)
    return out


def hard_negative_batches(
    mentions: Sequence[tuple[str, Sequence[str]]],
    names_by_concept: Mapping[str, Sequence[str]],
    negatives: Sequence[Sequence[tuple[str, str]]],
    pairs_per_batch: int,
    seed: int,
) -> list[list[Pair]]:
    """Shuffled mentions, each contributing (mention, random gold name) and, per mined negative concept,
    (its nearest name, another of its names) — the same name twice when it has only one."""
    rng = random.Random(seed)
    mentions_per_batch = max(1, pairs_per_batch // (1 + max((len(n) for n in negatives), default=0)))
    order = list(range(len(mentions)))
    rng.shuffle(order)
    batches, batch, in_batch = [], [], 0
    for i in order:
        text, gold = mentions[i]
        candidates = [(c, n) for c in sorted(set(gold)) for n in sorted(set(names_by_concept.get(c, ()))) if n != text]
        if not candidates:
            continue
        concept, name = rng.choice(candidates)
        batch.append(Pair(text, name, concept))
        for neg_concept, neg_name in negatives[i]:
            others = [n for n in sorted(set(names_by_concept[neg_concept])) if n != neg_name]
            batch.append(Pair(neg_name, rng.choice(others) if others else neg_name, neg_concept))
        in_batch += 1
        if in_batch == mentions_per_batch:
            batches.append(batch)
            batch, in_batch = [], 0
    if batch:
        batches.append(batch)
    return batches


class HardNegativeBatcher:
    """Per-epoch batches for `train`: mines with the encoder as it is at the epoch's start, caches to disk."""

    def __init__(
        self,
        encoder,
        mentions,
        names_by_concept,
        negatives_per_mention: int,
        pairs_per_batch: int,
        seed: int,
        cache_dir: str | Path,
        progress: bool = False,
    ):
        self.encoder, self.mentions, self.names_by_concept = encoder, list(mentions), names_by_concept
        self.negatives_per_mention, self.pairs_per_batch, self.seed = negatives_per_mention, pairs_per_batch, seed
        self.cache_dir, self.progress = Path(cache_dir), progress

    def steps_per_epoch(self) -> int:
        usable = sum(
            1 for text, gold in self.mentions if any(n != text for c in set(gold) for n in self.names_by_concept.get(c, ()))
        )
        per_batch = max(1, self.pairs_per_batch // (1 + self.negatives_per_mention))
        return -(-usable // per_batch)

    def __call__(self, epoch: int) -> list[list[Pair]]:
        cache = self.cache_dir / f"negatives-epoch{epoch}.json"
        if cache.is_file():
            negatives = [[tuple(x) for x in row] for row in json.loads(cache.read_text())]
        else:
            negatives = mine_negatives(
                self.encoder, self.mentions, self.names_by_concept, self.negatives_per_mention, progress=self.progress
            )
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(".tmp")
            tmp.write_text(json.dumps(negatives))
            tmp.rename(cache)
        return hard_negative_batches(
            self.mentions, self.names_by_concept, negatives, self.pairs_per_batch, seed=self.seed * 1000 + epoch
        )
