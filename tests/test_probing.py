import random
from pathlib import Path

import pytest
import torch

from bioel_core.evaluation.probing import attention_window, probe, shuffle_ngrams
from bioel_core.linking import NameSet

CORPORA = Path(__file__).resolve().parent / "fixtures" / "corpora" / "biosyn"


def test_shuffle_ngrams_keeps_words_chunks_and_composite_parts():
    rng = random.Random(0)
    out = shuffle_ngrams("a b c d e f|g h", 2, rng)
    left, right = out.split("|")
    assert sorted(left.split()) == list("abcdef") and sorted(right.split()) == ["g", "h"]
    pairs = [left.split()[i : i + 2] for i in range(0, 6, 2)]
    assert sorted(pairs) == [["a", "b"], ["c", "d"], ["e", "f"]]  # bigrams move whole
    assert shuffle_ngrams("x y z", 3, random.Random(1)) == "x y z"


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from transformers import AutoTokenizer, BertConfig, BertModel

    models = pytest.importorskip("bioel_core.models")
    try:
        base = models.default_base_checkpoint()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    folder = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    BertModel(
        BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    ).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return models.TransformerEncoder(folder, pooling="cls")


def test_a_window_wider_than_the_text_changes_nothing_and_a_narrow_one_does(tiny_bert):
    texts = ["hereditary nonpolyposis colorectal cancer syndrome", "ataxia"]
    plain = tiny_bert.encode(texts)
    with attention_window(tiny_bert, 99):
        wide = tiny_bert.encode(texts)
    with attention_window(tiny_bert, 1):
        narrow = tiny_bert.encode(texts)
    assert torch.allclose(torch.from_numpy(plain), torch.from_numpy(wide), atol=1e-5)
    assert not torch.allclose(torch.from_numpy(plain[:1]), torch.from_numpy(narrow[:1]), atol=1e-3)
    assert torch.isfinite(torch.from_numpy(narrow)).all()
    assert torch.allclose(torch.from_numpy(tiny_bert.encode(texts)), torch.from_numpy(plain), atol=1e-6)  # hooks removed


def test_probe_reports_every_condition(tiny_bert):
    from bioel_core.corpora.biosyn import read_query_folder

    names = NameSet.from_biosyn(CORPORA / "test_dictionary.txt")
    queries = [q for q in read_query_folder(CORPORA / "processed_test") if q.concept_ids]
    rows = probe(tiny_bert, names, queries, k=2)
    assert [r["condition"] for r in rows] == [
        "original",
        "shuffle unigrams",
        "shuffle bigrams",
        "shuffle trigrams",
        "context size = 3",
        "context size = 5",
    ]
    assert rows[0]["change_pct"] == 0.0 and all(0 <= r["acc@1"] <= 100 and r["n"] == len(queries) for r in rows)
