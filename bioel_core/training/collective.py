"""Training the collective document model (`bioel train collective`, `run_collective_training` from a
`CollectiveSettings`).

Per document, one forward pass, three losses summed:
- span loss: binary cross-entropy of every candidate span x entity type against the gold spans (a gold span that
  does not start and end on word boundaries of the WordPiece split cannot be a candidate and is counted apart), over
  the types the document's corpus annotates only;
- linking loss: for each gold mention whose concept is in its type's KB, softmax cross-entropy of the scaled
  cosines between its mention vector and [its concept's nearest name, `random_negatives` random names of other
  concepts, `hard_negatives` nearest names of other concepts]. The name vectors are the frozen name encoder's,
  computed once; hard negatives are searched with the current mention vector at every step (fresher than the
  paper's once per epoch, at the cost of one exact search per document and type, on the training device:
  bioel_core.index.exact, no FAISS);
- BIO loss: token cross-entropy of the BIO tags (the comparison decoder); where the document's corpus does not
  annotate a type, a token outside its gold mentions may be that type's B or I as well as O (the loss is that of the
  set of tags it allows: -log of their summed probability).

Corpora that annotate some of the model's types only (NCBI-disease: diseases) are `TypedCorpus`es
(bioel_core.corpora.annotated, a train corpus given as `Disease=PATH`): their documents' spans of the other types are
neither positives nor negatives, and their predictions of those types are not scored. Dev corpora are scored each
against its own types and pooled (micro: the counts summed), which picks the epoch and the decoding.
AdamW with linear warm-up and decay, gradients accumulated over `documents_per_step` documents; after every epoch
the dev corpus is scored end to end (strict P/R/F1, spans decoded at 0.5, counted as `bioel evaluate-e2e` restricted to
its types counts them, pooled over the dev corpora: `dev_scores`) and the best epoch is kept; a wall-clock
budget ends training cleanly with the best model so far. Checkpoints (model folder + optimizer + RNG in
safetensors) make a killed run resumable. The corpora are read strictly in any annotated format (`read_annotated`);
the parts of a composite mention a BioC release states apart are not gold mentions (`is_composite_part`), so BC5CDR's
BioC and PubTator releases train the same.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bioel_core.corpora.annotated import TypedCorpus, is_composite_part
from bioel_core.corpora.records import Document, Mention
from bioel_core.evaluation.e2e import e2e_scores
from bioel_core.index.exact import ExactInnerProduct
from bioel_core.kb.vocab import plain_id
from bioel_core.progress import bar as progress_bar
from bioel_core.models.collective import (
    DOCUMENT_DIR,
    NAMES_DIR,
    CollectiveEncoder,
    Encoded,
    feed_forward_importance,
    hidden_importance,
    is_collective,
    keep_feed_forward,
    keep_hidden,
)
from bioel_core.settings import SettingsError, to_mapping
from bioel_core.settings.train import CollectiveSettings
from bioel_core.training.loop import load_optimizer_state, save_checkpoint

log = logging.getLogger(__name__)
# train documents whose activations choose the feed-forward units, hidden dimensions and heads a smaller model keeps
CUT_SAMPLE = 128


@dataclass
class CollectiveTrainConfig:
    epochs: int = 8
    learning_rate: float = 5e-5  # the transformer
    head_learning_rate: float = 1e-3  # spans, BIO, mention projection
    weight_decay: float = 0.01
    warmup: float = 0.1  # fraction of the steps
    documents_per_step: int = 4
    random_negatives: int = 10
    hard_negatives: int = 10
    scale: float = 20.0  # cosine -> logit
    span_weight: float = 1.0
    link_weight: float = 1.0
    bio_weight: float = 1.0
    seed: int = 0
    max_minutes: float | None = None
    epoch_dev_documents: int = 150  # of each dev corpus, scored after each epoch to pick the best (all are used to tune)
    thresholds: list = field(default_factory=lambda: [0.3, 0.4, 0.5, 0.6, 0.7])


class NameSpace:
    """One entity type's names in the frozen name space: vectors, their concepts, an exact index (on `device`)."""

    def __init__(self, vectors: np.ndarray, concept_ids: list[str], device: str | torch.device = "cpu"):
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.concept_ids = concept_ids
        self.rows_of: dict[str, list[int]] = {}
        for row, concept in enumerate(concept_ids):
            self.rows_of.setdefault(concept, []).append(row)
        self.index = ExactInnerProduct(self.vectors, device)

    @classmethod
    def from_names_table(cls, names_dir: str | Path, encoder, device: str | torch.device = "cpu") -> NameSpace:
        from bioel_core.embeddings import TEXT_COLUMN
        from bioel_core.tables import read_table

        table = read_table(names_dir, "names", ["concept_id", TEXT_COLUMN]).to_pydict()
        return cls(encoder.encode(table[TEXT_COLUMN], batch_size=512), table["concept_id"], device)

    def best(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scores, rows = self.index.search(vectors, 1)
        return scores[:, 0], rows[:, 0]


def gold_mentions(document: Document, entity_types) -> list[Mention]:
    """The document's gold mentions of the model's entity types; a composite's parts stated apart are not."""
    return [m for m in document.mentions if m.entity_type in entity_types and not is_composite_part(m)]


def gold_piece_spans(encoded: Encoded, document: Document, entity_types: list[str]) -> tuple[dict, int]:
    """{(start piece, end piece, type index): gold concept ids} for the document's gold mentions whose characters
    start and end on piece boundaries; and how many mentions could not be aligned. Mentions stated apart for one
    span and type give it the union of their ids, as the scoring counts them (bioel_core.evaluation.e2e): the link
    loss then takes the nearest name of any of them as the positive and none of them as a negative, where the last
    stated would have made the others' names negatives although linking to them scores as right. A span whose
    mentions have no concept id (`-1`) is a span to detect with nothing to link."""
    starts = {p.start: i for i, p in enumerate(encoded.pieces)}
    ends = {p.end: i for i, p in enumerate(encoded.pieces)}
    out, unaligned = {}, 0
    for m in gold_mentions(document, entity_types):
        i, j = starts.get(m.start), ends.get(m.end)
        if i is None or j is None or j < i:
            unaligned += 1
            continue
        # the corpus readers split the id field (`|`, `+`) and read `-1` as no id (corpora.pubtator.split_ids)
        key = (i, j, entity_types.index(m.entity_type))
        out[key] = out.get(key, set()) | {plain_id(c) for c in m.concept_ids}
    return out, unaligned


def annotated_mask(entity_types: list[str], annotated=None) -> list[bool]:
    """Per model type, whether the document's corpus annotates it (None: every type)."""
    return [annotated is None or t in annotated for t in entity_types]


def span_loss(logits: torch.Tensor, spans: torch.Tensor, gold: dict, annotated: list[bool] | None = None) -> torch.Tensor:
    """Mean binary cross-entropy over candidate spans x the annotated types (`annotated`: per type; None: all), 1 for
    the gold (span, type) pairs. A type the corpus does not annotate has no negatives to learn from."""
    target = torch.zeros_like(logits)
    index = {(int(a), int(b)): k for k, (a, b) in enumerate(spans.tolist())}
    for i, j, t in gold:
        if (i, j) in index:
            target[index[(i, j)], t] = 1.0
    if annotated is not None and not all(annotated):
        keep = torch.tensor(annotated, device=logits.device)
        logits, target = logits[:, keep], target[:, keep]
    return F.binary_cross_entropy_with_logits(logits, target) if logits.numel() else logits.sum()


def bio_targets(n: int, gold: dict) -> torch.Tensor:
    tags = torch.zeros(n, dtype=torch.long)
    for i, j, t in sorted(gold, key=lambda g: (g[1] - g[0], g)):  # longer spans last: they win overlaps
        tags[i] = 1 + 2 * t
        tags[i + 1 : j + 1] = 2 + 2 * t
    return tags


def bio_loss(logits: torch.Tensor, tags: torch.Tensor, annotated: list[bool] | None = None) -> torch.Tensor:
    """Mean over tokens of -log P(the tags the gold allows): its tag, and for an O token also the B and I tags of
    each type the corpus does not annotate (`annotated`: per type; None: all, which is plain cross-entropy)."""
    if annotated is None or all(annotated):
        return F.cross_entropy(logits, tags)
    allowed = F.one_hot(tags, logits.shape[1]).bool()
    unknown = [tag for t, known in enumerate(annotated) if not known for tag in (1 + 2 * t, 2 + 2 * t)]
    allowed[:, unknown] |= (tags == 0).unsqueeze(1)
    return (torch.logsumexp(logits, dim=1) - torch.logsumexp(logits.masked_fill(~allowed, float("-inf")), dim=1)).mean()


def link_loss(mentions: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor, scale: float) -> torch.Tensor:
    """Softmax cross-entropy of scale * cosine: each mention (m, d) against its positive (m, d) first and its
    negatives (m, k, d); all vectors L2-normalized."""
    pos = (mentions * positives).sum(-1, keepdim=True)
    neg = torch.einsum("md,mkd->mk", mentions, negatives)
    logits = scale * torch.cat([pos, neg], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(mentions), dtype=torch.long, device=mentions.device))


