"""`GenerativeModel`: an encoder-decoder that links a mention by writing one of the KB's names (GenBioEL,
`../shared/papers/003_*`), warm-started from a BERT checkpoint (the packaged all-MiniLM-L6-v2).

Encoder input: `[CLS] left context [START] mention [END] right context [SEP]` (the markers are the checkpoint's
`[unused0]`/`[unused1]` tokens, so the vocabulary is the checkpoint's own). Decoder: `[CLS] mention is NAME
[SEP]`; the prompt `mention is` (the paper's decoder prompt) is teacher-forced and left out of the loss, so
the model learns to write the name. At inference the prompt is forced and the name constrained to a prefix tree
of the KB's names (bioel_core.linking.prefix_tree), so only real names come out.

Size: the decoder shares the encoder's embeddings (and its output layer is tied to them), and has
`decoder_layers` transformer layers (self- and cross-attention), its self-attention and feed-forward weights
copied from the encoder's last layers (bert2bert warm start; cross-attention starts fresh). One decoder layer
keeps the float16 folder under 50 MB.

A folder like every model: `bioel_encoder.json` (encoder_type "generative"), the encoder's HF `config.json`,
the tokenizer, and `model.safetensors` holding each tensor once (the shared ones under the encoder's names).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from bioel_core.models.base import WEIGHTS_FILE, fingerprint_of, float64_copy, read_config, stored, write_config
from bioel_core.models.checkpoints import check_positions, load_hf_model, load_tokenizer, require_hf_checkpoint

if TYPE_CHECKING:
    from transformers import BertConfig, BertLMHeadModel

START, END = "[unused0]", "[unused1]"  # mention markers: tokens of the BERT vocabulary no text produces
# the decoder's copies of the encoder's tensors: not stored, shared again when the model is built
SHARED_PREFIXES = ("decoder.bert.embeddings.", "decoder.cls.predictions.decoder.")
IGNORE = -100  # label of positions left out of the loss (padding, the prompt)


class GenerativeModel(torch.nn.Module):
    encoder_type = "generative"

    def __init__(
        self,
        checkpoint_dir: str | Path,
        decoder_layers: int = 1,
        max_length: int = 48,
        max_name_length: int = 32,
        prompt: bool = True,
        length_penalty: float = 1.0,
        retriever_weight: float = 0.0,
        _encoder_config: BertConfig | None = None,
    ):
        """From an HF BERT checkpoint (warm start); `_encoder_config` (load): the architecture only, weights to follow.
        `length_penalty`: beam and name scores are sums of token log-probabilities divided by length ** this.
        `retriever_weight`: as a reranker, the share of the retriever's score added to this model's (chosen on dev)."""
        # imported here, not with the module: these classes take ~2 s to import, which every process that opens
        # bioel_core.models (a link worker with a dense model, the CLI) would pay
        from transformers import BertConfig, BertLMHeadModel, BertModel, EncoderDecoderModel

        super().__init__()
        checkpoint_dir = Path(checkpoint_dir) if _encoder_config is not None else require_hf_checkpoint(checkpoint_dir)
        self.tokenizer = load_tokenizer(checkpoint_dir)
        if _encoder_config is None:
            encoder = load_hf_model(checkpoint_dir, self.tokenizer, BertModel, add_pooling_layer=False)
        else:
            encoder = BertModel(_encoder_config, add_pooling_layer=False)
        config = encoder.config
        if decoder_layers < 1 or decoder_layers > config.num_hidden_layers:
            raise ValueError(f"decoder_layers must be 1..{config.num_hidden_layers}, got {decoder_layers}")
        decoder = BertLMHeadModel(
            BertConfig(
                **{**config.to_dict(), "num_hidden_layers": decoder_layers, "is_decoder": True, "add_cross_attention": True}
            )
        )
        if _encoder_config is None:  # bert2bert: the decoder's layers start as the encoder's last ones
            for mine, theirs in zip(decoder.bert.encoder.layer, encoder.encoder.layer[-decoder_layers:]):
                mine.load_state_dict(theirs.state_dict(), strict=False)  # crossattention keeps its fresh weights
        self.seq2seq = EncoderDecoderModel(encoder=encoder, decoder=decoder)
        self._share_embeddings()
        vocab = self.tokenizer.get_vocab()
        if START not in vocab or END not in vocab:
            raise ValueError(
                f"{checkpoint_dir}: the checkpoint's vocabulary has no {START} and {END} tokens, which mark "
                f"the mention; a BERT vocabulary has them"
            )
        self.cls_id, self.sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.start_id, self.end_id = vocab[START], vocab[END]
        self.decoder_layers, self.max_length, self.max_name_length = decoder_layers, max_length, max_name_length
        self.prompt, self.length_penalty, self.retriever_weight = prompt, length_penalty, retriever_weight
        for cfg in (self.seq2seq.config, self.seq2seq.generation_config):
            cfg.decoder_start_token_id, cfg.bos_token_id = self.cls_id, self.cls_id
            cfg.eos_token_id, cfg.pad_token_id = self.sep_id, self.pad_id
        self._fast = Tokenizer.from_str(self.tokenizer.backend_tokenizer.to_str())
        self._fast.no_padding()
        self._fast.no_truncation()
        self._is_ids = self.pieces(["is"])[0]
        # the decoder reads [CLS], the prompt (half the input at most, then `is`) and the name
        prompt_length = max_length // 2 + len(self._is_ids) if prompt else 0
        check_positions(checkpoint_dir, encoder, max(max_length, 1 + prompt_length + max_name_length))

    def _share_embeddings(self) -> None:
        decoder = self.seq2seq.decoder
        decoder.bert.embeddings = self.seq2seq.encoder.embeddings
        decoder.cls.predictions.decoder.weight = self.seq2seq.encoder.embeddings.word_embeddings.weight
        decoder.cls.predictions.decoder.bias = decoder.cls.predictions.bias

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # ---- texts -> token ids ----------------------------------------------------------------------
    def pieces(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids without special tokens."""
        return [e.ids for e in self._fast.encode_batch(list(texts), add_special_tokens=False)]

    def encoder_ids(
        self, mentions: Sequence[str], lefts: Sequence[str] | None = None, rights: Sequence[str] | None = None
    ) -> list[list[int]]:
        """`[CLS] left [START] mention [END] right [SEP]` per mention, at most `max_length` ids: the mention keeps up
        to half of them, the context what is left, split between the words nearest the mention on each side."""
        n = len(mentions)
        mention_ids = self.pieces(mentions)
        left_ids = self.pieces(lefts) if lefts is not None else [[]] * n
        right_ids = self.pieces(rights) if rights is not None else [[]] * n
        out = []
        for m, left, right in zip(mention_ids, left_ids, right_ids):
            m = m[: self.max_length // 2]
            room = self.max_length - len(m) - 4
            keep_left = min(len(left), max(room // 2, room - len(right)))
            keep_right = min(len(right), room - keep_left)
            out.append(
                [self.cls_id, *left[len(left) - keep_left :], self.start_id, *m, self.end_id, *right[:keep_right], self.sep_id]
            )
        return out

    def prompt_ids(self, mentions: Sequence[str]) -> list[list[int]]:
        """The decoder prompt `mention is` per mention (empty when the model was trained without one)."""
        if not self.prompt:
            return [[] for _ in mentions]
        return [m[: self.max_length // 2] + self._is_ids for m in self.pieces(mentions)]

    def name_ids(self, names: Sequence[str]) -> list[list[int]]:
        return [ids[: self.max_name_length] for ids in self.pieces(names)]

    def _padded(self, rows: Sequence[Sequence[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
        width = max((len(r) for r in rows), default=0)
        ids = torch.full((len(rows), width), value, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        return ids.to(self.device), mask.to(self.device)

    # ---- teacher forcing: training loss and name scores ------------------------------------------
    def _scored_logits(
        self,
        module,
        encoder_ids: list[list[int]],
        prompts: list[list[int]],
        names: list[list[int]],
        pair_of: list[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logits, targets, pairs) at the scored positions only: decoder sequences `[CLS] prompt name` predict
        `prompt name [SEP]`, and the prompt is not scored, so the output layer (a vocabulary-wide product, the
        bulk of the cost) runs on the name and end tokens alone. `pair_of`: the encoder row of each (prompt, name)
        pair (the encoder runs once per distinct input)."""
        input_ids, attention = self._padded(encoder_ids, self.pad_id)
        states = module.seq2seq.encoder(input_ids=input_ids, attention_mask=attention).last_hidden_state
        if pair_of is not None:
            index = torch.tensor(pair_of, dtype=torch.long, device=states.device)
            states, attention = states.index_select(0, index), attention.index_select(0, index)
        decoder_ids, decoder_mask = self._padded([[self.cls_id, *p, *n] for p, n in zip(prompts, names)], self.pad_id)
        targets, _ = self._padded([[IGNORE] * len(p) + [*n, self.sep_id] for p, n in zip(prompts, names)], IGNORE)
        hidden = module.seq2seq.decoder.bert(
            input_ids=decoder_ids, attention_mask=decoder_mask, encoder_hidden_states=states, encoder_attention_mask=attention
        ).last_hidden_state
        scored = targets != IGNORE
        pairs = torch.arange(len(names), device=targets.device)[:, None].expand_as(targets)[scored]
        return module.seq2seq.decoder.cls(hidden[scored]), targets[scored], pairs

    def loss(
        self, encoder_ids: list[list[int]], prompts: list[list[int]], names: list[list[int]], label_smoothing: float = 0.1
    ) -> torch.Tensor:
        """Cross-entropy of the name tokens and the end token (label smoothing as in the paper), differentiable."""
        logits, targets, _ = self._scored_logits(self, encoder_ids, prompts, names)
        return F.cross_entropy(logits, targets, label_smoothing=label_smoothing)

    @torch.inference_mode()
    def score_names(
        self, mentions: Sequence[str], candidates: Sequence[Sequence[str]], batch_size: int = 256, batch_invariant: bool = False
    ) -> list[np.ndarray]:
        """Per mention, the score of writing each of its candidate names after the prompt: the log-probability of the
        name's tokens and the end token, divided by their number ** length_penalty. (A beam search ranks by the same
        sum over the whole written sequence, the forced prompt included, which is one constant per mention.)
        `batch_invariant`: float64, so a score does not depend on the batch."""
        module = float64_copy(self) if batch_invariant else self
        encoder_ids, prompts = self.encoder_ids(mentions), self.prompt_ids(mentions)
        pairs = [(i, name) for i, names in enumerate(candidates) for name in self.name_ids(list(names))]
        flat = np.empty(len(pairs), dtype=np.float32)
        was_training = self.training
        self.eval()
        try:
            for start in range(0, len(pairs), batch_size):
                chunk = pairs[start : start + batch_size]
                rows = sorted({i for i, _ in chunk})
                at = {i: r for r, i in enumerate(rows)}
                logits, targets, pair = self._scored_logits(
                    module,
                    [encoder_ids[i] for i in rows],
                    [prompts[i] for i, _ in chunk],
                    [n for _, n in chunk],
                    [at[i] for i, _ in chunk],
                )
                picked = F.log_softmax(logits, dim=-1).gather(-1, targets[:, None]).squeeze(-1)
                total = torch.zeros(len(chunk), dtype=picked.dtype, device=picked.device).index_add_(0, pair, picked)
                count = torch.bincount(pair, minlength=len(chunk)).to(picked.dtype)
                flat[start : start + len(chunk)] = (total / count**self.length_penalty).float().cpu().numpy()
        finally:
            self.train(was_training)
        return np.split(flat, np.cumsum([len(names) for names in candidates])[:-1]) if len(candidates) else []

    # ---- constrained beam search -----------------------------------------------------------------
    @torch.inference_mode()
    def generate_names(
        self, mentions: Sequence[str], tree, beams: int = 5, batch_size: int = 64, batch_invariant: bool = False
    ) -> list[list[tuple[int, float]]]:
        """Per mention, up to `beams` (tree node where a name ends, score) best first: beam search whose every step
        is restricted to the tokens that continue some name of `tree` after the forced prompt. Mentions are decoded
        `batch_size` at a time (all their beams in one step of the decoder), mentions of similar prompt length
        together: a batch runs as many steps as its longest prompt and name need."""
        module = float64_copy(self) if batch_invariant else self
        encoder_ids, prompts = self.encoder_ids(mentions), self.prompt_ids(mentions)
        order = sorted(range(len(mentions)), key=lambda i: (len(prompts[i]), len(encoder_ids[i])))
        out: list[list[tuple[int, float]]] = [[] for _ in mentions]
        was_training = self.training
        self.eval()
        try:
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                found = self._beam_batch(module, [encoder_ids[i] for i in rows], [prompts[i] for i in rows], tree, beams)
                for i, names in zip(rows, found):
                    if batch_invariant:  # float64 sums still differ in the last bits with the padding: round them off
                        names = sorted(((node, float(np.float32(s))) for node, s in names), key=lambda f: (-f[1], f[0]))
                    out[i] = names
        finally:
            self.train(was_training)
        return out

    def _beam_batch(self, module, encoder_ids, prompts, tree, beams: int) -> list[list[tuple[int, float]]]:
        """Beam search over the tree for a batch of mentions, every live beam of every mention in one decoder step.
        The prompt is read in one pass (teacher-forced, not scored); a beam's score is the sum of its name tokens'
        log-probabilities (the full vocabulary's softmax, as in training), and a finished name's score is that sum with
        the end token's, divided by their number ** length_penalty: exactly what `score_names` gives the name.
        Running beams are ranked by their sums; a mention is done when it holds `beams` finished names."""
        n = len(encoder_ids)
        input_ids, attention = self._padded(encoder_ids, self.pad_id)
        states = module.seq2seq.encoder(input_ids=input_ids, attention_mask=attention).last_hidden_state
        decoder = _IncrementalDecoder(module.seq2seq.decoder, states, attention)
        hidden = decoder.start([[self.cls_id, *p] for p in prompts])
        mention = np.arange(n)  # per live beam: its mention, tree node, score sum, name tokens so far
        node, total, length = np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n, dtype=np.int64)
        finished: list[list[tuple[float, int]]] = [[] for _ in range(n)]
        for _ in range(self.max_name_length + 1):
            logp = F.log_softmax(module.seq2seq.decoder.cls(hidden), dim=-1)
            starts, counts = tree.child_start[node], tree.child_start[node + 1] - tree.child_start[node]
            counts = np.where(length < self.max_name_length, counts, 0)
            row = np.repeat(np.arange(len(node)), counts)
            flat = starts[row] + np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts)
            token = tree.child_token[flat]
            ends = np.flatnonzero(tree.name_start[node + 1] > tree.name_start[node])
            picked = logp[
                torch.from_numpy(np.concatenate([row, ends])).to(logp.device),
                torch.from_numpy(np.concatenate([token, np.full(len(ends), self.sep_id)])).to(logp.device),
            ]
            score = np.concatenate([total[row], total[ends]]) + picked.double().cpu().numpy()
            owner = np.concatenate([mention[row], mention[ends]])
            is_end = np.concatenate([np.zeros(len(row), dtype=bool), np.ones(len(ends), dtype=bool)])
            order = np.lexsort((-score, owner))  # per mention, best first (ties: the order built, which is fixed)
            owner, score, is_end = owner[order], score[order], is_end[order]
            first = np.searchsorted(owner, owner)  # where each candidate's mention begins in the sorted list
            rank = np.arange(len(owner)) - first
            running = np.cumsum(~is_end)
            running_rank = running - 1 - (running[first] - (~is_end[first]))
            for i in np.flatnonzero(is_end & (rank < beams)):  # names ending among a mention's best: finished
                parent = ends[order[i] - len(row)]
                finished[owner[i]].append((score[i] / (length[parent] + 1) ** self.length_penalty, int(node[parent])))
            done = np.array([len(f) >= beams for f in finished])
            go_on = np.flatnonzero(~is_end & (running_rank < beams) & ~done[owner])
            if not len(go_on):
                break
            parent, chosen = row[order[go_on]], order[go_on]
            mention, total, length = owner[go_on], score[go_on], length[parent] + 1
            node = tree.child_node[flat[chosen]]
            hidden = decoder.step(parent, token[chosen])
        out = []
        for found in finished:  # best first; ties by node, so the order does not depend on the batch
            found = sorted(found, key=lambda f: (-f[0], f[1]))[:beams]
            out.append([(node_id, float(s)) for s, node_id in found])
        return out

    # ---- folder --------------------------------------------------------------------------------------
    def config(self) -> dict:
        return {
            "encoder_type": self.encoder_type,
            "decoder_layers": self.decoder_layers,
            "max_length": self.max_length,
            "max_name_length": self.max_name_length,
            "prompt": self.prompt,
            "length_penalty": self.length_penalty,
            "retriever_weight": self.retriever_weight,
            "markers": [START, END],
            "model_type": self.seq2seq.encoder.config.model_type,
            "hidden_size": self.seq2seq.encoder.config.hidden_size,
        }

    def weights(self) -> dict[str, torch.Tensor]:
        """Every tensor once: the decoder's shared copies of the encoder's embeddings are left out."""
        return {k: v for k, v in self.seq2seq.state_dict().items() if not k.startswith(SHARED_PREFIXES)}

    def fingerprint(self) -> str:
        return fingerprint_of(self.config(), self.weights(), self.tokenizer)

    def save(self, directory: str | Path, dtype: str = "float32") -> Path:
        weights = stored(self.weights(), dtype)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file(weights, str(directory / WEIGHTS_FILE))
        self.seq2seq.encoder.config.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        write_config(directory, {**self.config(), "storage_dtype": dtype})
        return directory

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> GenerativeModel:
        from transformers import BertConfig

        config = read_config(directory, cls.encoder_type)
        model = cls(
            directory,
            decoder_layers=config["decoder_layers"],
            max_length=config["max_length"],
            max_name_length=config["max_name_length"],
            prompt=config["prompt"],
            length_penalty=config["length_penalty"],
            retriever_weight=config["retriever_weight"],
            _encoder_config=BertConfig.from_pretrained(directory),
        )
        weights = {
            k: v.float() if v.is_floating_point() else v for k, v in load_file(str(Path(directory) / WEIGHTS_FILE)).items()
        }
        missing, unexpected = model.seq2seq.load_state_dict(weights, strict=False)
        missing = [k for k in missing if not k.startswith(SHARED_PREFIXES)]
        if missing or unexpected:
            raise ValueError(
                f"{directory}: {WEIGHTS_FILE} does not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        model._share_embeddings()
        return model.to(device).eval()


class _IncrementalDecoder:
    """A BERT decoder (`BertLMHeadModel`'s layers and weights) run a token at a time over live beams, with the keys and
    values of every token so far kept per beam and the encoder states projected for cross-attention once per mention.
    `start` reads each mention's `[CLS] prompt` in one pass, left-padded so every row's next token takes the same
    column; positions count real tokens only, so padding changes nothing a row attends to."""

    def __init__(self, decoder: BertLMHeadModel, states: torch.Tensor, encoder_mask: torch.Tensor):
        self.embeddings, self.layers = decoder.bert.embeddings, decoder.bert.encoder.layer
        self.heads = decoder.config.num_attention_heads
        self.cross = [
            (self._split(layer.crossattention.self.key(states)), self._split(layer.crossattention.self.value(states)))
            for layer in self.layers
        ]
        self.encoder_mask = encoder_mask.bool()[:, None, None, :]
        self.device = states.device

    def _split(self, x: torch.Tensor) -> torch.Tensor:  # (rows, tokens, hidden) -> (rows, heads, tokens, head size)
        return x.view(x.shape[0], x.shape[1], self.heads, -1).transpose(1, 2)

    @staticmethod
    def _merge(x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)

    def start(self, prefixes: list[list[int]]) -> torch.Tensor:
        """Hidden state after each prefix, one row per prefix (row i belongs to mention i)."""
        width = max(len(p) for p in prefixes)
        ids = torch.zeros((len(prefixes), width), dtype=torch.long)
        real = torch.zeros((len(prefixes), width), dtype=torch.bool)
        positions = torch.zeros((len(prefixes), width), dtype=torch.long)
        for i, p in enumerate(prefixes):
            ids[i, width - len(p) :] = torch.tensor(p)
            real[i, width - len(p) :] = True
            positions[i, width - len(p) :] = torch.arange(len(p))
        self.mention = torch.arange(len(prefixes), device=self.device)
        self.real, self.next_position = real.to(self.device), positions[:, -1].to(self.device) + 1
        self.keys: list[torch.Tensor | None] = [None] * len(self.layers)
        self.values: list[torch.Tensor | None] = [None] * len(self.layers)
        return self._run(ids.to(self.device), positions.to(self.device))[:, -1]

    def step(self, parents: np.ndarray, tokens: np.ndarray) -> torch.Tensor:
        """The beams continued from rows `parents` by `tokens`: their hidden states after the new token."""
        rows = torch.from_numpy(parents).to(self.device)
        self.mention, self.real, self.next_position = self.mention[rows], self.real[rows], self.next_position[rows]
        self.keys = [k.index_select(0, rows) for k in self.keys]
        self.values = [v.index_select(0, rows) for v in self.values]
        self.real = torch.cat([self.real, torch.ones((len(rows), 1), dtype=torch.bool, device=self.device)], dim=1)
        positions = self.next_position[:, None]
        self.next_position = self.next_position + 1
        return self._run(torch.from_numpy(tokens).to(self.device)[:, None], positions)[:, 0]

    def _run(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        new = ids.shape[1]
        past = self.real.shape[1] - new
        causal = torch.ones((new, past + new), dtype=torch.bool, device=self.device).tril(past)
        self_diagonal = torch.zeros_like(causal)
        self_diagonal[torch.arange(new), past + torch.arange(new)] = True  # a padding row sees itself: no empty softmax
        visible = ((causal[None] & self.real[:, None, :]) | self_diagonal[None])[:, None]
        cross_mask = self.encoder_mask.index_select(0, self.mention)
        hidden = self.embeddings(input_ids=ids, position_ids=positions)
        for i, layer in enumerate(self.layers):
            attention = layer.attention
            query = self._split(attention.self.query(hidden))
            key, value = self._split(attention.self.key(hidden)), self._split(attention.self.value(hidden))
            self.keys[i] = key if self.keys[i] is None else torch.cat([self.keys[i], key], dim=2)
            self.values[i] = value if self.values[i] is None else torch.cat([self.values[i], value], dim=2)
            context = F.scaled_dot_product_attention(query, self.keys[i], self.values[i], attn_mask=visible)
            hidden = attention.output.LayerNorm(attention.output.dense(self._merge(context)) + hidden)
            cross = layer.crossattention
            key, value = (c.index_select(0, self.mention) for c in self.cross[i])
            context = F.scaled_dot_product_attention(self._split(cross.self.query(hidden)), key, value, attn_mask=cross_mask)
            hidden = cross.output.LayerNorm(cross.output.dense(self._merge(context)) + hidden)
            hidden = layer.output.LayerNorm(layer.output.dense(layer.intermediate(hidden)) + hidden)
        return hidden
