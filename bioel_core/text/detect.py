"""Mention detection: the `MentionDetector` interface and `DictionaryDetector`, which finds a KB's names in
running text, plus the stop list it can learn from gold corpora.

How `DictionaryDetector` matches:
- Each passage is cut into tokens by the KB's own normalizer policy (split: runs of characters that are
  neither whitespace nor punctuation; remove/keep: whitespace-separated, punctuation trimmed at the ends
  under remove), and every token goes through the same `Normalizer` the names went through; each token
  keeps its character span, so a match's offsets slice the original text exactly.
- Leftmost-longest: scanning tokens left to right, the longest name starting at a token wins and the scan
  resumes after it. Names start and end at token boundaries only ("als" never matches inside "also"),
  never cross passages, and never cross a sentence end (`.`, `!`, `?`, `;` before a space), a bracket or a comma
  before a space ("7 men, 3 women" holds no "MEN 3"; "cancer, gallbladder" is no name as running text writes it).
  A possessive "s" may be skipped: "Parkinson's disease" matches "parkinson disease" (and "parkinson s disease").
- Spelling (`spelling`): a word matches as written and as the names spell it ("anaemia" matches "anemia",
  bioel_core.text.spelling; "haematological toxicity", a name too, still matches as written); the match's
  offsets are the word's as written.
- Filters: names shorter than `min_chars` characters (normalized; 2 drops single characters) and names made
  only of digits (`skip_numeric`) are not matched; `uppercase_only` names (acronyms, see `from_names_table`)
  match only text without lowercase letters, so "was" is not Wiskott-Aldrich syndrome. A stop-listed name
  is still matched, so its tokens cannot yield a shorter name ("tumor" inside a stopped "tumor necrosis
  factor"), but it gives no mention.
- Abbreviations (`abbreviations=True`): when a passage defines "long form (SF)" (Schwartz–Hearst,
  bioel_core.text.abbreviations) and the long form is itself a plausible mention of the type, every whole-word
  occurrence of SF in the document becomes a mention whose `link_text` is the long form, whatever the stop list
  says; a longer mention around an occurrence stands. The mention is SF as written; the long form is only what
  it is linked by. A long form is plausible when it is a noun phrase headed by a mention: a detected mention
  ends it ("levodopa-induced dyskinesias (LID)" with "dyskinesias" found) and the words before that mention are
  modifiers, none a function word ("the maximum tolerated dose of paclitaxel (Taxol)", "thrombin and tranexamic
  acid (AMCA)" are not: the definition is unclear, SF is neither expanded nor dropped). When no
  mention ends the long form, the document has said SF means something else: dictionary matches that are
  exactly SF are dropped.

Coordinated mentions (`coordinations=True`): where a matched name of two or more tokens follows "X and", "X or",
"X and/or", "X/" or a list "X1, X2(,) and", and each X put in place of the name's first token makes a name of the KB
too, the whole phrase is one mention ("breast and ovarian cancer", "acute and chronic renal failure") whose `parts`
are those names, as written ("breast cancer", "ovarian cancer"): the linker links each part, and the phrase is
annotated once per part, as BC5CDR and NCBI-disease annotate a composite mention. A conjunct is one word, not a
function word nor a number, and the phrase never crosses a sentence end or a bracket. COORDINATION_RULES versions this.

Short forms (`is_short_form`: one word of at most SHORT_FORM_CHARS characters, "APC", "VEGF", "death") are ambiguous
out of context; `learn_stop_list` also records, per short form seen in the training corpora, how often its
occurrences are gold mentions (`StopList.short_forms`, `StopList.prior`): the per-name prior the linker weighs with
the document model's span score (bioel_core.linking.annotate). Occurrences in documents that define the short form
count too: "VHL" and "WAS" are defined in most NCBI-disease abstracts that write them, and are diseases there.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import unicodedata
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from bioel_core.corpora.records import Document, Mention
from bioel_core.normalize import Normalizer, NormalizerConfig
from bioel_core.text.abbreviations import find_abbreviations
from bioel_core.text.spelling import SpellingVariants

_PREFIX, _NAME, _STOPPED, _UPPER = 1, 2, 4, 8
_BREAK = re.compile(r"[.!?;](?=\s|$)|[()\[\]{}]")
# Where no single name reaches past: those breaks and a comma before a space. A name whose words a comma parts is
# MeSH's inverted form ("Cancer, Gallbladder", "Kidney, Failure") or two phrases ("7 men, 3 women" is no "MEN 3");
# running text writes neither as one name. A list "brain, breast and prostate cancer" is a coordinated mention.
_NAME_BREAK = re.compile(r"[.!?;,](?=\s|$)|[()\[\]{}]")
STOP_LIST_KIND = "bioel-stop-list"
SHORT_FORM_RULE = (
    "short forms (one word of at most 5 characters) the detector matched or the gold holds, counted at each "
    "whole-word occurrence: occurrences, and those a gold mention"
)
ACRONYM_CHARS = 5
# a mention this short, in one word, is a symbol or a bare head word: its context must support its type
SHORT_FORM_CHARS = 5
RECENT_TEXTS = 8  # texts whose tokens a Tokenizer keeps per thread: a document's passages, read by each type's detector
APOSTROPHES = "'\u2019"  # a possessive "s" follows either: "Parkinson's", "Parkinson’s"
# The version of the coordinated-mention rule (DictionaryDetector._coordinated): part of a linking run's settings.
COORDINATION_RULES = "one-word-conjuncts/1"
# The version of where a name may match (_NAME_BREAK): part of a linking run's settings.
NAME_MATCH_RULES = "no-comma-inside/1"
CONJUNCTIONS = ("and", "or")
# Closed-class words: a long form holding one is a phrase ("duration of catatonia", "and tranexamic acid"),
# not a name modifying its head mention; written in capitals ("Cyclosporin A") a word is no function word.
FUNCTION_WORDS = frozenset(
    "a an and as at by for from in into its of on or than that the their these this those "
    "to under via was were which while with within without".split()
)


def _has_lower(text: str, start: int, end: int) -> bool:
    return any(c.islower() for c in text[start:end])


def is_short_form(text: str) -> bool:
    """Whether a mention's text is one word of at most SHORT_FORM_CHARS characters ("APC", "5-HT", "death")."""
    return len(text) <= SHORT_FORM_CHARS and not any(c.isspace() for c in text)


