"""Retrieve, then rerank: a retriever (any linker) gives each query's top concepts; a reranker reorders them.

The retriever is fast and broad (right concept in its top 5 for ~95% of queries, first for ~91%); the reranker is
slow and precise, and only ever sees the retriever's `depth` best concepts, so it can reorder them but never
bring in another concept. Concepts, not names, are reranked: the retriever's name-level candidates are grouped
by concept (its best name first), and the reranker reads each concept as its names (`ConceptCandidate`).

As in every linker, exact matches stay first: a query equal to a KB name keeps that name's concepts ahead of the
rest (the reranker orders them among themselves when the name is ambiguous). A concept's final score is the
reranker's plus `retriever_weight` x the retriever's (the weight is the reranker's, chosen on dev after training):
the two make different mistakes. Every candidate the stage returns carries that score, exact matches included, so
scores (and the NIL thresholds calibrated on them) are on one scale.

A reranker is anything with `rerank_scores(queries, candidates) -> [scores]` and `fingerprint()`: the
cross-encoder (`CrossEncoderReranker`) here; the generative model constrained to the candidates' names
(linking.generative.GenerativeReranker) is the second; several of them, their scores weighted and summed
(linking.rerank_ensemble.RerankerEnsemble), the third. `open_reranker` opens any of them from its folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from bioel_core.corpora.records import Candidate
from bioel_core.linking import DEFAULT_RERANK_DEPTH as DEFAULT_DEPTH
from bioel_core.linking.base import Linker
from bioel_core.models.base import RERANKER_ENSEMBLE, read_config
from bioel_core.names import NameSet
from bioel_core.settings.fields import SettingsError

# names of a concept the cross-encoder reads, best-matching first; more seldom fit in its input anyway
NAMES_PER_CONCEPT = 4


@dataclass(frozen=True)
class ConceptCandidate:
    """One retrieved concept: its ids, its names (the retriever's best-matching first) and the retriever's score."""

    concept_ids: tuple[str, ...]
    names: tuple[str, ...]
    score: float
    exact: bool = False  # one of the query's own names


class Reranker(Protocol):
    retriever_weight: float  # the share of the retriever's score added to the reranker's (chosen on dev)

    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[ConceptCandidate]]) -> list[np.ndarray]:
        """Per query, one score per candidate (higher is better)."""

    def fingerprint(self) -> str: ...


class ConceptNames:
    """concept ids -> the KB's names of that concept, in dictionary order."""

    def __init__(self, names: NameSet):
        self.by_concept: dict[tuple[str, ...], list[str]] = {}
        for name, ids in zip(names.names, names.concept_ids):
            self.by_concept.setdefault(ids, []).append(name)

    def group(self, query: str, ranked: Sequence[Candidate], depth: int, hidden: str | None = None) -> list[ConceptCandidate]:
        """Name-level candidates (best first) -> the first `depth` concepts, each with its best-matching name
        first, then its other names in dictionary order. `hidden`: a name left out everywhere (training on a KB
        name as if it were a mention, its concept then known by its other names only)."""
        out: dict[tuple[str, ...], ConceptCandidate] = {}
        for c in ranked:
            if c.concept_ids in out or c.name == hidden:
                continue
            if len(out) == depth:
                break
            others = [n for n in self.by_concept.get(c.concept_ids, ()) if n != c.name and n != hidden]
            out[c.concept_ids] = ConceptCandidate(c.concept_ids, (c.name, *others), c.score, exact=c.name == query)
        return list(out.values())


def concept_text(candidate: ConceptCandidate, names_per_concept: int = NAMES_PER_CONCEPT) -> str:
    """What a cross-encoder reads for a concept: its first names joined by ' ; '."""
    return " ; ".join(candidate.names[:names_per_concept])


# a reranker folder's encoder_type -> "module:Class" of the Reranker that reads it
RERANKERS = {
    "cross-encoder": "bioel_core.linking.rerank:CrossEncoderReranker",
    "generative": "bioel_core.linking.generative:GenerativeReranker",
    RERANKER_ENSEMBLE: "bioel_core.linking.rerank_ensemble:RerankerEnsemble",
}


def is_reranker_folder(folder: str | Path) -> bool:
    try:
        return read_config(folder).get("encoder_type") in RERANKERS
    except FileNotFoundError:  # a plain HF checkpoint (an encoder ensemble's member) has no bioel config
        return False


def check_reranker(folder: str | Path) -> str:
    """The folder's encoder_type, after refusing (before anything is loaded) a folder that is not a reranker."""
    from bioel_core.models import check_kind

    return check_kind(folder, "reranker")


def open_reranker(folder: str | Path, device: str = "cpu", reproducible: bool = False) -> Reranker:
    """The reranker a folder holds (RERANKERS), by its encoder_type."""
    import importlib

    module, cls = RERANKERS[check_reranker(folder)].split(":")
    return getattr(importlib.import_module(module), cls).open(folder, device, reproducible=reproducible)


class ModelReranker:
    """A reranker that is a model folder: the model's fingerprint and retriever weight are the reranker's.

    `reproducible`: a score does not depend on the others scored with it (batch-invariant float64 scoring), so bulk
    linking writes the same bytes whatever its batching or worker count; slower."""

    batch_size = 128

    def __init__(self, model, batch_size: int | None = None, reproducible: bool = False):
        self.model, self.reproducible = model, reproducible
        self.batch_size = batch_size or self.batch_size

    def fingerprint(self) -> str:
        return self.model.fingerprint()

    @property
    def retriever_weight(self) -> float:
        return self.model.retriever_weight


class CrossEncoderReranker(ModelReranker):
    """Scores each (query, concept) pair with a `CrossEncoder` (bioel_core.models.cross_encoder)."""

    @classmethod
    def open(cls, folder: str | Path, device: str = "cpu", reproducible: bool = False) -> CrossEncoderReranker:
        from bioel_core.models import open_model

        return cls(open_model(folder, device=device, role="reranker"), reproducible=reproducible)

    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[ConceptCandidate]]) -> list[np.ndarray]:
        pairs = [(q, concept_text(c)) for q, cands in zip(queries, candidates) for c in cands]
        flat = self.model.score(pairs, self.batch_size, self.reproducible) if pairs else np.empty(0, dtype=np.float32)
        return np.split(flat, np.cumsum([len(cands) for cands in candidates])[:-1]) if len(candidates) else []


