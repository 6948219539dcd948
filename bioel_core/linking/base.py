"""The one interface every linker keeps, and the folder layout every linker saves to.

`Linker.link(mentions, k, contexts)` returns, per mention, up to k `Candidate`s best first. A mention is
one query: composite mentions are split before (`QueryPreprocessor.sub_mentions`). When the document text
of a mention is given in `contexts`, abbreviations it defines are expanded in the mention first.
A saved linker is a folder: `config.json` (kind, normalizer, options), `names.parquet`, plus its own
files; nothing is pickled.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

from bioel_core.corpora.records import Candidate, Mention
from bioel_core.names import NameSet
from bioel_core.normalize import Normalizer, NormalizerConfig
from bioel_core.text.abbreviations import abbreviation_map, expand_abbreviations
from bioel_core.text.spelling import SpellingVariants

CONFIG = "config.json"
NAMES = "names.parquet"


class Linker(ABC):
    kind: str = ""  # registry key, written into config.json
    # set where a linker links running text (bioel_core.linking.annotate): queries' British spellings are read as the
    # names' American ones; None (BioSyn's protocol, `bioel evaluate`): queries are linked as normalized
    spelling: SpellingVariants | None = None

    def __init__(self, names: NameSet):
        self.names = names
        self.normalize = names.normalizer

    # ---- querying ----
    def link(
        self, mentions: Sequence[Mention | str], k: int = 5, contexts: Sequence[str | None] | None = None, batch_size: int = 256
    ) -> list[list[Candidate]]:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if contexts is not None and len(contexts) != len(mentions):
            raise ValueError(f"{len(contexts)} contexts for {len(mentions)} mentions")
        texts = [m.text if isinstance(m, Mention) else m for m in mentions]
        if contexts is not None:
            maps: dict[str, dict[str, str]] = {}  # one abbreviation scan per document, not per mention
            for i, context in enumerate(contexts):
                if context:
                    if context not in maps:
                        maps[context] = abbreviation_map(context)
                    texts[i] = expand_abbreviations(texts[i], maps[context])
        queries = [self.query(t) for t in texts]
        # a query empty once normalized (a mention of punctuation only) names nothing: searched, it would get the
        # name nearest the empty string ('disease' at 0.63); no candidate makes it NIL
        asked = [i for i, query in enumerate(queries) if query]
        out: list[list[Candidate]] = [[] for _ in queries]
        for start in range(0, len(asked), batch_size):
            batch = asked[start : start + batch_size]
            for i, candidates in zip(batch, self.search([queries[i] for i in batch], k)):
                out[i] = candidates
        return out

    def query(self, text: str) -> str:
        """What the linker searches for a mention's text: normalized as its names, spelled as they are (`spelling`)."""
        query = self.normalize(text)
        return query if self.spelling is None else self.spelling(query)

    @abstractmethod
    def search(self, queries: list[str], k: int) -> list[list[Candidate]]:
        """Top k per already-normalized query."""

    # ---- building, saving, loading ----
    @classmethod
    @abstractmethod
    def build(cls, names: NameSet, **options) -> Linker:
        """Fit on the names."""

    def options(self) -> dict:
        """JSON-able build options, written into config.json."""
        return {}

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.names.save(folder / NAMES)
        self._save_state(folder)
        # config last: a folder without it is not a finished save
        config = {
            "linker": self.kind,
            "normalizer": self.normalize.to_dict(),
            "options": self.options(),
            "n_names": len(self.names),
            "source": self.names.source,
        }
        (folder / CONFIG).write_text(json.dumps(config, indent=2))
        return folder

    def _save_state(self, folder: Path) -> None:
        """Files beyond names and config (matrices, vocabularies)."""

    @classmethod
    def load(cls, folder: str | Path) -> Linker:
        folder = Path(folder)
        config = read_config(folder)
        if config["linker"] != cls.kind:
            raise ValueError(f"{folder}: holds a {config['linker']!r} linker, not {cls.kind!r}")
        names = NameSet.read_saved(
            folder / NAMES, Normalizer(NormalizerConfig.from_dict(config["normalizer"])), config.get("source", "")
        )
        if names.normalizer.version != config["normalizer"]["version"]:
            raise ValueError(f"{folder}: normalizer version {config['normalizer']['version']} cannot be rebuilt here")
        return cls._load_state(folder, names, config["options"])

    @classmethod
    def _load_state(cls, folder: Path, names: NameSet, options: dict) -> Linker:
        return cls(names, **options)


def read_config(folder: str | Path) -> dict:
    path = Path(folder) / CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no {CONFIG}: not a saved linker (or the save did not finish)")
    return json.loads(path.read_text())