def defined_short_forms(document: Document) -> dict[str, tuple[int, int]]:
    """The short forms the document defines ("long form (SF)", bioel_core.text.abbreviations), each with its long
    form's span in the document text; a short form defined twice keeps its first definition (abbreviation_map)."""
    defined: dict[str, tuple[int, int]] = {}
    for p in document.passages:
        for a in find_abbreviations(p.text):
            defined.setdefault(a.short, (p.offset + a.long_start, p.offset + a.long_end))
    return defined


def plausible_long_form(text: str, start: int, end: int, found: Collection[tuple[int, int]]) -> bool | None:
    """Whether text[start:end], a long form, is a mention headed by one of `found` (spans of mentions of one type):
    True when a found span ends it and the words before that span are modifiers (no function word: "cholesteryl
    hemisuccinate, tris salt" is a name); None (unclear) when they are not; False when no found span ends it, so the
    document has said its short form means something else."""
    head = min((s for s, e in found if e == end and start <= s), default=None)
    if head is None:
        return False
    modifiers = text[start:head]
    if any(w.lower() in FUNCTION_WORDS and not w.isupper() for w in re.findall(r"[^\W\d_]+", modifiers)):
        return None
    return True


def _whole_words(forms: Iterable[str]) -> re.Pattern:
    """Whole-word occurrences of any of `forms`, longest first: "PD" is not found in "PDs", "PD-1" or "sPD"."""
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(s) for s in sorted(forms, key=len, reverse=True)) + r")(?![\w-])")


class MentionDetector(ABC):
    @abstractmethod
    def detect(self, document: Document, defined: Mapping[str, tuple[int, int]] | None = None) -> list[Mention]:
        """Mentions of `document` in text order, offsets into `document.text` (passages at their offsets). `defined`:
        the document's defined_short_forms, when the caller has them (several detectors read one document)."""


class NameMatch(NamedTuple):
    start: int  # offsets into the document text
    end: int
    name: str  # the normalized name matched
    stopped: bool
    parts: tuple[str, ...] = ()  # a coordinated mention's names, as written (module docstring)


