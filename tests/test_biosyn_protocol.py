"""The BioSyn protocol on hand-computed cases, GenBioEL's subpopulations, and the `bioel evaluate` verb."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bioel_core.corpora import Candidate, Mention, read_query_folder
from bioel_core.evaluation import gold_ids, is_correct, membership, run_protocol, score_query, subpopulation_scores, summarize
from bioel_core.linking import NameSet, build_linker
from bioel_core.normalize import Normalizer
from bioel_core.text import split_composite
from pipelines import cli_evaluate

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpora"
BIOSYN = FIXTURES / "biosyn"
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared benchmark data not found at {DATA}")


def cand(*ids: str, name: str = "n") -> Candidate:
    return Candidate(tuple(ids), name, 0.0)


class TableLinker:
    """A linker answering from a fixed table, so the expected scores can be worked out by hand."""

    def __init__(self, answers: dict[str, list[Candidate]]):
        self.answers = answers

    def link(self, mentions, k=5, batch_size=256):
        return [self.answers.get(m, [])[:k] for m in mentions]


class GoldLinker:
    """Answers each sub-mention with its query's gold ids (run_protocol links sub-mentions in query order)."""

    def __init__(self, queries: list[Mention]):
        self.gold = iter([q.concept_ids for q in queries for _ in split_composite(q.text)])

    def link(self, mentions, k=5, batch_size=256):
        return [[Candidate(next(self.gold), m, 1.0)] for m in mentions]


def test_any_shared_id_counts_and_ids_are_split_on_bar_and_plus():
    gold = gold_ids(Mention("m", concept_ids=("D001943+D010051", " D1|OMIM:2 ")))
    assert gold == {"D001943", "D010051", "D1", "2"}  # a known vocabulary's prefix is not part of the id
    assert is_correct(("D9", "D010051"), gold)  # a MeSH|OMIM name sharing one id
    assert is_correct(("D9|D1",), gold)
    assert not is_correct(("D9", "OMIM:3"), gold)
    # a KB table qualifies alt ids (OMIM:2) and PubTator3 prefixes MeSH ids: neither makes a right answer wrong
    assert is_correct(("D9", "OMIM:2"), gold) and is_correct(("MESH:D1",), gold)


def test_every_sub_mention_must_hit_and_the_rank_is_the_worst_one():
    q = Mention("breast cancer|ovarian cancer", concept_ids=("D001943", "D010051"))
    both = score_query(q, ["breast cancer", "ovarian cancer"], [[cand("D001943")], [cand("X"), cand("D010051")]])
    assert both.sub_ranks == (1, 2) and both.rank == 2 and not both.hit(1) and both.hit(2)
    one = score_query(q, ["breast cancer", "ovarian cancer"], [[cand("D001943")], [cand("X"), cand("Y")]])
    assert one.rank is None and not one.hit(5)
    with pytest.raises(ValueError, match="2 candidate lists for 1 sub-mentions"):
        score_query(q, ["breast cancer"], [[], []])


def test_protocol_on_hand_computed_queries():
    queries = [
        Mention("delirium", concept_ids=("D003693",)),
        Mention("delirium", concept_ids=("D003693",)),  # a duplicate line counts again
        Mention("breast cancer+ovarian cancer", concept_ids=("D001943", "D010051")),  # "+" splits the mention too
        Mention("wilsons disease", concept_ids=("277900",)),
        Mention("memory impairment", concept_ids=("D008569",)),
    ]
    linker = TableLinker(
        {
            "delirium": [cand("D003693"), cand("X")],
            "breast cancer": [cand("D001943")],
            "ovarian cancer": [cand("X"), cand("Y"), cand("D010051")],
            "wilsons disease": [cand("D006527", "277900")],  # multi-id name
            "memory impairment": [cand("X"), cand("D008569"), cand("D008569")],
        }
    )
    results = run_protocol(linker, queries, k=5)
    assert [r.sub_mentions for r in results][2] == ("breast cancer", "ovarian cancer")
    assert [r.rank for r in results] == [1, 1, 3, 1, 2]
    scores = summarize(results, k=5)
    assert scores["n"] == 5
    assert scores["acc@1"] == pytest.approx(60.0)  # 3 of 5
    assert scores["acc@2"] == pytest.approx(80.0)
    assert scores["acc@3"] == scores["acc@5"] == pytest.approx(100.0)
    # AP: 1, 1, (1 + 1/3)/2, 1, (1/2 + 2/3)/2
    assert scores["map"] == pytest.approx(100 * (3 + 2 / 3 + 7 / 12) / 5)
    assert summarize(results, k=1)["acc@1"] == scores["acc@1"]


def test_fixture_dataset_with_the_exact_linker():
    """By hand: delirium (x2), wilson disease, breast|ovarian cancer, ' 215600' copper toxicosis hit; 3 miss."""
    queries = read_query_folder(BIOSYN / "processed_test")
    linker = build_linker("exact", NameSet.from_biosyn(BIOSYN / "test_dictionary.txt"))
    results = run_protocol(linker, queries, k=5)
    assert [r.hit(1) for r in results] == [True, False, True, False, True, True, True, False]
    assert summarize(results, 5)["acc@1"] == pytest.approx(62.5)


