from bioel_core.normalize import Normalizer, NormalizerConfig, name_id


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
