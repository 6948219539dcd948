"""Dense nearest names: an `Encoder` embeds every distinct name once; queries go through the same encoder
and an exact inner-product FAISS index (cosine on L2-normalized vectors). Exact matches come first, as in
the other linkers.

The model is a bioel model folder (`bioel train` output) or any plain local Hugging Face checkpoint
(pooling chosen with `pooling`). A saved dense linker keeps the name embeddings (`embeddings.npy`, read
with allow_pickle=False) and the model's path and fingerprint; loading refuses a model that changed.
"""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from bioel_core.corpora.records import Candidate
from bioel_core.linking.base import Linker
from bioel_core.linking.dictionary import NameSet
from bioel_core.linking.exact import NameIndex
from bioel_core.models import Encoder, TransformerEncoder, load_encoder
from bioel_core.models.base import CONFIG_FILE

EMBEDDINGS = "embeddings.npy"
DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "models" / "disease-default"


def model_folder(model: str | Path | None) -> Path:
    """The folder a --model value names, the shipped default when none is given."""
    return (Path(model) if model else DEFAULT_MODEL).resolve()


def open_model(model: str | Path | None, pooling: str | None = None, device: str = "cpu") -> Encoder:
    """A bioel model folder, or a plain HF checkpoint with the given pooling (default cls, as SapBERT)."""
    folder = model_folder(model)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder not found: {folder}" + ("" if model else " (the default disease model is not shipped in this checkout)"))
    if not (folder / CONFIG_FILE).is_file():
        return TransformerEncoder(folder, pooling=pooling or "cls").to(device)
    if pooling is not None:
        raise ValueError(f"{folder} is a bioel model folder: its pooling is fixed by its config; drop --pooling")
    return load_encoder(folder, device)


class DenseLinker(Linker):
    kind = "dense"

    def __init__(self, names: NameSet, encoder: Encoder, model_path: str, pooling: str | None = None,
                 embeddings: np.ndarray | None = None, batch_size: int = 256):
        super().__init__(names)
        self.encoder, self.model_path, self.pooling, self.batch_size = encoder, model_path, pooling, batch_size
        self.exact = NameIndex(names)
        if embeddings is None:
            embeddings = encoder.encode(self.exact.row_names, batch_size=batch_size, show_progress=len(names) > 20000)
        if embeddings.shape != (len(self.exact.row_names), encoder.dim):
            raise ValueError(f"embeddings of shape {embeddings.shape} do not fit {len(self.exact.row_names)} names x {encoder.dim}")
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.index = faiss.IndexFlatIP(encoder.dim)
        self.index.add(self.embeddings)

    @classmethod
    def build(cls, names: NameSet, model: str | None = None, pooling: str | None = None, device: str = "cpu",
              batch_size: int = 256) -> DenseLinker:
        encoder = open_model(model, pooling, device)
        return cls(names, encoder, str(model_folder(model)), pooling, batch_size=batch_size)

    def options(self) -> dict:
        return {"model": self.model_path, "pooling": self.pooling, "fingerprint": self.encoder.fingerprint()}

    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        out = [self.exact.candidates(self.names, q, k) for q in queries]
        todo = [i for i, c in enumerate(out) if len(c) < k]
        if not todo:
            return out
        vectors = self.encoder.encode([queries[i] for i in todo], batch_size=self.batch_size)
        scores, rows = self.index.search(vectors, min(k + 1, self.index.ntotal))
        for j, i in enumerate(todo):
            ranked = [(r, s) for r, s in zip(rows[j], scores[j]) if r >= 0]
            self.exact.fill(self.names, out[i], queries[i], ranked, k)
        return out

    def _save_state(self, folder: Path) -> None:
        np.save(folder / EMBEDDINGS, self.embeddings, allow_pickle=False)

    @classmethod
    def _load_state(cls, folder: Path, names: NameSet, options: dict) -> DenseLinker:
        encoder = open_model(options["model"], options.get("pooling"))
        if encoder.fingerprint() != options["fingerprint"]:
            raise ValueError(f"{folder}: the model at {options['model']} is not the one these embeddings were made with "
                             f"(fingerprint {encoder.fingerprint()[:12]} != {options['fingerprint'][:12]})")
        embeddings = np.load(folder / EMBEDDINGS, allow_pickle=False)
        return cls(names, encoder, options["model"], options.get("pooling"), embeddings=embeddings)