class KeptScores:
    """A reranker whose scores per (query, candidates) are computed once: for trying weights on dev, where they do not change."""

    def __init__(self, reranker):
        self.reranker, self.kept = reranker, {}

    @property
    def retriever_weight(self) -> float:
        return self.reranker.retriever_weight

    def fingerprint(self) -> str:
        return self.reranker.fingerprint()

    def rerank_scores(self, queries, candidates):
        keys = [(q, tuple((c.concept_ids, c.names) for c in cands)) for q, cands in zip(queries, candidates)]
        new = [i for i, key in enumerate(keys) if key not in self.kept]
        if new:
            found = self.reranker.rerank_scores([queries[i] for i in new], [candidates[i] for i in new])
            self.kept.update(zip((keys[i] for i in new), found))
        return [self.kept[key] for key in keys]


def reranked(candidates: Sequence[ConceptCandidate], scores: np.ndarray) -> list[tuple[ConceptCandidate, float]]:
    """Exact matches first, then by reranker score (ties: the retriever's order)."""
    order = sorted(range(len(candidates)), key=lambda i: (not candidates[i].exact, -float(scores[i]), i))
    return [(candidates[i], float(scores[i])) for i in order]


class RerankLinker(Linker):
    kind = "rerank"

    def __init__(
        self, names: NameSet, retriever: Linker, reranker: Reranker, reranker_path: str = "", depth: int = DEFAULT_DEPTH
    ):
        super().__init__(names)
        if depth < 1:
            raise ValueError(f"rerank depth must be at least 1, got {depth}")
        self.retriever, self.reranker, self.reranker_path, self.depth = retriever, reranker, reranker_path, depth
        self.concepts = ConceptNames(names)

    @classmethod
    def build(
        cls,
        names: NameSet,
        retriever: str = "dense",
        reranker: str | None = None,
        depth: int = DEFAULT_DEPTH,
        device: str = "cpu",
        **retriever_options,
    ) -> RerankLinker:
        """`retriever`: the kind of linker to build on `names` (with `retriever_options`, e.g. model=...);
        `reranker`: a cross-encoder or generative model folder."""
        from bioel_core.linking import build_linker

        if reranker is None:
            raise SettingsError("reranker", "required by the rerank linker: a reranker model folder")
        if retriever == cls.kind:
            raise ValueError("a rerank linker's retriever cannot itself be a rerank linker")
        return cls(
            names,
            build_linker(retriever, names, device=device, **retriever_options),
            open_reranker(reranker, device),
            str(Path(reranker).resolve()),
            depth,
        )

    def candidates(self, queries: list[str]) -> list[list[ConceptCandidate]]:
        """The retriever's `depth` best concepts per (normalized) query."""
        # names, not concepts, come back: ask for enough to fill `depth` concepts in most cases
        ranked = self.retriever.search(queries, 4 * self.depth)
        return [self.concepts.group(q, r, self.depth) for q, r in zip(queries, ranked)]

    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        distinct = list(dict.fromkeys(queries))  # a query's answer depends on its text alone
        answers = dict(zip(distinct, self._reranked(distinct, self.candidates(distinct), k)))
        return [list(answers[q]) for q in queries]

    def _reranked(self, queries: list[str], pools: list[list[ConceptCandidate]], k: int) -> list[list[Candidate]]:
        # Every candidate returned carries the stage's score (reranker + weight x retriever), even where the reranker
        # cannot change the first concept (a single concept, or an unambiguous exact match): one NIL threshold then
        # serves every mention, where mixing the retriever's cosines (<= 1) with fused scores (~20-40) made a
        # calibrated threshold leave every exact match unlinked. Asked for one candidate, such a pool has its first
        # concept scored alone: the same score, one pair instead of `depth`.
        scored = [p[:1] if k == 1 and (len(p) == 1 or sum(c.exact for c in p) == 1) else p for p in pools]
        todo = [i for i, p in enumerate(scored) if p]
        scores = dict(zip(todo, self.reranker.rerank_scores([queries[i] for i in todo], [scored[i] for i in todo])))
        weight = np.float32(self.reranker.retriever_weight)
        out = []
        for i, pool in enumerate(scored):
            fused = scores.get(i)
            if weight and pool:
                fused = fused + weight * np.array([c.score for c in pool], dtype=np.float32)
            out.append([Candidate(c.concept_ids, c.names[0], s) for c, s in reranked(pool, fused)[:k]])
        return out

    def search_vectors(self, vectors: np.ndarray, k: int, texts: Sequence[str] | None = None) -> list[list[Candidate]]:
        """Candidates for query vectors made elsewhere (a document model's mentions), found by the retriever's
        `search_vectors` and reordered by the reranker, which reads the mentions' `texts` (normalized here)."""
        if texts is None or len(texts) != len(vectors):
            raise ValueError("reranking vector queries needs the mentions' texts, one per vector")
        queries = [self.normalize(t) for t in texts]
        retrieved = self.retriever.search_vectors(vectors, 4 * self.depth)
        return self._reranked(queries, [self.concepts.group(q, r, self.depth) for q, r in zip(queries, retrieved)], k)

    def options(self) -> dict:
        return {
            "retriever": self.retriever.kind,
            "retriever_options": self.retriever.options(),
            "reranker": self.reranker_path,
            "fingerprint": self.reranker.fingerprint(),
            "depth": self.depth,
        }

    def _save_state(self, folder: Path) -> None:
        self.retriever.save(folder / "retriever")

    @classmethod
    def _load_state(cls, folder: Path, names: NameSet, options: dict) -> RerankLinker:
        from bioel_core.linking import load_linker

        reranker = open_reranker(options["reranker"])
        if reranker.fingerprint() != options["fingerprint"]:
            raise ValueError(
                f"{folder}: the reranker at {options['reranker']} is not the one this linker was saved with "
                f"(fingerprint {reranker.fingerprint()[:12]} != {options['fingerprint'][:12]})"
            )
        return cls(names, load_linker(folder / "retriever"), reranker, options["reranker"], options["depth"])


class KeptPools(RerankLinker):
    """The rerank stage with each query's retrieved concepts found once: for scoring a reranker under training, or
    weights being tried, over one frozen retriever (its pools do not change between them)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kept: dict[str, list[ConceptCandidate]] = {}

    def candidates(self, queries: list[str]) -> list[list[ConceptCandidate]]:
        new = [q for q in queries if q not in self.kept]
        if new:
            self.kept.update(zip(new, super().candidates(new)))
        return [self.kept[q] for q in queries]
