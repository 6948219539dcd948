"""Abbreviation definitions in running text, by the Schwartz & Hearst (2003) algorithm, and their
expansion in mentions.

As the paper defines it ("A simple algorithm for identifying abbreviation definitions in biomedical text"):
- A definition is "long form (SF)" or, when the parenthesis holds more than two words or more characters than
  the text before it, "SF (long form)" (SF then the word just before the parenthesis, holding a capital).
  Of "(SF, ...)", "(SF; ...)" and "(SF (...))" the first item is read.
- The short form has 2 to 10 characters and at most two words, starts with a letter or digit and holds a letter.
- The long form is found by matching the short form's letters and digits right to left in the words before the
  parenthesis, the first character at the start of a word; it has at most min(|SF| + 5, 2|SF|) words
  (|SF|: the short form's characters), is longer than the short form and does not hold it as a word.

What abstracts put in parentheses besides definitions, which the paper's rules let through ("disorder
(OR=12.6, 95% CI 2.6-19.7)", "nimodipine (n=101)"), is ruled out too:
- a short form that is a statistic (`is_statistic`: `OR=12.6`, `n=101`, `p<0.05`, `95% CI`, `HR 1.2`) or a Latin
  connective (`i.e.`, `e.g.`) is none;
- a long form never reaches back over a clause end (`;`, `:`, a sentence end), a parenthesis or a statistic:
  its words are taken after the last of them;
- a long form holds no bare number (`12`, `2.5`, `10%`) that the short form does not write ("interleukin 6
  (IL6)" holds its 6; "heparin 2 doses (HD)" would hold a 2 nobody abbreviated).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The version of these rules and of how detection uses them (bioel_core.text.detect): part of a linking run's
# settings (AnnotatorSpec.settings_sha256), so an incremental run links again what older rules annotated.
ABBREVIATION_RULES = "schwartz-hearst-2003/guarded-2"
MIN_SHORT_CHARS, MAX_SHORT_CHARS = 2, 10
# A long form never spans a sentence or clause end, nor a parenthesis: its window starts after the last one.
_BOUNDARY = re.compile(r"[.!?;:](?=\s|$)|[()\[\]{}]")
# A statistic: a comparison or equality sign, a confidence level ("95% CI"), or a ratio / interval name followed by
# its figure. A bare percentage is none: "0.9% saline" is a chemical.
_STATISTIC = re.compile(r"[=<>\u2264\u2265\u00b1]|\d\s*%\s*CI\b|\b(?:OR|HR|RR|CI|SD|SEM?|IQR)\s*\d")
_BARE_NUMBER = re.compile(r"[-+\u2212]?\d+(?:[.,]\d+)*(?:[-\u2013]\d+(?:[.,]\d+)*)?%?")
_WORD = re.compile(r"\S+")
_WORD_END = re.compile(r"\s|$")
# Latin connectives written in parentheses, "(i.e., desogestrel)": the paper's rules would take them as short forms
_LATIN = frozenset({"i.e.", "ie.", "e.g.", "eg.", "cf.", "vs.", "viz.", "etc.", "et al."})


def is_statistic(text: str) -> bool:
    """Whether `text` holds a statistic (`OR=12.6`, `n = 101`, `p<0.05`, `95% CI`, `HR 1.2`): no abbreviation,
    and no mention of a disease or a chemical."""
    return _STATISTIC.search(text) is not None


def crosses_boundary(text: str) -> bool:
    """Whether `text` holds what no long form may span: a clause end, a parenthesis or a statistic."""
    return _window(text, 0, len(text)) > 0


def is_bare_number(word: str) -> bool:
    """Whether `word` (trailing commas and the like aside) is only a number, a range or a percentage."""
    return _BARE_NUMBER.fullmatch(word.strip(",;.")) is not None


@dataclass(frozen=True)
class Abbreviation:
    short: str
    long: str
    short_start: int
    short_end: int
    long_start: int
    long_end: int


def _matching_paren(text: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def _valid_short(short: str) -> bool:
    return (
        MIN_SHORT_CHARS <= len(short) <= MAX_SHORT_CHARS
        and len(short.split()) <= 2
        and short[0].isalnum()
        and any(c.isalpha() for c in short)
        and not is_statistic(short)
        and short.lower() not in _LATIN
    )


def _matched_positions(short: str, candidate: str) -> list[int] | None:
    """Where in `candidate` the short form's letters and digits match, right to left, the first character at a
    word start; None when they cannot all match."""
    positions: list[int] = []
    s, i = len(short) - 1, len(candidate) - 1
    while s >= 0:
        c = short[s].lower()
        if not c.isalnum():
            s -= 1
            continue
        # the short form's first character must begin a word of the long form
        while i >= 0 and (candidate[i].lower() != c or (s == 0 and i > 0 and candidate[i - 1].isalnum())):
            i -= 1
        if i < 0:
            return None
        positions.append(i)
        i -= 1
        s -= 1
    return positions[::-1]


def best_long_form(short: str, candidate: str) -> int | None:
    """Start index in `candidate` of the shortest suffix whose words account for `short`, or None.

    Unlike the original, which backs up to the previous space, the long form starts at the matched
    word start itself, so "ischemic stroke (IS)/transient ischemic attack (TIA)" does not drag "(IS)/" in."""
    positions = _matched_positions(short, candidate)
    return positions[0] if positions else None


def _window(text: str, start: int, end: int) -> int:
    """Where a long form ending at `end` may start at the earliest: after the last clause end, parenthesis or
    statistic (the whole word holding it) in text[start:end]."""
    at = start
    for m in _BOUNDARY.finditer(text, start, end):
        at = m.end()
    for m in _STATISTIC.finditer(text, at, end):
        word_end = _WORD_END.search(text, m.end())
        at = max(at, min(word_end.start(), end))
    return at


def _pair(short: str, short_at: int, text: str, window_at: int, window_end: int) -> Abbreviation | None:
    """The definition of `short` (at `short_at` in `text`) whose long form ends text[window_at:window_end], or None."""
    if not _valid_short(short):
        return None
    limit = min(len(short) + 5, 2 * len(short))
    window_at = _window(text, window_at, window_end)
    words = list(_WORD.finditer(text, window_at, window_end))[-limit:]
    if not words:
        return None
    window_at = words[0].start()
    window = text[window_at:window_end]
    positions = _matched_positions(short, window)
    if positions is None:
        return None
    long_start = positions[0]
    long = window[long_start:].rstrip()
    if len(long) <= len(short) or f"{short} " in long or long.endswith(short):
        return None
    for word in _WORD.finditer(long):
        if is_bare_number(word.group()) and not any(word.start() <= p - long_start < word.end() for p in positions):
            return None
    long_at = window_at + long_start
    return Abbreviation(short, long, short_at, short_at + len(short), long_at, long_at + len(long))


def find_abbreviations(text: str) -> list[Abbreviation]:
    """All abbreviation definitions in `text`, in order of appearance."""
    found: list[Abbreviation] = []
    pos = 0
    while (open_at := text.find("(", pos)) >= 0:
        close_at = _matching_paren(text, open_at)
        if close_at is None:  # unbalanced: nothing to read inside
            pos = open_at + 1
            continue
        pos = close_at + 1
        if open_at == 0 or not text[open_at - 1].isspace():
            continue  # "(HSP) heat shock", "gene(s)": no long form before the parenthesis
        inner = text[open_at + 1 : close_at]
        # Keep the first item of "(HSP, see below)" / "(HSP; ...)" / "(IL-1Ra (human))".
        inner_len = min((inner.find(sep) for sep in (", ", "; ", " (") if sep in inner), default=len(inner))
        inner_at = open_at + 1 + (len(inner[:inner_len]) - len(inner[:inner_len].lstrip()))
        inner = inner[:inner_len].strip()
        before_end = len(text[:open_at].rstrip())
        before_at = _window(text, 0, before_end)
        if not inner or before_at >= before_end:
            continue
        if len(inner.split()) > 2 or len(inner) > before_end - before_at:
            # "SHORT (long form)": the short form is the word just before the parenthesis
            word = text[before_at:before_end].split()[-1]
            if any(c.isupper() for c in word):
                pair = _pair(word, before_end - len(word), text, inner_at, inner_at + len(inner))
                if pair is not None:
                    found.append(pair)
            continue
        pair = _pair(inner, inner_at, text, before_at, before_end)
        if pair is not None:
            found.append(pair)
    return found


def abbreviation_map(text: str) -> dict[str, str]:
    """short form -> long form for one document; a short form defined twice keeps its first definition."""
    out: dict[str, str] = {}
    for a in find_abbreviations(text):
        out.setdefault(a.short, a.long)
    return out


def expand_abbreviations(mention: str, abbreviations: dict[str, str]) -> str:
    """Replace every short form standing as a whole word in `mention` by its long form (case-sensitive),
    except in a mention that already holds the long form ("superior vena cava (SVC) syndrome"), as
    BioSyn's preprocessed data has it."""
    lowered = mention.lower()
    present = [s for s in abbreviations if s in mention and abbreviations[s].lower() not in lowered]
    if not present:
        return mention
    # longest first so "HSP70" is not read as "HSP" + "70"
    alternatives = "|".join(re.escape(s) for s in sorted(present, key=len, reverse=True))
    return re.sub(rf"(?<![\w-])({alternatives})(?![\w-])", lambda m: abbreviations[m.group(1)], mention)