class Token(NamedTuple):
    norm: str
    start: int
    end: int
    possessive: bool = False  # an "s" right after an apostrophe that follows a word ("Parkinson's")
    spelled: str = ""  # the word as the names spell it, where that differs (bioel_core.text.spelling)

    def forms(self) -> tuple[str, ...]:
        """The word as written (normalized) and, if the names spell it otherwise, as they do: a name matches either."""
        return (self.norm, self.spelled) if self.spelled else (self.norm,)


class _ProbeTable(dict):
    """str.translate table for token boundaries in non-ASCII text: a character whose normal form is one
    character stands for it (a full-width comma is a comma), one whose normal form is only whitespace is a
    space, others stand for themselves. Filled on first sight of each character."""

    def __init__(self, form: str | None):
        super().__init__()
        self.form = form

    def __missing__(self, code: int) -> int:
        char = chr(code)
        norm = unicodedata.normalize(self.form, char) if self.form else char
        self[code] = ord(norm) if len(norm) == 1 else (32 if norm.isspace() else code)
        return self[code]


class Tokenizer:
    """The `Token`s of a text, by the normalizer's policy."""

    def __init__(self, normalizer: Normalizer):
        self.normalizer = normalizer
        cfg = normalizer.config
        self._token = self._pattern(cfg.punctuation, cfg.punctuation_chars())
        self._ascii_token = self._pattern(cfg.punctuation, cfg.ascii_punctuation_chars())  # the same tokens of ASCII text
        # an ASCII token under split holds no punctuation or space, and NFKC leaves ASCII alone
        self._ascii_fast = cfg.punctuation == "split"
        self._lower = cfg.lowercase
        self._probe = _ProbeTable(cfg.unicode_form)
        self._recent = threading.local()  # per thread: {id(text): (text, tokens)} of the last few texts

    @staticmethod
    def _pattern(policy: str, punctuation: str) -> re.Pattern:
        punct = re.escape(punctuation)
        if policy == "split":
            return re.compile(rf"[^\s{punct}]+")
        if policy == "remove":
            return re.compile(rf"[^\s{punct}](?:\S*[^\s{punct}])?")
        return re.compile(r"\S+")

    def __call__(self, text: str) -> list[Token]:
        """The text's tokens; of a text this thread gave it lately (the same object: each type's detector reads the
        same passages of a document), the list it gave then, which callers only read."""
        recent = getattr(self._recent, "texts", None)
        if recent is None:
            recent = self._recent.texts = {}
        kept = recent.get(id(text))
        if kept is not None and kept[0] is text:
            return kept[1]
        probe = text if text.isascii() else text.translate(self._probe)
        out: list[Token] = []
        for m in (self._ascii_token if probe.isascii() else self._token).finditer(probe):
            start, end = m.span()
            raw = text[start:end]
            if self._ascii_fast and raw.isascii():
                norm = raw.lower() if self._lower else raw
                possessive = norm == "s" and bool(out) and out[-1].end == start - 1 and probe[start - 1] in APOSTROPHES
                out.append(Token(norm, start, end, possessive))
                continue
            # a character may normalize to several words ("⑴" -> "(1)"): each keeps the token's span
            out.extend(Token(t, start, end) for t in self.normalizer(raw).split(" ") if t)
        if len(recent) >= RECENT_TEXTS:
            recent.clear()
        recent[id(text)] = (text, out)  # the text held too, so its id names no other text while kept
        return out


@functools.lru_cache(maxsize=8)
def _shared_tokenizer(config: NormalizerConfig) -> Tokenizer:
    # one per normalizer policy, so detectors of several types tokenize a passage once
    return Tokenizer(Normalizer(config))


