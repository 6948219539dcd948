"""`bioel train transformer|rescnn`: self-alignment on a KB's names, then optional fine-tuning on a dataset's training
mentions, saving a model folder with its model card (`run_training`, from a `NameEncoderSettings`). Also what the
kinds trained on a dataset's mentions share: the fine-tuning plan (`finetune_plan`), a stage's loop settings
(`stage_config`), the mentions, dev scoring, the stages' checkpoints and the card.

Each stage keeps its checkpoint and, once done, a `done.json` under `OUTPUT/_train/<stage>/`, so a stopped
run started again with the same command resumes where it was.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

import bioel_core
from bioel_core.corpora.biosyn import read_query_folder
from bioel_core.corpora.pubtator import split_ids
from bioel_core.kb.vocab import plain_id
from bioel_core.names import NameSet
from bioel_core.models import Encoder, EnsembleEncoder, ResCNNEncoder, TransformerEncoder, default_base_checkpoint, load_encoder
from bioel_core.models.base import CONFIG_FILE, read_config
from bioel_core.models.cards import fingerprint_entry, write_card
from bioel_core.settings import SettingsError, to_mapping
from bioel_core.settings.train import MentionTrainSettings, NameEncoderSettings
from bioel_core.text.preprocess import split_composite
from bioel_core.training.hard_negatives import HardNegativeBatcher
from bioel_core.training.loop import TrainConfig, run_seed, train
from bioel_core.training.pairs import alignment_pairs, mention_pairs

# fine-tuning with a dev split, on small data: at least this many steps, dev scored about this often (TrainConfig)
FINETUNE_MIN_STEPS, DEV_EVERY_STEPS = 1500, 200


@dataclass(frozen=True)
class FinetunePlan:
    """How fine-tuning runs, from the settings and the datasets' folders: the split trained on, the epochs, whether
    dev chooses the epoch, and whether the default epochs stretch to small data's minimum of steps."""

    split: str
    epochs: int
    dev_chooses: bool
    small_data: bool


def finetune_plan(settings: MentionTrainSettings) -> FinetunePlan:
    """The split defaults to train when every dataset has processed_dev (dev then chooses the epoch), else traindev;
    the epochs to 20 when dev chooses (patience stops it; small data trains longer), else 3."""
    datasets = settings.train_dataset or []
    with_dev = bool(datasets) and all((Path(d) / "processed_dev").is_dir() for d in datasets)
    split = settings.train_split or ("train" if with_dev else "traindev")
    dev_chooses = with_dev and split == "train"
    epochs = settings.finetune_epochs if settings.finetune_epochs is not None else 20 if dev_chooses else 3
    return FinetunePlan(split, epochs, dev_chooses, small_data=dev_chooses and settings.finetune_epochs is None)


def stage_config(
    settings: MentionTrainSettings, *, epochs: int, loss: str, max_steps: int | None = None, plan: FinetunePlan | None = None
) -> TrainConfig:
    """The loop's settings of one stage; `plan`: a fine-tuning stage's (with dev choosing the epoch and the default
    epochs, small data trains longer and scores dev less often)."""
    small = plan is not None and plan.small_data
    name_encoder = isinstance(settings, NameEncoderSettings)
    return TrainConfig(
        epochs=epochs,
        batch_size=settings.batch_size,
        learning_rate=settings.lr,
        max_steps=max_steps,
        seed=settings.seed,
        loss=loss,
        warmup=settings.warmup,
        patience=settings.patience,
        max_minutes=settings.max_minutes,
        min_steps=FINETUNE_MIN_STEPS if small else 0,
        dev_every_steps=DEV_EVERY_STEPS if small else 0,
        **({"margin": settings.margin, "temperature": settings.temperature} if name_encoder else {}),
    )


