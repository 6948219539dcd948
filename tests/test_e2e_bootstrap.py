"""Intervals of the end-to-end scores by resampled documents, and paired differences of two runs, on the committed
sample's gold PubTator (40 NCBI-disease and BC5CDR abstracts) and predictions made from it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import SAMPLE_DATA

from bioel_core.corpora import read_pubtator
from bioel_core.evaluation.bootstrap import difference, interval, scored_counts
from bioel_core.evaluation.concepts import concept_scores
from bioel_core.evaluation.e2e import e2e_scores, micro_scores
from pipelines import cli

GOLD = SAMPLE_DATA / "gold_ncbi_bc5cdr_sample.pubtator"


def damaged(documents, every: int):
    """The gold with every `every`-th mention of each document given a wrong id: a linker right on the rest."""
    return [
        replace(d, mentions=[replace(m, concept_ids=("D000000",)) if k % every == 0 else m for k, m in enumerate(d.mentions)])
        for d in documents
    ]


def test_the_documents_counts_are_the_scores_the_scorers_report():
    gold = read_pubtator(GOLD)
    pred = damaged(gold, 3)
    documents = sorted(d.doc_id for d in gold)
    counts = scored_counts(gold, pred, documents)
    scores, concepts = e2e_scores(gold, pred), concept_scores(gold, pred)
    assert {name for name in counts} == {"strict", "partial", *(f"concepts {t}" for t in concepts)}
    for mode in ("strict", "partial"):
        assert micro_scores([tuple(r) for r in counts[mode]]).f1 == pytest.approx(scores[mode]["f1"])
    for etype, s in concepts.items():
        assert micro_scores([tuple(r) for r in counts[f"concepts {etype}"]]).f1 == pytest.approx(s["f1"])
        assert interval(counts[f"concepts {etype}"], 200).f1 == pytest.approx(s["f1"])
    # a document absent from both sides is a row of zeros: it changes no score
    padded = scored_counts(gold, pred, ["0", *documents])
    assert padded["strict"][0].tolist() == [0, 0, 0, 0] and np.array_equal(padded["strict"][1:], counts["strict"])


def test_an_interval_holds_its_score_narrows_with_more_documents_and_is_the_same_on_a_rerun(monkeypatch):
    from bioel_core.evaluation import bootstrap

    gold = read_pubtator(GOLD)
    pred = damaged(gold, 4)
    documents = sorted(d.doc_id for d in gold)
    strict = scored_counts(gold, pred, documents)["strict"]
    found = interval(strict, 500)
    assert found.low < found.f1 < found.high < 100
    assert interval(strict, 500) == found  # a fixed seed: the same report on every run
    monkeypatch.setattr(bootstrap, "BATCH_CELLS", 100)  # a large corpus resampled in batches: the same intervals
    assert interval(strict, 500) == found
    monkeypatch.undo()
    four_times = interval(np.concatenate([strict] * 4), 500)  # the same documents four times over
    assert four_times.high - four_times.low < found.high - found.low
    perfect = interval(scored_counts(gold, gold, documents)["strict"], 100)
    assert (perfect.f1, perfect.low, perfect.high) == (100.0, 100.0, 100.0)


def test_a_paired_difference_is_zero_for_the_same_run_and_clear_for_a_better_one_on_every_document():
    gold = read_pubtator(GOLD)
    documents = sorted(d.doc_id for d in gold)
    worse = scored_counts(gold, damaged(gold, 2), documents)["strict"]
    better = scored_counts(gold, damaged(gold, 5), documents)["strict"]
    same = difference(better, better, 300)
    assert (same.delta, same.low, same.high, same.clear) == (0.0, 0.0, 0.0, False)
    gain = difference(better, worse, 300)
    assert gain.delta == pytest.approx(interval(better, 10).f1 - interval(worse, 10).f1)
    assert gain.clear and 0 < gain.low < gain.delta < gain.high
    assert difference(worse, better, 300).high < 0
    with pytest.raises(ValueError, match="^counts of 40 and 39 documents"):
        difference(better, worse[1:], 10)


def test_evaluate_e2e_reports_intervals_and_the_difference_from_a_baseline(tmp_path, capsys):
    from bioel_core.corpora import write_pubtator

    gold = read_pubtator(GOLD)
    for name, every in (("better", 5), ("worse", 2)):
        with open(tmp_path / f"{name}.pubtator", "w") as fh:
            write_pubtator(damaged(gold, every), fh)
    out = tmp_path / "e2e.json"
    argv = ["evaluate-e2e", "--gold", str(GOLD), "--pred", str(tmp_path / "better.pubtator")]
    assert cli.main([*argv, "--baseline", str(tmp_path / "worse.pubtator"), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    strict = report["intervals"]["strict"]
    assert strict["f1"] == pytest.approx(report["strict"]["f1"]) and strict["low"] < strict["f1"] < strict["high"]
    assert report["documents_resampled"] == 40
    assert report["differences"]["strict"]["low"] > 0
    printed = capsys.readouterr().out
    assert f"{strict['low']:.2f}-{strict['high']:.2f}" in printed.splitlines()[1]
    assert "against --baseline" in printed and "(the interval leaves 0 out)" in printed
    # none asked: the scores alone
    assert cli.main([*argv, "--bootstrap", "0", "--json", str(out)]) == 0
    assert "intervals" not in json.loads(out.read_text()) and "interval" not in capsys.readouterr().out
    assert cli.main([*argv, "--bootstrap", "0", "--baseline", str(tmp_path / "worse.pubtator")]) == 2
    assert "--baseline needs --bootstrap above 0" in capsys.readouterr().err
    # a baseline linked on other text has spans that name other characters
    other = [replace(d, passages=[replace(p, text=p.text.upper()) for p in d.passages]) for d in damaged(gold, 2)]
    with open(tmp_path / "other.pubtator", "w") as fh:
        write_pubtator(other, fh)
    assert cli.main([*argv, "--baseline", str(tmp_path / "other.pubtator")]) == 2
    [error] = capsys.readouterr().err.splitlines()  # one line, naming the run and the first document
    assert "--baseline" in error and "other.pubtator: 40 of its 40 documents" in error and "another text" in error
