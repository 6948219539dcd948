"""`bioel train cross-encoder`: a reranker trained on a dataset's training mentions, each against the
concepts a retriever confuses it with.

Each distinct (mention, gold concept) of the training split becomes one example: the retriever's `size` best
concepts for the mention (the gold one put in last when the retriever missed it), and the loss is the
cross-entropy of the gold concept among them (a softmax over the cross-encoder's scores). Mentions equal to one
KB name of a single concept are left out: the rerank stage never reorders those (linking.rerank). The rest of
the recipe is the bi-encoders' (training.loop): warm-up and decay, dev acc@1 of the whole rerank stage after
each epoch, best model kept, patience, time budget, resume. Then the weight of the retriever's score added to the
reranker's is chosen on dev (`choose_retriever_weight`) and saved in the model's config. `run_reranker_training`
takes a `CrossEncoderSettings`.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from bioel_core.linking.base import Linker
from bioel_core.linking.rerank import ConceptCandidate, ConceptNames, CrossEncoderReranker, KeptPools, KeptScores, concept_text
from bioel_core.models import CrossEncoder, default_base_checkpoint, load_encoder
from bioel_core.names import NameSet
from bioel_core.settings.train import CrossEncoderSettings
from bioel_core.training.recipe import dataset_mentions, dev_queries, finetune_plan, finish_card, stage_config, train_stage


@dataclass(frozen=True)
class RerankExample:
    query: str
    candidates: tuple[ConceptCandidate, ...]
    gold: int  # position of the gold concept in candidates


def rerank_examples(
    retriever: Linker, names: NameSet, mentions: list[tuple[str, list[str]]], size: int, hide_query: bool = False
) -> tuple[list[RerankExample], dict]:
    """Examples from (normalized mention, gold concept ids) pairs; returns them and how many were left out why.
    `hide_query`: the mentions are KB names, hidden from the candidates (`synonym_examples`)."""
    concepts = ConceptNames(names)
    by_id = {ids[0]: ids for ids in concepts.by_concept}
    distinct = sorted({(text, tuple(sorted(gold))) for text, gold in mentions})
    # one more name than needed: a hidden query takes one place
    ranked = retriever.search([text for text, _ in distinct], 4 * size + int(hide_query))
    examples, skipped = [], {"exact_unambiguous": 0, "gold_not_in_kb": 0}
    for (text, gold), found in zip(distinct, ranked):
        hidden = text if hide_query else None
        pool = concepts.group(text, found, size, hidden)
        if sum(c.exact for c in pool) == 1 and pool[0].exact:
            skipped["exact_unambiguous"] += 1
            continue
        at = next((i for i, c in enumerate(pool) if c.concept_ids[0] in gold), None)
        if at is None:
            ids = next((by_id[g] for g in gold if g in by_id), None)
            if ids is None:
                skipped["gold_not_in_kb"] += 1
                continue
            # not retrieved: no retriever score
            pool = pool[: size - 1] + [
                ConceptCandidate(ids, tuple(n for n in concepts.by_concept[ids] if n != hidden), float("-inf"))
            ]
            at = len(pool) - 1
        if len(pool) > 1:
            examples.append(RerankExample(text, tuple(pool), at))
    return examples, {"distinct_mentions": len(distinct), "examples": len(examples), **skipped}


def synonym_examples(retriever: Linker, names: NameSet, count: int, size: int, seed: int) -> tuple[list[RerankExample], dict]:
    """SapBERT's self-alignment for the reranker: `count` KB names of concepts with several names, one per concept
    picked at random (seeded), each as a mention whose concept must be found by its other names (the name itself
    is hidden from every candidate). More varied data than a dataset's few thousand training mentions."""
    rng = random.Random(seed)
    with_synonyms = [(ids, sorted(set(ns))) for ids, ns in sorted(ConceptNames(names).by_concept.items()) if len(set(ns)) > 1]
    picked = rng.sample(with_synonyms, min(count, len(with_synonyms)))
    return rerank_examples(retriever, names, [(rng.choice(ns), [ids[0]]) for ids, ns in picked], size, hide_query=True)


def new_cross_encoder(init: str | None, max_length: int, device: str, seed: int) -> CrossEncoder:
    """A cross-encoder to train from an HF checkpoint (default the packaged MiniLM), its head drawn from `seed`."""
    torch.manual_seed(seed)
    return CrossEncoder(Path(init) if init else default_base_checkpoint(), max_length=max_length).to(device)


def listwise_loss(model: CrossEncoder, batch: list[RerankExample]) -> torch.Tensor:
    """Mean cross-entropy of each example's gold concept among its candidates."""
    pairs = [(e.query, concept_text(c)) for e in batch for c in e.candidates]
    scores = model(**model.tokenize(pairs))
    losses, at = [], 0
    for e in batch:
        n = len(e.candidates)
        losses.append(F.cross_entropy(scores[at : at + n].unsqueeze(0), torch.tensor([e.gold], device=scores.device)))
        at += n
    return torch.stack(losses).mean()


def dev_stages(retriever, names: NameSet, datasets: list[str], reranker, depth: int) -> list[tuple[KeptPools, list]]:
    """Per dataset with a processed_dev split: (the rerank stage of `reranker` over `retriever`'s pools, on the
    dataset's `dev_dictionary.txt` as BioSyn's protocol scores it, or on the KB's names without one; its queries with
    a concept). The retriever is frozen, so each query's pool is retrieved once for every later score."""
    from bioel_core.linking.dense import DenseLinker

    out = []
    for dataset in datasets:
        queries = dev_queries(dataset)
        if not queries:
            continue
        dictionary = Path(dataset) / "dev_dictionary.txt"
        if dictionary.is_file():
            dev_names = NameSet.from_biosyn(dictionary, names.normalizer)
            dev_retriever = DenseLinker(dev_names, retriever.encoder, retriever.model_path)
        else:
            dev_names, dev_retriever = names, retriever
        out.append((KeptPools(dev_names, dev_retriever, reranker, "(training)", depth), queries))
    return out


