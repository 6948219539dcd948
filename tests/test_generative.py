"""Generative linking (GenBioEL): the prefix tree, target selection, template filling, constrained decoding with a
tiny real encoder-decoder (2-layer BERT warm start), batching, save/load, the linker and reranker modes, and
`bioel train generative` -> `bioel evaluate --linker generative` end to end."""

import json
import math

import numpy as np
import pytest
import torch

from bioel_core.linking.generative import GenerativeLinker, GenerativeReranker
from bioel_core.linking.prefix_tree import PrefixTree
from bioel_core.linking.rerank import ConceptNames, RerankLinker, open_reranker
from bioel_core.linking.tfidf import TfidfLinker
from bioel_core.models import GenerativeModel, load_encoder, open_encoder
from bioel_core.names import NameSet
from bioel_core.training.generative import (
    TEMPLATES,
    GenerativeExample,
    choose_targets,
    fill_template,
    generative_loss,
    pretraining_examples,
)
from test_models import VOCAB, make_tiny_bert

GENERATIVE_VOCAB = VOCAB + ["[unused0]", "[unused1]", "is", "carcinoma", "##s", "gout", "arthritis", "tumor", "heart"]
KB = [
    ("breast cancer", ("D1",)),
    ("breast carcinoma", ("D1",)),
    ("ovarian cancer", ("D2",)),
    ("colon cancer", ("D3",)),
    ("cancer", ("D5",)),
    ("cancer", ("D6",)),
    ("heart attack", ("D4",)),
    ("myocardial infarction", ("D4",)),
    ("gout", ("D7",)),
    ("gout arthritis", ("D8",)),
    ("type 2 diabetes", ("D9",)),
]
MENTIONS = ["breast carcinomas", "ovary cancer", "colon tumor", "heart", "gout", "diabetes type 2", "infarction of the heart"]


@pytest.fixture(scope="module")
def names():
    return NameSet.from_pairs(KB)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), GENERATIVE_VOCAB)


@pytest.fixture(scope="module")
def model(tiny_bert):
    torch.manual_seed(3)
    return GenerativeModel(tiny_bert, decoder_layers=1, max_length=24, max_name_length=8).eval()


def kb_names(tree, names, node):
    return {names[i] for i in tree.names_at(node)}


# ---- the prefix tree -------------------------------------------------------------------------------------
def test_the_tree_decodes_exactly_the_names_it_was_built_from(tmp_path):
    sequences = [[5, 6, 7], [5, 6], [5, 8], [9], [5, 6, 7], [], [5, 6, 7, 2]]
    tree = PrefixTree.build(sequences)
    # nodes: root, 5, 9, 5-6, 5-8, 5-6-7, 5-6-7-2: shared prefixes are stored once
    assert len(tree) == 7
    assert tree.walk([5, 6, 7]) is not None and list(tree.names_at(tree.walk([5, 6, 7]))) == [0, 4]  # one sequence, two names
    short = tree.walk([5, 6])  # a name that is a prefix of others: it ends here and goes on
    assert list(tree.names_at(short)) == [1] and list(tree.next_tokens(short)) == [7]
    assert list(tree.next_tokens(0)) == [5, 9] and list(tree.names_at(tree.walk([5]))) == []
    assert tree.walk([5, 7]) is None and tree.walk([1]) is None and tree.child(tree.walk([9]), 5) is None
    assert list(tree.names_at(tree.walk([5, 6, 7, 2]))) == [6] and 5 not in tree.name_index  # the empty name is left out
    tree.save(tmp_path / "tree.npz")
    loaded = PrefixTree.load(tmp_path / "tree.npz")
    assert loaded == tree and loaded.walk([5, 8]) == tree.walk([5, 8])
    # the arrays do not depend on the order the names came in
    assert PrefixTree.build(sequences[::-1]).child_token.tolist() == tree.child_token.tolist()
    np.savez(tmp_path / "other.npz", child_start=np.zeros(2))
    with pytest.raises(ValueError, match="not a prefix tree"):
        PrefixTree.load(tmp_path / "other.npz")


