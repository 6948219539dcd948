"""An ensemble of rerankers (a cross-encoder and a generative model, tiny real ones over a 2-layer BERT): its scores
are the weighted sum of its members', its folder references them, a changed member is refused, and `bioel ensemble`
makes it."""

import json
import shutil

import numpy as np
import pytest
import torch

from bioel_core.linking import load_linker
from bioel_core.linking.rerank import ConceptNames, RerankLinker, open_reranker
from bioel_core.linking.rerank_ensemble import RerankerEnsemble, make_reranker_ensemble
from bioel_core.linking.tfidf import TfidfLinker
from bioel_core.models import CrossEncoder, GenerativeModel, MemberChangedError, ResCNNEncoder, load_encoder, open_encoder
from bioel_core.names import NameSet
from pipelines import cli
from test_generative import GENERATIVE_VOCAB, KB, MENTIONS
from test_models import make_tiny_bert


@pytest.fixture(scope="module")
def names():
    return NameSet.from_pairs(KB)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """tiny-bert, ce (a cross-encoder), gen (a generative model) and enc (a name encoder, not a reranker)."""
    root = tmp_path_factory.mktemp("rerankers")
    bert = make_tiny_bert(root / "tiny-bert", GENERATIVE_VOCAB)
    torch.manual_seed(1)
    CrossEncoder(bert, max_length=24).save(root / "ce")
    torch.manual_seed(3)
    GenerativeModel(bert, decoder_layers=1, max_length=24, max_name_length=8).save(root / "gen")
    ResCNNEncoder(bert, width=24, filters=8, num_blocks=1).save(root / "enc")
    return root


def pools(names, depth=3):
    retriever, concepts = TfidfLinker.build(names), ConceptNames(names)
    queries = [names.normalizer(m) for m in MENTIONS]
    return queries, [concepts.group(q, found, depth) for q, found in zip(queries, retriever.search(queries, 40))]


def test_scores_are_the_weighted_sum_of_the_members_and_rank_the_stage(folders, names):
    ensemble = RerankerEnsemble.from_folders([(folders / "ce", 2.0), (folders / "gen", 0.5)], retriever_weight=5.0)
    queries, candidates = pools(names)
    cross = open_reranker(folders / "ce").rerank_scores(queries, candidates)
    written = open_reranker(folders / "gen").rerank_scores(queries, candidates)
    got = ensemble.rerank_scores(queries, candidates)
    for scores, a, b in zip(got, cross, written):
        assert scores.dtype == np.float32
        np.testing.assert_allclose(scores, 2.0 * a + 0.5 * b, rtol=1e-6, atol=1e-6)
    stage = RerankLinker(names, TfidfLinker.build(names), ensemble, str(folders / "ens"), depth=3)
    for query, pool, scores, answer in zip(queries, candidates, got, stage.search(queries, 3)):
        if len(pool) > 1 and not any(c.exact for c in pool):
            fused = scores + np.float32(5.0) * np.array([c.score for c in pool], dtype=np.float32)
            assert answer[0].concept_ids == pool[int(np.argmax(fused))].concept_ids, query