def _negatives(
    space: NameSpace, nearest: np.ndarray, gold: set[str], config: CollectiveTrainConfig, rng: random.Random
) -> list[int]:
    """`hard_negatives` nearest names of other concepts (of `nearest`, the mention's nearest rows, best first), then
    random names of other concepts to fill the rest."""
    hard = [int(r) for r in nearest if r >= 0 and space.concept_ids[r] not in gold][: config.hard_negatives]
    randoms = []
    while len(hard) + len(randoms) < config.hard_negatives + config.random_negatives:
        r = rng.randrange(len(space.concept_ids))
        if space.concept_ids[r] not in gold:
            randoms.append(r)
    return hard + randoms


def document_loss(
    model: CollectiveEncoder,
    document: Document,
    spaces: dict[str, NameSpace],
    config: CollectiveTrainConfig,
    rng: random.Random,
    annotated=None,
) -> tuple[torch.Tensor, dict]:
    """The document's summed loss and its parts. `annotated`: the entity types its corpus annotates (None: all)."""
    encoded = model.encode_document(document.text)
    gold, unaligned = gold_piece_spans(encoded, document, model.entity_types)
    mask = annotated_mask(model.entity_types, annotated)
    loss_span = span_loss(model.span_logits(encoded), encoded.spans, gold, mask)
    loss_bio = (
        bio_loss(model.bio_logits(encoded), bio_targets(len(encoded.pieces), gold).to(model.device), mask)
        if encoded.pieces
        else encoded.states.sum()
    )
    linkable = []
    for (i, j, t), ids in sorted(gold.items()):
        space = spaces[model.entity_types[t]]
        rows = [r for c in sorted(ids) for r in space.rows_of.get(c, [])]
        if rows:
            linkable.append((i, j, space, rows, ids))
    loss_link = encoded.states.sum() * 0
    if linkable:
        vectors = model.mention_vectors(encoded, torch.tensor([(i, j) for i, j, *_ in linkable], device=model.device))
        current = vectors.detach().cpu().numpy()
        nearest = {}  # per name space, one search for all its mentions: deep enough to pass every gold name
        for space in {id(space): space for _, _, space, _, _ in linkable}.values():
            ks = [k for k, (_, _, s, _, _) in enumerate(linkable) if s is space]
            depth = config.hard_negatives + max(len(linkable[k][3]) for k in ks)
            nearest.update(zip(ks, space.index.search(current[ks], depth)[1]))
        positives, negatives = [], []
        for k, (_, _, space, rows, ids) in enumerate(linkable):
            positives.append(space.vectors[rows[int(np.argmax(space.vectors[rows] @ current[k]))]])
            negatives.append(space.vectors[_negatives(space, nearest[k], ids, config, rng)])
        loss_link = link_loss(
            vectors,
            torch.from_numpy(np.stack(positives)).to(model.device),
            torch.from_numpy(np.stack(negatives)).to(model.device),
            config.scale,
        )
    total = config.span_weight * loss_span + config.link_weight * loss_link + config.bio_weight * loss_bio
    return total, {
        "span": loss_span.item(),
        "link": loss_link.item(),
        "bio": loss_bio.item(),
        "unaligned": unaligned,
        "mentions": len(gold),
        "linkable": len(linkable),
    }


