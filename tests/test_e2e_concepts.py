"""Document-level concept P/R/F1 (BioCreative V CDR) and the gold ids a KB lacks, on hand-made PubTator fixtures."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bioel_core.corpora import Mention, read_pubtator
from bioel_core.evaluation.concepts import concept_scores, kb_folders, unlinkable, unlinkable_in
from pipelines import cli_evaluate
from schemas import TABLE_SCHEMAS

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpora"
GOLD, PRED = FIXTURES / "concepts_gold.pubtator", FIXTURES / "concepts_pred.pubtator"


def m(doc, *ids, etype="Disease", start=0):
    return Mention(text="x", doc_id=doc, start=start, end=start + 1, entity_type=etype, concept_ids=tuple(ids))


def test_concept_sets_per_document_by_hand():
    s = concept_scores(read_pubtator(GOLD), read_pubtator(PRED))
    # Disease gold: {D007674, D002318, D012131} in 100 (the composite's ids each; -1 left out), {D014202} in 200;
    # predicted: D007674 (MESH: prefix), D012131, D003920 (wrong) in 100, D014202 twice in 200 (once in the set)
    d = s["Disease"]
    assert (d["n_pred"], d["correct_pred"], d["n_gold"], d["matched_gold"]) == (4, 3, 4, 3)
    assert d["precision"] == pytest.approx(75.0) and d["recall"] == pytest.approx(75.0) and d["f1"] == pytest.approx(75.0)
    # Chemical: D002945 named twice in 100 is one pair; D002945 in 200 is wrong there though gold in 100
    c = s["Chemical"]
    assert (c["n_pred"], c["correct_pred"], c["n_gold"], c["matched_gold"]) == (3, 2, 2, 2)
    assert c["precision"] == pytest.approx(200 / 3) and c["recall"] == pytest.approx(100.0)
    a = s["all"]
    assert (a["n_pred"], a["correct_pred"], a["n_gold"], a["matched_gold"]) == (7, 5, 6, 5)
    assert a["f1"] == pytest.approx(2 * (5 / 7) * (5 / 6) / (5 / 7 + 5 / 6) * 100)
    assert concept_scores(read_pubtator(GOLD), read_pubtator(PRED), ["Chemical"]).keys() == {"Chemical", "all"}


def test_the_gold_against_itself_is_100_and_a_type_is_never_another_types_answer():
    gold = read_pubtator(GOLD)
    assert all(v["f1"] == 100.0 for v in concept_scores(gold, gold).values())
    s = concept_scores([m("A", "D1", etype="Disease")], [m("A", "D1", etype="Chemical")])
    assert s["all"]["correct_pred"] == 0 and s["Disease"]["matched_gold"] == 0


KIT_GOLD, KIT_DNER = FIXTURES / "bc5cdr_eval_kit_gold.pubtator", FIXTURES / "bc5cdr_eval_kit_dner.pubtator"


def test_the_biocreative_kit_counts_on_its_own_sample():
    # `java -cp bc5cdr_eval.jar ncbi.bc5cdr_eval.Evaluate id Disease PubTator GOLD PRED` (BC5CDR_Evaluation-0.0.3) on
    # these six documents of its sample (composites with 2 and 3 ids, a -1, OMIM predictions): TP 29, FP 8, FN 15
    s = concept_scores(read_pubtator(KIT_GOLD), read_pubtator(KIT_DNER), ["Disease"])["Disease"]
    assert (s["correct_pred"], s["n_pred"] - s["correct_pred"], s["n_gold"] - s["matched_gold"]) == (29, 8, 15)
    assert s["f1"] == pytest.approx(100 * 0.7160493827160493)


def test_a_composite_prediction_names_each_of_its_ids_as_the_kit_reads_it():
    # the kit on the same files with "tumors ... MESH:D009369|MESH:D007674" in 2224762: TP 30, FP 8, FN 14
    pred = read_pubtator(KIT_DNER)
    doc = next(d for d in pred if d.doc_id == "2224762")
    i = next(i for i, x in enumerate(doc.mentions) if x.text == "tumors")
    doc.mentions[i] = replace(doc.mentions[i], concept_ids=("MESH:D009369", "MESH:D007674"))
    s = concept_scores(read_pubtator(KIT_GOLD), pred, ["Disease"])["Disease"]
    assert (s["correct_pred"], s["n_pred"] - s["correct_pred"], s["n_gold"] - s["matched_gold"]) == (30, 8, 14)


def _kb(folder: Path, ids: list[str], alt_ids: list[list[str]]) -> Path:
    (folder / "concepts").mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "concept_id": ids,
                "vocabulary": ["MESH"] * len(ids),
                "kb": ["mesh"] * len(ids),
                "preferred_name": ids,
                "semantic_types": [[]] * len(ids),
                "definition": [None] * len(ids),
                "alt_ids": alt_ids,
            },
            schema=TABLE_SCHEMAS["concepts"],
        ),
        folder / "concepts" / "part-00000-of-00001.parquet",
    )
    (folder / "manifest.json").write_text(json.dumps({"complete": True}))
    return folder


def test_unlinkable_gold_counts_annotations_and_document_concepts():
    gold = read_pubtator(GOLD)
    out = unlinkable(gold, {"Disease": {"D007674", "D012131"}, "Chemical": {"D002945"}})
    # Disease annotations with an id: nephrotoxicity (in), the composite (D012131 in), tremor x2 (not in)
    assert out["Disease"] | {} == {
        "with_id": 4,
        "unlinkable": 2,
        "concepts": 4,
        "concepts_unlinkable": 2,
        "unlinkable_share": 50.0,
        "concepts_unlinkable_share": 50.0,
    }
    assert (out["Chemical"]["with_id"], out["Chemical"]["unlinkable"]) == (4, 2)  # lithium twice
    assert (out["Chemical"]["concepts"], out["Chemical"]["concepts_unlinkable"]) == (2, 1)


def test_kb_folders_and_the_ids_and_alt_ids_they_name(tmp_path):
    kb = _kb(tmp_path / "chem", ["D002945"], [["MESH:D008094"]])
    assert kb_folders([f"Chemical={kb}"]) == {"Chemical": kb}
    out = unlinkable_in(read_pubtator(GOLD), {"Chemical": kb})
    assert out.keys() == {"Chemical"} and out["Chemical"]["unlinkable"] == 0  # the alt id names lithium
    with pytest.raises(ValueError, match="^kb Chemical=: expected TYPE=KB_DIR"):
        kb_folders(["Chemical="])
    with pytest.raises(ValueError, match="^kb .*not by `bioel build`"):
        kb_folders([str(kb)])  # a KB folder given without its type: not a bundle


def _run_cli(argv):
    parser = argparse.ArgumentParser()
    cli_evaluate.add_subcommands(parser.add_subparsers(dest="cmd", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_evaluate_e2e_prints_and_writes_concept_scores_and_unlinkable_gold(tmp_path, capsys):
    kb = _kb(tmp_path / "dis", ["D007674", "D012131"], [[], []])
    out = tmp_path / "e2e.json"
    assert _run_cli(["evaluate-e2e", "--gold", str(GOLD), "--pred", str(PRED), "--kb", f"Disease={kb}", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["concepts"]["Disease"]["f1"] == pytest.approx(75.0)
    assert report["unlinkable"]["Disease"]["concepts_unlinkable"] == 2
    printed = capsys.readouterr().out
    assert "document-level concepts" in printed
    assert ["Disease", "75.00", "75.00", "75.00", "4", "4"] in [line.split()[:6] for line in printed.splitlines()]
    assert "gold Disease ids the KB lacks: annotations 2 of 4 (50.0%), document concepts 2 of 4 (50.0%)" in printed
