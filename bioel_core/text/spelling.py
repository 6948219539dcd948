"""British spellings read as a KB's American ones: "anaemia", "oedema", "tumour", "sulphate" and "leucopenia" in
text find MEDIC's and MeSH's "anemia", "edema", "tumor", "sulfate" and "leukopenia".

A word is read as its variant only when the KB's names hold the variant, and lack the word or hold it less often
(MEDIC writes "anaemia" in a few names, "anemia" in hundreds), so a KB written in British English keeps its words; a
text that is itself a name of the KB ("haematological toxicity", a learned synonym) stays as written, and the
detector matches a word as written or as spelled. The rules are those of medical British English (Greek and Latin
"ae" / "oe", "-our", "-ise", "-yse", "-tre", "-ogue", "sulph", "leuc", "aluminium"), written narrowly enough not to
fire on common words ("does" is not "des", diethylstilbestrol), on words of at least MIN_CHARS characters (shorter
ones are mostly symbols: "AET" is not "ET"). SPELLING_RULES versions them; every linking run's settings record it.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Container, Iterable, Mapping
from pathlib import Path

SPELLING_RULES = "british-american/1"
MIN_CHARS = 5

_RULES = (
    (re.compile(r"aluminium"), "aluminum"),
    (re.compile(r"sulph"), "sulf"),
    (re.compile(r"^leuc(?=[oa])"), "leuk"),  # leucocyte, leucopenia, leucaemia
    # ae inside a word, not "aer" (aerobic) nor Latin plurals ending in it (vertebrae): haem, anaemia, paediatric,
    # aetiology, caesarean, faecal, gynaecology, naevus
    (re.compile(r"ae(?=[^r])"), "e"),
    # oe only where British medical words have it: oedema, oesophagus, oestrogen; diarrhoea, dyspnoea; foetal;
    # coeliac; homoeopathy
    (re.compile(r"^oe(?=[dsn])"), "e"),
    (re.compile(r"oea"), "ea"),
    (re.compile(r"(?<=^f)oe(?=t)"), "e"),
    (re.compile(r"(?<=^c)oe(?=l)"), "e"),
    (re.compile(r"oeo"), "eo"),
    (re.compile(r"(?<=..)our(?=s?$|al|ed|ing|ite|able|ably|less)"), "or"),  # tumour, behavioural; not four, hour
    (re.compile(r"(?<=[a-z][a-z])is(?=(?:ation|ations|e|es|ed|ing)$)"), "iz"),  # immunisation, hospitalised
    (re.compile(r"ys(?=(?:e|es|ed|ing)$)"), "yz"),  # analyse, paralysed
    (re.compile(r"(?<=[bht])re(?=s?$)"), "er"),  # fibre, centre, titre
    (re.compile(r"ogue(?=s?$)"), "og"),  # analogue
)
# a word none of the rules changes is left at once
_ANY_RULE = re.compile("|".join(pattern.pattern for pattern, _ in _RULES))


def _may_change(word: str) -> bool:
    return len(word) >= MIN_CHARS and _ANY_RULE.search(word) is not None


def american(word: str) -> str:
    """`word` with every rule applied (a normalized word: lowercase under the default normalizer)."""
    for pattern, replacement in _RULES:
        word = pattern.sub(replacement, word)
    return word


class SpellingVariants:
    """Reads a normalized text's words as the KB's words (module docstring): a word the KB lacks, or writes less
    often than its American spelling ("anaemia" in a few OMIM names of MEDIC, "anemia" in hundreds), is read as that
    spelling where the KB has it."""

    def __init__(self, counts: Mapping[str, int], names: Container[str] = ()):
        """`counts`: the KB names' words, each with the number of times the names hold it; `names`: the KB's whole
        names, which a text equal to one keeps as written (a learned "haematological toxicity")."""
        self.words, self.names = frozenset(counts), names
        self._seen: dict[str, str] = {}  # words of text the KB lacks, as read: bounded (`word`)
        self._read_as = {
            word: variant
            for word, count in counts.items()
            if _may_change(word) and (variant := american(word)) != word and counts.get(variant, 0) > count
        }

    @classmethod
    def from_names(cls, names: Iterable[str]) -> SpellingVariants:
        """From normalized names (a NameSet's): their words, split at spaces as the normalizer leaves them."""
        return cls(Counter(word for name in names for word in name.split(" ")))

    @classmethod
    def from_names_table(cls, table_dir: str | Path) -> SpellingVariants:
        """From an ingest-kb output's names: the words counted in Arrow, each name row once (a UMLS-size table's 10M
        names in seconds, where counting them in Python takes half a minute)."""
        # imported here: tables need pyarrow and the schemas package, the rules themselves do not
        import pyarrow as pa
        import pyarrow.compute as pc

        from bioel_core.tables import read_table

        names = read_table(table_dir, "names", ["name_norm"])["name_norm"]
        parts = []  # a slice of names at a time: their words split all at once would take gigabytes
        for at in range(0, len(names), 1 << 20):
            counted = pc.value_counts(pc.list_flatten(pc.split_pattern(names.slice(at, 1 << 20), " ")))
            parts.append(pa.table({"word": counted.field("values"), "count": counted.field("counts")}))
        if not parts:
            return cls({})
        total = pa.concat_tables(parts).group_by("word", use_threads=False).aggregate([("count", "sum")])
        return cls({w: c for w, c in zip(total["word"].to_pylist(), total["count_sum"].to_pylist()) if w})

    def with_names(self, names: Container[str]) -> SpellingVariants:
        """The same reading, keeping a text that is one of `names` as written."""
        twin = copy.copy(self)
        twin.names, twin._seen = names, {}
        return twin

    def word(self, word: str) -> str:
        read_as = self._read_as.get(word)
        if read_as is not None:
            return read_as
        if word in self.words:
            return word
        seen = self._seen.get(word)
        if seen is None:
            if len(self._seen) >= 1 << 16:  # a bulk run meets millions of distinct words
                self._seen.clear()
            variant = american(word) if _may_change(word) else word
            seen = self._seen[word] = variant if variant in self.words else word
        return seen

    def __call__(self, text: str) -> str:
        """A normalized text with each word read so (its spaces as they were), or as it is when it is a name."""
        if text in self.names:
            return text
        return " ".join(self.word(w) for w in text.split(" "))