@dataclass
class StopList:
    """Normalized names a detector must not report, with the counts and thresholds they were chosen by."""

    counts: dict[str, tuple[int, int]]  # name -> (times matched, times the match was a gold span)
    min_count: int = 0
    max_precision: float = 0.0
    learned_from: list[str] = field(default_factory=list)
    entity_types: list[str] = field(default_factory=list)
    dictionary: str = ""
    normalizer: dict = field(default_factory=dict)  # Normalizer.to_dict() of the names
    # short form as written -> (whole-word occurrences in the training corpora, those a gold mention)
    short_forms: dict[str, tuple[int, int]] = field(default_factory=dict)
    # name -> why: names chosen on development corpora where the training corpora's annotators disagree, stopped too
    chosen: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.counts) | frozenset(self.chosen)

    def prior(self, short_form: str) -> float | None:
        """The share of the short form's occurrences in the training corpora that were gold mentions; None when it
        was never seen there."""
        occurrences, gold = self.short_forms.get(short_form, (0, 0))
        return gold / occurrences if occurrences else None

    def check_normalizer(self, normalizer: Normalizer) -> None:
        """Refuses names normalized otherwise than the list's: its names would not be theirs."""
        if self.normalizer.get("version", normalizer.version) != normalizer.version:
            raise ValueError(
                f"the stop list was learned under normalizer {self.normalizer.get('version')}, these names "
                f"use {normalizer.version}: re-ingest the KB (bioel ingest-kb) under the stop list's "
                "normalizer, or learn a stop list for these names"
            )

    def save(self, path: str | Path) -> None:
        data = {
            "kind": STOP_LIST_KIND,
            "rule": "matched >= min_count and gold / matched < max_precision",
            "min_count": self.min_count,
            "max_precision": self.max_precision,
            "learned_from": self.learned_from,
            "entity_types": self.entity_types,
            "dictionary": self.dictionary,
            "normalizer": self.normalizer,
            "names": {n: {"matched": m, "gold": g} for n, (m, g) in sorted(self.counts.items())},
            "short_form_rule": SHORT_FORM_RULE,
            "short_forms": {f: {"occurrences": o, "gold": g} for f, (o, g) in sorted(self.short_forms.items())},
            "chosen": dict(sorted(self.chosen.items())),
        }
        Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> StopList:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except ValueError as err:
            raise ValueError(f"{path}: not a bioel stop list ({err})") from None
        kind = data.get("kind") if isinstance(data, dict) else None
        if kind != STOP_LIST_KIND:
            raise ValueError(f"{path}: not a bioel stop list (kind {kind!r})")
        return cls(
            {n: (c["matched"], c["gold"]) for n, c in data["names"].items()},
            data["min_count"],
            data["max_precision"],
            data["learned_from"],
            data["entity_types"],
            data["dictionary"],
            data["normalizer"],
            # a list learned before short forms were counted has none: every short form is unseen
            {f: (c["occurrences"], c["gold"]) for f, c in data.get("short_forms", {}).items()},
            dict(data.get("chosen", {})),
        )


def acronym_names(names: Iterable[tuple[str, str]]) -> list[str]:
    """Of (KB name, normalized name) pairs, the normalized names that are one word of at most ACRONYM_CHARS
    characters written without lowercase letters in every KB form ("WAS", "ALL": Wiskott-Aldrich syndrome,
    acute lymphoblastic leukemia), to match only uppercase text."""
    has_lower: dict[str, bool] = {}
    for name, norm in names:
        if len(norm) <= ACRONYM_CHARS and " " not in norm:
            has_lower[norm] = has_lower.get(norm, False) or any(c.islower() for c in name)
    return sorted(n for n, lower in has_lower.items() if not lower)


