import pytest

from bioel_core.corpora.records import Document, Mention, Passage
from bioel_core.linking import NameSet, build_linker
from bioel_core.linking.annotate import DocumentAnnotator, DocumentError, EntityTarget, content_sha256
from bioel_core.text.detect import DictionaryDetector

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