def new_encoder(kind: str, init: str | None, pooling: str | None, device: str, seed: int = 0) -> Encoder:
    """A fresh encoder: `init` is a bioel model folder (continue training it) or an HF checkpoint; the weights
    that start random (a ResCNN's, a pooling head's) are drawn from `seed`."""
    if init and (Path(init) / CONFIG_FILE).is_file():
        found = read_config(init).get("encoder_type")
        if found == EnsembleEncoder.encoder_type:
            raise SettingsError("init", f"{init}: an ensemble is not trained as one; train its members")
        if found != kind:
            raise SettingsError(
                "init",
                f"{init}: a {found} model folder, which the {found} kind trains on (a {kind} "
                f"starts from a Hugging Face checkpoint or a {kind} model folder)",
            )
        return load_encoder(init, device)
    base = Path(init) if init else default_base_checkpoint()
    torch.manual_seed(seed)
    if kind == "transformer":
        return TransformerEncoder(base, pooling=pooling).to(device)
    if kind == "rescnn":
        return ResCNNEncoder(base, pooling=pooling or "max").to(device)
    raise ValueError(f"unknown encoder {kind!r}; choose transformer or rescnn")


def usable_queries(dataset: str | Path, split: str, alias: dict[str, str]) -> tuple[list[tuple], int]:
    """(query, [(sub-mention, [concept ids])]) per usable query of DATASET/processed_SPLIT; composites pair parts and
    ids by position. Returns them and how many queries could not be used (ids not in the KB, or parts != ids)."""
    out, unusable = [], 0
    for m in read_query_folder(Path(dataset) / f"processed_{split}"):
        parts = split_composite(m.text)
        ids = [i for field in m.concept_ids for i in split_ids(field)]
        if len(parts) == 1:
            groups = [(parts[0], ids)]
        elif len(parts) == len(ids):
            groups = [(p, [i]) for p, i in zip(parts, ids)]
        else:
            unusable += 1
            continue
        resolved = [(p, sorted({alias[i] for i in g if i in alias})) for p, g in groups]
        if any(not g for _, g in resolved):
            unusable += 1
            continue
        out.append((m, resolved))
    return out, unusable


def training_mentions(dataset: str | Path, split: str, alias: dict[str, str]) -> tuple[list[tuple[str, list[str]]], int]:
    """(sub-mention, [concept ids]) of every usable query of DATASET/processed_SPLIT, and how many were not usable."""
    queries, unusable = usable_queries(dataset, split, alias)
    return [pair for _, pairs in queries for pair in pairs], unusable


def concept_alias(names: NameSet) -> dict[str, str]:
    """Every id of the KB -> the first id of its concept (a dataset's ids may be any of a concept's). A concept's own
    id wins over another's alt id: a MeSH supplementary record's alt ids are the descriptors it is mapped to, which are
    concepts of their own when the KB holds the descriptors too."""
    alias = {ids[0]: ids[0] for ids in names.concept_ids}
    owner = {plain_id(ids[0]): ids[0] for ids in names.concept_ids}  # `MESH:D001569` is the concept D001569
    for ids in names.concept_ids:
        for i in ids[1:]:
            alias.setdefault(i, owner.get(plain_id(i), ids[0]))
    return alias


def dataset_mentions(
    names: NameSet, names_dir: str, datasets: list[str], split: str, stage: str
) -> tuple[list[tuple[str, list[str]]], int, str]:
    """(normalized (sub-mention, [concept ids]) of every dataset's processed_SPLIT, how many queries could not be
    used, where they came from); data that yields no mention is refused with a line naming `stage`, the inputs and
    why. Mentions are normalized as the names are (and as queries are at link time: Linker.link)."""
    alias = concept_alias(names)
    mentions, unusable = [], 0
    for dataset in datasets:
        found, bad = training_mentions(dataset, split, alias)
        mentions, unusable = mentions + found, unusable + bad
    where = ", ".join(f"{d}/processed_{split}" for d in datasets)
    if not mentions:
        raise ValueError(
            f"{stage}: no usable training mention in {where}: {unusable:,} queries, none with an id of the KB "
            f"{names_dir} (check the KB folder and the ids' vocabulary) and parts matching its ids"
        )
    if unusable:
        print(
            f"note: {stage}: {unusable:,} queries of {where} left out: no concept id (-1, CUI-less), no id of the KB "
            f"{names_dir}, or a composite whose parts and ids differ in number",
            file=sys.stderr,
        )
    return [(names.normalizer(text), ids) for text, ids in mentions], unusable, where


