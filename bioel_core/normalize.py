"""The one normalizer every stage shares, so training, indexing and querying see the same strings.

The default policy reproduces BioSyn's preprocessing (lowercase; every run of punctuation and whitespace
becomes one space), with Unicode NFKC first so that full-width and compatibility forms collapse. Punctuation is
ASCII's and every other Unicode punctuation character (category P: the typographic apostrophe in "Parkinson’s",
the hyphen U+2010 and the dashes, curly quotes), which NFKC leaves as they are and PubMed's text is full of, while
KB names mostly write the ASCII forms. Configs recorded before `unicode_punctuation` existed had ASCII
punctuation only; `NormalizerConfig.from_dict` reads them so, and their version is unchanged.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import string
import unicodedata
from dataclasses import asdict, dataclass

PUNCTUATION_POLICIES = ("split", "remove", "keep")
# Unicode category Cc (C0, DEL, C1): NUL and the like reach names from broken dumps and never mean anything there
_CONTROL = re.compile(r"[ ]*[\x00-\x1f\x7f-\x9f]+[ ]*")


# Unicode has punctuation in its first two planes only (planes 2 and 3 hold ideographs, 14 tags, 15 and 16 private
# use): scanning those is a tenth of the scan of every code point (tests/test_normalize.py holds them equal)
PUNCTUATION_PLANES_END = 0x20000


@functools.cache
def unicode_punctuation() -> str:
    """Every non-ASCII character of Unicode category P. Built on first use, not at import: every `bioel` command
    (its help included) would pay the scan."""
    return "".join(c for c in map(chr, range(128, PUNCTUATION_PLANES_END)) if unicodedata.category(c).startswith("P"))


def clean_text(text: str) -> str:
    """`text` with each run of control characters (tab and newline included) made one space, trimmed: the one
    rule for names (ingest-kb writes names cleaned and dead-letters one left empty) and, through the
    Normalizer, for everything matched against them."""
    return _CONTROL.sub(" ", text).strip()


@dataclass(frozen=True)
class NormalizerConfig:
    unicode_form: str | None = "NFKC"
    lowercase: bool = True
    punctuation: str = "split"  # split: punctuation becomes a space; remove: deleted; keep: untouched
    keep_chars: str = ""  # punctuation kept whatever the policy, e.g. "|" for composite queries
    unicode_punctuation: bool = True  # False: ASCII punctuation only (configs recorded before this field)

    @classmethod
    def from_dict(cls, recorded: dict) -> NormalizerConfig:
        """The config a manifest, saved linker or stop list recorded (`Normalizer.to_dict`)."""
        fields = {k: v for k, v in recorded.items() if k != "version"}
        fields.setdefault("unicode_punctuation", False)
        return cls(**fields)

    def punctuation_chars(self) -> str:
        """Every character the policy treats as punctuation."""
        chars = string.punctuation + (unicode_punctuation() if self.unicode_punctuation else "")
        return "".join(c for c in chars if c not in self.keep_chars)

    def ascii_punctuation_chars(self) -> str:
        """The punctuation an ASCII text can hold: a class of these scans it several times faster than the whole one."""
        return "".join(c for c in string.punctuation if c not in self.keep_chars)

    def __post_init__(self) -> None:
        if self.punctuation not in PUNCTUATION_POLICIES:
            raise ValueError(f"punctuation policy must be one of {PUNCTUATION_POLICIES}, got {self.punctuation!r}")
        if self.unicode_form not in (None, "NFC", "NFKC", "NFD", "NFKD"):
            raise ValueError(f"unknown Unicode normal form {self.unicode_form!r}")


class Normalizer:
    def __init__(self, config: NormalizerConfig | None = None):
        self.config = config or NormalizerConfig()
        punct = self.config.punctuation_chars()
        self._punct_re = re.compile(f"[{re.escape(punct)}]") if punct else None
        ascii_punct = self.config.ascii_punctuation_chars()
        self._ascii_punct_re = re.compile(f"[{re.escape(ascii_punct)}]") if ascii_punct else None
        self._space_re = re.compile(r"\s+")

    @property
    def version(self) -> str:
        """A short fingerprint of the policy: it goes into every manifest and model card. An ASCII-punctuation
        config leaves the field out, so it keeps the version it was recorded with."""
        config = asdict(self.config)
        if not config["unicode_punctuation"]:
            del config["unicode_punctuation"]
        blob = json.dumps(config, sort_keys=True).encode()
        return "norm-" + hashlib.sha256(blob).hexdigest()[:12]

    def to_dict(self) -> dict:
        return {"version": self.version, **asdict(self.config)}

    def __call__(self, text: str) -> str:
        cfg = self.config
        text = clean_text(text)
        if cfg.unicode_form:
            text = unicodedata.normalize(cfg.unicode_form, text)
        if cfg.lowercase:
            text = text.lower()
        punct_re = self._ascii_punct_re if text.isascii() else self._punct_re
        if punct_re is not None and cfg.punctuation != "keep":
            text = punct_re.sub(" " if cfg.punctuation == "split" else "", text)
        return self._space_re.sub(" ", text).strip()


def name_id(kb: str, concept_id: str, name_norm: str) -> int:
    """Stable 63-bit id of a (kb, concept, normalized name): usable directly as a FAISS id, and the same
    across runs and machines so KB refreshes can diff tables by it."""
    digest = hashlib.blake2b(f"{kb}\x1f{concept_id}\x1f{name_norm}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF
