"""`EnsembleEncoder`: several trained encoders used as one, their unit vectors weighted and concatenated.

For members with weights w_i, the vector is [sqrt(w_1/W) a_1, sqrt(w_2/W) a_2, ...] (W = sum of weights): it is
unit-norm, and the inner product of two such vectors is sum_i (w_i/W) cos(a_i, b_i). One FAISS inner-product
index over the concatenation therefore ranks names by the weighted mean of the members' cosines, so embed,
build-index, link and evaluate take an ensemble folder like any other model folder.

The folder holds only `bioel_encoder.json`: each member is referenced (a path relative to the folder, or a
checkpoint inside an installed package, with its pooling) together with its fingerprint, which is checked
at load; members are never copied. An ensemble is not trained as one: train its members, then combine them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

import bioel_core
from bioel_core.models.base import CONFIG_FILE, Encoder, read_config, write_config
from bioel_core.models.cards import fingerprint_entry, write_card
from bioel_core.models.checkpoints import checkpoint_reference, resolve_reference


class MemberChangedError(ValueError):
    """An ensemble member's weights or config differ from those the ensemble was made (and scored) with."""


def check_members(directory: str | Path, saved: Sequence[dict], found: Sequence[str], where: Sequence[str | Path]) -> None:
    """Refuses an ensemble (of encoders or of rerankers) whose members' fingerprints are not those it was made, and
    scored, with (`saved`: its config's members)."""
    for i, (spec, fingerprint) in enumerate(zip(saved, found)):
        if fingerprint != spec["fingerprint"]:
            raise MemberChangedError(
                f"{directory}: member {i} at {where[i]} has fingerprint {fingerprint[:12]}, but the ensemble was made "
                f"with {spec['fingerprint'][:12]}; re-create the ensemble (bioel ensemble) and re-score it"
            )


class EnsembleEncoder(torch.nn.Module):
    encoder_type = "ensemble"

    def __init__(self, members: Sequence[Encoder], weights: Sequence[float], sources: Sequence[dict]):
        """`sources[i]`: where member i was read from ({"path"} or {"package", "checkpoint"}, plus "pooling"
        for a plain HF checkpoint), so that `save` can reference it."""
        super().__init__()
        if len(members) < 2 or not len(members) == len(weights) == len(sources):
            raise ValueError("an ensemble needs at least two members, each with a weight and a source")
        if any(not w > 0 for w in weights):
            raise ValueError(f"member weights must be positive, got {list(weights)}")
        self.members = torch.nn.ModuleList(members)
        self.member_weights = [float(w) for w in weights]
        self.sources = [dict(s) for s in sources]
        # hashed once: members are never trained through the ensemble (forward refuses), and hashing a
        # transformer's weights on every fingerprint()/config() call would repeat ~100 MB of sha256
        self.member_fingerprints = [m.fingerprint() for m in members]

    @classmethod
    def from_folders(cls, specs: Sequence[tuple[str | Path, float, str | None]], device: str = "cpu") -> EnsembleEncoder:
        """(model folder or HF checkpoint, weight, pooling for a plain HF checkpoint or None) per member."""
        from bioel_core.models import open_encoder

        members, sources = [], []
        for folder, _, pooling in specs:
            members.append(open_encoder(folder, pooling, device))
            plain = not (Path(folder) / CONFIG_FILE).is_file()
            # the member's pooling, the one a sentence-transformers folder declares included
            sources.append({**checkpoint_reference(folder), **({"pooling": members[-1].pooling} if plain else {})})
        return cls(members, [w for _, w, _ in specs], sources)

    @property
    def dim(self) -> int:
        return sum(m.dim for m in self.members)

    def forward(self, *args, **kwargs):
        raise TypeError("an ensemble is not trained as one: train its members, then combine them (bioel ensemble)")

    def tokenize(self, texts):
        raise TypeError("an ensemble has no tokenizer of its own: each member tokenizes for itself")

    def encode(
        self, texts: list[str], batch_size: int = 256, show_progress: bool = False, batch_invariant: bool = False
    ) -> np.ndarray:
        """(n, dim) float32, L2-normalized, in input order (`batch_invariant`: see Encoder.encode)."""
        total = sum(self.member_weights)
        parts = [
            np.sqrt(w / total, dtype=np.float32)
            * m.encode(texts, batch_size=batch_size, show_progress=show_progress, batch_invariant=batch_invariant)
            for m, w in zip(self.members, self.member_weights)
        ]
        return np.concatenate(parts, axis=1)

    def config(self) -> dict:
        return {
            "encoder_type": self.encoder_type,
            "dim": self.dim,
            "members": [
                {"weight": w, "config": m.config(), "fingerprint": f}
                for m, w, f in zip(self.members, self.member_weights, self.member_fingerprints)
            ],
        }

    def fingerprint(self) -> str:
        """sha256 over the members' fingerprints, configs and weights: the ensemble changes when any of them does."""
        return hashlib.sha256(json.dumps(self.config(), sort_keys=True).encode()).hexdigest()

    def vectors_fingerprint(self) -> str:
        """The fingerprint of what makes the name vectors: the ensemble's own (every member encodes each name)."""
        return self.fingerprint()

    def saved_config(self, directory: str | Path) -> dict:
        """The config `save(directory)` writes: `config()` plus each member's source, paths relative to the
        folder so the ensemble and its members can move together (models/)."""
        config = self.config()
        for member, source in zip(config["members"], self.sources):
            if "path" in source:
                source = {**source, "path": os.path.relpath(Path(source["path"]).resolve(), Path(directory).resolve())}
            member["source"] = source
        return config

    def save(self, directory: str | Path, dtype: str = "float32") -> Path:
        """Writes the references only; `dtype` is the members' business (kept for the Encoder signature)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_config(directory, self.saved_config(directory))
        return directory

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> EnsembleEncoder:
        from bioel_core.models import open_encoder

        directory = Path(directory)
        config = read_config(directory, cls.encoder_type)
        members, sources = [], []
        for spec in config["members"]:
            source = spec["source"]
            if "path" in source:
                source = {**source, "path": str((directory / source["path"]).resolve())}
            members.append(open_encoder(resolve_reference(source), source.get("pooling"), device))
            sources.append(source)
        ensemble = cls(members, [m["weight"] for m in config["members"]], sources)
        check_members(directory, config["members"], ensemble.member_fingerprints, [resolve_reference(s) for s in sources])
        return ensemble


def make_ensemble(specs: list[tuple[str, float, str | None]], output: str | Path, command: list[str] | None = None) -> dict:
    """`bioel ensemble`: an ensemble folder over existing model folders (or HF checkpoints), with its card."""
    out = Path(output)
    encoder = EnsembleEncoder.from_folders(specs)
    encoder.save(out)
    saved = encoder.saved_config(out)
    card = {
        "model": out.name,
        "encoder": {"encoder_type": encoder.encoder_type, "dim": encoder.dim},
        **fingerprint_entry(encoder),
        "command": " ".join(command or sys.argv),
        "members": [
            {
                "source": m["source"],
                "encoder_type": m["config"]["encoder_type"],
                "weight": m["weight"],
                "fingerprint": m["fingerprint"],
            }
            for m in saved["members"]
        ],
        "bioel_version": bioel_core.__version__,
        "scores": {},
    }
    write_card(out, card)
    return card
