import pytest

from bioel_core.corpora.records import Document, Mention, Passage
from bioel_core.linking import NameSet, build_linker
from bioel_core.linking.annotate import DocumentAnnotator, DocumentError, EntityTarget, ShortFormSupport, content_sha256
from bioel_core.text.detect import DictionaryDetector, StopList

DISEASES = NameSet.from_pairs(
    [("breast cancer", ("D001943",)), ("ataxia telangiectasia", ("D001260",)), ("cancer", ("D009369",))]
)
CHEMICALS = NameSet.from_pairs([("cisplatin", ("D002945",)), ("breast", ("X1",))])


def doc(title: str, abstract: str = "", mentions=()) -> Document:
    passages = [Passage("title", 0, title)] + ([Passage("abstract", len(title) + 1, abstract)] if abstract else [])
    return Document("42", passages, list(mentions))


def target(entity_type, names, threshold=None, linker="tfidf"):
    return EntityTarget(
        entity_type,
        build_linker(linker, names),
        kb_version=f"kb-{entity_type}",
        detector=DictionaryDetector.from_name_set(names, entity_type=entity_type),
        nil_threshold=threshold,
    )


def test_detected_mentions_are_linked_per_type_with_longest_span_across_types():
    annotator = DocumentAnnotator([target("Disease", DISEASES), target("Chemical", CHEMICALS)], model_version="m1")
    d = doc("Cisplatin in breast cancer.", "Ataxia telangiectasia (AT) and AT carriers.")
    text = annotator.check(d)
    [rows] = annotator.annotate([d])
    got = [(r["start"], r["end"], r["mention"], r["entity_type"], r["concept_id"], r["link_text"]) for r in rows]
    # "breast cancer" (Disease) beats the Chemical "breast" it overlaps; AT expands to its long form
    assert got == [
        (0, 9, "Cisplatin", "Chemical", "D002945", "Cisplatin"),
        (13, 26, "breast cancer", "Disease", "D001943", "breast cancer"),
        (28, 49, "Ataxia telangiectasia", "Disease", "D001260", "Ataxia telangiectasia"),
        (51, 53, "AT", "Disease", "D001260", "Ataxia telangiectasia"),
        (59, 61, "AT", "Disease", "D001260", "Ataxia telangiectasia"),
    ]
    assert all(text[r["start"] : r["end"]] == r["mention"] for r in rows)
    assert {(r["model_version"], r["kb_version"]) for r in rows} == {("m1", "kb-Disease"), ("m1", "kb-Chemical")}
    assert not any(r["nil"] for r in rows) and all(r["score"] == pytest.approx(1.0) for r in rows)


def test_given_mentions_below_the_threshold_are_nil():
    d = doc(
        "Breast carcinoma and gout.",
        mentions=[
            Mention("Breast carcinoma", "42", 0, 16, "Disease"),
            Mention("gout", "42", 21, 25, "Disease"),
            Mention("aspirin", "42", 0, 0, "Chemical"),
        ],
    )
    annotator = DocumentAnnotator([target("Disease", DISEASES, threshold=0.5)], model_version="m1", detect=False)
    d.mentions.pop()  # the chemical: its offsets are bad, and no Chemical KB is loaded here anyway
    annotator.check(d)
    [rows] = annotator.annotate([d])
    by_text = {r["mention"]: r for r in rows}
    assert by_text["Breast carcinoma"]["concept_id"] == "D001943" and not by_text["Breast carcinoma"]["nil"]
    assert by_text["gout"]["nil"] and by_text["gout"]["concept_id"] is None and by_text["gout"]["score"] < 0.5


def test_given_mentions_of_a_type_without_a_kb_are_kept_nil_and_counted():
    # they were dropped: absent from the annotations and PubTator outputs, counted nowhere
    d = doc(
        "Cisplatin in breast cancer.",
        mentions=[Mention("Cisplatin", "42", 0, 9, "Chemical"), Mention("breast cancer", "42", 13, 26, "Disease")],
    )
    annotator = DocumentAnnotator([target("Disease", DISEASES)], model_version="m1", detect=False)
    annotator.check(d)
    [rows] = annotator.annotate([d])
    assert [(r["mention"], r["entity_type"], r["concept_id"], r["matched_name"], r["nil"], r["kb_version"]) for r in rows] == [
        ("Cisplatin", "Chemical", None, None, True, ""),
        ("breast cancer", "Disease", "D001943", "breast cancer", False, "kb-Disease"),
    ]
    assert annotator.no_index(rows) == {"Chemical": 1}


