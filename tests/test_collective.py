"""The collective document model: windows, spans and offsets, the losses on hand-computed cases, save/load, a tiny
training run, and `bioel link` with the model as detector (and for given mentions) on the committed sample."""

import json
import math
import random
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from bioel_core.corpora import Document, Mention, Passage, read_annotated, read_pubtator, write_bioc_json
from bioel_core.corpora.annotated import CorpusSpec, TypedCorpus
from bioel_core.evaluation.e2e import e2e_scores
from bioel_core.index import IndexSpec
from bioel_core.linking.annotate import AnnotatorSpec
from bioel_core.models import CollectiveEncoder, TransformerEncoder, open_model
from bioel_core.models.bert_inference import BertForInference
from bioel_core.models.collective import (
    feed_forward_importance,
    hidden_importance,
    keep_feed_forward,
    keep_hidden,
    owner_window,
    windows,
    word_spans,
)
from bioel_core.training.collective import (
    CollectiveTrainConfig,
    NameSpace,
    bio_loss,
    bio_targets,
    dev_scores,
    document_loss,
    gold_piece_spans,
    link_loss,
    predict,
    span_loss,
    train_collective,
    warm_start_heads,
)
from conftest import FIXTURES, SAMPLE_DATA, table_bytes
from pipelines import build_index, embed_names, ingest_kb, link_corpus
from pipelines.options import pipeline_options
from test_models import make_tiny_bert

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXT = (
    "Familial breast and ovarian cancer syndrome (Sjögren-β ✓) of the colon. Heart attack, myocardial "
    "infarction; type 2 diabetes: x linked disease of the colon."
)


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    root = tmp_path_factory.mktemp("collective")
    bert = make_tiny_bert(root / "bert")
    names = TransformerEncoder(bert, pooling="mean").save(root / "names")
    return root, bert, names


def tiny(bases, **kwargs) -> CollectiveEncoder:
    _, bert, names = bases
    torch.manual_seed(0)
    return CollectiveEncoder(bert, open_model(str(names)), ["Chemical", "Disease"], **kwargs).eval()


def test_windows_cover_every_piece_and_each_piece_takes_its_most_central_window():
    assert windows(5, 8, 2) == [(0, 5)]
    ranges = windows(10, 4, 2)
    assert ranges == [(0, 4), (2, 6), (4, 8), (6, 10)]
    owner = owner_window(10, ranges)
    assert owner.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 3, 3] or owner.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    assert all(ranges[w][0] <= i < ranges[w][1] for i, w in enumerate(owner))


def test_spans_start_and_end_on_word_boundaries_and_slice_the_text_across_windows(bases):
    model = tiny(bases, window=16, overlap=6, max_span=4)
    long_text = " ".join([TEXT] * 6)  # many windows of 14 pieces
    encoded = model.encode_document(long_text)
    n = len(encoded.pieces)
    assert n > 60 and encoded.states.shape == (n, 32)
    assert bool(torch.isfinite(encoded.states).all()) and bool((encoded.states.abs().sum(-1) > 0).all())
    words = [p.word for p in encoded.pieces]
    for i, j in encoded.spans.tolist():
        assert 0 <= j - i < 4
        assert i == 0 or words[i - 1] != words[i]
        assert j == n - 1 or words[j + 1] != words[j]
    # every piece's characters are the text it came from; a span's characters are one slice of the text
    assert all(0 <= p.start < p.end <= len(long_text) for p in encoded.pieces)
    start = long_text.index("Sjögren")
    covered = model.covering_span(encoded, start, start + len("Sjögren"))
    assert long_text[encoded.pieces[covered[0]].start : encoded.pieces[covered[1]].end] == "Sjögren"
    assert word_spans([], 10).shape == (0, 2)


def test_span_loss_on_a_hand_computed_case():
    logits = torch.tensor([[0.0, 1.0], [2.0, -1.0]])  # two spans x two types
    spans = torch.tensor([[0, 0], [1, 2]])
    loss = span_loss(logits, spans, {(1, 2, 0): {"D1"}})
    expected = (math.log(2) + math.log(1 + math.e) + math.log(1 + math.exp(-2)) + math.log(1 + math.exp(-1))) / 4
    assert float(loss) == pytest.approx(expected, abs=1e-6)


def test_link_loss_on_a_hand_computed_case():
    mentions = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    positives = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    negatives = torch.tensor([[[0.0, 1.0]], [[0.0, 1.0]]])
    loss = link_loss(mentions, positives, negatives, scale=2.0)
    # first mention: logits (2, 0); second: (0, 2)
    expected = (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(2))) / 2
    assert float(loss) == pytest.approx(expected, abs=1e-6)


def test_bio_targets_mark_begin_and_inside_per_type():
    tags = bio_targets(6, {(1, 3, 1): {"D"}, (5, 5, 0): {"C"}})
    assert tags.tolist() == [0, 3, 4, 4, 0, 1]


def test_save_then_load_gives_identical_outputs(bases, tmp_path):
    model = tiny(bases, window=24, overlap=8)
    with torch.no_grad():
        for p in model.mention.parameters():
            p.add_(0.1)
    model.decoding = {"thresholds": {"Chemical": 0.3, "Disease": 0.6}, "link_with": "both"}
    model.save(tmp_path / "m")
    again = CollectiveEncoder.load(tmp_path / "m")
    assert again.fingerprint() == model.fingerprint() and again.decoding == model.decoding
    with torch.no_grad():
        a, b = model.encode_document(TEXT), again.encode_document(TEXT)
        assert torch.equal(model.span_logits(a), again.span_logits(b))
        assert torch.equal(model.mention_vectors(a, a.spans[:5]), again.mention_vectors(b, b.spans[:5]))
    assert np.array_equal(model.encode(["heart attack"]), again.encode(["heart attack"]))


def test_the_float64_mention_head_follows_its_weights_as_an_optimizer_changes_them(bases):
    model = tiny(bases)
    encoded = model.encode_document(TEXT)
    spans = [tuple(s) for s in encoded.spans[:4].tolist()]

    def reference() -> np.ndarray:  # the head in float64, converted afresh
        h = encoded.states
        x = torch.cat([h[[a for a, _ in spans]], h[[b for _, b in spans]]], dim=-1).double()
        w, b = model.mention.weight.double(), model.mention.bias.double()
        return torch.nn.functional.normalize(torch.nn.functional.linear(x, w, b), dim=-1).float().detach().numpy()

    with torch.no_grad():
        before = model.collective_vectors(encoded, spans)
        assert np.array_equal(before, reference()) and np.array_equal(model.collective_vectors(encoded, spans), before)
    optimizer = torch.optim.SGD(model.mention.parameters(), lr=0.5)
    model.mention_vectors(encoded, torch.tensor(spans), batch_invariant=True).sum().backward()  # gradients reach it
    assert model.mention.weight.grad is not None and model.mention.weight.grad.abs().sum() > 0
    optimizer.step()
    with torch.no_grad():
        after = model.collective_vectors(encoded, spans)
    assert np.array_equal(after, reference()) and not np.array_equal(after, before)