class DictionaryDetector(MentionDetector):
    def __init__(
        self,
        names: Iterable[str],
        normalizer: Normalizer | None = None,
        *,
        entity_type: str = "",
        stop_list: StopList | Iterable[str] | None = None,
        abbreviations: bool = True,
        coordinations: bool = True,
        min_chars: int = 3,
        skip_numeric: bool = True,
        uppercase_only: Collection[str] = (),
        source: str = "",
        spelling: SpellingVariants | None = None,
    ):
        """`names` are already normalized by `normalizer` (as a NameSet's or a names table's `name_norm`);
        `uppercase_only` names match only text written without lowercase letters (acronyms: "ALL", not "all");
        `spelling`: the text's words are read through it (British spellings as the names' American ones)."""
        self.normalizer = normalizer or Normalizer()
        if isinstance(stop_list, StopList):
            stop_list.check_normalizer(self.normalizer)
        self.stopped = stop_list.names if isinstance(stop_list, StopList) else frozenset(stop_list or ())
        self.entity_type, self.abbreviations, self.source = entity_type, abbreviations, source
        self.coordinations, self.spelling = coordinations, spelling
        self.min_chars, self.skip_numeric = min_chars, skip_numeric
        self.tokenize = _shared_tokenizer(self.normalizer.config)
        # every name and every proper token prefix of one, as space-joined tokens -> _PREFIX|_NAME|_STOPPED
        self._trie: dict[str, int] = {}
        for name in names:
            if len(name) < min_chars or (skip_numeric and name.replace(" ", "").isdigit()):
                continue
            tokens = name.split(" ")
            for k in range(1, len(tokens)):
                key = " ".join(tokens[:k])
                self._trie[key] = self._trie.get(key, 0) | _PREFIX
            self._trie[name] = self._trie.get(name, 0) | (_STOPPED if name in self.stopped else _NAME)
        for name in uppercase_only:
            if name in self._trie:
                self._trie[name] |= _UPPER

    @classmethod
    def from_name_set(cls, names, **options) -> DictionaryDetector:
        """From a `bioel_core.names.NameSet` (its names and normalizer)."""
        return cls(names.names, names.normalizer, source=names.source, **options)

    @classmethod
    def from_names_table(
        cls,
        table_dir: str | Path,
        *,
        acronyms_uppercase_only: bool = True,
        semantic_types: Sequence[str] = (),
        names=None,
        **options,
    ) -> DictionaryDetector:
        """From an ingest-kb output folder, under the normalizer its manifest records; with
        `acronyms_uppercase_only`, its `acronym_names` match only uppercase text. `semantic_types` keeps the
        names of concepts with a semantic type starting with one of them (MeSH tree numbers: "D" = chemicals
        and drugs; UMLS: "T047"), so a detector for one entity type ignores the KB's other branches. `names`: the
        folder's NameSet when the caller has already read it."""
        # imported here: tables need pyarrow and the schemas package, the detector itself does not
        from bioel_core.names import NameSet
        from bioel_core.tables import read_table

        names = names or NameSet.from_names_table(table_dir)
        kept, source = names.names, names.source
        if semantic_types:
            concepts = read_table(table_dir, "concepts", ["concept_id", "semantic_types"]).to_pydict()
            prefixes = tuple(semantic_types)
            keep = {
                c
                for c, types in zip(concepts["concept_id"], concepts["semantic_types"])
                if any(t.startswith(prefixes) for t in types)
            }
            kept = [n for n, ids in zip(names.names, names.concept_ids) if ids[0] in keep]
            source = f"{source} (semantic types {', '.join(prefixes)}*)"
        if acronyms_uppercase_only:
            import pyarrow.compute as pc

            table = read_table(table_dir, "names", ["name", "name_norm"])
            # only one-word short names can be acronyms: the others stay in Arrow (a UMLS-size KB's 20M strings)
            norm = table["name_norm"]
            short = pc.and_(pc.less_equal(pc.utf8_length(norm), ACRONYM_CHARS), pc.invert(pc.match_substring(norm, " ")))
            table = table.filter(short).to_pydict()
            options["uppercase_only"] = acronym_names(zip(table["name"], table["name_norm"]))
        return cls(kept, names.normalizer, source=source, **options)

    # ---- dictionary matches ----
    def _longest(self, text: str, tokens: list[Token], i: int, limit: int) -> tuple[int, str, bool] | None:
        """(last token, name, stopped) of the longest name starting at token i and ending before `limit`;
        a possessive "s" may be skipped, so "Parkinson's disease" finds "parkinson disease" too."""
        trie, n, best = self._trie, len(tokens), None
        first = tokens[i]
        stack = [(i, first.norm), (i, first.spelled)] if first.spelled else [(i, first.norm)]
        while stack:
            j, key = stack.pop()
            flags = trie.get(key)
            if flags is None:
                continue
            if (
                flags & (_NAME | _STOPPED)
                and (best is None or (j, len(key)) > (best[0], len(best[1])))
                and not (flags & _UPPER and _has_lower(text, tokens[i].start, tokens[j].end))
            ):
                best = (j, key, bool(flags & _STOPPED))
            k = j + 1
            if flags & _PREFIX and k < n and tokens[k].start < limit:
                stack.append((k, f"{key} {tokens[k].norm}"))
                if tokens[k].spelled:
                    stack.append((k, f"{key} {tokens[k].spelled}"))
                if tokens[k].possessive and k + 1 < n and tokens[k + 1].start < limit:
                    stack.append((k + 1, f"{key} {tokens[k + 1].norm}"))
                    if tokens[k + 1].spelled:
                        stack.append((k + 1, f"{key} {tokens[k + 1].spelled}"))
        return best

    def _scan(self, text: str, offset: int) -> list[NameMatch]:
        tokens = self.tokenize(text)
        if self.spelling is not None:  # a word spelled otherwise keeps its span: offsets still slice the text
            word = self.spelling.word
            tokens = [t if (w := word(t.norm)) == t.norm else t._replace(spelled=w) for t in tokens]
        breaks = [m.start() for m in _NAME_BREAK.finditer(text)]
        out: list[NameMatch] = []
        i, b = 0, 0
        while i < len(tokens):
            if tokens[i].norm not in self._trie and (not tokens[i].spelled or tokens[i].spelled not in self._trie):
                i += 1
                continue
            # the first sentence end, bracket or comma after token i: no name reaches past it
            while b < len(breaks) and breaks[b] < tokens[i].end:
                b += 1
            found = self._longest(text, tokens, i, breaks[b] if b < len(breaks) else len(text))
            if found is None:
                i += 1
                continue
            j, name, stopped = found
            first, parts = self._coordinated(text, tokens, i, j, name) if self.coordinations and not stopped else (i, ())
            start = offset + tokens[first].start
            while out and out[-1].end > start:  # a conjunct matched on its own is part of the longer phrase
                out.pop()
            out.append(NameMatch(start, offset + tokens[j].end, name, stopped, parts))
            i = j + 1
        return out

    def _coordinated(self, text: str, tokens: list[Token], i: int, j: int, name: str) -> tuple[int, tuple[str, ...]]:
        """(first token, part names) of the coordinated mention ending in `name`, matched at tokens i..j, or (i, ())
        when there is none (module docstring)."""
        if j == i:
            return i, ()
        # the name's words after its first, as matched (written or spelled); tokens' when it skipped a possessive "s"
        rest = name.split(" ", 1)[1] if name.count(" ") == j - i else " ".join(t.norm for t in tokens[i + 1 : j + 1])

        def gap(a: int) -> str:  # the text between token a and the next
            return text[tokens[a].end : tokens[a + 1].start]

        def is_name(conjunct: Token) -> bool:
            named = any(self._trie.get(f"{form} {rest}", 0) & _NAME for form in conjunct.forms())
            return named and not conjunct.norm.isdigit() and conjunct.norm not in FUNCTION_WORDS

        k = i - 1
        if k >= 0 and gap(k).strip() == "/":  # "breast/ovarian cancer"
            conjuncts = [k]
        else:
            if k < 1 or tokens[k].norm not in CONJUNCTIONS or gap(k).strip():
                return i, ()
            if tokens[k].norm == "or" and k >= 2 and tokens[k - 1].norm == "and" and gap(k - 1).strip() == "/":
                k -= 1  # "and/or"
            conjuncts = [k - 1] if gap(k - 1).strip() in ("", ",") else []
            while conjuncts and conjuncts[0] > 0 and gap(conjuncts[0] - 1).strip() == ",":
                conjuncts.insert(0, conjuncts[0] - 1)  # "brain, breast(,) and prostate cancer"
        while conjuncts and not all(is_name(tokens[c]) for c in conjuncts):
            conjuncts.pop(0)  # the nearest conjuncts that all make names
        if not conjuncts or _BREAK.search(text, tokens[conjuncts[0]].start, tokens[i].start):
            return i, ()
        tail = text[tokens[i + 1].start : tokens[j].end]
        written = [text[tokens[c].start : tokens[c].end] for c in conjuncts]
        return conjuncts[0], (*(f"{w} {tail}" for w in written), text[tokens[i].start : tokens[j].end])

    def name_matches(self, document: Document) -> list[NameMatch]:
        """Every dictionary match of the document, stop-listed ones included (flagged), no abbreviations."""
        return [m for p in document.passages for m in self._scan(p.text, p.offset)]

    # ---- mentions ----
    def detect(self, document: Document, defined: Mapping[str, tuple[int, int]] | None = None) -> list[Mention]:
        matches = [m for m in self.name_matches(document) if not m.stopped]
        found = {(m.start, m.end): "" for m in matches}  # span -> link text ('' = its own text)
        parts = {(m.start, m.end): m.parts for m in matches if m.parts}
        if self.abbreviations:
            self._abbreviations(document, found, defined_short_forms(document) if defined is None else defined)
        text = document.text
        return [
            Mention(
                text=text[s:e],
                doc_id=document.doc_id,
                start=s,
                end=e,
                entity_type=self.entity_type,
                link_text=link,
                parts=() if link else parts.get((s, e), ()),
            )
            for (s, e), link in sorted(found.items())
        ]

    def _abbreviations(
        self, document: Document, found: dict[tuple[int, int], str], definitions: Mapping[str, tuple[int, int]]
    ) -> None:
        defined: dict[str, str | None] = {}  # short form -> long form if a mention, None if something else
        text = document.text
        for short, (start, end) in definitions.items():
            plausible = plausible_long_form(text, start, end, found)
            if plausible is not None:  # unclear: the short form's matches stand as they are
                defined[short] = text[start:end] if plausible else None
        if not defined:
            return
        pattern = _whole_words(defined)
        taken = sorted(found)
        for p in document.passages:
            for m in pattern.finditer(p.text):
                span = (p.offset + m.start(), p.offset + m.end())
                long = defined[m.group(1)]
                if long is None:
                    found.pop(span, None)
                elif span in found or not any(s < span[1] and span[0] < e for s, e in taken):
                    found[span] = long


