"""The training loop: pair batches, online hard-pair mining, multi-similarity loss, AdamW with linear warm-up and
decay.

Seeded (data order and dropout), with a progress bar, periodic checkpoints and resume. With a dev scorer, the
model is scored after each epoch (every few epochs when they are short: `dev_every_steps`), the best one is kept (`best/` beside the checkpoint) and restored at the end,
and training stops when the score has not improved for `patience` epochs or the wall-clock budget is spent. A checkpoint is a
folder `checkpoint/` beside the output: the encoder saved as a model folder, the optimizer state and the
RNG state in safetensors, and `state.json` (step, config). It is written to a temporary folder and renamed,
so a killed run leaves either the previous checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from bioel_core.progress import bar as progress_bar
from bioel_core.training.losses import multi_similarity_loss, supervised_infonce_loss
from bioel_core.training.miners import hard_pairs
from bioel_core.training.pairs import Pair


@dataclass
class TrainConfig:
    epochs: int = 1
    batch_size: int = 128  # pairs per step: 2x as many texts
    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    margin: float = 0.2
    neg_scale: float = 60.0
    pos_scale: float = 1.0
    offset: float = 0.5
    use_miner: bool = True
    loss: str = "multi-similarity"  # or "infonce" (see losses.supervised_infonce_loss)
    temperature: float = 0.05  # infonce only
    max_steps: int | None = None
    checkpoint_every: int = 200
    seed: int = 0
    warmup: float = 0.1  # share of the steps with a linearly rising learning rate; it then falls linearly to 0
    patience: int = 3  # with a dev scorer: dev scores without a better one before stopping
    # small data (few steps an epoch): at least this many steps in all (more epochs), and dev scored every
    # ceil(dev_every_steps / steps per epoch) epochs rather than after each, so the schedule, the dev curve and
    # patience see enough updates, and scoring does not cost more than training
    min_steps: int = 0
    dev_every_steps: int = 0
    max_minutes: float | None = None  # wall-clock budget: ends after the running step, with the best model so far


def run_seed(*stages: TrainConfig | None) -> int:
    """The seed of a run of stages, some skipped (None): the first run stage's (the fresh model's random start is
    drawn from it), the default when none runs."""
    return next((stage.seed for stage in stages if stage is not None), TrainConfig.seed)


def learning_rate_at(step: int, total: int, config: TrainConfig) -> float:
    """Linear warm-up over `warmup` of the steps, then linear decay to 0 at `total`; a function of the step
    alone, so a resumed run follows the same schedule."""
    warm = max(1, round(config.warmup * total))
    if step < warm:
        return config.learning_rate * (step + 1) / warm
    return config.learning_rate * max(0.0, (total - step) / max(1, total - warm))


def _batches(pairs: list[Pair], config: TrainConfig, epoch: int) -> list[list[Pair]]:
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(config.seed * 1000 + epoch)).tolist()
    return [[pairs[i] for i in order[s : s + config.batch_size]] for s in range(0, len(order), config.batch_size)]


def batch_loss(encoder, batch: list[Pair], config: TrainConfig) -> torch.Tensor:
    texts = [p.left for p in batch] + [p.right for p in batch]
    label_ids: dict[str, int] = {}
    labels = torch.tensor([label_ids.setdefault(p.label, len(label_ids)) for p in batch] * 2, device=encoder.device)
    embeddings = encoder(**encoder.tokenize(texts))
    if config.loss == "infonce":
        return supervised_infonce_loss(embeddings, labels, config.temperature)
    if config.use_miner:
        pos, neg = hard_pairs(embeddings, labels, config.margin)
    else:
        same = labels[:, None] == labels[None, :]
        pos, neg = same & ~torch.eye(len(labels), dtype=torch.bool, device=labels.device), ~same
    return multi_similarity_loss(embeddings, pos, neg, config.neg_scale, config.pos_scale, config.offset)


def save_checkpoint(
    folder: Path, encoder, optimizer: torch.optim.Optimizer, step: int, config: TrainConfig, dev_history: list | None = None
) -> None:
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    encoder.save(tmp / "model")
    state = optimizer.state_dict()
    tensors = {
        f"{idx}.{key}": value.detach().cpu().contiguous()
        for idx, param_state in state["state"].items()
        for key, value in param_state.items()
        if torch.is_tensor(value)
    }
    tensors["rng.torch"] = torch.get_rng_state()
    save_file(tensors, str(tmp / "optimizer.safetensors"))
    (tmp / "state.json").write_text(
        json.dumps(
            {"step": step, "config": asdict(config), "dev": dev_history or [], "param_groups": state["param_groups"]}, indent=2
        )
    )
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def load_optimizer_state(folder: Path, optimizer: torch.optim.Optimizer) -> int:
    meta = json.loads((folder / "state.json").read_text())
    tensors = load_file(str(folder / "optimizer.safetensors"))
    torch.set_rng_state(tensors.pop("rng.torch"))
    per_param: dict[int, dict] = {}
    for name, value in tensors.items():
        idx, key = name.split(".", 1)
        per_param.setdefault(int(idx), {})[key] = value
    optimizer.load_state_dict({"state": per_param, "param_groups": meta["param_groups"]})
    return meta["step"]


LOSSES = ("multi-similarity", "infonce")


def train(
    encoder,
    pairs: list,
    config: TrainConfig,
    checkpoint_dir: str | Path,
    *,
    load_encoder=None,
    progress: bool = True,
    batcher=None,
    dev_score=None,
    loss_fn=None,
) -> dict:
    """Trains `encoder` in place on `pairs`; returns training statistics.

    When `checkpoint_dir/checkpoint` exists (a run that was stopped), training resumes from it: pass
    `load_encoder(folder)` to read the saved weights back into `encoder`'s class. `batcher`, when given,
    replaces the shuffled pair batches: `batcher(epoch)` returns that epoch's batches and
    `batcher.steps_per_epoch()` their number (see hard_negatives.HardNegativeBatcher); `pairs` is then unused.
    `dev_score()`, when given, scores the current model (higher is better) after each epoch and when the time
    budget ends a run: the best scored model is the one left in `encoder` (needs `load_encoder`).
    `loss_fn(model, batch)`, when given, replaces the pair loss (`pairs` are then whatever items it reads).
    """
    if loss_fn is None and config.loss not in LOSSES:
        raise ValueError(f"unknown loss {config.loss!r}; choose one of {LOSSES}")
    if batcher is None and not pairs:
        raise ValueError(f"{Path(checkpoint_dir).name}: no training pairs to train on")
    torch.manual_seed(config.seed)
    checkpoint = Path(checkpoint_dir) / "checkpoint"
    params = [p for p in encoder.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    start, history = 0, []
    if checkpoint.is_dir() and load_encoder is not None:
        encoder.load_state_dict(load_encoder(checkpoint / "model").state_dict())
        start = load_optimizer_state(checkpoint, optimizer)
        history = json.loads((checkpoint / "state.json").read_text()).get("dev", [])
    best_dir = Path(checkpoint_dir) / "best"
    steps_per_epoch = batcher.steps_per_epoch() if batcher else math.ceil(len(pairs) / config.batch_size)
    epochs = max(config.epochs, math.ceil(config.min_steps / max(1, steps_per_epoch)))
    dev_every = max(1, math.ceil(config.dev_every_steps / max(1, steps_per_epoch)))
    total = steps_per_epoch * epochs
    if config.max_steps is not None:
        total = min(total, config.max_steps)
    losses: list[float] = []
    began, stopped = time.perf_counter(), "steps"
    encoder.train()
    bar = progress_bar(total=total, initial=start, show=progress, desc="train", unit="step")
    step, epoch_pairs = start, len(pairs)

    def scored(epoch: float) -> bool:
        """Scores the model on dev, keeps it when best; True when patience says stop."""
        encoder.eval()
        score = float(dev_score())
        encoder.train()
        if not history or score > max(h["score"] for h in history):
            keep = best_dir.with_name(best_dir.name + ".tmp")
            shutil.rmtree(keep, ignore_errors=True)
            encoder.save(keep)
            shutil.rmtree(best_dir, ignore_errors=True)
            keep.rename(best_dir)
        history.append({"epoch": epoch, "step": step, "score": score})
        best_at = max(range(len(history)), key=lambda i: (history[i]["score"], -i))
        return len(history) - 1 - best_at >= config.patience

    for epoch in range(epochs):
        if (epoch + 1) * steps_per_epoch <= start or epoch * steps_per_epoch >= total:
            continue  # no step of this epoch is left to run: do not build (or mine) its batches
        batches = batcher(epoch) if batcher else _batches(pairs, config, epoch)
        epoch_pairs = sum(len(b) for b in batches)
        for i, batch in enumerate(batches):
            global_step = epoch * steps_per_epoch + i
            if global_step < start:
                continue  # already done before the resume point; data order is a function of (seed, epoch)
            if global_step >= total:
                break
            for group in optimizer.param_groups:
                group["lr"] = learning_rate_at(global_step, total, config)
            loss = loss_fn(encoder, batch) if loss_fn is not None else batch_loss(encoder, batch, config)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step = global_step + 1
            losses.append(loss.item())
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
            if config.max_minutes is not None and time.perf_counter() - began > 60 * config.max_minutes:
                stopped = "time budget"
                break
            if step % config.checkpoint_every == 0 and step < total:
                save_checkpoint(checkpoint, encoder, optimizer, step, config, history)
        if stopped == "time budget":
            if dev_score is not None:
                scored(round(step / steps_per_epoch, 2))
            break
        if (
            dev_score is not None
            and step == min(total, (epoch + 1) * steps_per_epoch)
            and ((epoch + 1) % dev_every == 0 or step == total)
        ):
            if scored(epoch + 1):
                stopped = "patience"
                break
            if step < total:  # the dev history must survive a stop between epochs
                save_checkpoint(checkpoint, encoder, optimizer, step, config, history)
    bar.close()
    if best_dir.is_dir():
        encoder.load_state_dict(load_encoder(best_dir).state_dict())
    encoder.eval()
    shutil.rmtree(checkpoint, ignore_errors=True)  # finished: the final model is the artifact
    shutil.rmtree(best_dir, ignore_errors=True)
    out = {
        "steps": step,
        "epochs": epochs,
        "dev_every_epochs": dev_every,
        "resumed_from": start,
        "pairs": epoch_pairs,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "stopped_by": stopped,
        "mean_loss_last_50": sum(losses[-50:]) / max(1, len(losses[-50:])),
        "seconds": time.perf_counter() - began,
    }
    if history:
        best = max(history, key=lambda h: h["score"])
        out.update({"dev": history, "best_dev": best})
    return out