def dev_queries(dataset: str | Path) -> list:
    """The dataset's processed_dev queries that have a concept ([] without a dev split): what model selection scores."""
    folder = Path(dataset) / "processed_dev"
    return [q for q in read_query_folder(folder) if q.concept_ids] if folder.is_dir() else []


def dev_scorer(encoder: Encoder, names: NameSet, datasets: list[str]):
    """acc@1 (BioSyn protocol, the KB's names) of the datasets' processed_dev queries with a concept, or None when
    none has a dev split: what model selection scores after each fine-tuning epoch."""
    from bioel_core.evaluation import evaluate
    from bioel_core.linking.dense import DenseLinker

    queries = [q for d in datasets for q in dev_queries(d)]
    if not queries:
        return None

    def score() -> float:
        return evaluate(DenseLinker(names, encoder, model_path="(training)"), queries, k=1)[0]["acc@1"]

    return score


def train_stage(
    encoder, name: str, pairs, config: TrainConfig, workdir: Path, progress: bool, batcher=None, dev_score=None, loss_fn=None
) -> dict:
    stage_dir = workdir / name
    done = stage_dir / "done.json"
    if done.is_file():  # finished before a restart: its weights are in the later stage's start or the output
        return json.loads(done.read_text())
    stage_dir.mkdir(parents=True, exist_ok=True)
    stats = {
        **train(
            encoder,
            pairs,
            config,
            stage_dir,
            load_encoder=load_encoder,
            progress=progress,
            batcher=batcher,
            dev_score=dev_score,
            loss_fn=loss_fn,
        ),
        "config": asdict(config),
    }
    encoder.save(stage_dir / "model")
    done.write_text(json.dumps(stats, indent=2))
    return stats


