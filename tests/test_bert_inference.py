"""BertForInference against transformers' BertModel: the same token states bit for bit, the same weights under the
same names (so the same fingerprints and saved folders), and transformers for anything that is not a plain BERT."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertModel

from bioel_core.models import CollectiveEncoder, TransformerEncoder, open_model
from bioel_core.models.bert_inference import BertForInference
from test_models import make_tiny_bert, minilm, without_pooler  # noqa: F401 (minilm: a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


def states(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state


def windows_of(vocab: int, lengths, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (1, n), generator=generator) for n in lengths]


@pytest.mark.parametrize("checkpoint", ["tiny", "minilm"])
def test_token_states_are_bertmodels_bit_for_bit(checkpoint, tiny_bert, request):
    folder = tiny_bert if checkpoint == "tiny" else request.getfixturevalue("minilm")
    reference = BertModel.from_pretrained(folder, local_files_only=True, use_safetensors=True, dtype=torch.float32).eval()
    lean = BertForInference.from_folder(folder)
    assert lean is not None
    lengths = (1, 2, 7, 31, 64) if checkpoint == "tiny" else (1, 9, 77, 300, 512)
    for ids in windows_of(reference.config.vocab_size, lengths):
        assert torch.equal(states(lean, ids), states(reference, ids)), ids.shape
    # the same weights under the same names: what a model's fingerprint and saved folder are made of
    ours, theirs = lean.state_dict(), reference.state_dict()
    assert sorted(ours) == sorted(theirs)
    assert all(torch.equal(ours[k], theirs[k]) and ours[k].dtype == theirs[k].dtype for k in ours)


def test_a_checkpoint_without_a_pooler_has_none_as_transformers_drops_it(tiny_bert, tmp_path):
    lean = BertForInference.from_folder(without_pooler(tiny_bert, tmp_path / "no-pooler"))
    assert lean is not None and not any(k.startswith("pooler.") for k in lean.state_dict())


def test_a_saved_folder_loads_back_in_transformers_with_the_same_states(tiny_bert, tmp_path):
    lean = BertForInference.from_folder(tiny_bert)
    lean.save_pretrained(tmp_path / "saved", state_dict=lean.state_dict())
    reloaded = BertModel.from_pretrained(tmp_path / "saved", local_files_only=True, use_safetensors=True).eval()
    ids = windows_of(lean.config.vocab_size, (20,))[0]
    assert torch.equal(states(reloaded, ids), states(lean, ids))


@pytest.mark.parametrize(
    "change",
    [{"position_embedding_type": "relative_key"}, {"hidden_act": "relu"}, {"is_decoder": True}, {"model_type": "roberta"}],
)
def test_anything_but_a_plain_bert_is_left_to_transformers(tiny_bert, tmp_path, change):
    folder = shutil.copytree(tiny_bert, tmp_path / "other")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    assert BertForInference.from_folder(folder) is None


def test_a_checkpoint_lacking_a_layers_weight_is_left_to_transformers_to_refuse(tiny_bert, tmp_path):
    folder = shutil.copytree(tiny_bert, tmp_path / "lacking")
    weights = load_file(folder / "model.safetensors")
    del weights["encoder.layer.1.output.dense.weight"]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    assert BertForInference.from_folder(folder) is None


def test_a_padded_sequence_is_refused(tiny_bert):
    ids = torch.tensor([[2, 5, 6, 0]])
    with pytest.raises(ValueError, match="unpadded"):
        BertForInference.from_folder(tiny_bert)(ids, attention_mask=torch.tensor([[1, 1, 1, 0]]))


def test_a_saved_collective_model_loads_for_inference_with_its_fingerprint_and_its_passes(tiny_bert, tmp_path):
    names = TransformerEncoder(tiny_bert, pooling="mean").save(tmp_path / "names")
    torch.manual_seed(0)
    trained = CollectiveEncoder(tiny_bert, open_model(str(names)), ["Disease"]).eval()  # as training builds it
    assert isinstance(trained.document, BertModel)
    loaded = CollectiveEncoder.load(trained.save(tmp_path / "collective"))
    assert isinstance(loaded.document, BertForInference)
    assert loaded.fingerprint() == trained.fingerprint()
    text = "Familial breast and ovarian cancer of the colon. " * 3
    with torch.no_grad():
        assert torch.equal(loaded.encode_document(text).states, trained.encode_document(text).states)
    # and saved again from the inference form, the same model
    assert CollectiveEncoder.load(loaded.save(tmp_path / "again")).fingerprint() == trained.fingerprint()


def test_opening_a_document_model_never_imports_transformers_modeling_code(tiny_bert, tmp_path):
    names = TransformerEncoder(tiny_bert, pooling="mean").save(tmp_path / "names")
    CollectiveEncoder(tiny_bert, open_model(str(names)), ["Disease"]).save(tmp_path / "collective")
    # the name encoder here is a transformers model itself: open only the document side in the child
    probe = (
        "import sys; from bioel_core.models.bert_inference import BertForInference; "
        f"m = BertForInference.from_folder({str(tmp_path / 'collective' / 'document')!r}); "
        "print(type(m).__name__, 'transformers.modeling_utils' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["BertForInference", "False"]
