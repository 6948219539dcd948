"""Abbreviation definitions in running text, by the Schwartz & Hearst (2003) algorithm, and their
expansion in mentions.

A definition is "long form (SHORT)" or, when the parenthesis holds more than two words, "SHORT (long form)".
The long form is found by matching the short form's letters and digits right to left in the words before
the parenthesis, the first character at the start of a word; it is kept only if it is short enough
(at most min(|A| + 5, 2|A|) words, |A| = letters and digits of the short form).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SHORT_CHARS = 10
# A long form never spans a sentence or clause end; the search window starts after the last one.
_BOUNDARY = re.compile(r"[.!?;:](?:\s|$)")
_WORD = re.compile(r"\S+")


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


def _alnum_count(s: str) -> int:
    return sum(c.isalnum() for c in s)


def _valid_short(short: str) -> bool:
    return (2 <= len(short) and _alnum_count(short) <= MAX_SHORT_CHARS and len(short.split()) <= 2
            and any(c.isalpha() for c in short) and short[0].isalnum())


def best_long_form(short: str, candidate: str) -> int | None:
    """Start index in `candidate` of the shortest suffix whose words account for `short`, or None.

    Unlike the original, which backs up to the previous space, the long form starts at the matched
    word start itself, so "ischemic stroke (IS)/transient ischemic attack (TIA)" does not drag "(IS)/" in."""
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
        i -= 1
        s -= 1
    # i + 1 is where the first character matched, at a word start: "(IS)/transient" gives "transient"
    return i + 1


def _pair(short: str, short_at: int, window: str, window_at: int) -> Abbreviation | None:
    """Check one (short form, long-form window) pair; offsets are into the whole text."""
    if not _valid_short(short):
        return None
    n = _alnum_count(short)
    words = list(_WORD.finditer(window))[-min(n + 5, 2 * n):]
    if not words:
        return None
    window_at += words[0].start()
    window = window[words[0].start():]
    start = best_long_form(short, window)
    if start is None:
        return None
    long = window[start:].strip()
    long_words = len(long.split())
    if (len(long) < len(short) or f"{short} " in long or long.endswith(short)
            or long_words > 2 * n or long_words > n + 5):
        return None
    long_at = window_at + start
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
        inner = text[open_at + 1:close_at]
        # Keep the first item of "(HSP, see below)" / "(HSP; ...)" / "(IL-1Ra (human))".
        inner_len = min((inner.find(sep) for sep in (", ", "; ", " (") if sep in inner), default=len(inner))
        inner_at = open_at + 1 + (len(inner[:inner_len]) - len(inner[:inner_len].lstrip()))
        inner = inner[:inner_len].strip()
        sentence_at = max((m.end() for m in _BOUNDARY.finditer(text, 0, open_at)), default=0)
        before = text[sentence_at:open_at].rstrip()
        if not inner or not before:
            continue
        if len(inner.split()) > 2 or len(inner) > len(before):
            # "SHORT (long form)": the short form is the word just before the parenthesis
            word = before.split()[-1]
            if any(c.isupper() for c in word):
                pair = _pair(word, sentence_at + len(before) - len(word), inner, inner_at)
                if pair is not None:
                    found.append(pair)
            continue
        pair = _pair(inner, inner_at, before, sentence_at)
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