@torch.no_grad()
def predict(
    model: CollectiveEncoder,
    document: Document,
    spaces: dict[str, NameSpace],
    thresholds: dict[str, float],
    decoder: str = "spans",
    link_with: str = "collective",
    encoded: Encoded | None = None,
) -> list[tuple[int, int, str, str, float]]:
    """(start, end, type, concept id, score) per detected mention. `link_with`: collective (the mention vector),
    surface (the name encoder on the span's text), both (their normalized sum). `encoded`: the document's
    encoding when already computed (tuning decodes one encoding many ways)."""
    encoded = encoded or model.encode_document(document.text)
    if decoder == "spans":
        found = model.decode_spans(encoded, model.span_logits(encoded), thresholds)
    else:
        found = model.decode_bio(encoded, model.bio_logits(encoded))
    found = [s for s in found if s.entity_type in spaces]  # types with no KB here are not linked
    if not found:
        return []
    vectors = model.query_vectors(encoded, document.text, [s.piece_span for s in found], link_with)
    best = {}  # one search per type
    for entity_type in dict.fromkeys(s.entity_type for s in found):
        ks = [k for k, s in enumerate(found) if s.entity_type == entity_type]
        best.update(zip(ks, zip(*spaces[entity_type].best(vectors[ks]))))
    return [
        (s.start, s.end, s.entity_type, spaces[s.entity_type].concept_ids[int(best[k][1])], float(best[k][0]))
        for k, s in enumerate(found)
    ]


