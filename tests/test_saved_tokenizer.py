"""SavedTokenizer against transformers' own reading of the same folders: the same pipeline, special tokens, ids and
fingerprint digest for every tokenizer the repository ships and for a checkpoint transformers saved; transformers for
what it cannot mirror; and a shipped document model opened without importing transformers at all."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from bioel_core.models.base import tokenizer_digest
from bioel_core.models.checkpoints import default_base_checkpoint, load_tokenizer
from bioel_core.models.saved_tokenizer import SavedTokenizer
from test_models import make_tiny_bert

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted({p.parent for p in (ROOT / "models").rglob("tokenizer.json")})
TEXT = "Familial Mediterranean fever (FMF) and cisplatin-induced nephrotoxicity: 5-FU, IL-2 [Ca2+] naïve Ménière's."


def assert_read_alike(folder: Path) -> None:
    ours, theirs = SavedTokenizer.read(folder), AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert ours is not None, folder
    assert tokenizer_digest(ours) == tokenizer_digest(theirs)
    assert ours.special_tokens_map == theirs.special_tokens_map
    ids = lambda t: (t.pad_token_id, t.cls_token_id, t.sep_token_id, t.unk_token_id)  # noqa: E731
    assert ids(ours) == ids(theirs)
    assert len(ours) == len(theirs) and ours.get_vocab() == theirs.get_vocab()
    a, b = ours.backend_tokenizer.encode(TEXT), theirs.backend_tokenizer.encode(TEXT)
    assert (a.ids, a.offsets) == (b.ids, b.offsets)


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: str(p.relative_to(ROOT / "models")))
def test_every_shipped_tokenizer_reads_as_transformers_reads_it(folder):
    assert_read_alike(folder)


def test_a_checkpoint_transformers_saved_reads_alike_and_saves_back(tmp_path):
    folder = make_tiny_bert(tmp_path / "tiny")
    assert_read_alike(folder)
    SavedTokenizer.read(folder).save_pretrained(tmp_path / "again")
    assert_read_alike(tmp_path / "again")
    assert tokenizer_digest(SavedTokenizer.read(tmp_path / "again")) == tokenizer_digest(SavedTokenizer.read(folder))


def test_the_pipeline_is_saved_as_it_now_is(tmp_path):
    # TransformerEncoder prepends sentence-transformers' lowercasing to the pipeline it read
    from tokenizers import normalizers

    saved = SavedTokenizer.read(make_tiny_bert(tmp_path / "tiny"))
    saved.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.Lowercase(), saved.backend_tokenizer.normalizer])
    saved.save_pretrained(tmp_path / "changed")
    assert tokenizer_digest(SavedTokenizer.read(tmp_path / "changed")) == tokenizer_digest(saved)
    assert "Lowercase" in (tmp_path / "changed" / "tokenizer.json").read_text()


def with_config(folder: Path, target: Path, **changes) -> Path:
    shutil.copytree(folder, target)
    config = json.loads((target / "tokenizer_config.json").read_text())
    config.update(changes)
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    return target


@pytest.mark.parametrize(
    "changes",
    [
        {"added_tokens_decoder": {"0": {"content": "[PAD]", "special": True}}},
        {"extra_special_tokens": {"image_token": "[MASK]"}},
        {"backend": "sentencepiece"},
        {"cls_token": {"__type": "AddedToken", "content": "[CLS]", "lstrip": True}},
        {"bos_token": "<s>"},  # a special token the vocabulary lacks: transformers would add it
    ],
    ids=["added-tokens", "extra-special-tokens", "other-backend", "token-as-object", "token-not-in-vocabulary"],
)
def test_what_transformers_would_change_is_left_to_transformers(tmp_path, changes):
    folder = with_config(make_tiny_bert(tmp_path / "tiny"), tmp_path / "changed", **changes)
    assert SavedTokenizer.read(folder) is None
    assert not isinstance(load_tokenizer(folder), SavedTokenizer)


def test_a_package_checkpoint_is_read_by_transformers():
    # MiniLM's folder has a special_tokens_map.json and a vocab.txt: transformers decides what they mean
    folder = default_base_checkpoint()
    assert SavedTokenizer.read(folder) is None
    assert not isinstance(load_tokenizer(folder), SavedTokenizer)


def test_a_shipped_document_model_opens_without_importing_transformers():
    model = ROOT / "models" / "cdr-ncbi-collective-1layer-ff384"
    probe = (
        "import sys; from bioel_core.models import open_model; "
        f"m = open_model({str(model)!r}); m.encode_document('Cisplatin nephrotoxicity.'); "
        "print(type(m.tokenizer).__name__, any(n.split('.')[0] == 'transformers' for n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert out == ["SavedTokenizer", "False"]
