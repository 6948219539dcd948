"""Typed training contracts: one per model kind `bioel train KIND` trains, each validated once, when made, with
errors that name the field (bioel_core.settings.fields). `TrainSettings` is the part every kind shares (output,
start, device, seed, learning rate, time budget, weights on disk); `MentionTrainSettings` adds what the kinds trained
on a KB's names and a BioSyn dataset's training mentions share; each kind's contract adds its own settings and holds
its own defaults where they differ by kind (batch size, learning rate, weights on disk). `TRAIN_KINDS` maps each
kind's name to its contract; `bioel_core.training.run.train` trains any of them.

Light on purpose (no torch): the CLI makes its flags from these fields. The choices that belong to torch-importing
model modules (poolings) are stated here and checked equal to the models' own by the tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from bioel_core.corpora.annotated import CorpusSpec
from bioel_core.corpora.read import FORMATS, FORMATS_WITH_MENTIONS
from bioel_core.linking import DEFAULT_RERANK_DEPTH
from bioel_core.settings.fields import Settings, SettingsError, fields_of, setting
from bioel_core.settings.stages import ENTITY_TYPE

SAVE_DTYPES = ("float32", "float16")
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
NAME_ENCODER_LOSSES = ("multi-similarity", "infonce")  # training.loop's losses of text pairs
TARGET_NAMES = ("tfidf", "shortest", "random")  # training.generative.choose_targets
# the models' own choices (models.transformer.POOLINGS, models.rescnn.POOLINGS, models.collective.MENTION_POOLINGS)
TRANSFORMER_POOLINGS = ("cls", "mean")
RESCNN_POOLINGS = ("max", "attention")
MENTION_POOLINGS = ("endpoints", "mean")
# gold + 7 of the retriever's wrong concepts: twice the negatives cost twice the CPU for ~0.2 dev points (measured)
EXAMPLE_SIZE = 8


def _above_zero(settings, *names: str) -> None:
    for name in names:
        value = getattr(settings, name)
        if value is not None and not value > 0:
            raise SettingsError(name, f"must be above 0, got {value:g}")


@dataclass(kw_only=True)
class TrainSettings(Settings):
    """What every kind's training shares."""

    kind: ClassVar[str] = ""  # the kind's name: `bioel train KIND`

    output: str = setting(
        path=True,
        help="model folder to write; training again with the same settings after a stop resumes from the last checkpoint",
    )
    init: str | None = setting(
        None, path=True, help="HF checkpoint or bioel model folder to start from (default: the packaged MiniLM)"
    )
    device: str = setting("auto", help="auto (cuda when available, else cpu), cpu or cuda[:N]")
    seed: int = setting(0, help="seed of the data order, dropout and the weights that start random")
    lr: float = setting(2e-5, help="learning rate")
    max_minutes: float | None = setting(
        None,
        help="wall-clock budget for the whole run; ends after the running step with "
        "the best model so far (best on dev when there is a dev split)",
    )
    save_dtype: str = setting("float32", choices=SAVE_DTYPES, help="weights on disk")
    no_progress: bool = setting(False, help="no progress bar (there is none anyway when stderr is not a terminal)")

    def check(self) -> None:
        if not DEVICE.fullmatch(self.device):
            raise SettingsError("device", f"{self.device!r} is not a device: auto, cpu, cuda or cuda:N")
        _above_zero(self, "lr", "max_minutes")

    def inputs(self) -> list[tuple[str, str]]:
        """(setting, path) of every file or folder the run reads: an output among them would overwrite it."""
        out = []
        for info in fields_of(type(self)):
            value = getattr(self, info.name)
            if info.path and info.name != "output" and value:
                out += [(info.name, v) for v in (value if isinstance(value, list) else [value])]
        return out


@dataclass(kw_only=True)
class MentionTrainSettings(TrainSettings):
    """The kinds trained on a KB's names and a BioSyn dataset's training mentions (name encoders, rerankers,
    generative models)."""

    names: str = setting(path=True, help="an ingest-kb output folder (the KB's names)")
    train_dataset: list[str] | None = setting(
        None, path=True, help="BioSyn dataset folder(s) whose training mentions fine-tune the model"
    )
    train_split: str | None = setting(
        None,
        help="processed_SPLIT used for fine-tuning; default: train when every train "
        "dataset has processed_dev (dev then chooses the epoch), else traindev",
    )
    finetune_epochs: int | None = setting(
        None,
        minimum=0,
        help="at most this many fine-tuning epochs (default: 20 when "
        "dev chooses the epoch and patience stops it, more when the data is small: at "
        "least 1,500 steps, dev scored about every 200 steps; else 3)",
    )
    finetune_max_steps: int | None = setting(None, minimum=1, help="at most this many fine-tuning steps")
    patience: int = setting(3, minimum=1, help="with a dev split: epochs without a better dev acc@1 before stopping")
    warmup: float = setting(
        0.1, minimum=0, help="share of each stage's steps with a rising learning rate (then linear decay to 0)"
    )
    batch_size: int = setting(128, minimum=1, help="examples per step")

    def check(self) -> None:
        super().check()
        if "=" in self.names and ENTITY_TYPE[0].fullmatch(self.names.partition("=")[0]):
            raise SettingsError(
                "names", f"{self.names}: one KB folder, not TYPE=KB_DIR (the collective model takes one per entity type)"
            )
        if self.warmup > 1:
            raise SettingsError("warmup", f"a share of the steps, at most 1, got {self.warmup:g}")