def predicted_documents(
    model: CollectiveEncoder,
    documents: list[Document],
    spaces: dict[str, NameSpace],
    thresholds: dict[str, float],
    decoder: str = "spans",
    link_with: str = "collective",
    encoded: list[Encoded] | None = None,
) -> list[Document]:
    """The documents with the model's linked spans (`predict`) as their mentions in place of the gold ones."""
    out = []
    for k, d in enumerate(documents):
        found = predict(model, d, spaces, thresholds, decoder, link_with, encoded[k] if encoded else None)
        out.append(replace(d, mentions=[Mention(d.text[a:b], d.doc_id, a, b, t, (c,)) for a, b, t, c, _ in found]))
    return out


@torch.no_grad()
def dev_scores(
    model: CollectiveEncoder,
    corpora: list[TypedCorpus],
    spaces: dict[str, NameSpace],
    thresholds: dict[str, float],
    decoder: str = "spans",
    link_with: str = "collective",
    encoded: list[list[Encoded]] | None = None,
) -> dict:
    """Strict micro P/R/F1 (fractions, as the card records them) of the model's links on the gold dev `corpora`, each
    counted as `bioel evaluate-e2e` restricted to the types it annotates counts them (bioel_core.evaluation.e2e.e2e_scores):
    one gold annotation per span, its ids the union; no-concept annotations and composite parts left out (counted
    apart); predictions of a type the corpus does not annotate left out. The corpora are pooled by summing their
    counts (`by_corpus` keeps each one's). A prediction need not have its gold's entity type: evaluate-e2e keeps the
    annotations of those types on both sides and then matches by span and ids alone, and the epoch and decoding are
    picked by the figure it reports (each type links into its own KB, so an id right under another type is rare).
    `encoded`: per corpus, its documents' encodings when already computed."""
    pooled, by_corpus = {"n_pred": 0, "n_gold": 0, "correct_pred": 0, "matched_gold": 0, "gold_without_concept": 0}, {}
    for c, corpus in enumerate(corpora):
        predicted = predicted_documents(
            model, corpus.documents, spaces, thresholds, decoder, link_with, encoded[c] if encoded else None
        )
        scores = e2e_scores(
            corpus.documents, predicted, corpus.types, names=(f"the dev corpus {corpus.source}", "the model's links")
        )
        counts = {
            **{k: scores["strict"][k] for k in ("n_pred", "n_gold", "correct_pred", "matched_gold")},
            "gold_without_concept": scores["gold_without_concept"],
        }
        for k, v in counts.items():
            pooled[k] += v
        by_corpus[corpus.source] = _fractions(counts)
    return {**_fractions(pooled), **({"by_corpus": by_corpus} if len(corpora) > 1 else {})}


