"""Exact inner-product search without FAISS (bioel_core.index.exact): what a flat FAISS index answers, ties by row,
in blocks of queries; and the in-memory dense linker that searches with it."""

import faiss
import numpy as np
import pytest

from bioel_core.index.exact import ExactInnerProduct


def brute_force(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    scores = queries @ vectors.T
    rows = np.array([sorted(range(len(vectors)), key=lambda r: (-s[r], r))[:k] for s in scores])
    return np.take_along_axis(scores, rows, axis=1), rows


@pytest.mark.parametrize("block_elements", [1, 50, 1 << 24])
def test_answers_as_a_flat_faiss_index_whatever_the_query_blocks(block_elements):
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    queries = rng.normal(size=(7, 8)).astype(np.float32)
    scores, rows = ExactInnerProduct(vectors, block_elements=block_elements).search(queries, 5)
    flat = faiss.IndexFlatIP(8)
    flat.add(vectors)
    faiss_scores, faiss_rows = flat.search(queries, 5)
    assert np.array_equal(rows, faiss_rows)
    assert np.allclose(scores, faiss_scores, atol=1e-5)


def test_ties_are_broken_by_row_also_across_the_cut_and_k_past_the_count_pads():
    vectors = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    query = np.array([[0.0, 1.0]], dtype=np.float32)
    _, rows = ExactInnerProduct(vectors).search(query, 2)
    assert rows.tolist() == [[0, 2]]  # rows 0, 2 and 4 tie: the lowest two, whatever topk returned
    scores, rows = ExactInnerProduct(vectors).search(query, 7)
    assert rows.tolist() == [[0, 2, 4, 1, 3, -1, -1]]
    assert scores[0, 5] == -np.inf and scores[0, 0] == 1.0
    expected_scores, expected_rows = brute_force(vectors, query, 5)
    assert np.array_equal(rows[:, :5], expected_rows) and np.array_equal(scores[:, :5], expected_scores)
    empty_scores, empty_rows = ExactInnerProduct(vectors).search(np.zeros((0, 2), dtype=np.float32), 3)
    assert empty_scores.shape == (0, 3) and empty_rows.shape == (0, 3)


# what a GPU worker image lacks (benchmarks/gpu_workers.py, `bioel train collective` there)
NOT_INSTALLED = ("apache_beam", "faiss", "great_expectations")
BLOCK = f"import sys\nfor m in {NOT_INSTALLED!r}:\n    sys.modules[m] = None  # importing it now fails\n"


def without_beam_faiss_gx(code: str, cwd) -> str:
    """Runs `code` in a Python where Beam, FAISS and Great Expectations cannot be imported; its stdout."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", BLOCK + code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_in_memory_dense_linker_and_the_collective_training_need_no_faiss(tmp_path):
    """The in-memory dense linker and the collective model's training searched FAISS flat indexes: a machine without
    FAISS (a GPU worker image) could neither link through the annotator nor train. Both now search exactly without
    it; the linker gives the brute-force candidates."""
    out = without_beam_faiss_gx(
        """
import numpy as np, torch
import bioel_core.training.collective, pipelines.cli_train
from bioel_core.linking import NameSet
from bioel_core.linking.dense import DenseLinker
from bioel_core.models import TransformerEncoder
from test_models import make_tiny_bert
encoder = TransformerEncoder(make_tiny_bert('bert'), pooling='mean')
names = NameSet.from_pairs([('heart attack', ('D1',)), ('myocardial infarction', ('D1',)), ('type 2 diabetes', ('D2',)),
                            ('breast cancer', ('D3',))])
linker = DenseLinker(names, encoder, 'bert')
query = 'cancer of the breast'
found = linker.link([query], k=3)[0]
scores = linker.encoder.encode([linker.normalize(query)]) @ linker.embeddings.T
best = [linker.exact.row_names[r] for r in np.argsort(-scores[0], kind='stable')[:3]]
print([c.name for c in found] == best, len(found))
""",
        tmp_path,
    )
    assert out.split() == ["True", "3"]
