"""The models shipped under models/: they load from safetensors alone, are what their cards say, and link."""

import json
from pathlib import Path

import numpy as np
import pytest

from bioel_core.linking.rerank import ConceptCandidate, open_reranker
from bioel_core.linking.rerank_ensemble import RerankerEnsemble
from bioel_core.models import DEFAULT_MODEL, CrossEncoder, GenerativeModel, ResCNNEncoder, load_encoder, open_model
from bioel_core.models.base import FINGERPRINT_SCHEME, RERANKER_ENSEMBLE, read_config
from bioel_core.models.cards import CARD_JSON, CARD_MD, write_card

SHIPPED = sorted(p.parent for p in (Path(__file__).resolve().parents[1] / "models").glob("*/card.json"))


@pytest.fixture(scope="module", params=SHIPPED, ids=[p.name for p in SHIPPED])
def shipped(request):
    reranker_ensemble = read_config(request.param)["encoder_type"] == RERANKER_ENSEMBLE
    return request.param, open_reranker(request.param) if reranker_ensemble else load_encoder(request.param)


def test_the_default_disease_model_is_a_shipped_rescnn():
    assert DEFAULT_MODEL.resolve() in SHIPPED, f"the default disease model is missing: {DEFAULT_MODEL}"
    model = open_model(None)
    assert isinstance(model, ResCNNEncoder)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) <= 2_000_000


def test_shipped_model_is_what_its_card_says(shipped):
    folder, model = shipped
    card = json.loads((folder / "card.json").read_text())
    assert model.fingerprint() == card["fingerprint"] and card["fingerprint_scheme"] == FINGERPRINT_SCHEME
    assert model.config()["encoder_type"] == card["encoder"]["encoder_type"]
    assert not [p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pkl", ".pickle", ".ckpt")]
    tested = {"ncbi-disease/test", "bc5cdr-disease/test"} if _domain(folder) == "disease" else {"bc5cdr-chemical-mesh/test"}
    assert tested <= set(card["scores"])


def test_shipped_card_markdown_is_rendered_from_its_json(shipped, tmp_path):
    """MODEL_CARD.md is what `write_card` makes of card.json: no hand edit the next `--record-in-card` would lose
    (or fail on)."""
    folder, _ = shipped
    write_card(tmp_path, json.loads((folder / CARD_JSON).read_text()))
    assert (tmp_path / CARD_MD).read_text() == (folder / CARD_MD).read_text()


def _domain(folder: Path) -> str:
    return "chemical" if folder.name.startswith("chemical") else "disease"


# synonyms of the KB the models were aligned on (MEDIC; MeSH tree D) and training-style mentions
SYNONYMS = {
    "disease": (
        [
            "breast neoplasms",
            "malignant tumor of breast",
            "diabetes mellitus type 2",
            "noninsulin dependent diabetes",
            "alzheimer disease",
            "senile dementia of the alzheimer type",
        ],
        ["breast cancer", "type ii diabetes", "alzheimers disease"],
    ),
    "chemical": (
        ["acetaminophen", "paracetamol", "acetylsalicylic acid", "aspirin", "levodopa", "l dopa"],
        ["tylenol", "asa", "l-dopa"],
    ),
}


def test_shipped_model_puts_synonyms_nearest(shipped):
    # each query must find its own concept among three, two names each
    folder, model = shipped
    names, queries = SYNONYMS[_domain(folder)]
    concept_of = [0, 0, 1, 1, 2, 2]
    if isinstance(model, CrossEncoder):  # a reranker scores (mention, a concept's names) pairs
        concepts = [" ; ".join(names[2 * c : 2 * c + 2]) for c in range(3)]
        scores = np.array([model.score([(q, c) for c in concepts]) for q in queries])
        concept_of = [0, 1, 2]
    elif isinstance(model, RerankerEnsemble):  # its members' weighted scores of each concept, read as its names
        concepts = [ConceptCandidate((f"C{c}",), tuple(names[2 * c : 2 * c + 2]), 0.0) for c in range(3)]
        scores = np.array(model.rerank_scores(queries, [concepts] * len(queries)))
        concept_of = [0, 1, 2]
    elif isinstance(model, GenerativeModel):  # a generative model writes the names: the likeliest must be the concept's
        scores = np.array(model.score_names(queries, [names] * len(queries)))
    else:
        scores = model.encode(queries) @ model.encode(names).T
    assert [concept_of[i] for i in np.argmax(scores, axis=1)] == [0, 1, 2]