def test_saved_it_references_its_members_opens_with_identical_scores_and_refuses_a_changed_member(folders, names, tmp_path):
    for member in ("tiny-bert", "ce", "gen"):
        shutil.copytree(folders / member, tmp_path / member)
    card = make_reranker_ensemble(
        [(tmp_path / "ce", 1.0), (tmp_path / "gen", 1.0)], 20.0, tmp_path / "ens", command=["bioel", "ensemble"]
    )
    config = json.loads((tmp_path / "ens" / "bioel_encoder.json").read_text())
    assert [m["source"] for m in config["members"]] == [{"path": "../ce"}, {"path": "../gen"}]
    assert [m["encoder_type"] for m in config["members"]] == ["cross-encoder", "generative"] and config[
        "retriever_weight"
    ] == 20.0
    opened = open_reranker(tmp_path / "ens")
    made = RerankerEnsemble.from_folders([(tmp_path / "ce", 1.0), (tmp_path / "gen", 1.0)], 20.0)
    assert isinstance(opened, RerankerEnsemble) and opened.fingerprint() == card["fingerprint"] == made.fingerprint()
    queries, candidates = pools(names)
    for a, b in zip(opened.rerank_scores(queries, candidates), made.rerank_scores(queries, candidates)):
        assert np.array_equal(a, b)
    stage = RerankLinker(names, TfidfLinker.build(names), opened, str(tmp_path / "ens"), depth=3)
    stage.save(tmp_path / "linker")
    assert load_linker(tmp_path / "linker").link(MENTIONS, k=3) == stage.link(MENTIONS, k=3)
    # another retriever weight is another ensemble than the one its card records (and scores)
    (tmp_path / "ens" / "bioel_encoder.json").write_text(json.dumps({**config, "retriever_weight": 5.0}))
    with pytest.raises(ValueError, match=r"ens: the model is not the one its card records \(fingerprint "):
        open_reranker(tmp_path / "ens")
    (tmp_path / "ens" / "bioel_encoder.json").write_text(json.dumps(config))

    cross = load_encoder(tmp_path / "ce")
    with torch.no_grad():
        cross.head.bias.add_(1.0)
    cross.save(tmp_path / "ce")
    with pytest.raises(MemberChangedError, match="member 0 at .*ce has fingerprint"):
        open_reranker(tmp_path / "ens")
    assert (
        RerankerEnsemble.from_folders([(tmp_path / "ce", 1.0), (tmp_path / "gen", 1.0)], 20.0).fingerprint()
        != card["fingerprint"]
    )


def test_bad_ensembles_are_refused(folders):
    ce = open_reranker(folders / "ce")
    with pytest.raises(ValueError, match="at least two members"):
        RerankerEnsemble([ce], [1.0], 1.0, [folders / "ce"])
    with pytest.raises(ValueError, match="weights must be positive"):
        RerankerEnsemble([ce, ce], [1.0, 0.0], 1.0, [folders / "ce"] * 2)
    with pytest.raises(ValueError, match="retriever's weight must be zero or more"):
        RerankerEnsemble([ce, ce], [1.0, 1.0], -1.0, [folders / "ce"] * 2)


def test_bioel_ensemble_of_rerankers_writes_the_folder_and_its_card(folders, tmp_path, capsys):
    out = tmp_path / "ens"
    assert (
        cli.main(
            [
                "ensemble",
                "--member",
                str(folders / "ce"),
                "2",
                "--member",
                str(folders / "gen"),
                "0.5",
                "--retriever-weight",
                "50",
                "--output",
                str(out),
            ]
        )
        == 0
    ), capsys.readouterr().err
    card, card_md = json.loads((out / "card.json").read_text()), (out / "MODEL_CARD.md").read_text()
    assert [((out / m["source"]["path"]).resolve(), m["weight"]) for m in card["members"]] == [
        ((folders / "ce").resolve(), 2.0),
        ((folders / "gen").resolve(), 0.5),
    ]
    assert " | cross-encoder | 2 | " in card_md and " | generative | 0.5 | " in card_md
    assert "the weighted sum of the members' scores, plus 50 x the retriever's" in card_md
    assert "--linker rerank --retriever MODEL --reranker THIS_FOLDER" in card_md
    assert open_reranker(out).weights == [2.0, 0.5] and open_reranker(out).retriever_weight == 50.0
    with pytest.raises(ValueError, match="is an ensemble of rerankers: it reorders"):
        open_encoder(out)
    capsys.readouterr()
    assert (
        cli.main(
            [
                "ensemble",
                "--member",
                str(folders / "ce"),
                "1",
                "--member",
                str(folders / "gen"),
                "1",
                "--output",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert "an ensemble of rerankers needs --retriever-weight" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "ensemble",
                "--member",
                str(folders / "ce"),
                "1",
                "--member",
                str(folders / "enc"),
                "1",
                "--retriever-weight",
                "1",
                "--output",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert (
        f"{folders / 'ce'} is a reranker and {folders / 'enc'} is not: an ensemble is of name encoders or of rerankers"
        in capsys.readouterr().err
    )
    assert (
        cli.main(
            [
                "ensemble",
                "--member",
                str(folders / "enc"),
                "1",
                "--member",
                str(folders / "tiny-bert"),
                "1",
                "mean",
                "--retriever-weight",
                "1",
                "--output",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert "--retriever-weight: only an ensemble of rerankers" in capsys.readouterr().err