# ---- training data ---------------------------------------------------------------------------------------
def test_the_target_is_the_gold_concepts_name_most_similar_to_the_mention():
    by_concept = {"D1": ["mammary neoplasm", "breast tumor", "breast cancer"], "D2": ["gout"]}
    mentions = [("breast tumour", ["D1"]), ("neoplasm of the mammary gland", ["D1"]), ("gouty", ["D2"])]
    assert choose_targets(mentions, by_concept) == ["breast tumor", "mammary neoplasm", "gout"]
    assert choose_targets(mentions, by_concept, "shortest") == ["breast tumor", "breast tumor", "gout"]
    drawn = choose_targets(mentions, by_concept, "random", seed=4)
    assert drawn == choose_targets(mentions, by_concept, "random", seed=4) and drawn[0] in by_concept["D1"]
    with pytest.raises(ValueError, match="target selection must be one of"):
        choose_targets(mentions, by_concept, "longest")


def test_pretraining_examples_fill_the_papers_templates():
    example = fill_template("{c} are the definitions of {a} .", "gout", "a form of arthritis")
    assert (example.left, example.mention, example.right) == ("a form of arthritis are the definitions of", "gout", ".")
    by_concept = {
        "D1": ["gout", "gouty arthritis", "podagra", "urate arthropathy"],
        "D2": ["asthma", "bronchial asthma"],
        "D3": ["cancer"],
        "D4": ["anemia", "anaemia"],
    }
    examples = {e.mention: e for e in pretraining_examples(by_concept, {"D4": "a lack of red blood cells"}, seed=0)}
    assert examples == {e.mention: e for e in pretraining_examples(by_concept, {"D4": "a lack of red blood cells"}, seed=0)}
    assert len(examples) == 4
    phrases = {
        kind: [t.replace("{c}", "").replace("{a}", "").replace(" .", "").strip() for t in ts] for kind, ts in TEMPLATES.items()
    }
    kind_of = {"D1": "synonyms", "D2": "few_names", "D3": "few_names", "D4": "definition"}
    for e in examples.values():
        concept = next(c for c, ns in by_concept.items() if e.mention in ns)
        assert e.target in by_concept[concept]
        text = f"{e.left} {e.right}"
        assert any(phrase in text for phrase in phrases[kind_of[concept]]) and e.right.endswith(".")
        if concept == "D1":  # more than two names: the context is its other names
            assert e.target != e.mention and sum(n in text for n in by_concept["D1"] if n not in (e.mention, e.target)) == 2
        elif concept == "D2":  # two names: the context is the target
            assert e.target != e.mention and e.target in text
        elif concept == "D3":  # one name: all three are the same
            assert e.target == e.mention == "cancer" and "cancer" in text
        else:
            assert "a lack of red blood cells" in text


# ---- the model ---------------------------------------------------------------------------------------------
def test_inputs_mark_the_mention_and_keep_the_context_nearest_it(model):
    ids = model.encoder_ids(["breast cancer"], ["the colon"], ["of the heart"])[0]
    tokens = [model.tokenizer.backend_tokenizer.id_to_token(i) for i in ids]
    assert tokens == ["[CLS]", "the", "colon", "[unused0]", "breast", "cancer", "[unused1]", "of", "the", "heart", "[SEP]"]
    long = model.encoder_ids(["cancer"], ["the " * 40], ["heart " * 40])[0]
    assert len(long) == model.max_length and long[long.index(model.start_id) + 1] == model.pieces(["cancer"])[0][0]
    assert model.prompt_ids(["gout"]) == [model.pieces(["gout is"])[0]]