def test_subpopulations_by_hand():
    train = read_query_folder(BIOSYN / "processed_traindev")  # delirium x2 (D003693), wilson disease (D006527)
    queries = read_query_folder(BIOSYN / "processed_test")
    linker = build_linker("exact", NameSet.from_biosyn(BIOSYN / "test_dictionary.txt"))
    results = run_protocol(linker, queries, k=5)
    member = membership(results, train, set(linker.names.names), Normalizer(), top_n=1)
    # queries: delirium, hemorrhagic|cystitis, delirium, learning impairment|memory impairment,
    #          wilson disease, breast cancer|ovarian cancer, copper toxicosis, wilsons disease
    assert member["single_word"] == [True, False, True, False, False, False, False, False]
    assert member["unseen_mentions"] == [False, True, False, True, False, True, True, True]
    assert member["unseen_concepts"] == [False, True, False, True, False, True, True, True]
    assert member["not_direct_match"] == [False, True, False, True, False, False, False, True]
    assert member["top_100_concepts"] == [True, False, True, False, False, False, False, False]  # top 1: D003693
    scores = subpopulation_scores(results, train, set(linker.names.names), Normalizer(), k=5)
    assert scores["overall"]["n"] == 8 and scores["not_direct_match"]["n"] == 3
    assert scores["not_direct_match"]["acc@1"] == 0.0 and scores["top_100_concepts"]["acc@1"] == 100.0


def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bioel")
    cli_evaluate.add_subcommands(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_evaluate_verb_prints_a_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "scores.json"
    assert _run_cli(["evaluate", "--dataset", str(BIOSYN), "--split", "test", "--linker", "exact", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {"dataset", "split", "n", "acc@1", "acc@5", "subpopulations"} <= set(report)
    assert (report["dataset"], report["split"], report["n"], report["acc@1"]) == ("biosyn", "test", 8, 62.5)
    assert report["subpopulations"]["unseen_mentions"]["n"] == 5
    printed = capsys.readouterr().out
    assert "not_direct_match" in printed and "62.50" in printed


@pytest.mark.parametrize(
    "lines, reason",
    [
        ("1||0|3||Disease||foo||-1\n1||4|7||Disease||bar||CUI-less\n", "2 queries, all without a concept id (-1 or CUI-less)"),
        ("", "its *.concept files are empty"),
    ],
)
def test_evaluate_and_probe_refuse_a_split_with_no_query_to_score(tmp_path, capsys, lines, reason):
    """A split whose every query is NIL (or whose files are empty) scored n = 0, acc 0.00, exit 0."""
    (tmp_path / "processed_test").mkdir()
    (tmp_path / "processed_test" / "a.concept").write_text(lines)
    (tmp_path / "test_dictionary.txt").write_text("C1||foo\n")
    for verb in ("evaluate", "probe"):
        with pytest.raises(ValueError) as err:
            _run_cli([verb, "--dataset", str(tmp_path), "--split", "test"])
        assert str(err.value) == f"{tmp_path / 'processed_test'}: no query to score: {reason}"


@pytest.mark.parametrize("linker", ["exact", "tfidf"])
@pytest.mark.parametrize("dictionary", ["\n\n", "C1||---\n"])
def test_evaluate_refuses_a_dictionary_with_no_name(tmp_path, linker, dictionary):
    """exact scored every query a miss (exit 0); tfidf failed with scikit-learn's 'empty vocabulary; perhaps the
    documents only contain stop words', naming no file."""
    (tmp_path / "processed_test").mkdir()
    (tmp_path / "processed_test" / "a.concept").write_text("1||0|3||Disease||foo||C1\n")
    (tmp_path / "test_dictionary.txt").write_text(dictionary)
    with pytest.raises(ValueError) as err:
        _run_cli(["evaluate", "--dataset", str(tmp_path), "--split", "test", "--linker", linker])
    assert str(err.value) == (
        f"{tmp_path / 'test_dictionary.txt'}: no name to link against (no 'ID||name' line whose "
        f"name is left non-empty by normalization)"
    )


def test_evaluate_verb_choices_come_from_the_registry():
    parser = argparse.ArgumentParser()
    cli_evaluate.add_subcommands(parser.add_subparsers(dest="verb"))
    with pytest.raises(SystemExit):
        parser.parse_args(["evaluate", "--dataset", "x", "--linker", "nope"])
    assert parser.parse_args(["evaluate", "--dataset", "x", "--linker", "tfidf"]).linker == "tfidf"


@needs_data
def test_bc5cdr_test_gold_scored_against_itself_is_100():
    """Every query parses, splits into non-empty sub-mentions, and its own gold ids count as correct."""
    queries = read_query_folder(DATA / "bc5cdr-disease" / "processed_test")
    # run_protocol links the sub-mentions in query order: answer each with its query's gold ids
    scores = summarize(run_protocol(GoldLinker(queries), queries, k=1), k=1)
    assert scores["n"] == 4287 and scores["acc@1"] == 100.0
