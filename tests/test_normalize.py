import re
import sys
import unicodedata

from bioel_core.normalize import PUNCTUATION_PLANES_END, Normalizer, NormalizerConfig, name_id, unicode_punctuation


def test_default_policy_matches_biosyn_preprocessing():
    norm = Normalizer()
    assert norm("Tooth Agenesis, Selective, 6") == "tooth agenesis selective 6"
    assert norm("Louis-Bar  Syndrome") == "louis bar syndrome"
    assert norm("Alzheimer's disease") == "alzheimer s disease"
    assert norm("  (HNPCC)  ") == "hnpcc"


def test_nfkc_folds_compatibility_forms():
    assert Normalizer()("ＢＲＣＡ１ deficiency") == "brca1 deficiency"
    assert Normalizer(NormalizerConfig(unicode_form=None))("ＢＲＣＡ１") == "ｂｒｃａ１"


def test_keep_chars_and_other_policies():
    assert Normalizer(NormalizerConfig(keep_chars="|"))("Breast|Ovarian-cancer") == "breast|ovarian cancer"
    assert Normalizer(NormalizerConfig(punctuation="remove"))("A-23187") == "a23187"
    assert Normalizer(NormalizerConfig(punctuation="keep", lowercase=False))("A-23187  x") == "A-23187 x"


def test_unicode_punctuation_is_punctuation():
    norm = Normalizer()
    assert norm("Parkinson\u2019s disease") == norm("Parkinson's disease") == "parkinson s disease"
    assert norm("type\u20102 \u201cdiabetes\u201d \u2013 adult\u2010onset") == "type 2 diabetes adult onset"
    assert Normalizer(NormalizerConfig(punctuation="remove"))("A\u201023187") == "a23187"
    assert Normalizer(NormalizerConfig(keep_chars="\u2019"))("Parkinson\u2019s") == "parkinson\u2019s"


def test_no_punctuation_lies_beyond_the_planes_scanned():
    beyond = [c for c in map(chr, range(PUNCTUATION_PLANES_END, sys.maxunicode + 1)) if unicodedata.category(c).startswith("P")]
    assert beyond == []
    assert len(unicode_punctuation()) > 700 and "\u2019" in unicode_punctuation() and "\U0001e95e" in unicode_punctuation()


def test_a_config_recorded_before_unicode_punctuation_reads_as_it_was_written():
    # the manifests, saved linkers and stop lists written before the field: ASCII punctuation, the same version
    recorded = {
        "version": "norm-17c9f93edb2f",
        "unicode_form": "NFKC",
        "lowercase": True,
        "punctuation": "split",
        "keep_chars": "",
    }
    old = Normalizer(NormalizerConfig.from_dict(recorded))
    assert old.version == "norm-17c9f93edb2f" and old("Parkinson\u2019s disease") == "parkinson\u2019s disease"
    assert Normalizer().version != old.version
    assert Normalizer(NormalizerConfig.from_dict(Normalizer().to_dict())).version == Normalizer().version


def test_version_depends_on_policy_only():
    assert Normalizer().version == Normalizer(NormalizerConfig()).version
    assert Normalizer().version != Normalizer(NormalizerConfig(punctuation="remove")).version


def test_name_id_is_stable_and_fits_int64():
    a = name_id("medic", "D001260", "ataxia telangiectasia")
    assert a == name_id("medic", "D001260", "ataxia telangiectasia")
    assert 0 <= a < 2**63
    assert a != name_id("medic", "D001261", "ataxia telangiectasia")
    assert a != name_id("mesh", "D001260", "ataxia telangiectasia")


def test_control_characters_become_one_space():
    # names kept NUL and other control characters (issue 13): one rule, applied by the normalizer and ingest-kb
    from bioel_core.normalize import clean_text

    assert clean_text("Acne\x00Vulgaris") == "Acne Vulgaris"
    assert clean_text("\x01Aspirin \x7f\x9f tablets\x1f") == "Aspirin tablets"
    assert clean_text("\x00\x00") == "" and clean_text("plain name") == "plain name"
    assert Normalizer()("Acne\x00Vulgaris") == "acne vulgaris"
    assert Normalizer(NormalizerConfig(punctuation="keep", lowercase=False))("A\x00-B") == "A -B"


ASCII_TEXTS = [
    "".join(chr(c) for c in range(32, 127)),
    "Parkinson's disease (PD), type-2 diabetes; 5-HT/NE [n=12] {a|b}~c`d",
    "  tab\tand\nnewline  ",
]


def test_ascii_text_is_normalized_as_the_whole_unicode_punctuation_class_would():
    for config in (NormalizerConfig(), NormalizerConfig(punctuation="remove"), NormalizerConfig(keep_chars="|")):
        normalizer = Normalizer(config)
        whole = re.compile(f"[{re.escape(config.punctuation_chars())}]")
        replacement = " " if config.punctuation == "split" else ""
        for text in ASCII_TEXTS:
            expected = " ".join(whole.sub(replacement, " ".join(text.split()).lower()).split())
            assert normalizer(text) == expected, (config, text)
