"""Query preprocessing as BioSyn applies it to mentions before linking.

In order: expand abbreviations defined in the mention's document (when the text is at hand), lowercase,
turn punctuation into spaces while keeping `|` (the composite separator), correct known typos word by
word (NCBI's spelling map), then split a composite mention into its sub-mentions.
A corpus that states a composite's parts (BC5CDR) gives them joined with `|`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from bioel_core.corpora.biosyn import read_typo_map
from bioel_core.corpora.records import Mention
from bioel_core.normalize import Normalizer, NormalizerConfig
from bioel_core.text.abbreviations import abbreviation_map, expand_abbreviations

COMPOSITE_SEPARATORS = re.compile(r"[|+]")


def split_composite(mention: str) -> list[str]:
    """`m1|m2` (and `m1+m2`, as BioSyn's evaluation splits) -> sub-mentions, stripped, empties dropped."""
    return [p.strip() for p in COMPOSITE_SEPARATORS.split(mention) if p.strip()]


class QueryPreprocessor:
    def __init__(self, typos: Mapping[str, str] | None = None, lowercase: bool = True, remove_punctuation: bool = True):
        self.typos = dict(typos or {})
        self._normalize = Normalizer(
            NormalizerConfig(lowercase=lowercase, keep_chars="|", punctuation="split" if remove_punctuation else "keep")
        )

    @classmethod
    def from_typo_file(cls, path: str | Path | None, **options) -> QueryPreprocessor:
        return cls(read_typo_map(path) if path else None, **options)

    def mention_text(
        self, mention: Mention | str, context: str | None = None, abbreviations: Mapping[str, str] | None = None
    ) -> str:
        """The composite-joined query string (`part|part` when the corpus gives parts), abbreviations
        expanded from `abbreviations` or, failing that, from the document text `context`."""
        if isinstance(mention, Mention):
            text = "|".join(mention.parts) if mention.parts else mention.text
        else:
            text = mention
        if abbreviations is None and context:
            abbreviations = abbreviation_map(context)
        return expand_abbreviations(text, dict(abbreviations)) if abbreviations else text

    def __call__(self, text: str) -> str:
        # the normalizer leaves "a | b" around a kept "|"; BioSyn's composites read "a|b"
        parts = [p.strip() for p in self._normalize(text).split("|")]
        if self.typos:
            parts = [" ".join(self.typos.get(w, w) for w in p.split(" ")) for p in parts]
        return "|".join(p for p in parts if p)

    def sub_mentions(
        self, mention: Mention | str, context: str | None = None, abbreviations: Mapping[str, str] | None = None
    ) -> list[str]:
        """The preprocessed sub-mentions of one mention: what a linker is asked about."""
        return split_composite(self(self.mention_text(mention, context, abbreviations)))
