"""The models shipped under models/: they load from safetensors alone, are what their cards say, and link."""

import json

import numpy as np
import pytest

from bioel_core.linking.dense import DEFAULT_MODEL, open_model
from bioel_core.models import ResCNNEncoder


@pytest.fixture(scope="module")
def default_model():
    if not DEFAULT_MODEL.is_dir():
        pytest.fail(f"the default disease model is missing: {DEFAULT_MODEL}")
    return open_model(None)


def test_default_model_is_the_carded_rescnn(default_model):
    card = json.loads((DEFAULT_MODEL / "card.json").read_text())
    assert isinstance(default_model, ResCNNEncoder)
    assert default_model.fingerprint() == card["fingerprint"]
    assert sum(p.numel() for p in default_model.parameters() if p.requires_grad) <= 2_000_000
    assert not list(DEFAULT_MODEL.glob("*.bin")) and not list(DEFAULT_MODEL.glob("*.pt"))
    assert {"ncbi-disease/test", "bc5cdr-disease/test"} <= set(card["scores"])


def test_default_model_puts_synonyms_nearest(default_model):
    # MEDIC synonyms the model was aligned on, and a training-style mention; each must find its own concept
    names = ["breast neoplasms", "malignant tumor of breast", "diabetes mellitus type 2", "noninsulin dependent diabetes",
             "alzheimer disease", "senile dementia of the alzheimer type"]
    queries = ["breast cancer", "type ii diabetes", "alzheimers disease"]
    concept_of = [0, 0, 1, 1, 2, 2]
    scores = default_model.encode(queries) @ default_model.encode(names).T
    assert [concept_of[i] for i in np.argmax(scores, axis=1)] == [0, 1, 2]
