"""End-to-end (document, span, concept) P/R/F1 on hand-computed sets, the evaluate-e2e verb, gold vs gold."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from bioel_core.corpora import Mention, read_pubtator, write_pubtator
from bioel_core.evaluation import e2e_scores
from pipelines import cli_evaluate

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpora"
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared benchmark data not found at {DATA}")


def m(doc, start, end, *ids, etype="Disease"):
    return Mention(text="x", doc_id=doc, start=start, end=end, entity_type=etype, concept_ids=tuple(ids))


GOLD = [m("A", 0, 5, "X"), m("A", 10, 20, "Y"), m("A", 30, 35), m("B", 0, 4, "Z", "W")]  # A 30-35: no concept
PRED = [
    m("A", 0, 5, "X"),  # strict hit
    m("A", 10, 18, "Y"),  # overlaps gold A 10-20: partial only
    m("A", 40, 45, "X"),  # no gold there
    m("B", 0, 4, "W"),  # shares one id with the gold id set
    m("C", 0, 3, "Q"),  # a document without gold
]


def test_strict_and_partial_by_hand():
    s = e2e_scores(GOLD, PRED)
    strict, partial = s["strict"], s["partial"]
    assert (strict["n_pred"], strict["n_gold"], strict["correct_pred"], strict["matched_gold"]) == (5, 3, 2, 2)
    assert strict["precision"] == pytest.approx(40.0) and strict["recall"] == pytest.approx(200 / 3)
    assert strict["f1"] == pytest.approx(50.0)  # 2 * .4 * .667 / 1.067
    assert (partial["correct_pred"], partial["matched_gold"]) == (3, 3)
    assert partial["precision"] == pytest.approx(60.0) and partial["recall"] == pytest.approx(100.0)
    assert partial["f1"] == pytest.approx(75.0)
    assert s["gold_without_concept"] == 1 and s["pred_without_concept"] == 0


def test_wrong_id_on_the_right_span_is_wrong_and_touching_spans_do_not_overlap():
    gold = [m("A", 0, 5, "X")]
    assert e2e_scores(gold, [m("A", 0, 5, "Y")])["strict"]["f1"] == 0.0
    assert e2e_scores(gold, [m("A", 5, 9, "X")])["partial"]["f1"] == 0.0  # end is exclusive
    assert e2e_scores(gold, [m("A", 4, 9, "X")])["partial"]["f1"] == 100.0


def test_one_long_prediction_over_two_gold_mentions_partially_matches_both():
    gold = [m("A", 0, 5, "X"), m("A", 6, 10, "X")]
    s = e2e_scores(gold, [m("A", 0, 10, "X")])["partial"]
    assert (s["precision"], s["recall"]) == (100.0, 100.0)
    assert e2e_scores(gold, [m("A", 0, 10, "X")])["strict"]["n_pred"] == 1


def test_prefixes_duplicates_types_and_nil_predictions():
    gold = [m("A", 0, 5, "MESH:D1"), m("A", 0, 5, "MESH:D1"), m("A", 8, 12, "C1", etype="Chemical")]
    pred = [m("A", 0, 5, "D1"), m("A", 6, 7), m("A", 8, 12, "C1", etype="Chemical")]
    s = e2e_scores(gold, pred)
    assert s["strict"]["n_gold"] == 2 and s["strict"]["f1"] == 100.0  # duplicate gold counted once
    assert s["pred_without_concept"] == 1
    only_disease = e2e_scores(gold, pred, entity_types=["Disease"])["strict"]
    assert (only_disease["n_gold"], only_disease["n_pred"]) == (1, 1)


def test_gold_ids_stated_apart_for_one_span_are_one_gold_annotation_and_predictions_stay_apart():
    """Two gold lines for one span with other ids were two gold annotations (a linker right on the span scored recall
    50), where one line `X|Y` is one and calibrate-nil counted one: the gold of a span is now one annotation, its
    ids the union. Predictions stay one per (span, ids): a second line with a wrong id costs precision."""
    apart = e2e_scores([m("A", 0, 5, "X"), m("A", 0, 5, "Y")], [m("A", 0, 5, "Y")])
    assert apart == e2e_scores([m("A", 0, 5, "X", "Y")], [m("A", 0, 5, "Y")])
    assert (apart["strict"]["n_gold"], apart["strict"]["recall"], apart["strict"]["precision"]) == (1, 100.0, 100.0)
    hedged = e2e_scores([m("A", 0, 5, "X")], [m("A", 0, 5, "X"), m("A", 0, 5, "Z")])["strict"]
    assert (hedged["n_pred"], hedged["correct_pred"], hedged["precision"], hedged["recall"]) == (2, 1, 50.0, 100.0)


def test_missing_span_is_an_error():
    with pytest.raises(ValueError, match="has no span"):
        e2e_scores([Mention("x", doc_id="A", concept_ids=("X",))], [])


def _run_cli(argv):
    parser = argparse.ArgumentParser(prog="bioel")
    cli_evaluate.add_subcommands(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_evaluate_e2e_verb_on_pubtator_fixture(tmp_path, capsys):
    gold = FIXTURES / "sample.pubtator"
    docs = read_pubtator(gold)
    docs[0].mentions.pop(0)  # drop one gold annotation from the predictions
    pred = tmp_path / "pred.pubtator"
    write_pubtator(docs, pred)
    out = tmp_path / "e2e.json"
    assert _run_cli(["evaluate-e2e", "--gold", str(gold), "--pred", str(pred), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    # 14 annotations, one without a concept: 13 gold; 12 predicted, all correct
    assert report["strict"]["n_gold"] == 13 and report["strict"]["n_pred"] == 12
    assert report["strict"]["precision"] == 100.0 and report["strict"]["recall"] == pytest.approx(1200 / 13)
    assert "strict" in capsys.readouterr().out


def test_evaluate_e2e_reports_documents_absent_from_either_side_and_refuses_predictions_of_other_documents(tmp_path, capsys):
    # a --pred missing half the gold documents scored them as all missed with no word about it, and predictions of
    # other documents altogether (a wrong file) printed F1 0.00 with exit 0
    gold = FIXTURES / "sample.pubtator"
    docs = read_pubtator(gold)
    pred, out = tmp_path / "pred.pubtator", tmp_path / "e2e.json"
    write_pubtator(docs[1:] + [replace(docs[0], doc_id="other", mentions=[])], pred)
    assert _run_cli(["evaluate-e2e", "--gold", str(gold), "--pred", str(pred), "--json", str(out)]) == 0
    lost = len({(a.start, a.end) for a in docs[0].mentions if a.concept_ids})
    assert json.loads(out.read_text())["documents"] == {
        "gold": len(docs),
        "pred": len(docs),
        "gold_not_in_pred": 1,
        "pred_not_in_gold": 1,
        "gold_not_in_pred_annotations": lost,
    }
    assert (
        f"documents: gold {len(docs)}, pred {len(docs)}; gold not in pred 1 ({lost} gold annotations counted as "
        "missed), pred not in gold 1"
    ) in capsys.readouterr().out
    write_pubtator([replace(docs[0], doc_id="other")], pred)
    with pytest.raises(
        ValueError, match=f"^--pred {pred}: none of its 1 documents is in --gold {gold} \\({len(docs)} documents\\)"
    ):
        _run_cli(["evaluate-e2e", "--gold", str(gold), "--pred", str(pred)])


def test_a_json_that_is_an_input_or_inside_an_input_folder_is_refused_before_scoring(tmp_path):
    # `--json` given the predictions file (or a file in the gold folder) overwrote it with the scores
    pred, gold = tmp_path / "pred.pubtator", tmp_path / "gold"
    gold.mkdir()
    for path in (pred, gold / "a.pubtator"):
        path.write_bytes((FIXTURES / "sample.pubtator").read_bytes())
    for json_path, says in ((pred, f"is (or holds) the --pred {pred}"), (gold / "s.json", f"is inside the --gold folder {gold}")):
        with pytest.raises(ValueError) as err:
            _run_cli(["evaluate-e2e", "--gold", str(gold), "--pred", str(pred), "--json", str(json_path)])
        assert str(err.value) == f"--json {json_path} {says} of this job; write to a folder of its own"
    assert pred.read_bytes() == (FIXTURES / "sample.pubtator").read_bytes() and sorted(gold.iterdir()) == [gold / "a.pubtator"]


@pytest.mark.parametrize(
    "annotation, types, reason",
    [
        (
            "1\t0\t5\tHeart\tDisease\tD001",
            ["Chemical"],
            " of type Chemical to score (1 documents, 0 annotations without a concept id; types in the file: Disease)",
        ),
        (
            "1\t0\t5\tHeart\tDisease\t-1",
            None,
            " to score (1 documents, 1 annotations without a concept id; types in the file: Disease)",
        ),
        (None, None, " to score (1 documents, 0 annotations without a concept id; types in the file: none)"),
    ],
)
def test_evaluate_e2e_refuses_a_gold_with_nothing_to_score(tmp_path, annotation, types, reason):
    """--types naming no type of the gold, an all-NIL gold or a gold without annotations printed P/R/F1 0.00 with
    0 gold, exit 0."""
    gold = tmp_path / "gold.pubtator"
    gold.write_text("1|t|Heart attack.\n1|a|\n" + (annotation + "\n" if annotation else "") + "\n")
    argv = ["evaluate-e2e", "--gold", str(gold), "--pred", str(gold)] + (["--types", *types] if types else [])
    with pytest.raises(ValueError) as err:
        _run_cli(argv)
    assert str(err.value) == f"--gold {gold}: no annotation with a concept id{reason}"


@needs_data
def test_bc5cdr_test_gold_against_itself_is_100():
    gold = read_pubtator(DATA / "bc5cdr-corpus" / "CDR_TestSet.PubTator.txt")
    s = e2e_scores(gold, gold)
    assert s["strict"]["f1"] == s["partial"]["f1"] == 100.0
    assert s["strict"]["n_gold"] + s["gold_without_concept"] <= 9809
    assert e2e_scores(gold, gold, entity_types=["Disease"])["strict"]["f1"] == 100.0


def test_vocabulary_prefixes_and_alt_ids_do_not_make_a_right_answer_wrong():
    from bioel_core.evaluation.e2e import annotation_mentions

    gold = [m("A", 0, 5, "D003920"), m("A", 10, 20, "D001260"), m("A", 30, 35, "MESH:D009369")]
    rows = [  # annotation rows: PubTator3-style prefixes, and an alt id that is the gold one
        {
            "doc_id": "A",
            "start": 0,
            "end": 5,
            "mention": "x",
            "entity_type": "Disease",
            "concept_id": "D003920",
            "vocabulary": "MESH",
            "alt_ids": [],
            "nil": False,
        },
        {
            "doc_id": "A",
            "start": 10,
            "end": 20,
            "mention": "x",
            "entity_type": "Disease",
            "concept_id": "208900",
            "vocabulary": "OMIM",
            "alt_ids": ["MESH:D001260"],
            "nil": False,
        },
        {
            "doc_id": "A",
            "start": 30,
            "end": 35,
            "mention": "x",
            "entity_type": "Disease",
            "concept_id": None,
            "vocabulary": None,
            "alt_ids": [],
            "nil": True,
        },
    ]
    s = e2e_scores(gold, annotation_mentions(rows))
    assert (s["strict"]["correct_pred"], s["strict"]["n_pred"], s["pred_without_concept"]) == (2, 2, 1)
    prefixed = [m("A", 0, 5, "MESH:D003920"), m("A", 10, 20, "OMIM:208900"), m("A", 30, 35, "mesh:D009369")]
    assert e2e_scores(gold, prefixed)["strict"]["correct_pred"] == 2  # the OMIM id is not the MeSH gold


def test_a_prediction_on_another_text_than_the_gold_is_refused_naming_document_and_offset(tmp_path):
    """Predictions made on another version of a gold document (one more character in the title) have offsets into
    that text: evaluate-e2e scored them against the gold's spans anyway, strict 0.00 and partial 80.00, exit 0."""
    gold, pred = tmp_path / "gold.pubtator", tmp_path / "pred.pubtator"
    gold.write_text(
        "1|t|Heart attack and asthma.\n1|a|Cancer.\n1\t0\t12\tHeart attack\tDisease\tD009203\n"
        "1\t17\t23\tasthma\tDisease\tD001249\n\n2|t|Asthma.\n2|a|\n2\t0\t6\tAsthma\tDisease\tD001249\n\n"
    )
    pred.write_text(
        "1|t|A Heart attack and asthma.\n1|a|Cancer.\n1\t2\t14\tHeart attack\tDisease\tD009203\n\n"
        "2|t|Asthma.\n2|a|\n2\t0\t6\tAsthma\tDisease\tD001249\n\n"
    )
    with pytest.raises(ValueError) as err:
        _run_cli(["evaluate-e2e", "--gold", str(gold), "--pred", str(pred)])
    assert str(err.value) == (
        f"--pred {pred}: 1 of its 2 documents in --gold {gold} has another text than the gold's "
        "(document 1 at offset 0: gold 'Heart attack and ast', pred 'A Heart attack and a'): its "
        "spans do not point into the gold text; predict on the gold documents' own text"
    )
    with pytest.raises(ValueError, match="^the predictions: 1 of its 2 documents in the gold has another text than the gold's"):
        e2e_scores(read_pubtator(gold), read_pubtator(pred))