def _fractions(counts: dict) -> dict:
    precision = counts["correct_pred"] / counts["n_pred"] if counts["n_pred"] else 0.0
    recall = counts["matched_gold"] / counts["n_gold"] if counts["n_gold"] else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "predicted": counts["n_pred"],
        "gold": counts["n_gold"],
        "correct": counts["correct_pred"],
        "matched": counts["matched_gold"],
        "gold_without_concept": counts["gold_without_concept"],
    }


def train_collective(
    model: CollectiveEncoder,
    train: list[TypedCorpus],
    dev: list[TypedCorpus],
    spaces: dict[str, NameSpace],
    config: CollectiveTrainConfig,
    output: str | Path,
) -> dict:
    """Trains in place, keeps the best dev epoch in `output` (saved model folder); returns the training record."""
    train_docs = [(d, corpus.types) for corpus in train for d in corpus.documents]
    epoch_dev = [replace(corpus, documents=corpus.documents[: config.epoch_dev_documents]) for corpus in dev]
    output, checkpoint = Path(output), Path(output).with_name(Path(output).name + ".checkpoint")
    heads = [p for n, p in model.named_parameters() if not n.startswith(("document.", "names."))]
    optimizer = torch.optim.AdamW(
        [
            {"params": list(model.document.parameters()), "lr": config.learning_rate},
            {"params": heads, "lr": config.head_learning_rate},
        ],
        weight_decay=config.weight_decay,
    )
    steps_per_epoch = math.ceil(len(train_docs) / config.documents_per_step)
    total_steps = steps_per_epoch * config.epochs
    warmup = max(1, int(config.warmup * total_steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total_steps - s) / max(1, total_steps - warmup)))
    )
    record = {"config": asdict(config), "epochs": [], "best": None}
    start_epoch = 0
    if (checkpoint / "state.json").is_file():
        state = json.loads((checkpoint / "state.json").read_text())
        model.load_state_dict(CollectiveEncoder.load(checkpoint / "model").state_dict())
        load_optimizer_state(checkpoint, optimizer)
        record, start_epoch = state["config"]["record"], state["step"] // steps_per_epoch
        with warnings.catch_warnings():  # replaying the schedule to the step: no optimizer step is due here
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(state["step"]):
                schedule.step()
        log.info("resumed from %s at epoch %d", checkpoint, start_epoch)
    began = time.monotonic()
    best_f1 = record["best"]["dev"]["f1"] if record["best"] else -1.0
    for epoch in range(start_epoch, config.epochs):
        # every random draw of an epoch (dropout, negatives, order) seeded by the epoch: a run resumed from a
        # checkpoint trains exactly as the uninterrupted one
        torch.manual_seed(config.seed + epoch)
        rng = random.Random(f"negatives-{config.seed}-{epoch}")
        model.train()
        model.names.eval()
        order = list(range(len(train_docs)))
        random.Random(config.seed + epoch).shuffle(order)
        totals = {"span": 0.0, "link": 0.0, "bio": 0.0}
        bar = progress_bar(
            range(0, len(order), config.documents_per_step), desc=f"epoch {epoch + 1}/{config.epochs}", unit="step"
        )
        for start in bar:
            optimizer.zero_grad()
            for i in order[start : start + config.documents_per_step]:
                document, annotated = train_docs[i]
                loss, parts = document_loss(model, document, spaces, config, rng, annotated)
                (loss / config.documents_per_step).backward()
                for k in totals:
                    totals[k] += parts[k]
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
            optimizer.step()
            schedule.step()
            bar.set_postfix({k: f"{v / (start + config.documents_per_step):.3f}" for k, v in totals.items()})
            if config.max_minutes and (time.monotonic() - began) / 60 > config.max_minutes:
                break
        model.eval()
        dev = dev_scores(model, epoch_dev, spaces, {t: 0.5 for t in model.entity_types})
        entry = {
            "epoch": epoch + 1,
            "loss": {k: v / len(train_docs) for k, v in totals.items()},
            "dev": dev,
            "minutes": (time.monotonic() - began) / 60,
        }
        record["epochs"].append(entry)
        log.info("epoch %d: dev strict F1 %.4f (P %.4f R %.4f)", epoch + 1, dev["f1"], dev["precision"], dev["recall"])
        print(json.dumps(entry), flush=True)
        if dev["f1"] > best_f1:
            best_f1, record["best"] = dev["f1"], entry
            model.save(output)
        save_checkpoint(checkpoint, model, optimizer, (epoch + 1) * steps_per_epoch, _CheckpointConfig(record=record))
        if config.max_minutes and (time.monotonic() - began) / 60 > config.max_minutes:
            log.info("stopping: the %g-minute budget is spent", config.max_minutes)
            break
    return record