def dev_accuracy(stages: list[tuple[KeptPools, list]], reranker=None) -> float:
    """acc@1 of the rerank stage over every dev query of every stage (with `reranker` in each, when given)."""
    from bioel_core.evaluation import evaluate

    hits = total = 0
    for stage, queries in stages:
        if reranker is not None:
            stage.reranker = reranker
        scores = evaluate(stage, queries, k=1)[0]
        hits, total = hits + scores["acc@1"] * scores["n"], total + scores["n"]
    return hits / total


# weights of the retriever's score tried on dev after training (its cosines differ by ~0.1 between candidates, the
# cross-encoder's logits by several units)
RETRIEVER_WEIGHTS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)


def choose_retriever_weight(model, stages: list[tuple[KeptPools, list]], given: float | None = None) -> dict | str:
    """Sets `model.retriever_weight`: to `given` when there is one (chosen on dev by an earlier run, e.g. before
    retraining on train + dev), else to the weight with the best acc@1 on the dev `stages` (ties: the smaller).
    Returns what the card records: each weight's dev acc@1, or how the weight was set."""
    if given is not None:
        model.retriever_weight = given
        return f"given ({given:g}, retriever_weight)"
    if not stages:
        return "not chosen (no dev split)"
    kept, scores = KeptScores(stages[0][0].reranker), {}
    for weight in RETRIEVER_WEIGHTS:
        model.retriever_weight = weight
        scores[weight] = dev_accuracy(stages, kept)
    model.retriever_weight = max(RETRIEVER_WEIGHTS, key=lambda w: (scores[w], -w))
    return {str(w): a for w, a in scores.items()}


def run_reranker_training(settings: CrossEncoderSettings, *, command: list[str] | None = None, max_length: int = 32) -> dict:
    """Trains a cross-encoder reranker for the settings' retriever (a dense model folder; default the shipped disease
    model) and writes it with its card."""
    from bioel_core.linking.dense import DenseLinker
    from bioel_core.models import model_folder, resolve_device

    s, plan = settings, finetune_plan(settings)
    config = stage_config(s, epochs=plan.epochs, loss="listwise", max_steps=s.finetune_max_steps, plan=plan)
    device, names_dir, train_datasets, train_split = resolve_device(s.device), s.names, s.train_dataset, plan.split
    retriever_model, example_size, depth = str(model_folder(s.retriever)), s.example_size, s.rerank_depth
    out, workdir = Path(s.output), Path(s.output) / "_train"
    began = time.perf_counter()
    names = NameSet.from_names_table(names_dir)
    mentions, unusable, where = dataset_mentions(names, names_dir, train_datasets, train_split, "cross-encoder")
    retriever = DenseLinker.build(names, retriever_model, device=device)
    examples, counts = rerank_examples(retriever, names, mentions, example_size)
    if not examples:
        raise ValueError(
            f"cross-encoder: none of the {counts['distinct_mentions']:,} distinct training mentions of {where} "
            f"leaves the retriever anything to reorder ({counts}): nothing to train a reranker on"
        )
    # by default as many KB-synonym examples as mention examples
    synonyms, synonym_counts = synonym_examples(
        retriever, names, len(examples) if s.synonym_examples is None else s.synonym_examples, example_size, config.seed
    )
    examples += synonyms
    counts["synonym_examples"] = synonym_counts["examples"]
    model = new_cross_encoder(s.init, max_length, device, config.seed)
    if (workdir / "rerank" / "done.json").is_file():
        model.load_state_dict(load_encoder(workdir / "rerank" / "model", device).state_dict())
    # dev chooses the epoch and the retriever's weight, only when dev is not trained on
    dev = dev_stages(retriever, names, train_datasets, CrossEncoderReranker(model), depth) if train_split == "train" else []
    score = (lambda: dev_accuracy(dev)) if dev else None
    print(
        f"cross-encoder: {counts['examples']:,} mention examples of {example_size} concepts from {where} and "
        f"{counts['synonym_examples']:,} from the KB's synonyms "
        f"(retriever {retriever_model}); model selection: {'dev acc@1' if score else 'the last epoch'}",
        file=sys.stderr,
    )
    stage = train_stage(model, "rerank", examples, config, workdir, not s.no_progress, dev_score=score, loss_fn=listwise_loss)
    weights = choose_retriever_weight(model, dev, s.retriever_weight)
    model.save(out, dtype=s.save_dtype)
    data = {
        "names": names_dir,
        "names_count": len(names),
        "retriever": str(Path(retriever_model).resolve()),
        "retriever_fingerprint": retriever.encoder.fingerprint(),
        "train_datasets": train_datasets,
        "train_split": train_split,
        "train_mentions": len(mentions),
        "train_queries_unusable": unusable,
        "concepts_per_example": example_size,
        "rerank_depth": depth,
        **counts,
        "model_selection": (
            "best dev acc@1 of retriever + reranker after each epoch (processed_dev against dev_dictionary.txt "
            "where the dataset has one, as BioSyn's protocol scores it)"
        )
        if score
        else "the last epoch",
        "retriever_weight": model.retriever_weight,
        "retriever_weight_dev_acc@1": weights,
    }
    return finish_card(
        out, model, data, {"rerank": stage}, settings=s, device=device, command=command, began=began, workdir=workdir
    )