def test_texts_that_differ_only_in_line_breaks_tabs_or_trailing_space_are_the_same_text():
    # PubTator writes a line break or tab of the text as one space (offsets unchanged): still the gold's text
    from bioel_core.corpora import Document, Passage

    gold = [Document("1", [Passage("title", 0, "Heart\tattack.")], [m("1", 0, 5, "D1")])]
    pred = [Document("1", [Passage("title", 0, "Heart attack. ")], [m("1", 0, 5, "D1")])]
    assert e2e_scores(gold, pred)["strict"]["f1"] == 100.0
    assert e2e_scores(gold, [m("1", 0, 5, "D1")])["strict"]["f1"] == 100.0  # mentions alone carry no text to compare


def test_evaluate_e2e_refuses_types_that_leave_no_prediction_of_a_pred_that_has_some(tmp_path):
    """Predictions typed otherwise than --types (an untyped --index writes `Entity`, NCBI gold says SpecificDisease)
    were all filtered out: P/R/F1 0.00 with 0 predictions, exit 0, as if the linker had found nothing."""
    gold, pred = tmp_path / "gold.pubtator", tmp_path / "pred.pubtator"
    text = "1|t|Heart attack and asthma.\n1|a|\n"
    gold.write_text(text + "1\t0\t12\tHeart attack\tDisease\tD009203\n1\t17\t23\tasthma\tDisease\tD001249\n\n")
    pred.write_text(text + "1\t0\t12\tHeart attack\tEntity\tD009203\n1\t17\t23\tasthma\tEntity\t-1\n\n")
    with pytest.raises(ValueError) as err:
        _run_cli(["evaluate-e2e", "--gold", str(gold), "--pred", str(pred), "--types", "Disease"])
    assert str(err.value) == (
        f"--pred {pred}: no annotation with a concept id of type Disease to score (1 documents, "
        "1 annotations without a concept id; types in the file: Entity)"
    )
    nothing = tmp_path / "nothing.pubtator"  # a linker that found nothing scores 0: that is its score
    nothing.write_text(text + "1\t17\t23\tasthma\tEntity\t-1\n\n")
    assert _run_cli(["evaluate-e2e", "--gold", str(gold), "--pred", str(nothing), "--types", "Disease"]) == 0
