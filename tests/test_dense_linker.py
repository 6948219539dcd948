import numpy as np
import pytest
import torch

from bioel_core.linking import NameSet, build_linker, load_linker

PAIRS = [
    ("breast cancer", ("D001943",)),
    ("breast carcinoma", ("D001943",)),
    ("ovarian cancer", ("D010051",)),
    ("ataxia telangiectasia", ("D001260", "208900")),
    ("louis bar syndrome", ("D001260", "208900")),
    ("colon cancer", ("D003110",)),
    ("colon cancer", ("D015179",)),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    models = pytest.importorskip("bioel_core.models")
    torch.manual_seed(0)
    try:
        encoder = models.ResCNNEncoder(num_blocks=1, filters=16, width=32)
    except FileNotFoundError as err:
        pytest.skip(str(err))
    return encoder.save(tmp_path_factory.mktemp("model") / "rescnn")


@pytest.fixture(scope="module")
def names():
    return NameSet.from_pairs(PAIRS)


def test_dense_top_k_equals_a_brute_force_reference(model_dir, names):
    linker = build_linker("dense", names, model=str(model_dir))
    queries = ["breast tumour", "ovary cancer", "bar syndrome louis"]
    got = linker.link(queries, k=3)
    q = linker.encoder.encode([linker.normalize(t) for t in queries])
    scores = q @ linker.embeddings.T
    for row, cands in zip(scores, got):
        best_rows = np.argsort(-row, kind="stable")
        # a row stands for every entry with its name, each with the row's score
        entries = [(linker.exact.row_names[r], row[r]) for r in best_rows for _ in linker.exact.entries(r)][:3]
        assert [c.name for c in cands] == [n for n, _ in entries]
        assert [c.score for c in cands] == pytest.approx([s for _, s in entries], abs=1e-5)


def test_exact_match_first_with_every_id_of_the_name(model_dir, names):
    linker = build_linker("dense", names, model=str(model_dir))
    cands = linker.link(["Colon-Cancer"], k=3)[0]
    assert [(c.name, c.concept_ids, c.score) for c in cands[:2]] == [
        ("colon cancer", ("D003110",), 1.0),
        ("colon cancer", ("D015179",), 1.0),
    ]
    assert cands[2].name != "colon cancer"


def test_save_load_gives_the_same_answers_and_refuses_a_changed_model(tmp_path, model_dir, names):
    linker = build_linker("dense", names, model=str(model_dir))
    saved = linker.save(tmp_path / "linker")
    again = load_linker(saved)
    queries = ["breast tumour", "telangiectasia ataxia"]
    assert linker.link(queries, k=4) == again.link(queries, k=4)
    from bioel_core.models import load_encoder

    changed = load_encoder(model_dir)
    with torch.no_grad():
        changed.projection.weight.add_(0.01)
    changed.save(model_dir)
    with pytest.raises(ValueError, match="not the one these embeddings were made with"):
        load_linker(saved)


def test_missing_model_folder_is_a_clear_error(names, tmp_path):
    with pytest.raises(FileNotFoundError, match="model folder not found"):
        build_linker("dense", names, model=str(tmp_path / "nope"))


def test_hybrid_with_zero_weight_ranks_like_dense_and_round_trips(tmp_path, model_dir, names):
    hybrid = build_linker("hybrid", names, model=str(model_dir), sparse_weight=0.0)
    dense = build_linker("dense", names, model=str(model_dir))
    queries = ["breast tumour", "ovary cancer", "bar syndrome louis"]
    assert [[c.name for c in cs] for cs in hybrid.link(queries, k=3)] == [[c.name for c in cs] for cs in dense.link(queries, k=3)]
    hybrid.sparse_weight = 1.0
    got = hybrid.link(queries, k=3)
    # the combined score is the dense cosine plus the TF-IDF cosine of the same name
    q = hybrid.dense.encoder.encode([hybrid.normalize(t) for t in queries])
    tfidf = build_linker("tfidf", names)
    for j, cands in enumerate(got):
        for c in cands:
            row = hybrid.exact.row_of[c.name]
            sparse = (tfidf.vectorize([hybrid.normalize(queries[j])]) @ tfidf.matrix[row].T).toarray()[0, 0]
            assert c.score == pytest.approx(float(q[j] @ hybrid.dense.embeddings[row]) + sparse, abs=1e-5)
    again = load_linker(hybrid.save(tmp_path / "hybrid"))
    assert again.link(queries, k=3) == got