@pytest.mark.parametrize(
    "document, reason",
    [
        (doc("   "), "empty document"),
        (doc("Gout.", mentions=[Mention("Gout", "42", 0, 40, "Disease")]), "outside the text"),
        (doc("Gout.", mentions=[Mention("Gout", "42", 1, 5, "Disease")]), "does not match"),
        (doc("x" * 50), "exceeds the limit"),
    ],
)
def test_documents_that_cannot_be_annotated_say_why(document, reason):
    annotator = DocumentAnnotator([target("Disease", DISEASES)], model_version="m", detect=False, max_chars=40)
    with pytest.raises(DocumentError, match=reason):
        annotator.check(document)


def test_content_hash_changes_with_text_and_given_mentions_only_when_they_count():
    a, b = doc("Gout."), doc("Gout!")
    assert content_sha256(a, False) != content_sha256(b, False)
    with_m = doc("Gout.", mentions=[Mention("Gout", "42", 0, 4, "Disease")])
    assert content_sha256(with_m, False) == content_sha256(a, False)
    assert content_sha256(with_m, True) != content_sha256(a, True)
    # a given mention linked by other words (a discontinuous BioC annotation's own text) is relinked when they change
    linked_by = doc("Gout.", mentions=[Mention("Gout", "42", 0, 4, "Disease", link_text="gouty arthritis")])
    assert content_sha256(linked_by, True) != content_sha256(with_m, True)


def test_rows_carry_the_concepts_vocabulary_and_alt_ids():
    concepts = {"D001260": ("MESH", ("OMIM:208900",)), "D001943": ("MESH", ()), "D009369": ("MESH", ())}
    disease = target("Disease", DISEASES)
    disease.concepts = concepts
    annotator = DocumentAnnotator([disease], model_version="m1")
    [rows] = annotator.annotate([doc("Ataxia telangiectasia and breast cancer.")])
    assert [(r["concept_id"], r["vocabulary"], r["alt_ids"]) for r in rows] == [
        ("D001260", "MESH", ["OMIM:208900"]),
        ("D001943", "MESH", []),
    ]
    nil = DocumentAnnotator([target("Disease", DISEASES, threshold=1.5)], model_version="m1")
    [rows] = nil.annotate([doc("Ataxia telangiectasia.")])
    assert [(r["concept_id"], r["vocabulary"], r["alt_ids"]) for r in rows] == [(None, None, [])]


def test_a_coordinated_mention_is_annotated_once_per_part_each_linked_to_its_concept():
    cancers = NameSet.from_pairs([("breast cancer", ("D001943",)), ("ovarian cancer", ("D010051",))])
    annotator = DocumentAnnotator([target("Disease", cancers)], model_version="m1")
    d = doc("Risk of breast and ovarian cancer.")
    [rows] = annotator.annotate([d])
    assert [(r["start"], r["end"], r["mention"], r["link_text"], r["concept_id"]) for r in rows] == [
        (8, 33, "breast and ovarian cancer", "breast cancer", "D001943"),
        (8, 33, "breast and ovarian cancer", "ovarian cancer", "D010051"),
    ]
    # mentions a corpus gives are linked as given, never split into parts
    given = Mention("breast and ovarian cancer", "42", 8, 33, "Disease", parts=("breast cancer", "ovarian cancer"))
    annotator = DocumentAnnotator([target("Disease", cancers)], model_version="m1", detect=False)
    [rows] = annotator.annotate([doc("Risk of breast and ovarian cancer.", mentions=[given])])
    assert [(r["mention"], r["link_text"]) for r in rows] == [("breast and ovarian cancer", "breast and ovarian cancer")]


