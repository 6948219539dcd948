"""Linkers: one interface (`Linker`), a registry by name so the CLI and benchmarks pick them up.

A later linker (dense, hybrid, ...) registers itself with `register_linker("dense", "module:Class")`
or by an entry in LINKERS; it is imported only when used, so its heavy needs never break the others. The
registry itself imports nothing heavy (the CLI reads LINKERS to build its choices).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from bioel_core.lazy import lazy_exports

if TYPE_CHECKING:
    from bioel_core.linking.base import Linker
    from bioel_core.names import NameSet

__getattr__ = lazy_exports(
    __name__, {"Candidate": "bioel_core.corpora.records", "Linker": "bioel_core.linking.base", "NameSet": "bioel_core.names"}
)

# mention detectors of `bioel link` detecting mentions (linking.annotate): the KB dictionaries, a collective model's
# span detector, or both (longest span first; the dictionary's spans linked by their text, the model's by vector)
DETECTORS = ("dictionary", "model", "both")
# what runs a collective model's document encoder (bioel_core.models.onnx_document): torch, or its ONNX graph on ONNX
# Runtime with float32 or int8 weights (CPU)
DOCUMENT_RUNTIMES = ("torch", "onnx", "onnx-int8")
# where the mentions linked come from: detected in the text, or the documents' own (given)
MENTION_MODES = ("detect", "given")
# the linkers whose candidates the rerank linker of `bioel evaluate` reorders
RERANK_RETRIEVERS = ("dense", "hybrid")
# how many of a retriever's best concepts the rerank stage (linking.rerank) reorders, unless told otherwise
DEFAULT_RERANK_DEPTH = 16

# name -> "module:Class"
LINKERS: dict[str, str] = {
    "exact": "bioel_core.linking.exact:ExactLinker",
    "tfidf": "bioel_core.linking.tfidf:TfidfLinker",
    "dense": "bioel_core.linking.dense:DenseLinker",
    "hybrid": "bioel_core.linking.hybrid:HybridLinker",
    "rerank": "bioel_core.linking.rerank:RerankLinker",
    "generative": "bioel_core.linking.generative:GenerativeLinker",
}


def register_linker(name: str, target: str) -> None:
    if ":" not in target:
        raise ValueError(f"linker target must be 'module:Class', got {target!r}")
    LINKERS[name] = target


def linker_class(name: str) -> type[Linker]:
    if name not in LINKERS:
        raise ValueError(f"unknown linker {name!r}; choose one of {sorted(LINKERS)}")
    module, cls = LINKERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def available_linkers() -> list[str]:
    """Registered linkers whose module imports here (a missing optional dependency leaves one out)."""
    out = []
    for name in sorted(LINKERS):
        try:
            linker_class(name)
        except ImportError:
            continue
        out.append(name)
    return out


def build_linker(name: str, names: NameSet, **options) -> Linker:
    return linker_class(name).build(names, **options)


def load_linker(folder: str | Path) -> Linker:
    from bioel_core.linking.base import read_config

    return linker_class(read_config(folder)["linker"]).load(folder)


__all__ = [
    "LINKERS",
    "Candidate",
    "Linker",
    "NameSet",
    "available_linkers",
    "build_linker",
    "linker_class",
    "load_linker",
    "register_linker",
]