def test_a_smaller_model_starts_from_a_trained_ones_first_layers_and_heads(bases, tmp_path):
    teacher = tiny(bases, window=24, overlap=8)
    with torch.no_grad():
        for p in teacher.heads().values():
            p.add_(0.25)
    folder = teacher.save(tmp_path / "teacher")
    student = CollectiveEncoder(
        folder / "document", open_model(str(folder / "names")), teacher.entity_types, window=24, overlap=8, document_layers=1
    )
    warm_start_heads(student, teacher)
    assert len(student.document.encoder.layer) == 1 and student.document.config.num_hidden_layers == 1
    for name, tensor in student.heads().items():
        assert torch.equal(tensor, teacher.heads()[name]), name
    first = {k: v for k, v in teacher.document.state_dict().items() if ".layer.1." not in k}
    assert set(student.document.state_dict()) == set(first)
    assert all(torch.equal(v, first[k]) for k, v in student.document.state_dict().items())
    again = CollectiveEncoder.load(student.save(tmp_path / "student"))  # the folder keeps one layer
    assert again.document.config.num_hidden_layers == 1 and again.fingerprint() == student.fingerprint()
    with pytest.raises(ValueError, match="has 2 layers; cannot keep 3"):
        CollectiveEncoder(folder / "document", open_model(str(folder / "names")), ["Disease"], document_layers=3)
    other = CollectiveEncoder(folder / "document", open_model(str(folder / "names")), ["Disease"], document_layers=1)
    before = {k: v.clone() for k, v in other.heads().items()}
    warm_start_heads(other, teacher)  # other entity types: the heads mean something else, not copied
    assert all(torch.equal(v, before[k]) for k, v in other.heads().items())


def test_pieces_are_the_tokenizers_split_with_its_offsets_and_words_whatever_it_was_last_asked(bases):
    from transformers import AutoTokenizer

    model = tiny(bases)
    hf = AutoTokenizer.from_pretrained(model.document_dir, local_files_only=True)
    enc = hf(TEXT, add_special_tokens=False, return_offsets_mapping=True)
    ids, pieces = model.pieces(TEXT)
    assert ids == enc["input_ids"] and len(ids) > 8
    assert [(p.start, p.end, p.word) for p in pieces] == [(a, b, w) for (a, b), w in zip(enc["offset_mapping"], enc.word_ids())]
    model.tokenizer.backend_tokenizer.enable_truncation(4)  # the model's own pipeline is not touched
    model.tokenizer.backend_tokenizer.enable_padding(length=40)
    assert model.pieces(TEXT) == (ids, pieces)