def test_the_detection_rules_version_is_part_of_the_incremental_key(monkeypatch, tmp_path):
    from bioel_core.linking import annotate
    from bioel_core.linking.annotate import AnnotatorSpec

    (tmp_path / "manifest.json").write_text('{"pipeline": "build-index", "complete": true}')
    spec = AnnotatorSpec(model=None, indexes=(("Disease", str(tmp_path)),))
    first = spec.settings_sha256()
    monkeypatch.setattr(annotate, "DETECTION_RULES", "older rules")
    assert spec.settings_sha256() != first


def test_the_abbreviation_rules_version_is_part_of_the_incremental_key(monkeypatch, tmp_path):
    # new abbreviation rules change mentions: an incremental run must link again what older rules annotated
    from bioel_core.linking import annotate
    from bioel_core.linking.annotate import AnnotatorSpec

    (tmp_path / "manifest.json").write_text('{"pipeline": "build-index", "complete": true}')  # an index's version
    indexes = (("Disease", str(tmp_path)),)
    with_abbreviations = AnnotatorSpec(model=None, indexes=indexes)
    without = AnnotatorSpec(model=None, indexes=indexes, abbreviations=False)
    first, off = with_abbreviations.settings_sha256(), without.settings_sha256()
    monkeypatch.setattr(annotate, "ABBREVIATION_RULES", "older rules")
    assert with_abbreviations.settings_sha256() != first
    assert without.settings_sha256() == off


# ---- short forms: linked only where the context supports the type (issue 42 item 3) ----

GENES_AND_DISEASES = NameSet.from_pairs(
    [("APC", ("D011125",)), ("FAP", ("D011125",)), ("adenomatous polyposis coli", ("D011125",)), ("gout", ("D006073",))]
)


def short_form_annotator(priors: dict, support: float = 0.2) -> DocumentAnnotator:
    disease = target("Disease", GENES_AND_DISEASES)
    disease.short_forms = ShortFormSupport(support, StopList({}, short_forms=priors))
    return DocumentAnnotator([disease], model_version="m1")


def linked(annotator: DocumentAnnotator, d: Document) -> list[tuple[str, str]]:
    [rows] = annotator.annotate([d])
    return [(r["mention"], r["link_text"]) for r in rows if not r["nil"]]


def test_an_undefined_short_form_with_a_low_prior_is_not_linked():
    # APC is mostly the gene in training (1 of 20 occurrences a disease); FAP mostly the disease
    annotator = short_form_annotator({"APC": (20, 1), "FAP": (10, 9)})
    d = doc("APC mutations in FAP.", "Germline APC variants and gout.")
    assert linked(annotator, d) == [("FAP", "FAP"), ("gout", "gout")]
    # without the rule every one is linked
    assert [m for m, _ in linked(DocumentAnnotator([target("Disease", GENES_AND_DISEASES)], "m1"), d)] == [
        "APC",
        "FAP",
        "APC",
        "gout",
    ]


def test_a_short_form_the_document_defines_is_linked_whatever_its_prior():
    annotator = short_form_annotator({"APC": (20, 1)})
    d = doc("Adenomatous polyposis coli (APC) in families.", "APC is inherited.")
    assert linked(annotator, d) == [
        ("Adenomatous polyposis coli", "Adenomatous polyposis coli"),
        ("APC", "Adenomatous polyposis coli"),
        ("APC", "Adenomatous polyposis coli"),
    ]


def test_a_high_prior_links_and_an_unseen_short_form_without_a_span_score_is_kept():
    assert linked(short_form_annotator({"APC": (20, 15)}), doc("APC in two sisters.")) == [("APC", "APC")]
    assert linked(short_form_annotator({}), doc("APC in two sisters.")) == [("APC", "APC")]
    # a prior exactly at the support is enough; a short word is judged as a symbol is
    assert linked(short_form_annotator({"APC": (10, 2)}), doc("APC.")) == [("APC", "APC")]
    assert linked(short_form_annotator({"gout": (10, 0)}), doc("gout")) == []


