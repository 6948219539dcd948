"""`RerankerEnsemble`: several rerankers used as one (`bioel ensemble` of reranker folders).

A retrieved concept's score is the weighted sum of the members' scores; the rerank stage adds `retriever_weight` x
the retriever's score, as for any reranker (linking.rerank). The members make different mistakes: the cross-encoder
reads the mention beside a concept's names, the generative model scores how well it writes one of them. The member
weights and the retriever's weight are chosen on dev (`python benchmarks/rerank_fusion.py` prints the grid).

The folder holds only `bioel_encoder.json` and its card: each member is referenced by a path relative to the folder,
with its fingerprint, checked at load (a retrained member is refused until the ensemble is re-made and re-scored),
as for an ensemble of name encoders (models.ensemble).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import bioel_core
from bioel_core.linking.rerank import Reranker, check_reranker, open_reranker
from bioel_core.models.base import RERANKER_ENSEMBLE, read_config, write_config
from bioel_core.models.cards import check_fingerprint, fingerprint_entry, write_card
from bioel_core.models.ensemble import check_members


class RerankerEnsemble:
    encoder_type = RERANKER_ENSEMBLE

    def __init__(
        self, members: Sequence[Reranker], weights: Sequence[float], retriever_weight: float, paths: Sequence[str | Path]
    ):
        """`paths[i]`: the folder member i was opened from (what `save` references)."""
        if len(members) < 2 or not len(members) == len(weights) == len(paths):
            raise ValueError("a reranker ensemble needs at least two members, each with a weight and a folder")
        if any(not w > 0 for w in weights):
            raise ValueError(f"member weights must be positive, got {list(weights)}")
        if not retriever_weight >= 0:
            raise ValueError(f"the retriever's weight must be zero or more, got {retriever_weight}")
        self.members, self.weights, self.retriever_weight = list(members), [float(w) for w in weights], float(retriever_weight)
        self.paths = [Path(p).resolve() for p in paths]
        self.member_types = [check_reranker(p) for p in self.paths]
        self.member_fingerprints = [m.fingerprint() for m in self.members]

    @classmethod
    def from_folders(
        cls, specs: Sequence[tuple[str | Path, float]], retriever_weight: float, device: str = "cpu", reproducible: bool = False
    ) -> RerankerEnsemble:
        """(reranker folder, weight) per member."""
        return cls(
            [open_reranker(folder, device, reproducible) for folder, _ in specs],
            [w for _, w in specs],
            retriever_weight,
            [folder for folder, _ in specs],
        )

    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence]) -> list[np.ndarray]:
        total = [np.zeros(len(cands), dtype=np.float32) for cands in candidates]
        for member, weight in zip(self.members, self.weights):
            for summed, scores in zip(total, member.rerank_scores(queries, candidates)):
                summed += np.float32(weight) * scores
        return total

    def config(self) -> dict:
        return {
            "encoder_type": self.encoder_type,
            "retriever_weight": self.retriever_weight,
            "members": [
                {"encoder_type": t, "weight": w, "fingerprint": f}
                for t, w, f in zip(self.member_types, self.weights, self.member_fingerprints)
            ],
        }

    def fingerprint(self) -> str:
        """sha256 over the members' fingerprints and all weights: the ensemble changes when any of them does."""
        return hashlib.sha256(json.dumps(self.config(), sort_keys=True).encode()).hexdigest()

    def saved_config(self, directory: str | Path) -> dict:
        """`config()` plus each member's path relative to `directory`, so the ensemble and its members can move together."""
        config = self.config()
        for member, path in zip(config["members"], self.paths):
            member["source"] = {"path": os.path.relpath(path, Path(directory).resolve())}
        return config

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_config(directory, self.saved_config(directory))
        return directory

    @classmethod
    def open(cls, folder: str | Path, device: str = "cpu", reproducible: bool = False) -> RerankerEnsemble:
        folder = Path(folder)
        config = read_config(folder, RERANKER_ENSEMBLE)
        specs = [((folder / m["source"]["path"]).resolve(), m["weight"]) for m in config["members"]]
        ensemble = cls.from_folders(specs, config["retriever_weight"], device, reproducible)
        check_members(folder, config["members"], ensemble.member_fingerprints, [path for path, _ in specs])
        check_fingerprint(folder, ensemble)
        return ensemble


def make_reranker_ensemble(
    specs: Sequence[tuple[str | Path, float]], retriever_weight: float, output: str | Path, command: list[str] | None = None
) -> dict:
    """`bioel ensemble` of reranker folders: the ensemble folder with its card."""
    out = Path(output)
    ensemble = RerankerEnsemble.from_folders(specs, retriever_weight)
    ensemble.save(out)
    saved = ensemble.saved_config(out)
    card = {
        "model": out.name,
        "encoder": {"encoder_type": RERANKER_ENSEMBLE, "retriever_weight": ensemble.retriever_weight},
        **fingerprint_entry(ensemble),
        "command": " ".join(command or sys.argv),
        "members": [{k: m[k] for k in ("source", "encoder_type", "weight", "fingerprint")} for m in saved["members"]],
        "bioel_version": bioel_core.__version__,
        "scores": {},
    }
    write_card(out, card)
    return card
