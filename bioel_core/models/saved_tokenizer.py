"""A tokenizer transformers saved, read back with `tokenizers` alone.

Importing transformers takes about a second, and a link worker needs nothing of it but its tokenizers: the models
here run their own BERT (bioel_core.models.bert_inference) and split text with the Rust pipeline (`backend_tokenizer`). A
folder that transformers' `save_pretrained` wrote from a fast tokenizer (every model folder bioel saves) holds that
pipeline as it was (tokenizer.json) and the special tokens by name (tokenizer_config.json): `SavedTokenizer.read`
gives what the models ask of transformers' tokenizer from those two files, and None for any folder it cannot read
as transformers would (then `load_tokenizer` asks transformers). Model fingerprints cover the tokenizer
(`tokenizer_digest`), so a folder read otherwise than transformers reads it would fail its card's check on load;
tests/test_saved_tokenizer.py reads every shipped model both ways.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tokenizers import Tokenizer

from bioel_core.guards import read_json_object

PIPELINE_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
# transformers' named special tokens (PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES), in its order
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# what would make transformers change the pipeline or the special tokens on load: then it reads the folder itself
_TRANSFORMERS_ONLY = ("added_tokens_decoder", "extra_special_tokens", "additional_special_tokens", "auto_map")
_SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"


class SavedTokenizer:
    """What the models use of a transformers fast tokenizer: `backend_tokenizer`, the special tokens and their ids,
    `len`, `get_vocab` and `save_pretrained` (the pipeline as it now is, the config as it was read)."""

    def __init__(self, folder: Path, backend: Tokenizer, special: dict[str, str]):
        self.folder = folder
        self.backend_tokenizer = backend
        self.special_tokens_map = special

    @classmethod
    def read(cls, folder: str | Path) -> SavedTokenizer | None:
        folder = Path(folder)
        pipeline, config_file = folder / PIPELINE_FILE, folder / CONFIG_FILE
        if not pipeline.is_file() or not config_file.is_file() or (folder / _SPECIAL_TOKENS_MAP_FILE).exists():
            return None
        config = read_json_object(config_file, "tokenizer config")
        if config.get("backend") != "tokenizers" or any(config.get(key) for key in _TRANSFORMERS_ONLY):
            return None
        special = {role: config[role] for role in SPECIAL_TOKENS if config.get(role) is not None}
        if not all(isinstance(token, str) for token in special.values()):
            return None
        backend = Tokenizer.from_file(str(pipeline))
        if any(backend.token_to_id(token) is None for token in special.values()):
            return None
        return cls(folder, backend, special)

    def convert_tokens_to_ids(self, token: str) -> int | None:
        return self.backend_tokenizer.token_to_id(token)

    def _id(self, role: str) -> int | None:
        token = self.special_tokens_map.get(role)
        return None if token is None else self.convert_tokens_to_ids(token)

    pad_token_id = property(lambda self: self._id("pad_token"))
    cls_token_id = property(lambda self: self._id("cls_token"))
    sep_token_id = property(lambda self: self._id("sep_token"))
    unk_token_id = property(lambda self: self._id("unk_token"))

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def save_pretrained(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backend_tokenizer.save(str(directory / PIPELINE_FILE))
        if (self.folder / CONFIG_FILE).resolve() != (directory / CONFIG_FILE).resolve():
            shutil.copyfile(self.folder / CONFIG_FILE, directory / CONFIG_FILE)
