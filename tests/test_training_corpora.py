"""The corpora the shipped learned files are learned from, and what each choice holds out (benchmarks/training_corpora.py)."""

from __future__ import annotations

import pytest

from benchmarks.training_corpora import corpora, dev_halves, write_dev_halves
from bioel_core.corpora import read_pubtator
from tests.conftest import SHARED_DATA, shared_file


def ids(docs) -> set[str]:
    return {d.doc_id for d in docs}


@pytest.fixture(scope="module")
def disease_sets():
    shared_file("bc5cdr-corpus/CDR_DevelopmentSet.PubTator.txt")
    shared_file("ncbi-disease/raw_corpus/NCBIdevelopset_corpus.txt")
    return {which: corpora("Disease", which) for which in ("train", "train+dev", "train+dev-a")}


def test_train_holds_both_dev_sets_out(disease_sets):
    sources, learned, held_out = disease_sets["train"]
    assert sorted(held_out) == ["bc5cdr-dev", "ncbi-dev"]
    assert len(learned) == 500 + 593 and len(held_out["bc5cdr-dev"]) == 500 and len(held_out["ncbi-dev"]) == 100
    assert not ids(learned) & (ids(held_out["bc5cdr-dev"]) | ids(held_out["ncbi-dev"]))
    assert all(m.entity_type == "Disease" for d in learned for m in d.mentions)
    assert sources == [
        "bc5cdr-corpus/CDR_TrainingSet.PubTator.txt (Disease)",
        "ncbi-disease/raw_corpus/NCBItrainset_corpus.txt (all mention types)",
    ]


def test_train_and_dev_hold_nothing_out(disease_sets):
    _, train, held_out = disease_sets["train"]
    sources, learned, nothing = disease_sets["train+dev"]
    assert nothing == {} and len(sources) == 4
    assert ids(learned) == ids(train) | ids(held_out["bc5cdr-dev"]) | ids(held_out["ncbi-dev"])


def test_half_a_is_learned_half_b_held_out(disease_sets):
    _, train, dev = disease_sets["train"]
    _, learned, held_out = disease_sets["train+dev-a"]
    assert sorted(held_out) == ["bc5cdr-dev-b", "ncbi-dev-b"]
    half_b = ids(held_out["bc5cdr-dev-b"]) | ids(held_out["ncbi-dev-b"])
    assert not ids(learned) & half_b
    assert ids(learned) | half_b == ids(train) | ids(dev["bc5cdr-dev"]) | ids(dev["ncbi-dev"])
    assert len(held_out["bc5cdr-dev-b"]) == 250 and len(held_out["ncbi-dev-b"]) == 50


def test_chemicals_come_from_bc5cdr_alone():
    shared_file("bc5cdr-corpus/CDR_TrainingSet.PubTator.txt")
    sources, learned, held_out = corpora("Chemical", "train")
    assert sources == ["bc5cdr-corpus/CDR_TrainingSet.PubTator.txt (Chemical)"] and list(held_out) == ["bc5cdr-dev"]
    assert {m.entity_type for d in learned for m in d.mentions} == {"Chemical"}


def test_an_unknown_choice_is_refused():
    with pytest.raises(ValueError, match="learn_from: 'dev' is none of train, train\\+dev, train\\+dev-a"):
        corpora("Disease", "dev")


def test_written_halves_read_back_as_the_halves(tmp_path):
    dev = read_pubtator(shared_file("ncbi-disease/raw_corpus/NCBIdevelopset_corpus.txt"))
    written = write_dev_halves(tmp_path, SHARED_DATA)
    assert [p.name for p in written] == ["bc5cdr-dev-a.txt", "bc5cdr-dev-b.txt", "ncbi-dev-a.txt", "ncbi-dev-b.txt"]
    for path, half in zip(written[2:], dev_halves(dev)):
        back = read_pubtator(path)
        assert [d.doc_id for d in back] == [d.doc_id for d in half]
        assert [[(m.start, m.end, m.concept_ids) for m in d.mentions] for d in back] == [
            [(m.start, m.end, m.concept_ids) for m in d.mentions] for d in half
        ]