def test_the_loss_leaves_the_prompt_out(model):
    example = GenerativeExample("breast carcinoma", "breast cancer")
    prompt_loss = generative_loss(model, [example]).item()
    no_prompt = GenerativeModel.__new__(GenerativeModel)
    no_prompt.__dict__.update(model.__dict__)
    no_prompt.prompt = False
    # without the prompt the decoder sees other tokens before the name: another loss over the same scored tokens
    assert prompt_loss != pytest.approx(generative_loss(no_prompt, [example]).item())
    _, targets, _ = model._scored_logits(
        model, model.encoder_ids([example.mention]), model.prompt_ids([example.mention]), model.name_ids([example.target])
    )
    name = model.name_ids([example.target])[0]
    assert targets.tolist() == [*name, model.sep_id]  # the name and the end token, not the prompt


def test_constrained_decoding_writes_only_kb_names(model, names):
    for kb in (names.names, ["gout", "gout arthritis", "gout arthritis heart"]):  # names that are prefixes of others
        tree = PrefixTree.build(model.name_ids(kb))
        for found in model.generate_names(MENTIONS, tree, beams=4):
            assert 1 <= len(found) <= 4 and len({node for node, _ in found}) == len(found)
            assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
            for node, _ in found:
                assert len(tree.names_at(node)) and all(kb[i] in kb for i in tree.names_at(node))


def test_batched_decoding_gives_the_unbatched_results(model, names):
    tree = PrefixTree.build(model.name_ids(names.names))
    one_by_one = [model.generate_names([m], tree, beams=3, batch_size=1)[0] for m in MENTIONS]
    batched = model.generate_names(MENTIONS, tree, beams=3, batch_size=8)
    for a, b in zip(one_by_one, batched):
        assert [n for n, _ in a] == [n for n, _ in b]
        assert np.allclose([s for _, s in a], [s for _, s in b], atol=1e-5)
    exact = model.generate_names(MENTIONS, tree, beams=3, batch_size=8, batch_invariant=True)
    assert exact == model.generate_names(MENTIONS[::-1], tree, beams=3, batch_size=3, batch_invariant=True)[::-1]


def test_name_scores_are_what_the_beam_search_ranks(model):
    tree = PrefixTree.build(model.name_ids(["gout", "heart attack", "breast cancer"]))
    found = model.generate_names(["gout"], tree, beams=3)[0]
    # the three names, scored by teacher forcing: the same order and, the prompt aside, the same scores' order
    names = ["gout", "heart attack", "breast cancer"]
    scores = model.score_names(["gout"], [names])[0]
    assert [names[tree.names_at(n)[0]] for n, _ in found] == [names[i] for i in np.argsort(-scores, kind="stable")]


@pytest.mark.parametrize("decoder_layers", [1, 2])
def test_beam_scores_equal_the_teacher_forced_scores_of_the_names(tiny_bert, names, decoder_layers):
    # the step-by-step decoder (cached keys and values, left-padded prompts) against the whole decoder run at once
    torch.manual_seed(5)
    model = GenerativeModel(tiny_bert, decoder_layers=decoder_layers, max_length=24, max_name_length=8).eval()
    tree = PrefixTree.build(model.name_ids(names.names))
    found = model.generate_names(MENTIONS, tree, beams=4, batch_size=4)
    candidates = [[names.names[tree.names_at(node)[0]] for node, _ in f] for f in found]
    for f, expected in zip(found, model.score_names(MENTIONS, candidates)):
        assert len(f) and np.allclose([s for _, s in f], expected, atol=1e-5)


def test_save_then_load_gives_identical_scores_and_refuses_other_uses(model, tmp_path):
    folder = model.save(tmp_path / "gen")
    loaded = load_encoder(folder)
    assert isinstance(loaded, GenerativeModel) and loaded.fingerprint() == model.fingerprint()
    candidates = [["breast cancer", "cancer"], ["gout", "gout arthritis", "heart attack"]]
    expected = model.score_names(["breast carcinomas", "gout"], candidates)
    for a, b in zip(expected, loaded.score_names(["breast carcinomas", "gout"], candidates)):
        assert np.array_equal(a, b)
    assert loaded.seq2seq.decoder.cls.predictions.decoder.weight is loaded.seq2seq.encoder.embeddings.word_embeddings.weight
    half = load_encoder(model.save(tmp_path / "gen16", dtype="float16"))
    for a, b in zip(expected, half.score_names(["breast carcinomas", "gout"], candidates)):
        assert np.allclose(a, b, atol=5e-2)
    with pytest.raises(ValueError, match="is a generative model: it writes names"):
        open_encoder(folder)


