"""`bioel train generative`: GenBioEL's two stages for a `GenerativeModel`.

1. KB-guided pre-training (`pretraining_examples`): per concept, two of its names s_a and s_b and a context c_e
   (its definition, else its other names, else s_b or s_a itself) spliced into one of the paper's clause
   templates (Table 10) as a synthetic input with s_a marked as the mention; the target is s_b.
2. Synonyms-aware fine-tuning (`finetune_examples`): each training mention of a dataset, its target the gold
   concept's name most similar to it by char 3-gram TF-IDF (or, for the ablations, the shortest or a random one).

Both stages run through the shared loop (training.loop: warm-up and decay, checkpoints and resume, time budget);
fine-tuning keeps the epoch with the best dev acc@1 of the whole-tree generative linker. Then, as for the
cross-encoder, the weight of a retriever's score added in reranker mode is chosen on dev. `run_generative_training`
takes a `GenerativeSettings`.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from bioel_core.linking.generative import GenerativeLinker, GenerativeReranker
from bioel_core.models import GenerativeModel, default_base_checkpoint, load_encoder
from bioel_core.models.base import CONFIG_FILE, read_config
from bioel_core.names import NameSet
from bioel_core.settings.train import TARGET_NAMES as TARGETS
from bioel_core.settings.train import GenerativeSettings
from bioel_core.training.loop import run_seed
from bioel_core.training.recipe import dataset_mentions, dev_queries, finetune_plan, finish_card, stage_config, train_stage

# Table 10 of the paper: encoder-side clause templates by what the concept has; {a} is the mention (s_a), {c} c_e
TEMPLATES = {
    "definition": (
        "{a} is defined as {c} .",
        "{a} is described as {c} .",
        "{c} are the definitions of {a} .",
        "{c} describe {a} .",
    ),
    "synonyms": (
        "{c} are the synonyms of {a} .",
        "{c} indicate the same concept as {a} .",
        "{a} has synonyms such as {c} .",
        "{a} refers to the same concepts as {c} .",
    ),
    "few_names": ("{c} is {a} .", "{c} is the same as {a} .", "{a} is {c} .", "{a} is the same as {c} ."),
}
CONTEXT_NAMES = 8  # other names making up c_e when a concept has no definition


@dataclass(frozen=True)
class GenerativeExample:
    mention: str
    target: str  # the name the decoder learns to write
    left: str = ""  # context before and after the mention
    right: str = ""


def fill_template(template: str, mention: str, context: str) -> GenerativeExample:
    """The template with c_e in place, split around the mention (which the model marks itself)."""
    left, right = template.replace("{c}", context).split("{a}")
    return GenerativeExample(mention, "", left.strip(), right.strip())


def pretraining_examples(by_concept: dict[str, list[str]], definitions: dict[str, str], seed: int) -> list[GenerativeExample]:
    """One synthetic example per concept (seeded): s_a and s_b two of its names at random (the same one when it
    has one), c_e its definition, else up to CONTEXT_NAMES of its other names, else s_b (two names) or s_a."""
    rng = random.Random(seed)
    out = []
    for concept in sorted(by_concept):
        names = sorted(set(by_concept[concept]))
        a, b = rng.sample(names, 2) if len(names) > 1 else (names[0], names[0])
        others = [n for n in names if n not in (a, b)]
        if definitions.get(concept):
            kind, context = "definition", definitions[concept]
        elif others:
            kind, context = "synonyms", " , ".join(rng.sample(others, min(CONTEXT_NAMES, len(others))))
        else:
            kind, context = "few_names", b
        out.append(replace(fill_template(rng.choice(TEMPLATES[kind]), a, context), target=b))
    return out


def choose_targets(
    mentions: list[tuple[str, list[str]]], by_concept: dict[str, list[str]], how: str = "tfidf", seed: int = 0
) -> list[str]:
    """Per (mention, gold concept ids), the gold concepts' name the decoder learns to write: the most similar by
    char 3-gram TF-IDF cosine (ties: dictionary order), the shortest, or one at random (seeded)."""
    if how not in TARGETS:
        raise ValueError(f"target selection must be one of {TARGETS}, got {how!r}")
    pools = [[n for i in ids for n in by_concept.get(i, ())] for _, ids in mentions]
    if how == "shortest":
        return [min(pool, key=len) for pool in pools]
    if how == "random":
        rng = random.Random(seed)
        return [rng.choice(pool) for pool in pools]
    from bioel_core.linking.tfidf import TfidfLinker

    distinct = sorted({n for pool in pools for n in pool})
    tfidf = TfidfLinker(NameSet.from_pairs(((n, ("",)) for n in distinct), normalized=True))
    queries = tfidf.vectorize([m for m, _ in mentions])
    out = []
    for i, pool in enumerate(pools):
        rows = [tfidf.exact.row_of[n] for n in pool]
        cosines = (tfidf.matrix[rows] @ queries[i].T).toarray().ravel()
        out.append(pool[int(np.argmax(cosines))])
    return out


def generative_loss(model: GenerativeModel, batch: list[GenerativeExample]) -> torch.Tensor:
    mentions = [e.mention for e in batch]
    return model.loss(
        model.encoder_ids(mentions, [e.left for e in batch], [e.right for e in batch]),
        model.prompt_ids(mentions),
        model.name_ids([e.target for e in batch]),
    )


def kb_names(names_dir: str) -> tuple[NameSet, dict[str, list[str]], dict[str, str]]:
    """(names, concept id -> its names, concept id -> definition where the KB has one)."""
    from bioel_core.tables import read_table

    names = NameSet.from_names_table(names_dir)
    by_concept: dict[str, list[str]] = {}
    for name, ids in zip(names.names, names.concept_ids):
        by_concept.setdefault(ids[0], []).append(name)
    concepts = read_table(names_dir, "concepts", ["concept_id", "definition"]).to_pydict()
    definitions = {c: d for c, d in zip(concepts["concept_id"], concepts["definition"]) if d}
    return names, by_concept, definitions


def new_model(init: str | None, decoder_layers: int, prompt: bool, device: str, seed: int = 0) -> GenerativeModel:
    """A generative model folder to train further, or a fresh one warm-started from an HF BERT checkpoint (the
    weights that start random, the decoder's cross-attention, drawn from `seed`)."""
    if init and (Path(init) / CONFIG_FILE).is_file():
        read_config(init, GenerativeModel.encoder_type)
        return load_encoder(init, device).train()
    torch.manual_seed(seed)
    return GenerativeModel(Path(init) if init else default_base_checkpoint(), decoder_layers=decoder_layers, prompt=prompt).to(
        device
    )


def run_generative_training(settings: GenerativeSettings, *, command: list[str] | None = None) -> dict:
    """Pre-trains on the KB's names (with pre-training epochs), fine-tunes on the datasets' training mentions (with
    a train dataset and fine-tuning epochs), writes the model folder with its card."""
    from bioel_core.evaluation import evaluate
    from bioel_core.linking.dense import DenseLinker
    from bioel_core.models import model_folder, resolve_device
    from bioel_core.training.rerank import choose_retriever_weight, dev_stages

    s, plan = settings, finetune_plan(settings)
    pretrain = stage_config(s, epochs=s.pretrain_epochs, loss="cross-entropy") if s.pretrain_epochs > 0 else None
    finetune = (
        stage_config(s, epochs=plan.epochs, loss="cross-entropy", max_steps=s.finetune_max_steps, plan=plan)
        if plan.epochs > 0
        else None
    )
    names_dir, train_datasets, train_split, target = s.names, s.train_dataset, plan.split, s.target_name
    device, progress, retriever_model = resolve_device(s.device), not s.no_progress, str(model_folder(s.retriever))
    out, workdir = Path(s.output), Path(s.output) / "_train"
    began = time.perf_counter()
    names, by_concept, definitions = kb_names(names_dir)
    model = new_model(s.init, s.decoder_layers, not s.no_prompt, device, run_seed(pretrain, finetune))
    for stage in ("finetune", "pretrain"):  # a restarted run continues from the last finished stage's weights
        if (workdir / stage / "done.json").is_file():
            model.load_state_dict(load_encoder(workdir / stage / "model", device).state_dict())
            break
    data = {
        "names": names_dir,
        "names_count": len(names),
        "concepts": len(by_concept),
        "definitions": len(definitions),
        "prompt": model.prompt,
        "target_name": target,
    }
    stages = {}
    if pretrain is not None:
        examples = pretraining_examples(by_concept, definitions, pretrain.seed)
        data["pretrain_examples"] = len(examples)
        stages["pretrain"] = train_stage(model, "pretrain", examples, pretrain, workdir, progress, loss_fn=generative_loss)
        if finetune is not None and finetune.max_minutes is not None:  # one budget for the whole run
            finetune = replace(finetune, max_minutes=max(0.0, finetune.max_minutes - stages["pretrain"]["seconds"] / 60))
    dev = []
    if finetune is not None and train_datasets:
        mentions, unusable, where = dataset_mentions(names, names_dir, train_datasets, train_split, "generative fine-tuning")
        targets = choose_targets(mentions, by_concept, target, finetune.seed)
        examples = [GenerativeExample(m, t) for (m, _), t in zip(mentions, targets)]
        data.update(
            {
                "train_datasets": train_datasets,
                "train_split": train_split,
                "train_mentions": len(examples),
                "train_queries_unusable": unusable,
            }
        )
        queries = [q for d in train_datasets for q in dev_queries(d)] if train_split == "train" else []
        linker = GenerativeLinker(names, model, "(training)") if queries else None
        score = (lambda: evaluate(linker, queries, k=1)[0]["acc@1"]) if queries else None
        data["model_selection"] = (
            "best dev acc@1 of the whole-tree linker (processed_dev, the KB's names)" if score else "the last epoch"
        )
        print(
            f"generative: {len(examples):,} training mentions from {where} (targets: {target}); model selection: "
            f"{'dev acc@1' if score else 'the last epoch'}",
            file=sys.stderr,
        )
        stages["finetune"] = train_stage(
            model, "finetune", examples, finetune, workdir, progress, dev_score=score, loss_fn=generative_loss
        )
        if score:
            dev = dev_stages(
                DenseLinker.build(names, retriever_model, device=device),
                names,
                train_datasets,
                GenerativeReranker(model),
                s.rerank_depth,
            )
    weights = choose_retriever_weight(model, dev, s.retriever_weight)
    data.update(
        {
            "retriever": str(Path(retriever_model).resolve()),
            "rerank_depth": s.rerank_depth,
            "retriever_weight": model.retriever_weight,
            "retriever_weight_dev_acc@1": weights,
        }
    )
    model.save(out, dtype=s.save_dtype)
    return finish_card(out, model, data, stages, settings=s, device=device, command=command, began=began, workdir=workdir)
