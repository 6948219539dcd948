"""Generative linking (GenBioEL): a `GenerativeModel` writes a KB name for each mention, constrained to a prefix
tree of every name of the KB, and the name maps back to its concepts.

Two ways in:
- `GenerativeLinker` (linker "generative"): the whole KB's tree; batched constrained beam search, the beams'
  names as candidates (k <= beams), exact names first as in every linker. A candidate's score is its name's
  per-token geometric-mean probability, exp(the model's mean token log-probability), in (0, 1]; an exact name 1.
  The tree is built once per KB and model and saved with the linker (`prefix_tree.npz`, integer arrays).
- `GenerativeReranker` (a `Reranker` for linking.rerank): the tree restricted per mention to the names of a
  retriever's top concepts, searched exhaustively: each of those concepts' names (its first MAX_NAMES_PER_CONCEPT,
  the retriever's best-matching one first) is scored by the model, a concept by its best name, so the generator reorders
  the retriever's candidates and never brings in another concept (GENRE's and the paper's reranking mode). Its scores
  stay the model's mean log-probabilities: the fusion weights (retriever_weight, an ensemble's) were chosen on them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bioel_core.corpora.records import Candidate
from bioel_core.linking.base import Linker
from bioel_core.linking.exact import NameIndex
from bioel_core.linking.prefix_tree import PrefixTree
from bioel_core.linking.rerank import ModelReranker
from bioel_core.names import NameSet
from bioel_core.settings.fields import SettingsError

TREE_FILE = "prefix_tree.npz"
DEFAULT_BEAMS = 5
# names of one concept a reranker scores (the retriever's best-matching name first, then the KB's order): each name
# costs a vocabulary-wide softmax per token, and concepts with dozens of names would dominate the cost
MAX_NAMES_PER_CONCEPT = 8


def open_generative(folder: str | Path, device: str = "cpu"):
    """A generative model folder, refused before loading when it is another kind of model."""
    from bioel_core.models import open_model

    return open_model(folder, device=device, role="generative")


def check_generative(folder: str | Path) -> None:
    """Refuses, before anything is loaded, a folder that is not a generative model."""
    from bioel_core.models import check_kind

    check_kind(folder, "generative")


class GenerativeLinker(Linker):
    kind = "generative"

    def __init__(
        self,
        names: NameSet,
        model,
        model_path: str,
        beams: int = DEFAULT_BEAMS,
        batch_size: int = 64,
        tree: PrefixTree | None = None,
        reproducible: bool = False,
    ):
        super().__init__(names)
        if beams < 1:
            raise ValueError(f"beams must be at least 1, got {beams}")
        self.model, self.model_path, self.beams, self.batch_size = model, model_path, beams, batch_size
        self.reproducible = reproducible
        self.exact = NameIndex(names)
        # one token sequence per distinct name: a node's names are rows of the name index
        self.tree = tree if tree is not None else PrefixTree.build(model.name_ids(self.exact.row_names))

    @classmethod
    def build(
        cls,
        names: NameSet,
        model: str | None = None,
        device: str = "cpu",
        beams: int = DEFAULT_BEAMS,
        batch_size: int = 64,
        **options,
    ) -> GenerativeLinker:
        if options:
            raise ValueError(f"unknown generative options {sorted(options)}; known: model, device, beams, batch_size")
        if not model:
            raise SettingsError("model", "required by the generative linker: a generative model folder (made by `bioel train`)")
        return cls(names, open_generative(model, device), str(Path(model).resolve()), beams, batch_size)

    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        distinct = list(dict.fromkeys(queries))  # a query's answer depends on its text alone: decode it once
        out = [self.exact.candidates(self.names, q, k) for q in distinct]
        todo = [i for i, c in enumerate(out) if len(c) < k]
        # k <= beams: more beams than asked for when k is larger
        decoded = (
            self.model.generate_names(
                [distinct[i] for i in todo], self.tree, max(self.beams, k), self.batch_size, batch_invariant=self.reproducible
            )
            if todo
            else []
        )
        for i, found in zip(todo, decoded):
            # exp puts a written name on the exact names' scale (1 = exp 0) and keeps the beams' order: one scale for
            # the output's scores and a NIL threshold (the model's own scores stay log-probabilities, as the reranker's)
            ranked = [(int(row), math.exp(score)) for node, score in found for row in self.tree.names_at(node)]
            self.exact.fill(self.names, out[i], distinct[i], ranked, k)
        answers = dict(zip(distinct, out))
        return [list(answers[q]) for q in queries]

    def options(self) -> dict:
        return {"model": self.model_path, "fingerprint": self.model.fingerprint(), "beams": self.beams}

    def _save_state(self, folder: Path) -> None:
        self.tree.save(folder / TREE_FILE)

    @classmethod
    def _load_state(cls, folder: Path, names: NameSet, options: dict) -> GenerativeLinker:
        model = open_generative(options["model"])
        if model.fingerprint() != options["fingerprint"]:
            raise ValueError(
                f"{folder}: the model at {options['model']} is not the one this linker was saved with "
                f"(fingerprint {model.fingerprint()[:12]} != {options['fingerprint'][:12]}): its tree "
                f"holds the other model's token ids"
            )
        return cls(names, model, options["model"], options["beams"], tree=PrefixTree.load(folder / TREE_FILE))


class GenerativeReranker(ModelReranker):
    """Scores each retrieved concept by the model's best score of writing one of its names for the mention."""

    batch_size = 256

    @classmethod
    def open(cls, folder: str | Path, device: str = "cpu", reproducible: bool = False) -> GenerativeReranker:
        return cls(open_generative(folder, device), reproducible=reproducible)

    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence]) -> list[np.ndarray]:
        names = [[n for c in cands for n in c.names[:MAX_NAMES_PER_CONCEPT]] for cands in candidates]
        scored = self.model.score_names(list(queries), names, self.batch_size, batch_invariant=self.reproducible)
        # a concept's score: the best of its names' (each concept has at least one name)
        return [
            np.maximum.reduceat(scores, np.cumsum([0] + [len(c.names[:MAX_NAMES_PER_CONCEPT]) for c in cands])[:-1]).astype(
                np.float32
            )
            for cands, scores in zip(candidates, scored)
        ]