# ---- linker and reranker -----------------------------------------------------------------------------------
def test_the_generative_linker_gives_exact_names_first_and_saves_its_tree(model, names, tmp_path):
    linker = GenerativeLinker(names, model, "(test)", beams=3)
    found = linker.link(["Cancer", "ovary cancer"], k=3)
    assert {c.concept_ids for c in found[0][:2]} == {("D5",), ("D6",)} and found[0][0].score == 1.0
    assert 1 <= len(found[1]) <= 3 and all(c.name in names.names for c in found[1])
    assert len(linker.link(["ovary cancer"], k=5)[0]) <= 5  # k above the beams: more beams
    folder = tmp_path / "linker"
    model.save(tmp_path / "m")
    GenerativeLinker(names, load_encoder(tmp_path / "m"), str(tmp_path / "m"), beams=3).save(folder)
    from bioel_core.linking import load_linker

    again = load_linker(folder)
    assert isinstance(again, GenerativeLinker) and again.tree == linker.tree
    assert [[(c.concept_ids, c.name) for c in r] for r in again.link(MENTIONS, k=3)] == [
        [(c.concept_ids, c.name) for c in r] for r in linker.link(MENTIONS, k=3)
    ]
    torch.manual_seed(9)
    other = GenerativeModel(make_tiny_bert(tmp_path / "b2", GENERATIVE_VOCAB), decoder_layers=1, max_length=20)
    other.save(tmp_path / "m")
    with pytest.raises(ValueError, match="not the one this linker was saved with"):
        load_linker(folder)


def test_the_generative_linkers_scores_are_probabilities_an_exact_name_1(model, names):
    """A written name scores exp of the model's mean log-probability for it (in (0, 1], the beams' order), on the
    scale of an exact name's 1: a link output's scores and a NIL threshold on one scale."""
    linker = GenerativeLinker(names, model, "(test)", beams=4, reproducible=True)  # scores independent of the batch
    queries = ["cancer", *MENTIONS]
    found = linker.search(queries, k=4)
    assert all(0.0 < c.score <= 1.0 for candidates in found for c in candidates)
    assert [c.score for c in found[0][:2]] == [1.0, 1.0] and all(c.score < 1.0 for c in found[0][2:])
    decoded = model.generate_names(queries, linker.tree, beams=4, batch_invariant=True)
    for query, candidates, beams in zip(queries, found, decoded):
        written = [c for c in candidates if c.name != query]
        by_name = {linker.exact.row_names[row]: score for node, score in beams for row in linker.tree.names_at(node)}
        assert written and [c.score for c in written] == [math.exp(by_name[c.name]) for c in written]
        assert [c.score for c in written] == sorted((c.score for c in written), reverse=True)


def test_as_a_reranker_it_reorders_only_the_retrievers_concepts(model, names, tmp_path):
    reranker = open_reranker(model.save(tmp_path / "gen"))
    assert isinstance(reranker, GenerativeReranker)
    retriever = TfidfLinker.build(names)
    concepts = ConceptNames(names)
    rerank = RerankLinker(names, retriever, reranker, str(tmp_path / "gen"), depth=2)
    for query, answer in zip(MENTIONS, rerank.link(MENTIONS, k=5)):
        q = names.normalizer(query)
        pool = concepts.group(q, retriever.search([q], 40)[0], 2)
        assert 1 <= len(answer) <= 2 and {c.concept_ids for c in answer} <= {c.concept_ids for c in pool}
    pool = concepts.group("breast carcinomas", retriever.search(["breast carcinomas"], 40)[0], 3)
    scores = reranker.rerank_scores(["breast carcinomas"], [pool])[0]
    by_name = model.score_names(["breast carcinomas"], [[n for c in pool for n in c.names]])[0]
    at = np.cumsum([0] + [len(c.names) for c in pool])
    # a concept: its best name's log-probability, as the fusion weights were chosen on (not the linker's exp of it)
    assert np.allclose(scores, [by_name[a:b].max() for a, b in zip(at[:-1], at[1:])]) and (scores < 0).all()