@dataclass
class _CheckpointConfig:
    """What a checkpoint's state.json keeps beside the step: the training record so far."""

    record: dict


def tune_on_dev(
    model: CollectiveEncoder, dev: list[TypedCorpus], spaces: dict[str, NameSpace], config: CollectiveTrainConfig
) -> dict:
    """The decoding settings with the best pooled dev strict F1: one span threshold per type (the others at 0.5,
    then coordinate-wise), then how mentions are linked. Returns them with every score tried."""
    with torch.no_grad():
        encoded = [[model.encode_document(d.text) for d in corpus.documents] for corpus in dev]
    score = lambda th, **kw: dev_scores(model, dev, spaces, th, encoded=encoded, **kw)  # noqa: E731
    thresholds = {t: 0.5 for t in model.entity_types}
    tried = []
    for t in model.entity_types:
        best = None
        for value in config.thresholds:
            scores = score({**thresholds, t: value})
            tried.append({"threshold": {**thresholds, t: value}, "link_with": "collective", **scores})
            if best is None or scores["f1"] > best[1]:
                best = (value, scores["f1"])
        thresholds[t] = best[0]
    links = {w: score(thresholds, link_with=w) for w in ("collective", "surface", "both")}
    tried += [{"threshold": thresholds, "link_with": w, **s} for w, s in links.items()]
    link_with = max(links, key=lambda w: links[w]["f1"])
    bio = score(thresholds, decoder="bio", link_with=link_with)
    return {"thresholds": thresholds, "link_with": link_with, "dev": links[link_with], "dev_bio": bio, "tried": tried}


def warm_start_heads(model: CollectiveEncoder, teacher: CollectiveEncoder) -> None:
    """Copies a trained collective model's span, BIO and mention heads into `model` (which starts from its document
    encoder, possibly cut to fewer layers). Only when they mean the same: the same entity types and pooling, and
    mention vectors aimed at the same name space."""
    same = (
        teacher.entity_types == model.entity_types
        and teacher.mention_pooling == model.mention_pooling
        and teacher.names.fingerprint() == model.names.fingerprint()
    )
    if not same:
        log.warning("the heads of the init model are not copied: its entity types, mention pooling or name encoder differ")
        return
    for name in ("span_start", "span_end", "span_inside", "bio", "mention"):
        getattr(model, name).load_state_dict(getattr(teacher, name).state_dict())