def test_a_smaller_feed_forward_keeps_the_units_that_carry_the_layers_output(bases, tmp_path):
    model = tiny(bases, window=24, overlap=8).eval()
    width = model.document.config.intermediate_size
    silent = torch.arange(0, width, 2)  # units whose output weights are zero add nothing to the layer's output
    with torch.no_grad():
        for layer in model.document.encoder.layer:
            layer.output.dense.weight[:, silent] = 0
        before = model.encode_document(TEXT).states
    importance = feed_forward_importance(model, [TEXT, "type 2 diabetes"])
    assert all(bool((scores[silent] == 0).all()) and bool((scores[1::2] > 0).all()) for scores in importance)
    keep_feed_forward(model.document, width // 2, importance)
    assert model.document.config.intermediate_size == width // 2
    with torch.no_grad():
        after = model.encode_document(TEXT).states
    assert torch.allclose(after, before, atol=1e-5)  # the same sums, fewer zero terms
    again = CollectiveEncoder.load(model.save(tmp_path / "cut", dtype="float32"))
    assert again.document.config.intermediate_size == width // 2 and again.fingerprint() == model.fingerprint()
    with torch.no_grad():
        assert torch.equal(again.encode_document(TEXT).states, after)
    with pytest.raises(ValueError, match=f"have {width // 2} units; cannot keep {width}"):
        keep_feed_forward(model.document, width, importance)


def test_narrower_hidden_states_keep_the_busiest_dimensions_and_heads_and_load_as_a_plain_bert(bases, tmp_path):
    model = tiny(bases, window=24, overlap=8).eval()
    config = model.document.config
    width, heads = config.hidden_size, config.num_attention_heads
    head = width // heads
    first = model.document.encoder.layer[0]
    with torch.no_grad():  # the first layer's first head writes nothing: it scores nothing and is the one cut
        first.attention.output.dense.weight[:, :head] = 0
    query = first.attention.self.query.weight.detach().clone()
    dims_scores, head_scores = hidden_importance(model, [TEXT, "type 2 diabetes"])
    assert dims_scores.shape == (width,) and bool((dims_scores > 0).all())
    assert [tuple(h.shape) for h in head_scores] == [(heads,)] * config.num_hidden_layers
    assert float(head_scores[0][0]) == 0 and float(head_scores[0][1]) > 0
    keep_hidden(model, width - head, (dims_scores, head_scores))
    dims = torch.sort(torch.argsort(dims_scores, descending=True, stable=True)[: width - head]).values
    assert (config.hidden_size, config.num_attention_heads) == (width - head, heads - 1)
    assert torch.equal(model.document.encoder.layer[0].attention.self.query.weight, query[head : 2 * head][:, dims])
    assert model.mention.in_features == 2 * (width - head) and model.span_start.in_features == width - head
    with torch.no_grad():
        encoded = model.encode_document(TEXT)
        logits = model.span_logits(encoded)
        vectors = model.mention_vectors(encoded, encoded.spans[:3])
    assert encoded.states.shape == (len(encoded.pieces), width - head) and bool(torch.isfinite(logits).all())
    assert vectors.shape == (3, model.names.dim)
    again = CollectiveEncoder.load(model.save(tmp_path / "narrow", dtype="float32"))
    assert isinstance(again.document, BertForInference) and again.fingerprint() == model.fingerprint()
    with torch.no_grad():
        assert torch.equal(again.encode_document(TEXT).states, encoded.states)
    with pytest.raises(ValueError, match=f"have {width - head} dimensions in heads of {head}; cannot keep {head + 1}"):
        keep_hidden(model, head + 1, hidden_importance(model, [TEXT]))


def tiny_corpus() -> list[Document]:
    out = []
    for k in range(6):
        text = "heart attack of the colon and type 2 diabetes" if k % 2 else "breast cancer and myocardial infarction"
        mentions = []
        for name, concept in (
            ("heart attack", "D1"),
            ("type 2 diabetes", "D2"),
            ("breast cancer", "D3"),
            ("myocardial infarction", "D1"),
        ):
            if name in text:
                start = text.index(name)
                mentions.append(Mention(name, str(k), start, start + len(name), "Disease", (concept,)))
        out.append(Document(str(k), [Passage("title", 0, text)], mentions))
    return out


def tiny_spaces(model: CollectiveEncoder) -> dict[str, NameSpace]:
    names = ["heart attack", "myocardial infarction", "type 2 diabetes", "breast cancer", "colon cancer", "x linked disease"]
    space = NameSpace(model.encode(names), ["D1", "D1", "D2", "D3", "D4", "D5"])
    return {"Disease": space, "Chemical": space}


def test_a_tiny_training_run_lowers_the_loss(bases):
    model = tiny(bases, window=32, overlap=8)
    spaces = tiny_spaces(model)
    config = CollectiveTrainConfig(random_negatives=2, hard_negatives=2)
    docs = tiny_corpus()
    gold, unaligned = gold_piece_spans(model.encode_document(docs[0].text), docs[0], model.entity_types)
    assert len(gold) == 2 and unaligned == 0

    def total() -> float:
        with torch.no_grad():
            return sum(document_loss(model, d, spaces, config, random.Random(0))[0].item() for d in docs)

    before = total()
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    for _ in range(8):
        for d in docs:
            optimizer.zero_grad()
            document_loss(model, d, spaces, config, random.Random(0))[0].backward()
            optimizer.step()
    model.eval()
    assert total() < 0.7 * before


def test_a_training_stopped_after_an_epoch_and_resumed_ends_with_the_uninterrupted_weights(bases, tmp_path, monkeypatch):
    from bioel_core.training import collective

    corpus = [TypedCorpus("tiny", ("Disease",), tiny_corpus())]
    config = CollectiveTrainConfig(epochs=3, documents_per_step=2, random_negatives=2, hard_negatives=2, warmup=0.2)
    straight, resumed = tiny(bases, window=32, overlap=8), tiny(bases, window=32, overlap=8)
    spaces = tiny_spaces(straight)
    whole = train_collective(straight, corpus, corpus, spaces, config, tmp_path / "a" / "model")

    real_loss, calls = collective.document_loss, {"n": 0}

    def stop_in_the_second_epoch(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == len(corpus[0].documents) + 3:
            raise KeyboardInterrupt
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(collective, "document_loss", stop_in_the_second_epoch)
    with pytest.raises(KeyboardInterrupt):
        train_collective(resumed, corpus, corpus, spaces, config, tmp_path / "b" / "model")
    assert json.loads((tmp_path / "b" / "model.checkpoint" / "state.json").read_text())["step"] == 3
    monkeypatch.setattr(collective, "document_loss", real_loss)
    torch.manual_seed(123)  # whatever the process did meanwhile
    again = train_collective(resumed, corpus, corpus, spaces, config, tmp_path / "b" / "model")
    assert [e["epoch"] for e in again["epochs"]] == [1, 2, 3]
    losses = [[e["loss"][k] for k in ("span", "link", "bio")] for e in again["epochs"]]
    assert np.allclose(losses, [[e["loss"][k] for k in ("span", "link", "bio")] for e in whole["epochs"]], rtol=1e-5)
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_gold_piece_spans_give_a_span_stated_twice_the_union_of_its_ids(bases):
    """Two annotations of one span and type were one target whose ids were the last line's: linking to the first's
    concept, which the scoring counts as right, was trained as a negative."""
    model = tiny(bases)
    text = "heart attack of the colon"
    at = (0, len("heart attack"))
    doc = Document(
        "1",
        [Passage("title", 0, text)],
        [Mention("heart attack", "1", *at, "Disease", ids) for ids in (("D1",), ("MESH:D2",), ())]
        + [Mention("colon", "1", 20, 25, "Disease", ())],
    )
    encoded = model.encode_document(text)
    gold, unaligned = gold_piece_spans(encoded, doc, model.entity_types)
    span = model.covering_span(encoded, *at)
    assert unaligned == 0 and gold[(span[0], span[1], 1)] == {"D1", "D2"}
    assert sorted(gold.values(), key=len) == [set(), {"D1", "D2"}]  # the `-1` span: to detect, nothing to link


def test_dev_scores_count_what_evaluate_e2e_counts(bases):
    """The training's dev scorer (epoch and decoding picked by it, its strict F1 in the card) had a rule of its own:
    the last annotation of a span replaced the ids of the others, `-1` annotations were gold no link can hit, and a
    link needed its gold's type. It now gives evaluate-e2e's figures on the same gold and links."""
    model = tiny(bases, window=32, overlap=8)
    spaces = tiny_spaces(model)
    every_span = {t: 0.0 for t in model.entity_types}
    plain = tiny_corpus()[1]
    found = predict(model, plain, spaces, every_span)
    assert len(found) >= 2
    (a1, b1, t1, c1, _), (a2, b2, t2, c2, _) = found[:2]
    a3 = plain.text.index("colon")
    other_type = {"Disease": "Chemical", "Chemical": "Disease"}
    gold = Document(
        plain.doc_id,
        plain.passages,
        [
            Mention(plain.text[a1:b1], plain.doc_id, a1, b1, t1, (c1,)),  # the link's id, then another for the same span
            Mention(plain.text[a1:b1], plain.doc_id, a1, b1, t1, ("D9",)),
            Mention(plain.text[a2:b2], plain.doc_id, a2, b2, other_type[t2], (c2,)),  # the link's id, the other type
            Mention("colon", plain.doc_id, a3, a3 + 5, "Disease", ()),  # no concept (`-1`)
            Mention("colon", plain.doc_id, a3, a3 + 5, "Gene", ("D1",)),
        ],
    )  # not a type of the model
    dev = dev_scores(model, [TypedCorpus("gold", tuple(model.entity_types), [gold])], spaces, every_span)
    links = [Mention(plain.text[a:b], plain.doc_id, a, b, t, (c,)) for a, b, t, c, _ in found]
    e2e = e2e_scores([gold], links, model.entity_types)
    for k in ("precision", "recall", "f1"):
        assert 100 * dev[k] == pytest.approx(e2e["strict"][k])
    assert (dev["predicted"], dev["gold"]) == (e2e["strict"]["n_pred"], e2e["strict"]["n_gold"])
    assert (dev["gold"], dev["matched"], dev["correct"], dev["gold_without_concept"], dev["recall"]) == (2, 2, 2, 1, 1.0)


@pytest.fixture(scope="module")
def collective_chain(bases, tmp_path_factory):
    """A collective model (untrained, every span a candidate) with a KB, embeddings and index built by the pipelines."""
    root = tmp_path_factory.mktemp("collective-chain")
    model = tiny(bases)
    model.decoding = {"thresholds": {"Chemical": 0.0, "Disease": 0.0}, "link_with": "both"}
    folder = str(model.save(root / "model"))
    options = pipeline_options([])
    ingest_kb.run("medic-biosyn", [str(SAMPLE_DATA / "medic_sample.txt")], str(root / "kb"), options, num_shards=2)
    embed_names.run(folder, str(root / "kb"), str(root / "emb"), options, num_shards=2)
    build_index.run(str(root / "emb"), str(root / "index"), options, num_shards=2, spec=IndexSpec("flat"))
    corpus = root / "corpus.pubtator"
    docs = read_pubtator(SAMPLE_DATA / "gold_ncbi_bc5cdr_sample.pubtator")[:8]
    from bioel_core.corpora import write_pubtator

    with open(corpus, "w") as fh:
        write_pubtator(docs, fh)
    return folder, str(root / "index"), corpus, docs


@pytest.mark.parametrize("detector", ["model", "both"])
def test_link_with_the_model_detector_reconciles_and_two_workers_write_the_same_bytes(collective_chain, tmp_path, detector):
    model, index, corpus, docs = collective_chain
    spec = AnnotatorSpec(model=model, indexes=(("Disease", index),), detector=detector)
    one = link_corpus.run([str(corpus)], "pubtator", str(tmp_path / "one"), spec, pipeline_options([]))
    assert all(one["reconciliation"].values()) and one["counts"]["documents"]["linked"] == len(docs)
    assert one["counts"]["mentions"]["linked"] > len(docs)
    two = link_corpus.run(
        [str(corpus)],
        "pubtator",
        str(tmp_path / "two"),
        spec,
        pipeline_options(["--runner", "DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]),
        batch_size=3,
    )
    assert all(two["reconciliation"].values())
    assert table_bytes(tmp_path / "one") == table_bytes(tmp_path / "two")
    from bioel_core.tables import read_table

    texts = {d.doc_id: d.text for d in docs}
    rows = read_table(tmp_path / "one", "annotations").to_pylist()
    assert all(texts[r["doc_id"]][r["start"] : r["end"]] == r["mention"] for r in rows)


def test_documents_encoded_side_by_side_on_threads_give_the_bits_of_one_at_a_time(collective_chain):
    """With two torch threads the document passes run two documents at once, one thread each: the same states,
    spans, logits and annotation rows as one at a time on one thread, and the thread count back after, also when the
    caller stops reading early."""
    model, index, _, docs = collective_chain
    annotator = AnnotatorSpec(model=model, indexes=(("Disease", index),), detector="both").open()
    document_model = annotator.document_model
    texts = [d.text for d in docs] + ["", "Heart attack."]  # more documents than are encoded ahead
    with torch.no_grad():
        alone = [(e, document_model.span_logits(e)) for e in map(document_model.encode_document, texts)]
    rows_alone = annotator.annotate(docs)
    torch.set_num_threads(2)
    try:
        together = list(document_model.encode_documents(texts, with_logits=True, then=lambda k: texts[k]))
        assert torch.get_num_threads() == 2
        rows_together = annotator.annotate(docs)
        passes = document_model.encode_documents(texts, with_logits=True)
        next(passes)
        assert torch.get_num_threads() == 1
        passes.close()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
    assert len(together) == len(alone)
    assert [then for _, _, then in together] == texts  # `then` of each document, in order
    for (expected, expected_logits), (got, logits, _) in zip(alone, together):
        assert got.pieces == expected.pieces
        assert torch.equal(got.states, expected.states) and torch.equal(got.spans, expected.spans)
        assert torch.equal(logits, expected_logits)
    assert rows_together == rows_alone and sum(map(len, rows_alone)) > len(docs)


def test_both_detectors_keep_the_longest_span_and_link_each_as_its_own_detector_does(collective_chain):
    model, index, _, docs = collective_chain
    stop = (("Disease", str(SAMPLE_DATA.parent / "models" / "stoplists" / "disease-medic.json")),)
    runs = {
        d: AnnotatorSpec(model=model, indexes=(("Disease", index),), stop_lists=stop, detector=d).open().annotate(docs)
        for d in ("dictionary", "model", "both")
    }
    from_dictionary = 0
    for dictionary, by_model, both in zip(runs["dictionary"], runs["model"], runs["both"]):
        expected = []  # longest first, then the earlier start; of the same span, the dictionary's
        for row in sorted(dictionary + by_model, key=lambda r: (-(r["end"] - r["start"]), r["start"])):
            if all(row["end"] <= k["start"] or k["end"] <= row["start"] for k in expected):
                expected.append(row)
        expected.sort(key=lambda r: (r["start"], r["end"]))
        assert [(r["start"], r["end"], r["concept_id"], r["score"]) for r in both] == [
            (r["start"], r["end"], r["concept_id"], r["score"]) for r in expected
        ]
        from_dictionary += sum(r in dictionary for r in expected)
    assert 0 < from_dictionary < sum(len(b) for b in runs["both"])  # both detectors contribute


def test_a_dropped_model_span_never_lends_its_link_to_a_mention_made_after_it(collective_chain, monkeypatch):
    """The model's spans are told from the dictionaries' by identity. With every model span dropped as a defined
    short form would be, then coordinated mentions split into parts (new objects, which CPython places where the
    dropped spans lay), `both` must link exactly what the dictionaries alone link: no part may take a dropped span's
    piece span and be linked by its vector. It did (a batch's memory decided which part: links changed with the batch)."""
    from bioel_core.corpora.records import Document, Passage
    from bioel_core.linking import annotate as annotate_module

    model, index, _, docs = collective_chain
    coordinated = "Carriers of breast and ovarian cancer, and of breast or ovarian neoplasms, were screened. " * 3
    docs = [*docs, Document("coordinated", [Passage("title", 0, coordinated)])]
    monkeypatch.setattr(annotate_module, "_defined_elsewise", lambda document, detected, dictionary, defined: [])
    runs = {
        d: AnnotatorSpec(model=model, indexes=(("Disease", index),), detector=d).open().annotate(docs)
        for d in ("dictionary", "both")
    }
    assert runs["both"] == runs["dictionary"]
    start = coordinated.index("breast and ovarian cancer")
    parts = [r for r in runs["both"][-1] if (r["start"], r["end"]) == (start, start + 25)]
    assert [(r["link_text"], r["concept_id"]) for r in parts] == [("breast cancer", "D001943"), ("ovarian cancer", "D010051")]


def test_the_default_detector_is_both_with_a_collective_model_and_the_dictionaries_otherwise(collective_chain):
    model, index, _, _ = collective_chain
    assert AnnotatorSpec(model=model, indexes=(("Disease", index),)).detector == "both"
    assert AnnotatorSpec(model=None, indexes=(("Disease", index),)).detector == "dictionary"
    # another model for a type: the collective model's one pass is refused, so the dictionaries are the default
    assert AnnotatorSpec(model=model, indexes=(("Disease", index),), type_models=(("Disease", model),)).detector == "dictionary"
    assert AnnotatorSpec(model=model, indexes=(("Disease", index),), detector="model").detector == "model"


def test_bioel_train_collective_cuts_a_trained_model_to_fewer_layers(collective_chain, tmp_path, capsys):
    from pipelines import cli

    teacher, index, corpus, _ = collective_chain
    kb = str(Path(index).parent / "kb")
    out = tmp_path / "small"

    def train(*cut: str) -> int:
        return cli.main(
            [
                "train",
                "collective",
                "--train-corpus",
                str(corpus),
                "--dev-corpus",
                str(corpus),
                "--names",
                f"Disease={kb}",
                f"Chemical={kb}",
                "--init",
                teacher,
                "--document-layers",
                "1",
                *cut,
                "--epochs",
                "1",
                "--save-dtype",
                "float32",
                "--output",
                str(out),
                "--no-progress",
            ]
        )

    width = CollectiveEncoder.load(teacher).document.config.intermediate_size
    assert train("--document-feed-forward", str(width + 1)) == 2
    assert capsys.readouterr().err.endswith(
        f"error: --document-feed-forward: the document encoder's feed-forward blocks have {width} units; "
        f"cannot keep {width + 1}\n"
    )
    assert train("--document-hidden", "17") == 2
    assert capsys.readouterr().err.endswith(
        "error: --document-hidden: the document encoder's hidden states have 32 dimensions in heads of 16; "
        "cannot keep 17 (a multiple of 16 up to 32)\n"
    )
    assert train("--document-feed-forward", "16", "--document-hidden", "16") == 0
    model = CollectiveEncoder.load(out)
    assert model.document.config.num_hidden_layers == 1 and model.document.config.intermediate_size == 16
    assert (model.document.config.hidden_size, model.document.config.num_attention_heads) == (16, 1)
    assert isinstance(model.document, BertForInference)  # the cut model is a plain BERT of that size
    assert tuple(model.document.get_parameter("encoder.layer.0.intermediate.dense.weight").shape) == (16, 16)
    assert model.names.fingerprint() == CollectiveEncoder.load(teacher).names.fingerprint()  # the teacher's name space
    card = json.loads((out / "card.json").read_text())
    assert card["init"] == teacher and card["document_layers"] == 1 and card["collective"]["best_epoch"] == 1
    assert card["document_feed_forward"] == 16 and card["document_hidden"] == 16
    from bioel_core.models.cards import write_card

    write_card(tmp_path, card)  # the card as trained is what its JSON renders (the shipped models' test holds this)
    assert (tmp_path / "MODEL_CARD.md").read_text() == (out / "MODEL_CARD.md").read_text()
    # BioSyn scores of a collective model are its frozen name encoder's (`evaluate --linker dense`): the card says so
    from bioel_core.models.cards import record_scores

    record_scores(out, {"dataset": "bc5cdr-disease", "split": "test", "n": 10, "acc@1": 90.0, "acc@5": 95.0, "linker": "dense"})
    assert (
        "## Scores (BioSyn protocol, its frozen name encoder alone: mentions linked by their text, without the document "
        "pass)\n\n| dataset | split | mode | n | acc@1 | acc@5 |"
    ) in (out / "MODEL_CARD.md").read_text()


def test_bioel_train_collective_reads_its_corpora_in_corpus_format(collective_chain, tmp_path):
    """--train-corpus and --dev-corpus were read as PubTator only; with --corpus-format the same documents as BioC
    JSON train the same model."""
    from pipelines import cli

    teacher, index, corpus, docs = collective_chain
    kb = str(Path(index).parent / "kb")
    bioc = tmp_path / "corpus.json"
    write_bioc_json(docs, bioc)
    cards = {}
    for fmt, path in (("pubtator", corpus), ("bioc-json", bioc)):
        out = tmp_path / fmt
        assert (
            cli.main(
                [
                    "train",
                    "collective",
                    "--train-corpus",
                    str(path),
                    "--dev-corpus",
                    str(path),
                    "--corpus-format",
                    fmt,
                    "--names",
                    f"Disease={kb}",
                    f"Chemical={kb}",
                    "--init",
                    teacher,
                    "--document-layers",
                    "1",
                    "--epochs",
                    "1",
                    "--save-dtype",
                    "float32",
                    "--output",
                    str(out),
                    "--no-progress",
                ]
            )
            == 0
        )
        cards[fmt] = json.loads((out / "card.json").read_text())
    assert (cards["pubtator"]["data"]["corpus_format"], cards["bioc-json"]["data"]["corpus_format"]) == ("pubtator", "bioc-json")
    assert cards["bioc-json"]["fingerprint"] == cards["pubtator"]["fingerprint"]
    assert cards["bioc-json"]["collective"]["dev"] == cards["pubtator"]["collective"]["dev"]


def test_bc5cdr_bioc_release_gives_the_gold_spans_of_its_pubtator_release(bases):
    """BC5CDR's BioC release states a composite's parts as annotations of their own (CompositeRole
    IndividualMention): read as gold mentions they were spans to detect the PubTator release has not ("malignant
    liver disease"), and a two-location part replaced its composite's ids ("end-stage liver disease", whose span is
    the composite's)."""
    model = tiny(bases)
    excerpt = FIXTURES / "corpora" / "bc5cdr_test_excerpt"
    pubtator = read_annotated(f"{excerpt}.pubtator", "pubtator")
    bioc = read_annotated(f"{excerpt}.bioc.xml", "bioc-xml")
    assert [d.doc_id for d in bioc] == [d.doc_id for d in pubtator] and len(pubtator) == 3
    for p, b in zip(pubtator, bioc):
        encoded = model.encode_document(p.text)
        assert gold_piece_spans(encoded, b, model.entity_types) == gold_piece_spans(encoded, p, model.entity_types)


def test_given_mentions_are_linked_in_one_pass_per_document(collective_chain, tmp_path):
    model, index, corpus, docs = collective_chain
    spec = AnnotatorSpec(model=model, indexes=(("", index),), detect=False)
    manifest = link_corpus.run([str(corpus)], "pubtator", str(tmp_path / "given"), spec, pipeline_options([]))
    assert all(manifest["reconciliation"].values())
    assert manifest["counts"]["mentions"]["linked"] == sum(len(d.mentions) for d in docs)


def test_given_mentions_of_a_type_without_an_index_are_kept_nil_in_one_pass(collective_chain, tmp_path):
    model, index, corpus, docs = collective_chain
    spec = AnnotatorSpec(model=model, indexes=(("SpecificDisease", index),), detect=False)  # no Modifier, DiseaseClass
    manifest = link_corpus.run([str(corpus)], "pubtator", str(tmp_path / "given"), spec, pipeline_options([]))
    from bioel_core.tables import read_table

    rows = read_table(tmp_path / "given", "annotations").to_pylist()
    given = Counter(m.entity_type for d in docs for m in d.mentions)
    assert len(rows) == manifest["counts"]["mentions"]["linked"] == sum(given.values())
    assert manifest["counts"]["mentions"]["no_index"] == {"DiseaseClass": given["DiseaseClass"], "Modifier": given["Modifier"]}
    assert all(r["nil"] and r["concept_id"] is None for r in rows if r["entity_type"] != "SpecificDisease")
    assert all(not r["nil"] for r in rows if r["entity_type"] == "SpecificDisease")


def test_the_model_detector_needs_a_collective_model(collective_chain, tmp_path):
    folder, index, corpus, _ = collective_chain
    names_only = AnnotatorSpec(model=None, indexes=(("Disease", index),), detector="model")
    with pytest.raises(ValueError, match="^detector: model needs a collective model"):
        names_only.versions()
    # the collective model given as a type's name model: the refusal says which model the detector is
    typed = AnnotatorSpec(model=None, indexes=(("Disease", index),), type_models=(("Disease", folder),), detector="model")
    with pytest.raises(
        ValueError,
        match=r"name encoder \(a type's own model is its name model; the span detector is the "
        r"linker's model\)$",
    ):
        typed.versions()


# ------------------------------------------------------------------ corpora that annotate some of the model's types
NCBI_EXCERPT = FIXTURES / "corpora" / "ncbi_disease_excerpt.pubtator"
BC5CDR_EXCERPT = FIXTURES / "corpora" / "bc5cdr_test_excerpt.pubtator"
MODEL_TYPES = ("Chemical", "Disease")


def test_a_corpus_flag_declares_the_types_its_corpus_annotates():
    assert CorpusSpec.parse("../data/CDR_TrainingSet.PubTator.txt") == CorpusSpec("../data/CDR_TrainingSet.PubTator.txt")
    assert CorpusSpec.parse("Disease=../data/ncbi.txt") == CorpusSpec("../data/ncbi.txt", ("Disease",))
    assert CorpusSpec.parse("Chemical,Disease=run=3/cdr.txt") == CorpusSpec("run=3/cdr.txt", ("Chemical", "Disease"))
    assert CorpusSpec.parse("./a=b.txt") == CorpusSpec("./a=b.txt")  # a path with a folder before its '=': no types
    assert str(CorpusSpec.parse("Chemical,Disease=cdr.txt")) == "Chemical,Disease=cdr.txt"
    with pytest.raises(ValueError, match=r"^--train-corpus Disease=: expected \[TYPE\[,TYPE\.\.\.\]=\]PATH, PATH not empty$"):
        CorpusSpec.parse("Disease=", "--train-corpus")
    with pytest.raises(ValueError, match="^--dev-corpus Disease,Disease=x: an entity type is named twice$"):
        CorpusSpec.parse("Disease,Disease=x", "--dev-corpus")
    with pytest.raises(
        ValueError,
        match=r"^--train-corpus Gene=.*ncbi_disease_excerpt.pubtator: Gene is not an entity type "
        r"of the model \(its types: Chemical, Disease\)$",
    ):
        CorpusSpec.parse(f"Gene={NCBI_EXCERPT}").read("pubtator", MODEL_TYPES, "--train-corpus")


def test_one_named_type_types_the_corpus_subtypes_and_leaves_the_models_other_types_out():
    plain = CorpusSpec(str(NCBI_EXCERPT)).read("pubtator", MODEL_TYPES)
    assert plain.types == MODEL_TYPES and {m.entity_type for m in plain.documents[0].mentions} == {
        "Modifier",
        "CompositeMention",
        "SpecificDisease",
        "DiseaseClass",
    }
    ncbi = CorpusSpec.parse(f"Disease={NCBI_EXCERPT}").read("pubtator", MODEL_TYPES)
    assert ncbi.types == ("Disease",) and ncbi.left_out == {}
    assert [(m.text, m.entity_type, m.concept_ids) for m in ncbi.documents[0].mentions] == [
        (m.text, "Disease", m.concept_ids) for m in plain.documents[0].mentions
    ]
    # BC5CDR declared as annotating chemicals only: its diseases are outside that, left out and counted
    cdr = read_pubtator(BC5CDR_EXCERPT)
    chemicals = CorpusSpec.parse(f"Chemical={BC5CDR_EXCERPT}").read("pubtator", MODEL_TYPES)
    diseases = sum(m.entity_type == "Disease" for d in cdr for m in d.mentions)
    assert diseases > 0 and chemicals.left_out == {"Disease": diseases}
    assert [[m for m in d.mentions if m.entity_type == "Chemical"] for d in cdr] == [d.mentions for d in chemicals.documents]
    # with several types named, a type not named is left out too (NCBI's subtypes are no model type)
    both = CorpusSpec.parse(f"Chemical,Disease={NCBI_EXCERPT}").read("pubtator", MODEL_TYPES)
    assert both.documents[0].mentions == [] and sum(both.left_out.values()) == 5
    summary = ncbi.summary()
    assert summary == {"path": str(NCBI_EXCERPT), "types": ["Disease"], "documents": 1, "mentions": {"Disease": 5}}


def test_span_loss_leaves_out_the_types_a_corpus_does_not_annotate():
    logits = torch.tensor([[0.0, 1.0], [2.0, -1.0]])  # two spans x (Chemical, Disease)
    spans = torch.tensor([[0, 0], [1, 2]])
    gold = {(1, 2, 1): {"D1"}}  # the second span is a disease
    only_disease = span_loss(logits, spans, gold, [False, True])
    expected = (math.log(1 + math.e) + math.log(1 + math.e)) / 2  # span 1 not a disease (logit 1), span 2 one (-1)
    assert float(only_disease) == pytest.approx(expected, abs=1e-6)
    assert float(span_loss(logits, spans, gold, [True, True])) == pytest.approx(float(span_loss(logits, spans, gold)))


def test_bio_loss_lets_an_outside_token_be_a_mention_of_an_unannotated_type():
    # tags: O, B-Chemical, I-Chemical, B-Disease, I-Disease; tokens: O, B-Disease
    logits = torch.tensor([[0.5, 1.0, -1.0, 0.0, 0.2], [0.1, 0.3, 0.0, 2.0, -0.5]])
    tags = torch.tensor([0, 3])
    assert float(bio_loss(logits, tags, [True, True])) == pytest.approx(float(torch.nn.functional.cross_entropy(logits, tags)))
    p = torch.softmax(logits, dim=1)
    expected = -(torch.log(p[0, 0] + p[0, 1] + p[0, 2]) + torch.log(p[1, 3])) / 2  # O or a chemical; the disease as given
    assert float(bio_loss(logits, tags, [False, True])) == pytest.approx(float(expected), abs=1e-6)


def test_a_disease_only_document_teaches_the_chemical_span_scores_nothing(bases):
    """NCBI-disease documents trained as BC5CDR ones made every chemical span in them a negative: the span scorer
    learnt that the chemicals of disease corpora are no chemicals. Their chemical columns now get no gradient."""
    model = tiny(bases, window=32, overlap=8)
    spaces = tiny_spaces(model)
    config = CollectiveTrainConfig(random_negatives=2, hard_negatives=2)
    document = tiny_corpus()[1]
    chemical = model.entity_types.index("Chemical")
    grads = {}
    for annotated in (None, ("Disease",)):
        model.zero_grad()
        document_loss(model, document, spaces, config, random.Random(0), annotated)[0].backward()
        grads[annotated] = {
            name: getattr(model, name).weight.grad[chemical].abs().sum().item()
            for name in ("span_start", "span_end", "span_inside")
        }
    assert all(v > 0 for v in grads[None].values())
    assert all(v == 0 for v in grads[("Disease",)].values())


def test_dev_scores_count_each_corpus_on_its_own_types_and_pool_the_counts(bases):
    """A disease-only dev corpus scored on every type made each chemical the model found in it a false positive.
    Each corpus is now scored as evaluate-e2e --types <its types> scores it, and the counts are summed."""
    model = tiny(bases, window=32, overlap=8)
    spaces = tiny_spaces(model)
    every_span = {t: 0.0 for t in model.entity_types}
    docs = tiny_corpus()
    both = TypedCorpus("cdr", MODEL_TYPES, [docs[0]])
    disease = TypedCorpus("ncbi", ("Disease",), [docs[1]])
    links = {
        d.doc_id: [Mention(d.text[a:b], d.doc_id, a, b, t, (c,)) for a, b, t, c, _ in predict(model, d, spaces, every_span)]
        for d in docs[:2]
    }
    assert any(m.entity_type == "Chemical" for m in links[docs[1].doc_id])  # predictions the disease corpus does not score
    pooled = dev_scores(model, [both, disease], spaces, every_span)
    alone = {c.source: dev_scores(model, [c], spaces, every_span) for c in (both, disease)}
    disease_e2e = e2e_scores([docs[1]], links[docs[1].doc_id], ("Disease",))["strict"]
    assert alone["ncbi"]["predicted"] == disease_e2e["n_pred"] == sum(m.entity_type == "Disease" for m in links[docs[1].doc_id])
    for k in ("predicted", "gold", "correct", "matched"):
        assert pooled[k] == alone["cdr"][k] + alone["ncbi"][k]
    assert pooled["precision"] == pytest.approx(pooled["correct"] / pooled["predicted"])
    assert pooled["by_corpus"] == {"cdr": alone["cdr"], "ncbi": alone["ncbi"]}


def test_bioel_train_collective_takes_corpora_of_some_types_and_records_them_in_the_card(collective_chain, tmp_path):
    """...where Beam, FAISS and Great Expectations cannot be imported (a GPU worker image): `bioel train` imported the
    name encoders' training recipe, which needs FAISS, before it turned to the collective model."""
    from test_exact_search import without_beam_faiss_gx

    teacher, index, corpus, _ = collective_chain
    kb = str(Path(index).parent / "kb")
    out = tmp_path / "typed"
    argv = [
        "train",
        "collective",
        "--train-corpus",
        str(corpus),
        f"Disease={NCBI_EXCERPT}",
        "--dev-corpus",
        str(corpus),
        f"Disease={NCBI_EXCERPT}",
        "--names",
        f"Disease={kb}",
        f"Chemical={kb}",
        "--init",
        teacher,
        "--document-layers",
        "1",
        "--epochs",
        "1",
        "--save-dtype",
        "float32",
        "--output",
        str(out),
        "--no-progress",
    ]
    without_beam_faiss_gx(f"from pipelines import cli\nassert cli.main({argv!r}) == 0", tmp_path)
    card = json.loads((out / "card.json").read_text())
    train = card["data"]["corpora"]["train"]
    assert [(c["path"], c["types"], c["documents"]) for c in train] == [
        (str(corpus), ["Chemical", "Disease"], 8),
        (str(NCBI_EXCERPT), ["Disease"], 1),
    ]
    assert train[1]["mentions"] == {"Disease": 5} and card["data"]["train_documents"] == 9
    assert set(card["collective"]["dev"]["by_corpus"]) == {str(corpus), str(NCBI_EXCERPT)}
    assert f"| train | `{NCBI_EXCERPT}` | Disease | 1 | Disease 5 | - |" in (out / "MODEL_CARD.md").read_text()


# ------------------------------------------------------------ benchmarks/gpu_workers.py: its code path on the CPU
def test_gpu_workers_links_as_bioel_link_does_and_runs_without_beam_faiss_or_gx(collective_chain, tmp_path):
    """benchmarks/gpu_workers.py measures `bioel link`'s library path with the names searched in memory (a GPU worker
    image has no FAISS): its annotations are the ones the annotator over the model's FAISS shards writes, and the
    script runs where Beam, FAISS and Great Expectations cannot be imported."""
    from benchmarks.gpu_workers import embed_rate, in_memory_spec, link_rate, model_spec
    from bioel_core.corpora import read_documents
    from test_exact_search import without_beam_faiss_gx

    model, index, _, _ = collective_chain
    kb = str(Path(index).parent / "kb")
    abstracts = SAMPLE_DATA / "abstracts_sample.jsonl"
    documents = list(read_documents(str(abstracts), "jsonl"))[:4]
    stop = (("Disease", str(SAMPLE_DATA.parent / "models" / "stoplists" / "disease-medic.json")),)
    through_index = AnnotatorSpec(model=model, indexes=(("Disease", index),), stop_lists=stop).open().annotate(documents)
    # the vectors the index holds (bioel embed's, renormalized in float32 by build-index): the same links, up to the
    # float32 rounding of the query vectors, which the FAISS shards renormalize too (scores within 1e-6; of two names
    # that near, either may win: the tiny untrained model has many such near-ties)
    from bioel_core.index import ShardedIndex
    from bioel_core.tables import read_table

    text_of = dict(zip(*read_table(kb, "names", ["name_id", "name_norm"]).to_pydict().values()))
    stored = {}
    for shard in ShardedIndex(index).shards:
        for name_id, vector in zip(shard.name_ids, shard.stored_vectors(np.arange(shard.ntotal))):
            stored.setdefault(text_of[int(name_id)], vector)
    annotator = in_memory_spec(model_spec(model, [f"Disease={kb}"], None)("cpu"), {"Disease": stored}).open()
    figures, rows = link_rate(annotator, documents, "cpu", batch_size=3)
    expected = [r for doc in through_index for r in doc]
    link = ("concept_id", "vocabulary", "alt_ids", "matched_name", "score")
    assert [{k: v for k, v in r.items() if k not in link} for r in rows] == [
        {k: v for k, v in r.items() if k not in link} for r in expected
    ] and len(rows) > len(documents)
    assert max(abs(a["score"] - b["score"]) for a, b in zip(rows, expected)) < 1e-6
    assert sum(a["concept_id"] != b["concept_id"] for a, b in zip(rows, expected)) < len(rows) / 4
    # bioel embed's vectors as the script makes them: the index's before renormalization
    _, embedded = embed_rate(model, kb, "cpu", 256, None)
    assert embedded.keys() == stored.keys()
    assert max(float(np.abs(embedded[n] - stored[n]).max()) for n in stored) < 1e-6
    assert figures["documents"] == 4 and figures["annotations"] == len(rows) and figures["dead_letters"] == []

    out = tmp_path / "gpu_workers.json"
    without_beam_faiss_gx(
        f"""
import runpy, sys
sys.argv = ['gpu_workers.py', '--model', {model!r}, '--kb', 'Disease={kb}', '--input', {str(abstracts)!r},
            '--devices', 'cpu', 'cpu', '--limit', '4', '--embed-limit', '100', '--json', {str(out)!r}]
runpy.run_path({str(Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_workers.py")!r}, run_name='__main__')
""",
        tmp_path,
    )
    report = json.loads(out.read_text())
    assert report["documents"] == 4 and report["link"]["cpu"]["annotations"] == len(rows)
    embed = report["embed"]["cpu/Disease"]
    assert embed["names"] >= 100 and embed["failed"] == 0 and embed["names_per_s"] > 0
    same = report["compare"]["link/cpu-cpu"]
    assert same["rows"] == [len(rows), len(rows)] and same["identical"] == len(rows) and same["max_score_difference"] == 0.0
    assert report["compare"]["embed/Disease/cpu-cpu"]["max_abs_difference"] == 0.0


def test_gpu_workers_compares_annotations_row_by_row():
    from benchmarks.gpu_workers import compare_annotations

    def row(start, concept, score, nil=False):
        return {
            "doc_id": "1",
            "start": start,
            "end": start + 4,
            "entity_type": "Disease",
            "mention": "abcd",
            "concept_id": concept,
            "score": score,
            "nil": nil,
        }

    cpu = [row(0, "D1", 0.9), row(10, "D2", 0.8), row(20, "D3", 0.7), row(30, "D4", 0.6)]
    cuda = [row(0, "D1", 0.9), row(10, "D2", 0.8 + 3e-7), row(20, "D9", 0.71), row(40, "D5", 0.5)]
    c = compare_annotations(cpu, cuda)
    assert (c["rows"], c["identical"], c["same_span_and_concept"], c["other_concept"], c["only_first"], c["only_second"]) == (
        [4, 4],
        1,
        2,
        1,
        1,
        1,
    )
    assert c["max_score_difference"] == pytest.approx(3e-7)
    assert c["examples_other_concept"][0]["second"]["concept_id"] == "D9" and c["examples_only_first"][0]["start"] == 30
    # a composite mention's rows (one span, a row per concept) are matched in order, not collapsed
    composite = [row(0, "D1", 0.9), row(0, "D2", 0.8)]
    c = compare_annotations(composite, [row(0, "D1", 0.9), row(0, "D3", 0.8)])
    assert (c["identical"], c["other_concept"], c["only_first"]) == (1, 1, 0)
    c = compare_annotations(composite, composite[:1])
    assert (c["identical"], c["only_first"], c["examples_only_first"][0]["concept_id"]) == (1, 1, "D2")


def test_span_score_is_the_score_decode_spans_compares_with_its_threshold(bases):
    model = tiny(bases)
    with torch.no_grad():
        encoded = model.encode_document(TEXT)
        logits = model.span_logits(encoded)
        spans = model.decode_spans(encoded, logits, {"Chemical": 0.0, "Disease": 0.0})
        assert spans
        for s in spans:
            assert model.span_score(encoded, logits, s.start, s.end, s.entity_type) == pytest.approx(s.score, abs=1e-6)
        first = encoded.pieces[0]
        assert model.span_score(encoded, logits, first.start + 1, first.end, "Disease") is None  # splits a piece
        assert model.span_score(encoded, logits, first.start, first.end, "Gene") is None  # no such type


def test_both_detectors_link_an_undefined_short_form_only_where_its_prior_or_span_score_supports_it(collective_chain, tmp_path):
    from bioel_core.text.detect import StopList, defined_short_forms, is_short_form

    model, index, _, docs = collective_chain
    shipped = StopList.load(SAMPLE_DATA.parent / "models" / "stoplists" / "disease-medic.json")

    def run(support, priors=None):
        stop = tmp_path / "stop.json"
        StopList(shipped.counts, normalizer=shipped.normalizer, short_forms=priors or {}).save(stop)
        spec = AnnotatorSpec(
            model=model,
            indexes=(("Disease", index),),
            stop_lists=(("Disease", str(stop)),),
            short_form_support=() if support is None else (("Disease", support),),
        )
        return spec.open().annotate(docs)

    def undefined_short(runs):
        return [
            r["mention"]
            for d, rows in zip(docs, runs)
            for r in rows
            if is_short_form(r["mention"]) and r["mention"] == r["link_text"] and r["mention"] not in defined_short_forms(d)
        ]

    off = run(None)
    assert undefined_short(off) and run(0.0) == off  # the untrained model finds short spans; support 0 keeps all
    # no span score reaches 1: only a short form whose every training occurrence was gold is linked
    assert undefined_short(run(1.0)) == []
    kept = undefined_short(off)[0]
    assert set(undefined_short(run(1.0, {kept: (3, 3)}))) == {kept}


def test_a_span_of_the_models_that_its_types_stop_list_holds_is_no_mention(collective_chain, tmp_path):
    """The model made to find each dictionary name as a span: a name the stop list holds (learned or chosen) is left
    out whether the model or the dictionary found it; without the list it is a mention."""
    from bioel_core.text.detect import StopList

    model, index, _, docs = collective_chain
    shipped = StopList.load(SAMPLE_DATA.parent / "models" / "stoplists" / "disease-medic.json")
    dictionary = (
        AnnotatorSpec(model=model, indexes=(("Disease", index),), detector="dictionary").open().targets["Disease"].detector
    )
    names = {d.text: dictionary.detect(d) for d in docs}
    normalize = dictionary.normalizer  # the KB names' normalizer, as stop lists hold names

    def run(detector, chosen=None):
        stop = ()
        if chosen is not None:
            StopList({}, normalizer=shipped.normalizer, chosen=chosen).save(tmp_path / "stop.json")
            stop = (("Disease", str(tmp_path / "stop.json")),)
        annotator = AnnotatorSpec(model=model, indexes=(("Disease", index),), stop_lists=stop, detector=detector).open()
        document_model = annotator.document_model
        encode = document_model.encode_document

        def encode_document(text):
            encoded = encode(text)
            encoded.names = [(m.start, m.end) for m in names[text]]
            return encoded

        def decode_spans(encoded, logits, thresholds):  # exactly the dictionary's names
            pieces = encoded.pieces
            found = [
                (0.9, a, b, "Disease") for a, b in encoded.spans.tolist() if (pieces[a].start, pieces[b].end) in encoded.names
            ]
            return document_model._non_overlapping(encoded, found)

        document_model.encode_document, document_model.decode_spans = encode_document, decode_spans
        return [normalize(r["mention"]) for rows in annotator.annotate(docs) for r in rows]

    for detector in ("model", "both"):
        unstopped = run(detector)
        most = max(set(unstopped), key=unstopped.count)
        assert unstopped.count(most) >= 2
        stopped = run(detector, {most: "chosen in this test"})
        assert most not in stopped and len(stopped) == len(unstopped) - unstopped.count(most)


def test_a_nil_span_of_the_models_gives_way_to_the_linked_names_inside_it_where_its_type_says_so(collective_chain):
    """The model made to read each dictionary name with the word before it ("of Wilson disease"): its spans link far
    from any name, NIL at a threshold only an exact name reaches; with `inner_names` each gives way to the names."""
    from bioel_core.models.collective import DetectedSpan
    from bioel_core.settings import SettingsError

    model, index, _, docs = collective_chain

    def run(inner_names=()):
        spec = AnnotatorSpec(
            model=model, indexes=(("Disease", index),), nil_thresholds=(("Disease", 0.9999),), inner_names=inner_names
        )
        annotator = spec.open()
        document_model, detector = annotator.document_model, annotator.targets["Disease"].detector
        names = {d.text: [(m.start, m.end) for m in detector.detect(d)] for d in docs}
        encode = document_model.encode_document

        def encode_document(text):
            encoded = encode(text)
            encoded.names = names[text]
            return encoded

        def decode_spans(encoded, logits, thresholds):
            longer = {}  # per name, the shortest span of the model's ending with it and starting before it
            for a, b in encoded.spans.tolist():
                start, end = encoded.pieces[a].start, encoded.pieces[b].end
                for name in encoded.names:
                    if start < name[0] and end == name[1] and (name not in longer or start > longer[name].start):
                        longer[name] = DetectedSpan(start, end, "Disease", 0.9, (a, b))
            return document_model._non_overlapping(encoded, [(0.9, *s.piece_span, "Disease") for s in longer.values()])

        document_model.encode_document, document_model.decode_spans = encode_document, decode_spans
        return spec, annotator.annotate(docs)

    off_spec, off = run()
    on_spec, on = run(("Disease",))
    replaced = 0
    for before, after, document in zip(off, on, docs):
        assert [r for r in before if not r["nil"]] == [r for r in after if r in before and not r["nil"]]  # linked stay
        new = [r for r in after if r not in before]
        for r in new:  # a name of the KB inside a span that was NIL, linked exactly
            outer = [b for b in before if b["start"] <= r["start"] and r["end"] <= b["end"] and b not in after]
            assert len(outer) == 1 and outer[0]["nil"] and not r["nil"] and r["score"] >= 0.9999
            assert document.text[r["start"] : r["end"]] == r["mention"]
        gone = [b for b in before if b not in after]
        assert all(any(b["start"] <= r["start"] and r["end"] <= b["end"] for r in new) for b in gone)
        assert [(r["start"], r["end"]) for r in after] == sorted((r["start"], r["end"]) for r in after)
        replaced += len(gone)
    assert replaced > 5
    assert on_spec.settings_sha256() != off_spec.settings_sha256()
    with pytest.raises(SettingsError, match=r"^types\.Chemical\.index: required: its inner_names is given"):
        AnnotatorSpec(model=model, indexes=(("Disease", index),), inner_names=("Chemical",))


def changed(folder: str, out: Path, side: str) -> str:
    """The collective model at `folder` with its document side (`document`: transformer and heads) or its name
    encoder (`names`) changed, as a retraining would, saved to `out`."""
    model = CollectiveEncoder.load(folder)
    with torch.no_grad():
        if side == "document":
            next(model.document.parameters()).add_(0.01)
            model.mention.weight.add_(0.05 * torch.randn(model.mention.weight.shape, generator=torch.Generator().manual_seed(1)))
        else:
            model.names.model.embeddings.word_embeddings.weight.add_(0.01)
    return str(model.save(out))


def test_a_retrained_document_side_links_against_the_index_of_its_unchanged_name_encoder(collective_chain, tmp_path):
    """The index's vectors are the name encoder's: a document side retrained on the same name encoder links against
    them as against its own fresh index; a changed name encoder is refused, naming both fingerprints."""
    from bioel_core.embeddings import ModelMismatchError, check_model_matches
    from bioel_core.index import read_index_manifest
    from bioel_core.linking.dense import DenseLinker
    from bioel_core.settings import SettingsError
    from bioel_core.tables import read_table

    folder, index, corpus, _ = collective_chain
    emb, kb = Path(index).parent / "emb", Path(index).parent / "kb"
    original, retrained = CollectiveEncoder.load(folder), changed(folder, tmp_path / "retrained", "document")
    renamed = changed(folder, tmp_path / "renamed", "names")
    model = CollectiveEncoder.load(retrained)
    assert model.fingerprint() != original.fingerprint() and model.vectors_fingerprint() == original.vectors_fingerprint()
    assert read_index_manifest(index)["model"]["vectors_fingerprint"] == original.names.fingerprint()

    def link(index_dir: str, out: str) -> tuple[dict, list]:
        spec = AnnotatorSpec(model=retrained, indexes=(("Disease", index_dir),), detector="model")
        manifest = link_corpus.run([str(corpus)], "pubtator", str(tmp_path / out), spec, pipeline_options([]))
        return manifest, read_table(tmp_path / out, "annotations").to_pylist()

    old_manifest, old_rows = link(index, "old")
    options = pipeline_options([])
    embed_names.run(retrained, str(kb), str(tmp_path / "emb"), options, num_shards=2)
    build_index.run(str(tmp_path / "emb"), str(tmp_path / "index"), options, num_shards=2, spec=IndexSpec("flat"))
    own_manifest, own_rows = link(str(tmp_path / "index"), "own")
    assert all(old_manifest["reconciliation"].values()) and old_rows and old_rows == own_rows
    # the annotations' model is the whole retrained model, not the one the index was built with
    assert old_manifest["model_version"] == own_manifest["model_version"] == model.fingerprint()
    check_model_matches(emb, model)
    DenseLinker.from_index(index, encoder=model)

    names_changed = CollectiveEncoder.load(renamed)
    found, recorded = names_changed.vectors_fingerprint()[:12], original.vectors_fingerprint()[:12]
    with pytest.raises(
        SettingsError, match=f"^types.Disease.model: the model .*fingerprint {found}.* the index .* built with \\({recorded}\\)"
    ):
        AnnotatorSpec(model=renamed, indexes=(("Disease", index),), detector="model").versions()
    with pytest.raises(ModelMismatchError, match=f"fingerprint {recorded}.*this model has fingerprint {found}"):
        DenseLinker.from_index(index, encoder=names_changed)
    with pytest.raises(ModelMismatchError, match=f"fingerprint {recorded}.*this model has fingerprint {found}"):
        check_model_matches(emb, names_changed)


def test_an_index_that_recorded_only_the_whole_model_is_checked_against_the_whole_model(collective_chain, tmp_path):
    """An index built before the vectors' fingerprint was recorded: the model must be the very one that built it."""
    from bioel_core.settings import SettingsError

    folder, index, _, _ = collective_chain
    old = tmp_path / "old-index"
    shutil.copytree(index, old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["model"]["vectors_fingerprint"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    retrained = changed(folder, tmp_path / "retrained", "document")
    found, recorded = CollectiveEncoder.load(retrained).fingerprint()[:12], manifest["model"]["fingerprint"][:12]
    assert AnnotatorSpec(model=folder, indexes=(("Disease", str(old)),), detector="model").versions()
    with pytest.raises(SettingsError, match=f"fingerprint {found}.* built with \\({recorded}\\)"):
        AnnotatorSpec(model=retrained, indexes=(("Disease", str(old)),), detector="model").versions()