# ---- bioel train / evaluate ----------------------------------------------------------------------------------
def test_bioel_train_generative_then_evaluate(tmp_path, tiny_bert, capsys):
    from bioel_core.models import ResCNNEncoder
    from pipelines import cli
    from test_rerank import _adr_kb_and_dataset

    kb, dataset = _adr_kb_and_dataset(tmp_path)
    torch.manual_seed(0)
    retriever = ResCNNEncoder(tiny_bert, width=24, filters=8, num_blocks=1).save(tmp_path / "retriever")
    out = tmp_path / "gen"
    capsys.readouterr()
    assert (
        cli.main(
            [
                "train",
                "generative",
                "--names",
                str(kb),
                "--train-dataset",
                str(dataset),
                "--retriever",
                str(retriever),
                "--init",
                str(tiny_bert),
                "--pretrain-epochs",
                "2",
                "--finetune-epochs",
                "3",
                "--patience",
                "2",
                "--batch-size",
                "4",
                "--rerank-depth",
                "3",
                "--output",
                str(out),
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    assert "generative: 5 training mentions" in capsys.readouterr().err
    card = json.loads((out / "card.json").read_text())
    assert card["encoder"]["encoder_type"] == "generative" and set(card["stages"]) == {"pretrain", "finetune"}
    assert card["data"]["pretrain_examples"] == 5 and card["stages"]["pretrain"]["steps"] == 4  # 2 epochs of 2 steps
    assert card["stages"]["finetune"]["best_dev"]["score"] == max(h["score"] for h in card["stages"]["finetune"]["dev"])
    assert not (out / "_train").exists() and load_encoder(out).retriever_weight == card["data"]["retriever_weight"]
    assert (
        cli.main(
            [
                "evaluate",
                "--linker",
                "generative",
                "--model",
                str(out),
                "--dataset",
                str(dataset),
                "--split",
                "dev",
                "--names",
                str(kb),
                "--beams",
                "3",
                "--k",
                "3",
                "--json",
                str(tmp_path / "g.json"),
                "--record-in-card",
            ]
        )
        == 0
    )
    report = json.loads((tmp_path / "g.json").read_text())
    assert report["linker"] == "generative" and report["n"] == 2
    assert report["acc@1"] == card["stages"]["finetune"]["best_dev"]["score"]  # the linker that chose the epoch
    assert (
        cli.main(
            [
                "evaluate",
                "--linker",
                "rerank",
                "--retriever",
                str(retriever),
                "--reranker",
                str(out),
                "--dataset",
                str(dataset),
                "--split",
                "dev",
                "--names",
                str(kb),
                "--rerank-depth",
                "3",
                "--k",
                "3",
                "--record-in-card",
            ]
        )
        == 0
    )
    scores = json.loads((out / "card.json").read_text())["scores"]
    assert set(scores) == {"adr/dev", "adr/dev/rerank"}
    assert "| adr | dev | reranker |" in (out / "MODEL_CARD.md").read_text()


def test_a_fresh_model_draws_its_random_weights_from_the_seed(tiny_bert):
    """The decoder's cross-attention starts random: from the seed, not from what the process ran before."""
    from bioel_core.training.generative import new_model

    states = []
    for global_seed, seed in ((1, 0), (2, 0), (1, 1)):
        torch.manual_seed(global_seed)
        states.append(new_model(str(tiny_bert), 1, True, "cpu", seed).state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    assert not all(torch.equal(states[0][k], states[2][k]) for k in states[0])