def run_collective_training(
    settings: CollectiveSettings, *, command: list[str] | None = None, spell: Callable[[str], str] = str
) -> dict:
    """The whole `bioel train collective` job: build, train, tune decoding on dev, save, write the card. `init`: an
    HF checkpoint, or a trained collective model folder (its document encoder, name encoder and heads are the start;
    with `document_layers`, a smaller model learns from the larger one's first layers; with `document_feed_forward`,
    from its feed-forward blocks cut to their units most active on the first train documents; with `document_hidden`,
    from its hidden states cut to their busiest dimensions and its attention to its busiest heads). The corpora are read first,
    so that a bad record stops the run before any model is loaded; `spell`: how the caller names a setting in their
    errors (the CLI: its flag)."""
    import os
    import platform
    import sys

    import bioel_core
    from bioel_core.models import default_base_checkpoint, model_folder, open_model, resolve_device
    from bioel_core.models.cards import fingerprint_entry, write_card
    from bioel_core.models.checkpoints import checkpoint_reference

    s = settings
    began, device, output = time.monotonic(), resolve_device(s.device), s.output
    names, init, name_model, save_dtype = s.kb_folders(), s.init, s.name_model, s.save_dtype
    config = CollectiveTrainConfig(epochs=s.epochs, learning_rate=s.lr, seed=s.seed, max_minutes=s.max_minutes)
    types = sorted(names)
    train = [
        spec.read(s.corpus_format, types, spell("train_corpus"), spell("corpus_format")) for spec in s.corpora("train_corpus")
    ]
    dev = [spec.read(s.corpus_format, types, spell("dev_corpus"), spell("corpus_format")) for spec in s.corpora("dev_corpus")]
    train_docs, dev_docs = sum(len(c.documents) for c in train), sum(len(c.documents) for c in dev)
    if not train_docs or not dev_docs:
        raise ValueError(
            f"no documents: {train_docs} in the train corpus {s.train_corpus}, {dev_docs} in the dev corpus {s.dev_corpus}"
        )
    torch.manual_seed(config.seed)
    teacher = Path(init) if init and is_collective(init) else None
    if teacher and name_model is None:
        name_model = str(teacher / NAMES_DIR)  # its mention head was trained into that name space
    name_encoder = open_model(name_model)
    base = teacher / DOCUMENT_DIR if teacher else Path(init) if init else default_base_checkpoint()
    model = CollectiveEncoder(
        base,
        name_encoder,
        types,
        mention_pooling=s.mention_pooling,
        document_layers=s.document_layers,
        names_source={"path": str(model_folder(name_model))},
    ).to(device)
    if teacher:
        warm_start_heads(model, CollectiveEncoder.load(teacher))
    texts = [d.text for corpus in train for d in corpus.documents][:CUT_SAMPLE]
    if s.document_feed_forward:
        try:
            keep_feed_forward(model.document, s.document_feed_forward, feed_forward_importance(model, texts))
        except ValueError as err:
            raise SettingsError("document_feed_forward", str(err)) from None
    if s.document_hidden:
        try:
            keep_hidden(model, s.document_hidden, hidden_importance(model, texts))
        except ValueError as err:
            raise SettingsError("document_hidden", str(err)) from None
    log.info("encoding the names of %s with the frozen name encoder", ", ".join(types))
    spaces = {t: NameSpace.from_names_table(names[t], name_encoder, device) for t in types}
    record = train_collective(model, train, dev, spaces, config, output)
    if record["best"] is None:
        raise SettingsError("max_minutes", "training ended before the first epoch was scored on dev: raise it")
    best = CollectiveEncoder.load(output, device)
    tuned = tune_on_dev(best, dev, spaces, config)
    best.decoding = {"thresholds": tuned["thresholds"], "link_with": tuned["link_with"]}
    best.save(output, dtype=save_dtype)
    card = {
        "model": Path(output).name,
        "bioel_version": bioel_core.__version__,
        "command": " ".join(command or sys.argv),
        "settings": {"kind": s.kind, **to_mapping(s)},
        # the fingerprint of the folder as saved (float16 weights load back as other floats than trained)
        "encoder": best.config(),
        **fingerprint_entry(CollectiveEncoder.load(output)),
        "init": str(teacher or checkpoint_reference(base)),
        "document_layers": best.document.config.num_hidden_layers,
        "document_feed_forward": best.document.config.intermediate_size,
        "document_hidden": best.document.config.hidden_size,
        "save_dtype": save_dtype,
        "scores": {},
        "data": {
            "train_corpus": s.train_corpus,
            "dev_corpus": s.dev_corpus,
            "corpus_format": s.corpus_format,
            "names": names,
            "train_documents": train_docs,
            "dev_documents": dev_docs,
            "seed": config.seed,
            # which corpus annotates which types (the others' spans were masked in training and not scored on dev)
            "corpora": {"train": [c.summary() for c in train], "dev": [c.summary() for c in dev]},
        },
        "collective": {
            "epochs": record["epochs"],
            "best_epoch": record["best"]["epoch"],
            "config": record["config"],
            "decoding": best.decoding,
            "dev": tuned["dev"],
            "dev_bio": tuned["dev_bio"],
            "tuning": tuned["tried"],
        },
        "hardware": {
            "device": device,
            "cuda": torch.cuda.get_device_name(0) if device.startswith("cuda") else "",
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "platform": platform.platform(),
        },
        "training_seconds": time.monotonic() - began,
    }
    write_card(output, card)
    return card
