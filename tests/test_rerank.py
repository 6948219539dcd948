"""The rerank stage: a retriever's top concepts reordered by a cross-encoder. Tiny real models (a 2-layer BERT), a
TF-IDF retriever over a small KB, and `bioel train cross-encoder` / `bioel evaluate --linker rerank` end to
end on a one-name-per-concept ADR dictionary."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bioel_core.linking.rerank import (
    ConceptCandidate,
    ConceptNames,
    CrossEncoderReranker,
    KeptPools,
    KeptScores,
    RerankLinker,
    concept_text,
    open_reranker,
    reranked,
)
from bioel_core.linking.tfidf import TfidfLinker
from bioel_core.models import CrossEncoder, load_encoder, open_encoder
from bioel_core.names import NameSet
from test_models import make_tiny_bert

KB = [
    ("breast cancer", ("D1",)),
    ("breast carcinoma", ("D1",)),
    ("mammary cancer", ("D1",)),
    ("ovarian cancer", ("D2",)),
    ("ovary carcinoma", ("D2",)),
    ("colon cancer", ("D3",)),
    ("colorectal carcinoma", ("D3",)),
    ("heart attack", ("D4",)),
    ("myocardial infarction", ("D4",)),
    ("cancer", ("D5",)),
    ("cancer", ("D6",)),
    ("diabetes", ("D7",)),
    ("type 2 diabetes", ("D8",)),
]
QUERIES = ["breast carcinomas", "ovary cancer", "colon carcinoma", "cancer", "heart attack", "diabetes type 2", "infarction"]


@pytest.fixture(scope="module")
def names():
    return NameSet.from_pairs(KB)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="module")
def cross_encoder(tiny_bert):
    torch.manual_seed(1)
    return CrossEncoder(tiny_bert, max_length=24).eval()


def linker(names, model, depth=3):
    return RerankLinker(names, TfidfLinker.build(names), CrossEncoderReranker(model), "(test)", depth)


def test_concepts_are_grouped_best_name_first_then_the_kb_order(names):
    found = TfidfLinker.build(names).search(["breast carcinoma"], 10)[0]
    pool = ConceptNames(names).group("breast carcinoma", found, 2)
    assert [c.concept_ids for c in pool] == [("D1",), pool[1].concept_ids] and len(pool) == 2
    assert pool[0].names == ("breast carcinoma", "breast cancer", "mammary cancer") and pool[0].exact
    assert not pool[1].exact and concept_text(pool[0], 2) == "breast carcinoma ; breast cancer"


def test_reranking_never_returns_a_concept_outside_the_retrievers_top_depth(names, cross_encoder):
    retriever = TfidfLinker.build(names)
    concepts = ConceptNames(names)
    for depth in (1, 2, 3):
        answers = linker(names, cross_encoder, depth).link(QUERIES, k=5)
        for query, answer in zip(QUERIES, answers):
            q = names.normalizer(query)
            allowed = {c.concept_ids for c in concepts.group(q, retriever.search([q], 40)[0], depth)}
            assert 1 <= len(answer) <= depth and {c.concept_ids for c in answer} <= allowed, (query, depth)
            assert len({c.concept_ids for c in answer}) == len(answer)  # each concept once


def test_scores_order_the_candidates_and_exact_matches_stay_first():
    pool = [
        ConceptCandidate(("A",), ("a",), 0.9),
        ConceptCandidate(("B",), ("b",), 0.8, exact=True),
        ConceptCandidate(("C",), ("c",), 0.7),
        ConceptCandidate(("E",), ("e",), 0.6, exact=True),
    ]
    order = [c.concept_ids[0] for c, _ in reranked(pool, np.array([5.0, 1.0, 9.0, 2.0]))]
    assert order == ["E", "B", "C", "A"]  # the exact ones first, each group by score


def test_the_retriever_weight_adds_the_retrievers_score(names, cross_encoder):
    rerank = RerankLinker(names, TfidfLinker.build(names), CrossEncoderReranker(cross_encoder), "(test)", 4)
    pools = rerank.candidates(["ovary cancer"])
    alone = rerank.reranker.rerank_scores(["ovary cancer"], pools)[0]
    try:
        cross_encoder.retriever_weight = 1000.0  # the retriever's order wins
        assert [c.concept_ids for c in rerank.link(["ovary cancer"], k=4)[0]] == [c.concept_ids for c in pools[0]]
        cross_encoder.retriever_weight = 0.0  # the reranker's order
        expected = [pools[0][i].concept_ids for i in sorted(range(len(alone)), key=lambda i: -alone[i])]
        assert [c.concept_ids for c in rerank.link(["ovary cancer"], k=4)[0]] == expected
    finally:
        cross_encoder.retriever_weight = 0.0


def test_an_exact_match_stays_first_and_every_candidate_carries_the_stages_score(names, cross_encoder):
    calls = []

    class Recording(CrossEncoderReranker):
        def rerank_scores(self, queries, candidates):
            calls.append({q: len(c) for q, c in zip(queries, candidates)})
            return super().rerank_scores(queries, candidates)

    rerank = RerankLinker(names, TfidfLinker.build(names), Recording(cross_encoder, reproducible=True), "(test)", 4)
    pools = dict(zip(["cancer", "breast cancer"], rerank.candidates(["cancer", "breast cancer"])))
    answers = rerank.link(["cancer", "breast cancer", "cancer"], k=4)
    # one call, the repeated query scored once; every pool scored in full to order what follows the exact match
    assert calls == [{"cancer": len(pools["cancer"]), "breast cancer": len(pools["breast cancer"])}]
    assert {c.concept_ids for c in answers[0][:2]} == {("D5",), ("D6",)} and answers[0] == answers[2]
    assert answers[1][0].concept_ids == ("D1",)  # 'breast cancer' names one concept: it stays first
    # the scores are the reranker's, exact match included, on one scale with the reranked queries' (one NIL threshold)
    alone = dict(zip(["cancer", "breast cancer"], cross_encoder.score([(q, concept_text(p[0])) for q, p in pools.items()])))
    assert answers[1][0].score == pytest.approx(float(alone["breast cancer"]), abs=1e-5)
    after = [a.score for a in answers[1][1:]]  # what follows the exact match: in the reranker's order
    assert len(after) >= 2 and after == sorted(after, reverse=True)
    # asked for one candidate, an unambiguous exact match is scored alone: the same score, one pair
    calls.clear()
    assert rerank.link(["breast cancer"], k=1) == [answers[1][:1]]
    assert calls == [{"breast cancer": 1}]


def test_reproducible_answers_do_not_depend_on_the_other_queries(names, cross_encoder):
    rerank = RerankLinker(names, TfidfLinker.build(names), CrossEncoderReranker(cross_encoder, reproducible=True), "(test)", 3)
    together = rerank.link(QUERIES, k=3)
    assert together == [rerank.link([q], k=3)[0] for q in QUERIES]
    # two concepts with the same names score the same: the retriever's order breaks the tie
    cancer = together[QUERIES.index("cancer")]
    assert [c.concept_ids for c in cancer[:2]] == [("D5",), ("D6",)] and cancer[0].score == cancer[1].score


def test_kept_pools_retrieve_each_query_once_and_answer_as_the_plain_stage(names, cross_encoder):
    retriever, asked = TfidfLinker.build(names), []
    search = retriever.search
    retriever.search = lambda queries, k: asked.extend(queries) or search(queries, k)
    kept = KeptPools(names, retriever, KeptScores(CrossEncoderReranker(cross_encoder)), "(test)", 3)
    first = kept.link(QUERIES, k=3)
    cross_encoder.retriever_weight = 50.0  # a weight tried on dev: the pools are not retrieved again
    try:
        second = kept.link(QUERIES + QUERIES[:2], k=3)
        assert second == linker(names, cross_encoder).link(QUERIES + QUERIES[:2], k=3) and first != second
    finally:
        cross_encoder.retriever_weight = 0.0
    assert first == linker(names, cross_encoder).link(QUERIES, k=3)
    assert sorted(asked) == sorted({names.normalizer(q) for q in QUERIES})


def test_cross_encoder_save_load_gives_identical_scores(cross_encoder, tmp_path):
    pairs = [(q, "breast cancer ; mammary cancer") for q in QUERIES]
    before = cross_encoder.score(pairs)
    cross_encoder.save(tmp_path / "ce")
    loaded = load_encoder(tmp_path / "ce")
    assert isinstance(loaded, CrossEncoder) and loaded.fingerprint() == cross_encoder.fingerprint()
    assert np.array_equal(loaded.score(pairs), before)
    cross_encoder.save(tmp_path / "ce16", dtype="float16")
    assert np.allclose(load_encoder(tmp_path / "ce16").score(pairs), before, atol=1e-2)
    assert not list((tmp_path / "ce").glob("*.bin")) and (tmp_path / "ce" / "head.safetensors").is_file()


def test_a_saved_rerank_linker_loads_with_the_same_answers_and_refuses_a_changed_reranker(names, cross_encoder, tmp_path):
    from bioel_core.linking import load_linker

    folder = cross_encoder.save(tmp_path / "ce")
    rerank = RerankLinker(names, TfidfLinker.build(names), CrossEncoderReranker.open(folder), str(folder), 3)
    rerank.save(tmp_path / "linker")
    again = load_linker(tmp_path / "linker")
    assert isinstance(again, RerankLinker) and again.link(QUERIES, k=3) == rerank.link(QUERIES, k=3)
    with torch.no_grad():
        cross_encoder.head.bias.add_(1.0)
    cross_encoder.save(folder)
    with pytest.raises(ValueError, match="not the one this linker was saved with"):
        load_linker(tmp_path / "linker")
    with torch.no_grad():
        cross_encoder.head.bias.sub_(1.0)


def test_a_cross_encoder_is_not_opened_as_a_name_encoder_nor_a_name_encoder_as_a_reranker(cross_encoder, tiny_bert, tmp_path):
    from bioel_core.models import TransformerEncoder

    folder = cross_encoder.save(tmp_path / "ce")
    with pytest.raises(ValueError, match="is a cross-encoder: it reorders"):
        open_encoder(folder)
    encoder = TransformerEncoder(tiny_bert).save(tmp_path / "enc")
    with pytest.raises(ValueError, match="a transformer model; a reranker is a cross-encoder"):
        open_reranker(encoder)


def test_the_listwise_loss_is_the_cross_entropy_of_the_gold_concept(cross_encoder):
    from bioel_core.training.rerank import RerankExample, listwise_loss

    pool = tuple(
        ConceptCandidate((c,), (n,), 0.0) for c, n in (("D1", "breast cancer"), ("D2", "ovarian cancer"), ("D3", "colon cancer"))
    )
    batch = [RerankExample("breast carcinoma", pool, 0), RerankExample("ovary cancer", pool[:2], 1)]
    cross_encoder.eval()  # no dropout: the loss is a function of the weights
    expected = []
    for e in batch:
        scores = torch.from_numpy(cross_encoder.score([(e.query, concept_text(c)) for c in e.candidates]))
        expected.append(F.cross_entropy(scores.unsqueeze(0), torch.tensor([e.gold])).item())
    assert listwise_loss(cross_encoder, batch).item() == pytest.approx(sum(expected) / 2, abs=1e-5)


def test_examples_hold_the_gold_concept_and_skip_unambiguous_exact_mentions(names):
    from bioel_core.training.rerank import rerank_examples

    mentions = [
        ("breast carcinoma", ["D1"]),
        ("ovary cancer", ["D2"]),
        ("ovary cancer", ["D2"]),
        ("cancer", ["D6"]),
        ("infarction", ["D4"]),
        ("mystery", ["D99"]),
    ]
    examples, counts = rerank_examples(TfidfLinker.build(names), names, mentions, size=2)
    assert counts == {"distinct_mentions": 5, "examples": 3, "exact_unambiguous": 1, "gold_not_in_kb": 1}
    for e in examples:
        assert len(e.candidates) == 2 and e.candidates[e.gold].concept_ids[0] in {"D2", "D4", "D6"}
    infarction = next(e for e in examples if e.query == "infarction")
    assert infarction.candidates[infarction.gold].concept_ids == ("D4",)


def test_synonym_examples_hide_the_name_they_ask_about(names):
    from bioel_core.training.rerank import synonym_examples

    examples, counts = synonym_examples(TfidfLinker.build(names), names, count=10, size=3, seed=0)
    assert counts["distinct_mentions"] == 4  # one name of each concept with several: D1-D4
    assert examples == synonym_examples(TfidfLinker.build(names), names, count=10, size=3, seed=0)[0]  # seeded
    for e in examples:
        assert e.query in names.names and all(e.query not in c.names for c in e.candidates)
        gold = e.candidates[e.gold]
        assert gold.names and e.query in ConceptNames(names).by_concept[gold.concept_ids]


def _adr_kb_and_dataset(tmp_path):
    """A one-name-per-concept ADR dictionary (non-MeSH ids) ingested by `bioel ingest-kb`, and a BioSyn-layout
    dataset with train and dev splits."""
    from pipelines import cli

    dictionary = tmp_path / "adr_dictionary.txt"
    dictionary.write_text("ADR0001||headache\nADR0002||nausea\nADR0003||insomnia\nADR0004||dizziness\nADR0005||head injury\n")
    kb = tmp_path / "kb"
    assert (
        cli.main(
            [
                "ingest-kb",
                "--input-format",
                "biosyn-dict",
                "--kb-name",
                "adr",
                "--id-pattern",
                r"ADR\d{4}",
                "--input",
                str(dictionary),
                "--output",
                str(kb),
                "--num-shards",
                "1",
                "--no-quality",
            ]
        )
        == 0
    )
    dataset = tmp_path / "adr"
    for split, lines in (
        (
            "train",
            "p1||0|1||ADR||head hurts||ADR0001\np1||2|3||ADR||felt sick||ADR0002\n"
            "p1||4|5||ADR||cant sleep||ADR0003\np1||6|7||ADR||room spinning||ADR0004\n"
            "p1||8|9||ADR||hit my head||ADR0005\n",
        ),
        ("dev", "p2||0|1||ADR||head pain||ADR0001\np2||2|3||ADR||sleepless||ADR0003\n"),
    ):
        (dataset / f"processed_{split}").mkdir(parents=True)
        (dataset / f"processed_{split}" / "p.concept").write_text(lines)
    (dataset / "dev_dictionary.txt").write_text(dictionary.read_text())
    return kb, dataset


def test_bioel_train_cross_encoder_then_evaluate_rerank(tmp_path, tiny_bert, capsys):
    from bioel_core.models import ResCNNEncoder
    from pipelines import cli

    kb, dataset = _adr_kb_and_dataset(tmp_path)
    torch.manual_seed(0)
    retriever = ResCNNEncoder(tiny_bert, width=24, filters=8, num_blocks=1).save(tmp_path / "retriever")
    out = tmp_path / "reranker"
    capsys.readouterr()
    assert (
        cli.main(
            [
                "train",
                "cross-encoder",
                "--names",
                str(kb),
                "--train-dataset",
                str(dataset),
                "--retriever",
                str(retriever),
                "--init",
                str(tiny_bert),
                "--example-size",
                "3",
                "--rerank-depth",
                "3",
                "--finetune-epochs",
                "4",
                "--patience",
                "2",
                "--output",
                str(out),
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    assert "cross-encoder: 5 mention examples of 3 concepts" in capsys.readouterr().err  # one name each: no synonyms
    card = json.loads((out / "card.json").read_text())
    stage = card["stages"]["rerank"]
    assert card["encoder"]["encoder_type"] == "cross-encoder" and card["data"]["train_split"] == "train"
    assert 2 <= len(stage["dev"]) <= 4 and stage["best_dev"]["score"] == max(h["score"] for h in stage["dev"])
    assert not (out / "_train").exists() and "dev acc@1 by epoch (epoch: score): 1: " in (out / "MODEL_CARD.md").read_text()
    assert (
        cli.main(
            [
                "evaluate",
                "--linker",
                "rerank",
                "--dataset",
                str(dataset),
                "--split",
                "dev",
                "--names",
                str(kb),
                "--retriever",
                str(retriever),
                "--reranker",
                str(out),
                "--rerank-depth",
                "3",
                "--k",
                "3",
                "--json",
                str(tmp_path / "s.json"),
                "--record-in-card",
            ]
        )
        == 0
    )
    report = json.loads((tmp_path / "s.json").read_text())
    assert report["linker"] == "rerank" and report["n"] == 2 and report["linker_options"]["depth"] == 3
    weight = card["data"]["retriever_weight"]
    assert card["encoder"]["retriever_weight"] == weight and load_encoder(out).retriever_weight == weight
    tried = card["data"]["retriever_weight_dev_acc@1"]
    assert tried["0.0"] == stage["best_dev"]["score"] and tried[str(weight)] == max(tried.values())
    assert report["acc@1"] == tried[str(weight)]  # the same stage that chose the epoch and the weight
    assert json.loads((out / "card.json").read_text())["scores"]["adr/dev"]["acc@1"] == report["acc@1"]
    code = cli.main(["train", "cross-encoder", "--names", str(kb), "--output", str(tmp_path / "x"), "--device", "cpu"])
    assert code == 2 and "the following arguments are required: --train-dataset" in capsys.readouterr().err


def test_a_reranker_retrained_on_traindev_keeps_the_retriever_weight_it_is_given(tmp_path, tiny_bert, capsys):
    """No dev is left to choose the weight once dev is trained on: the weight chosen by an earlier run is given."""
    from bioel_core.models import ResCNNEncoder
    from pipelines import cli

    kb, dataset = _adr_kb_and_dataset(tmp_path)
    (dataset / "processed_traindev").mkdir()
    (dataset / "processed_traindev" / "p.concept").write_text(
        (dataset / "processed_train" / "p.concept").read_text() + (dataset / "processed_dev" / "p.concept").read_text()
    )
    torch.manual_seed(0)
    retriever = ResCNNEncoder(tiny_bert, width=24, filters=8, num_blocks=1).save(tmp_path / "retriever")
    common = [
        "--names",
        str(kb),
        "--train-dataset",
        str(dataset),
        "--retriever",
        str(retriever),
        "--init",
        str(tiny_bert),
        "--example-size",
        "3",
        "--finetune-epochs",
        "1",
        "--device",
        "cpu",
        "--no-progress",
    ]
    out = tmp_path / "reranker"
    capsys.readouterr()
    assert (
        cli.main(
            ["train", "cross-encoder", *common, "--train-split", "traindev", "--retriever-weight", "20", "--output", str(out)]
        )
        == 0
    )
    assert "model selection: the last epoch" in capsys.readouterr().err
    card = json.loads((out / "card.json").read_text())
    assert card["data"]["train_split"] == "traindev" and card["data"]["train_mentions"] == 7
    assert card["data"]["retriever_weight_dev_acc@1"] == "given (20, retriever_weight)"
    assert card["encoder"]["retriever_weight"] == 20.0 and load_encoder(out).retriever_weight == 20.0
    # a weight below 0 is refused by the contract; a name encoder takes no retriever at all
    for encoder, weight, said in (
        ("cross-encoder", "-1", "--retriever-weight"),
        ("rescnn", "20", "unknown flag --retriever (not a flag of bioel train rescnn"),
    ):
        assert cli.main(["train", encoder, *common, "--retriever-weight", weight, "--output", str(tmp_path / "x")]) == 2
        assert said in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_models_trained_from_scratch_draw_their_random_weights_from_the_seed(tiny_bert):
    """`bioel train --seed S` twice gives one model: the weights that start random do not depend on what the process
    ran before (here: another global torch seed)."""
    from bioel_core.training.recipe import new_encoder
    from bioel_core.training.rerank import new_cross_encoder

    def state(make, seed):
        torch.manual_seed(100 + seed)
        first = make(seed).state_dict()
        torch.manual_seed(200 + seed)
        return first, make(seed).state_dict()

    for make in (
        lambda seed: new_cross_encoder(str(tiny_bert), 24, "cpu", seed),
        lambda seed: new_encoder("rescnn", str(tiny_bert), None, "cpu", seed),
    ):
        (a, b), (c, _) = state(make, 0), state(make, 1)
        assert all(torch.equal(a[k], b[k]) for k in a) and not all(torch.equal(a[k], c[k]) for k in a)