@dataclass(kw_only=True)
class NameEncoderSettings(MentionTrainSettings):
    """A name encoder (bi-encoder): self-alignment on the KB's synonyms (SapBERT: multi-similarity loss, online
    hard-pair mining), then optional fine-tuning on a dataset's training mentions."""

    batch_size: int = setting(128, minimum=1, help="pairs per step")
    align_epochs: int = setting(1, minimum=0, help="epochs of self-alignment on the KB's synonyms (0: none)")
    align_max_steps: int | None = setting(None, minimum=1, help="at most this many self-alignment steps")
    margin: float = setting(0.2, help="multi-similarity loss: the margin of the hard-pair miner")
    finetune_loss: str = setting(
        "multi-similarity",
        choices=NAME_ENCODER_LOSSES,
        help="fine-tuning loss: SapBERT's multi-similarity with hard-pair mining, or a batch "
        "softmax (InfoNCE) where the gold name and the wrong names compete",
    )
    temperature: float = setting(0.05, help="infonce temperature")
    hard_negatives: int = setting(
        0,
        minimum=0,
        help="fine-tuning: put each mention's N nearest wrong concepts (mined "
        "every epoch with the current model) in its batch instead of "
        "random batches (0: random)",
    )
    max_pairs_per_concept: int = setting(50, minimum=1, help="self-alignment: at most this many name pairs per concept")

    def check(self) -> None:
        super().check()
        _above_zero(self, "temperature")


@dataclass(kw_only=True)
class TransformerSettings(NameEncoderSettings):
    """`bioel train transformer`: a transformer name encoder (SapBERT)."""

    kind: ClassVar[str] = "transformer"
    pooling: str | None = setting(
        None, choices=TRANSFORMER_POOLINGS, help="default: a sentence-transformers init folder's own, else cls"
    )


@dataclass(kw_only=True)
class ResCNNSettings(NameEncoderSettings):
    """`bioel train rescnn`: a ResCNN name encoder over the base model's frozen token embeddings."""

    kind: ClassVar[str] = "rescnn"
    lr: float = setting(1e-3, help="learning rate")
    pooling: str = setting("max", choices=RESCNN_POOLINGS, help="how token vectors make the name's vector")


@dataclass(kw_only=True)
class RerankTrainSettings(MentionTrainSettings):
    """What the kinds that learn to reorder a retriever's candidates share."""

    retriever: str | None = setting(
        None,
        path=True,
        help="the dense model whose top concepts it learns to reorder "
        "(its score's weight is chosen on dev; default: the shipped "
        "disease model)",
    )
    rerank_depth: int = setting(DEFAULT_RERANK_DEPTH, minimum=1, help="concepts reordered when scoring dev")
    retriever_weight: float | None = setting(
        None,
        minimum=0,
        help="the share of the retriever's score the rerank stage "
        "adds, as chosen on dev by an earlier run (for a model retrained on "
        "train_split traindev, where no dev is left to choose it; default: chosen "
        "on dev, else 0)",
    )


@dataclass(kw_only=True)
class CrossEncoderSettings(RerankTrainSettings):
    """`bioel train cross-encoder`: a reranker for a retriever's candidates, trained on a dataset's training
    mentions against the retriever's best wrong concepts."""

    kind: ClassVar[str] = "cross-encoder"
    train_dataset: list[str] = setting(path=True, help="BioSyn dataset folder(s) whose training mentions it learns from")
    batch_size: int = setting(8, minimum=1, help="mentions per step (each with its candidate concepts)")
    example_size: int = setting(
        EXAMPLE_SIZE, minimum=2, help="concepts per training mention (gold + the retriever's best wrong ones)"
    )
    synonym_examples: int | None = setting(
        None,
        minimum=0,
        help="KB names trained on as mentions, their concept known "
        "by its other names (default: as many as the training mentions give; 0: none)",
    )

    def check(self) -> None:
        super().check()
        if not self.train_dataset:
            raise SettingsError("train_dataset", "a cross-encoder learns from training mentions: name a BioSyn dataset folder")


