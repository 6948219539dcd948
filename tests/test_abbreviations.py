"""Schwartz–Hearst abbreviation detection on the classic cases, and expansion in mentions."""

from __future__ import annotations

from pathlib import Path

import pytest

from bioel_core.corpora import Mention, read_pubtator, read_query_folder
from bioel_core.text import QueryPreprocessor, abbreviation_map, expand_abbreviations, find_abbreviations
from bioel_core.text.abbreviations import best_long_form

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def pairs(text):
    return [(a.short, a.long) for a in find_abbreviations(text)]


@pytest.mark.parametrize("text, expected", [
    ("Expression of heat shock protein (HSP) rises.", [("HSP", "heat shock protein")]),
    ("members of the Gcn5-related N-acetyltransferase (GNAT) superfamily", [("GNAT", "Gcn5-related N-acetyltransferase")]),
    # short form first, long form in the parenthesis (more than two words inside)
    ("levels of HSP (heat shock protein) rise", [("HSP", "heat shock protein")]),
    # abbreviations with digits
    ("inhibitors of cyclooxygenase-2 (COX-2) and interleukin 6 (IL6)", [("COX-2", "cyclooxygenase-2"), ("IL6", "interleukin 6")]),
    ("beta 2 microglobulin (B2M) was measured", [("B2M", "beta 2 microglobulin")]),
    # the long form stops at the shortest suffix that accounts for every letter
    ("a new study of Wilson disease (WD).", [("WD", "Wilson disease")]),
    # the first item of "(A, B)" or "(A; B)"
    ("tumor necrosis factor (TNF, also cachectin) levels", [("TNF", "tumor necrosis factor")]),
    # a long form never reaches back over a sentence end
    ("It was done. Copper toxicosis (CT) is rare.", [("CT", "Copper toxicosis")]),
])
def test_definitions_found(text, expected):
    assert pairs(text) == expected


@pytest.mark.parametrize("text", [
    "(HSP) heat shock protein is high",  # nothing before the parenthesis
    "the heat shock(HSP) response",  # no space before the parenthesis
    "in this study (ABC) we",  # letters that the preceding words cannot account for
    "a significant change (p < 0.05) was seen",  # not an abbreviation; no capital in the preceding word
    "heat shock protein (H)",  # one-character short form
    "treated with drugs (see Table 2)",  # a reference, not a definition
    "an unbalanced ( parenthesis (HSP",
    "shown in patients (n = 12)",
])
def test_negative_cases(text):
    assert pairs(text) == []


def test_nested_parentheses_take_the_outer_short_form_and_continue_after_it():
    text = "the interleukin-1 receptor antagonist (IL-1Ra (human)) and tumor necrosis factor (TNF) rose"
    found = find_abbreviations(text)
    assert [(a.short, a.long) for a in found] == [("IL-1Ra", "interleukin-1 receptor antagonist"), ("TNF", "tumor necrosis factor")]
    for a in found:  # offsets point at the very strings
        assert text[a.short_start:a.short_end] == a.short and text[a.long_start:a.long_end] == a.long


def test_best_long_form_requires_a_word_start_for_the_first_letter():
    assert best_long_form("HSP", "heat shock protein") == 0
    assert best_long_form("HP", "the shock protein") is None  # 'h' only inside "the"/"shock"


def test_first_definition_wins_and_expansion_is_whole_word():
    text = "Copper toxicosis (CT) differs from computed tomography (CT). CT is rare; the CTX gene and HSP-CT probe."
    abbrs = abbreviation_map(text)
    assert abbrs == {"CT": "Copper toxicosis"}
    assert expand_abbreviations("CT", abbrs) == "Copper toxicosis"
    assert expand_abbreviations("autosomal CT", abbrs) == "autosomal Copper toxicosis"
    assert expand_abbreviations("CTX deficiency", abbrs) == "CTX deficiency"
    assert expand_abbreviations("HSP-CT", abbrs) == "HSP-CT"


def test_preprocessor_expands_in_context_lowercases_keeps_composites_and_fixes_typos():
    pre = QueryPreprocessor(typos={"hemmorhage": "haemorrhage"})
    context = "Primary pulmonary hypertension (PPH) was seen."
    assert pre.sub_mentions("PPH", context=context) == ["primary pulmonary hypertension"]
    assert pre.sub_mentions("PPH") == ["pph"]
    assert pre("Hand-foot Syndrome|Brain Hemmorhage") == "hand foot syndrome|brain haemorrhage"
    # a corpus-stated composite (BC5CDR's parts column) is what gets split
    m = Mention("learning and memory impairment", parts=("learning impairment", "memory impairment"))
    assert pre.sub_mentions(m) == ["learning impairment", "memory impairment"]


def test_long_form_starts_at_the_matched_word_not_at_the_previous_space():
    text = "cohorts with ischemic stroke (IS)/transient ischemic attack (TIA) were"
    assert pairs(text) == [("IS", "ischemic stroke"), ("TIA", "transient ischemic attack")]


def test_a_mention_holding_its_own_definition_is_left_alone():
    abbrs = {"SVC": "superior vena cava", "LV": "left ventricular"}
    assert expand_abbreviations("superior vena cava (SVC) syndrome", abbrs) == "superior vena cava (SVC) syndrome"
    assert expand_abbreviations("LV hypertrophy", abbrs) == "left ventricular hypertrophy"


@pytest.mark.skipif(not DATA.is_dir(), reason=f"shared benchmark data not found at {DATA}")
def test_preprocessing_reproduces_biosyn_bc5cdr_test_queries():
    """Raw BC5CDR test mentions (bc5cdr-disease-cl) + document text -> BioSyn's processed queries, >= 99.5% exact.

    The known misses are Schwartz–Hearst's shortest-match choices ("multiple myeloma (MM)" -> "myeloma")
    where BioSyn used Ab3P.
    """
    docs = {d.doc_id: d for d in read_pubtator(DATA / "bc5cdr-corpus" / "CDR_TestSet.PubTator.txt")}
    processed = {(q.doc_id, q.start, q.end): q.text for q in read_query_folder(DATA / "bc5cdr-disease" / "processed_test")}
    pre, maps, same, total = QueryPreprocessor(), {}, 0, 0
    for q in read_query_folder(DATA / "bc5cdr-disease" / "bc5cdr-disease-cl" / "test"):
        key = (q.doc_id, q.start, q.end)
        if key not in processed:  # BioSyn dropped it (no concept)
            continue
        doc = docs[q.doc_id]
        gold = next(m for m in doc.mentions if (m.start, m.end) == (q.start, q.end))
        if q.doc_id not in maps:
            maps[q.doc_id] = abbreviation_map(doc.text)
        total += 1
        same += "|".join(pre.sub_mentions(gold, abbreviations=maps[q.doc_id])) == processed[key]
    assert total == 4287 and same / total >= 0.995