def test_the_span_score_supports_what_the_prior_does_not():
    support = ShortFormSupport(0.2, StopList({}, short_forms={"APC": (20, 1)}))
    assert not support.supported("APC", None) and not support.supported("APC", 0.1)
    assert support.supported("APC", 0.5) and support.supported("XYZ", None) and not support.supported("XYZ", 0.05)


def test_the_short_form_rule_is_part_of_the_incremental_key_and_its_support_is_checked(monkeypatch, tmp_path):
    from bioel_core.linking import annotate
    from bioel_core.linking.annotate import AnnotatorSpec
    from bioel_core.settings import SettingsError

    (tmp_path / "manifest.json").write_text('{"pipeline": "build-index", "complete": true}')
    indexes = (("Disease", str(tmp_path)),)
    off, on = AnnotatorSpec(model=None, indexes=indexes), AnnotatorSpec(None, indexes, short_form_support=(("Disease", 0.2),))
    keys = off.settings_sha256(), on.settings_sha256()
    assert keys[0] != keys[1]
    assert AnnotatorSpec(None, indexes, short_form_support=(("Disease", 0.3),)).settings_sha256() != keys[1]
    monkeypatch.setattr(annotate, "SHORT_FORM_RULES", "an older rule")
    assert on.settings_sha256() != keys[1] and off.settings_sha256() == keys[0]
    with pytest.raises(SettingsError, match=r"types\.Disease\.short_form_support: 1\.5: .*\[0, 1\]"):
        AnnotatorSpec(None, indexes, short_form_support=(("Disease", 1.5),))
    with pytest.raises(SettingsError, match=r"types\.Chemical\.index: required: its short_form_support is given"):
        AnnotatorSpec(None, indexes, short_form_support=(("Chemical", 0.2),))


def test_detection_keeps_no_statistic_and_no_bare_number():
    """A name normalized to its letters ("A-T", ataxia telangiectasia: `a t`) matches a mutation written `A-- > T`; a
    statistic or a bare number is never a mention (issue 42), whatever the dictionary says."""
    from bioel_core.corpora.records import Mention
    from bioel_core.linking.annotate import _no_statistics

    found = [
        Mention("A-- > T", "1", 0, 7, "Disease"),
        Mention("OR=12.6", "1", 10, 17, "Disease"),
        Mention("799", "1", 20, 23, "Chemical"),
        Mention("A-T", "1", 30, 33, "Disease"),
        Mention("n-3 fatty acids", "1", 40, 55, "Chemical"),
    ]
    assert [m.text for m in _no_statistics(found)] == ["A-T", "n-3 fatty acids"]


def test_a_model_span_that_is_a_short_form_defined_as_no_mention_of_its_type_is_dropped():
    from bioel_core.linking.annotate import _defined_elsewise
    from bioel_core.text.detect import defined_short_forms

    d = doc(
        "Dosing on gestational day (GD) 9 in breast cancer (BC) models.",
        "GD 10 and GD 11; BC again, and HT alone.",
    )
    text, defined = d.text, defined_short_forms(d)

    def span(word: str, entity_type: str, nth: int = 0) -> Mention:
        at = -1
        for _ in range(nth + 1):
            at = text.index(word, at + 1)
        return Mention(word, "42", at, at + len(word), entity_type)

    model = [span("GD", "Disease"), span("GD", "Disease", 1), span("BC", "Disease", 1), span("HT", "Disease")]
    dictionary = [span("breast cancer", "Disease")]
    # GD's long form holds no disease: every GD goes; BC's is headed by a disease mention; HT is defined nowhere
    assert [(m.text, m.start) for m in _defined_elsewise(d, model, dictionary, defined)] == [
        ("BC", text.index("BC again")),
        ("HT", text.index("HT")),
    ]
    # of another type, the long form "breast cancer" heads no mention: BC is dropped as a Chemical
    assert _defined_elsewise(d, [span("BC", "Chemical", 1)], dictionary, defined) == []
    # the model's own span heading the long form counts as the dictionaries' would
    assert _defined_elsewise(d, [span("breast cancer", "Chemical"), span("BC", "Chemical", 1)], [], defined) == [
        span("breast cancer", "Chemical"),
        span("BC", "Chemical", 1),
    ]