@dataclass(kw_only=True)
class GenerativeSettings(RerankTrainSettings):
    """`bioel train generative`: a seq2seq linker that writes KB names (GenBioEL: KB-guided pre-training, then
    fine-tuning on a dataset's training mentions)."""

    kind: ClassVar[str] = "generative"
    lr: float = setting(1e-4, help="learning rate")
    batch_size: int = setting(32, minimum=1, help="(input, name) examples per step")
    pretrain_epochs: int = setting(
        1, minimum=0, help="epochs of KB-guided pre-training, one synthetic example per concept each (0: none)"
    )
    target_name: str = setting(
        "tfidf",
        choices=TARGET_NAMES,
        help="which name of the gold concept a training mention "
        "learns to write: the most similar by char 3-gram TF-IDF, the shortest, or one at random",
    )
    no_prompt: bool = setting(False, help="decode the name alone, without the `mention is` prompt")
    decoder_layers: int = setting(1, minimum=1, help="decoder layers (1 keeps the float16 folder under 50 MB)")

    def check(self) -> None:
        super().check()
        if self.pretrain_epochs == 0 and (not self.train_dataset or self.finetune_epochs == 0):
            raise SettingsError(
                "pretrain_epochs",
                "nothing to train: no pre-training and no fine-tuning (a train_dataset and finetune_epochs above 0)",
            )


@dataclass(kw_only=True)
class CollectiveSettings(TrainSettings):
    """`bioel train collective`: the document model that detects and links every mention of a document in one pass,
    over a frozen name encoder's names of each entity type."""

    kind: ClassVar[str] = "collective"
    lr: float = setting(5e-5, help="learning rate of the document transformer (its heads learn at 1e-3)")
    save_dtype: str = setting("float16", choices=SAVE_DTYPES, help="weights on disk (float16 keeps the folder under 50 MB)")
    names: list[str] = setting(help="an ingest-kb output folder per entity type, TYPE=KB_DIR")
    train_corpus: list[str] = setting(
        help="gold documents to train on: [TYPE[,TYPE...]=]PATH, files, folders of files "
        "or `bioel link` outputs, in corpus_format; TYPE: the types a corpus annotates "
        "(default all)"
    )
    dev_corpus: list[str] = setting(help="gold documents to choose the epoch and decoding on (as train_corpus)")
    corpus_format: str = setting(
        "pubtator",
        choices=FORMATS,
        help=f"the format of the corpora, named as link's input format; one that carries "
        f"annotations: {', '.join(FORMATS_WITH_MENTIONS)}",
    )
    name_model: str | None = setting(
        None,
        path=True,
        help="the frozen name encoder (default: the shipped disease model; with init a trained collective model, its own)",
    )
    document_layers: int | None = setting(
        None,
        minimum=1,
        help="keep only the first N transformer layers of the "
        "document encoder (a faster model; with init a trained collective model, its "
        "first N layers and heads are the start)",
    )
    document_feed_forward: int | None = setting(
        None,
        minimum=1,
        help="keep only each document encoder layer's N most active feed-forward units "
        "(a faster model; chosen on the first train documents)",
    )
    document_hidden: int | None = setting(
        None,
        minimum=1,
        help="keep only N dimensions of the document encoder's hidden states and N / head size of each layer's "
        "attention heads, the busiest on the first train documents (a faster model)",
    )
    mention_pooling: str = setting(
        "endpoints", choices=MENTION_POOLINGS, help="mention vectors from W[h_start; h_end] or the mean of the span's tokens"
    )
    epochs: int = setting(8, minimum=1, help="epochs (the best on dev is kept)")

    def check(self) -> None:
        super().check()
        self.kb_folders()
        for name in ("train_corpus", "dev_corpus"):
            values = getattr(self, name)
            if not values:
                raise SettingsError(name, "no corpus given")
            for value in values:
                try:
                    CorpusSpec.parse(value)
                except ValueError as err:
                    raise SettingsError(name, str(err)) from None

    def kb_folders(self) -> dict[str, str]:
        """Entity type -> its KB folder, from the `TYPE=KB_DIR` items of `names`."""
        out: dict[str, str] = {}
        for item in self.names:
            entity_type, sep, folder = item.partition("=")
            if not sep or not folder.strip():
                raise SettingsError("names", f"{item}: expected TYPE=KB_DIR, one per entity type")
            if not ENTITY_TYPE[0].fullmatch(entity_type):
                raise SettingsError("names", f"{item}: {ENTITY_TYPE[1]}")
            if entity_type in out:
                raise SettingsError("names", f"entity type {entity_type} given twice")
            out[entity_type] = folder
        if not out:
            raise SettingsError("names", "no KB folder given (TYPE=KB_DIR, one per entity type)")
        return out

    def inputs(self) -> list[tuple[str, str]]:
        return (
            super().inputs()
            + [("names", folder) for folder in self.kb_folders().values()]
            + [(name, spec.path) for name in ("train_corpus", "dev_corpus") for spec in self.corpora(name)]
        )

    def corpora(self, name: str) -> list[CorpusSpec]:
        """The `[TYPE[,TYPE...]=]PATH` items of `train_corpus` or `dev_corpus`."""
        return [CorpusSpec.parse(value) for value in getattr(self, name)]


TRAIN_KINDS: dict[str, type[TrainSettings]] = {
    cls.kind: cls for cls in (TransformerSettings, ResCNNSettings, CollectiveSettings, CrossEncoderSettings, GenerativeSettings)
}