def run_training(settings: NameEncoderSettings, *, command: list[str] | None = None) -> dict:
    """Trains the name encoder `settings` describes and writes it with its card; with `hard_negatives` > 0,
    fine-tuning batches hold each mention's nearest wrong concepts (hard_negatives.py)."""
    from bioel_core.models import resolve_device

    s, plan = settings, finetune_plan(settings)
    device, progress = resolve_device(s.device), not s.no_progress
    align = (
        stage_config(s, epochs=s.align_epochs, loss="multi-similarity", max_steps=s.align_max_steps)
        if s.align_epochs > 0
        else None
    )
    finetune = (
        stage_config(s, epochs=plan.epochs, loss=s.finetune_loss, max_steps=s.finetune_max_steps, plan=plan)
        if plan.epochs > 0
        else None
    )
    names_dir, out, workdir = s.names, Path(s.output), Path(s.output) / "_train"
    names = NameSet.from_names_table(names_dir)
    by_concept: dict[str, list[str]] = {}
    for name, ids in zip(names.names, names.concept_ids):
        by_concept.setdefault(ids[0], []).append(name)

    encoder = new_encoder(s.kind, s.init, s.pooling, device, run_seed(align, finetune))
    # a restarted run continues from the last finished stage's weights
    for stage in ("finetune", "align"):
        if (workdir / stage / "done.json").is_file():
            encoder.load_state_dict(load_encoder(workdir / stage / "model", device).state_dict())
            break
    began, stages, data = time.perf_counter(), {}, {"names": names_dir, "names_count": len(names), "concepts": len(by_concept)}
    align_pairs = alignment_pairs(by_concept, s.max_pairs_per_concept, seed=align.seed) if align is not None else []
    if align is not None and not align_pairs:
        # a dictionary with one name per concept (common in users' own KBs) has no synonyms to align
        print(
            f"note: self-alignment skipped: no concept of the KB {names_dir} has two distinct names "
            f"({len(by_concept):,} concepts, {len(names):,} names); fine-tuning only",
            file=sys.stderr,
        )
        data["align_skipped"] = "no concept with two distinct names"
    finetune_pairs, batcher = [], None
    if s.train_dataset and finetune is not None:
        mentions, unusable, where = dataset_mentions(names, names_dir, s.train_dataset, plan.split, "fine-tuning")
        data.update(
            {
                "train_datasets": s.train_dataset,
                "train_split": plan.split,
                "train_mentions": len(mentions),
                "train_queries_unusable": unusable,
                "hard_negatives_per_mention": s.hard_negatives,
            }
        )
        finetune_pairs = mention_pairs(mentions, by_concept)
        if not finetune_pairs:
            raise ValueError(
                f"fine-tuning: the {len(mentions):,} training mentions of {where} are each the only name "
                f"of their concept in {names_dir}: no (mention, other name) pair to learn from"
            )
        if s.hard_negatives > 0:  # the batches come from the batcher, each mention with its mined negatives
            batcher, finetune_pairs = (
                HardNegativeBatcher(
                    encoder,
                    mentions,
                    by_concept,
                    s.hard_negatives,
                    finetune.batch_size,
                    finetune.seed,
                    workdir / "finetune",
                    progress=progress,
                ),
                [],
            )
    elif not align_pairs:
        off = "" if align is not None else "; self-alignment is off"
        raise SettingsError(
            "train_dataset",
            f"nothing to train: self-alignment has no pairs (no concept of {names_dir} "
            f"has two distinct names{off}) and no fine-tuning data was given",
        )
    if align_pairs:
        stages["align"] = train_stage(encoder, "align", align_pairs, align, workdir, progress)
        if finetune is not None and finetune.max_minutes is not None:  # one budget for the whole run
            finetune = replace(finetune, max_minutes=max(0.0, finetune.max_minutes - stages["align"]["seconds"] / 60))
    if finetune_pairs or batcher is not None:
        # dev scores choose the epoch only when dev is not trained on
        score = dev_scorer(encoder, names, s.train_dataset) if plan.split == "train" else None
        data["model_selection"] = (
            "best dev acc@1 (processed_dev), scored after each epoch (every few on small data)" if score else "the last epoch"
        )
        stages["finetune"] = train_stage(
            encoder, "finetune", finetune_pairs, finetune, workdir, progress, batcher=batcher, dev_score=score
        )
    encoder.save(out, dtype=s.save_dtype)
    return finish_card(out, encoder, data, stages, settings=s, device=device, command=command, began=began, workdir=workdir)


def finish_card(
    out: Path,
    model,
    data: dict,
    stages: dict,
    *,
    settings: MentionTrainSettings,
    device: str,
    command: list[str] | None,
    began: float,
    workdir: Path,
) -> dict:
    """Writes the card of a model saved at `out` (command, settings, data, stages, hardware, time) and removes the
    run's work folder."""
    init, save_dtype = settings.init, settings.save_dtype
    card = {
        # the saved folder's fingerprint: weights stored as float16 are not the float32 ones still in memory (read by the
        # class, not load_encoder: the card of an earlier model trained into this folder would refuse it)
        "model": out.name,
        "encoder": model.config(),
        **fingerprint_entry(type(model).load(out)),
        "init": init or str(default_base_checkpoint()),
        "command": " ".join(command or sys.argv),
        "settings": {"kind": settings.kind, **to_mapping(settings)},
        "data": data,
        "stages": stages,
        "save_dtype": save_dtype,
        "training_seconds": sum(s.get("seconds", 0.0) for s in stages.values()),
        "wall_seconds_this_run": time.perf_counter() - began,
        "hardware": {
            "device": str(device),
            "cuda": torch.cuda.get_device_name(0) if str(device).startswith("cuda") else None,
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "torch": torch.__version__,
        },
        "bioel_version": bioel_core.__version__,
        "scores": {},
    }
    if isinstance(model, ResCNNEncoder):
        card["trainable_parameters"] = model.trainable_parameters()
    write_card(out, card)
    shutil.rmtree(workdir)
    return card