def learn_stop_list(
    documents_with_gold: Iterable[Document],
    detector: DictionaryDetector,
    min_count: int = 3,
    max_precision: float = 0.2,
    *,
    entity_types: Collection[str] | None = None,
    learned_from: Sequence[str] = (),
) -> StopList:
    """Names the detector matches at least `min_count` times whose matches are gold mention spans (exact
    start and end; of `entity_types`, or any type when None) in under `max_precision` of the cases; and the
    short forms' counts (`StopList.short_forms`, see SHORT_FORM_RULE).

    Counts cover the detector's dictionary matches, its own stop list included (a stopped name is still
    matched), and leave abbreviation mentions out: those follow each document's definitions.
    """
    documents = list(documents_with_gold)
    matched: Counter[str] = Counter()
    gold: Counter[str] = Counter()
    gold_spans, short = [], set()
    for doc in documents:
        mentions = [m for m in doc.mentions if entity_types is None or m.entity_type in entity_types]
        spans = {(m.start, m.end) for m in mentions}
        gold_spans.append(spans)
        text = doc.text
        for m in detector.name_matches(doc):
            matched[m.name] += 1
            gold[m.name] += (m.start, m.end) in spans
            short.add(text[m.start : m.end])
        short.update(m.text for m in mentions)
    counts = {n: (c, gold[n]) for n, c in matched.items() if c >= min_count and gold[n] / c < max_precision}
    return StopList(
        counts,
        min_count,
        max_precision,
        list(learned_from),
        sorted(entity_types or ()),
        detector.source,
        detector.normalizer.to_dict(),
        _short_form_counts(documents, gold_spans, {f for f in short if is_short_form(f)}),
    )


def _short_form_counts(documents: list[Document], gold_spans: list[set], forms: set[str]) -> dict[str, tuple[int, int]]:
    """Short form -> (its whole-word occurrences in the documents, those a gold span)."""
    if not forms:
        return {}
    pattern = _whole_words(forms)
    occurrences: Counter[str] = Counter()
    gold: Counter[str] = Counter()
    for doc, spans in zip(documents, gold_spans):
        for p in doc.passages:
            for m in pattern.finditer(p.text):
                occurrences[m.group(1)] += 1
                gold[m.group(1)] += (p.offset + m.start(), p.offset + m.end()) in spans
    return {f: (n, gold[f]) for f, n in sorted(occurrences.items())}
