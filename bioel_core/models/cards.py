"""Model cards: `card.json` (data) and `MODEL_CARD.md` (the same, for people) in a model folder.

A trained model's card holds the command, the training contract's settings (bioel_core.settings.train), data,
stages, losses, hardware and time (`bioel train KIND`); an ensemble's holds its members (`bioel ensemble`); `bioel
evaluate --record-in-card` adds scores to either. A card recorded by bioel 0.2 (`bioel train --encoder KIND ...`)
shows its command as recorded and in today's form.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

from bioel_core.guards import read_json_object
from bioel_core.models.base import FINGERPRINT_SCHEME, RERANKER_ENSEMBLE

CARD_JSON, CARD_MD = "card.json", "MODEL_CARD.md"
# bioel 0.2 named the kind with an option of `bioel train`; 0.3 with a subcommand, every other flag spelt the same
_OLD_TRAIN = re.compile(r"^(\S*bioel train)((?:\s+\S+)*?)\s+--encoder(?:\s+|=)(\S+)")


def current_command(command: str) -> str | None:
    """A recorded `bioel train --encoder KIND ...` command in today's form (`bioel train KIND ...`), None when it is
    not of the old form."""
    found = _OLD_TRAIN.match(command)
    if found is None:
        return None
    prefix, before, kind = found.groups()
    return f"{prefix} {kind}{before}{command[found.end() :]}"


def check_fingerprint(model_dir: str | Path, model) -> None:
    """Refuses a model whose fingerprint is not the one its folder's card records: weights swapped or damaged since
    the card was written would otherwise load without a word (and carry the card's scores). Hashing costs about
    what reading the weights does (0.1 s for the shipped models, under a second for a BERT-base)."""
    path = Path(model_dir) / CARD_JSON
    card = read_json_object(path, "model card") if path.is_file() else {}
    recorded = card.get("fingerprint")
    if recorded is not None and card.get("fingerprint_scheme") != FINGERPRINT_SCHEME:
        warnings.warn(
            f"{model_dir}: its card was written by bioel {card.get('bioel_version', '< 0.2')}, whose fingerprints "
            f"left out the tokenizer: the folder is not checked against it (train or re-create the model with "
            f"this bioel to have it checked)",
            stacklevel=2,
        )
        return
    if recorded is not None and (found := model.fingerprint()) != recorded:
        raise ValueError(
            f"{model_dir}: the model is not the one its card records (fingerprint {found[:12]}, {CARD_JSON} "
            f"{str(recorded)[:12]}): its files changed since the card was written; restore them or train again"
        )


def fingerprint_entry(model) -> dict:
    """The card's record of `model`: its fingerprint and the scheme it was computed by (`check_fingerprint`)."""
    return {"fingerprint": model.fingerprint(), "fingerprint_scheme": FINGERPRINT_SCHEME}


def write_card(model_dir: str | Path, card: dict) -> None:
    model_dir = Path(model_dir)
    text = json.dumps(card, indent=2, sort_keys=True)
    (model_dir / CARD_JSON).write_text(text)
    card = json.loads(text)  # rendered as card.json holds it (its keys sorted): the same markdown from either
    made_by = "`bioel ensemble`" if "members" in card else "`bioel train`"
    lines = [
        f"# Model card: {card['model']}",
        "",
        f"Made by {made_by} (bioel {card['bioel_version']}).",
        "",
        "## Command",
        "",
        "```",
        card["command"],
        "```",
        "",
    ]
    if (today := current_command(card["command"])) is not None:
        lines += ["The same in bioel 0.3 and later:", "", "```", today, "```", ""]
    if "settings" in card:  # the whole contract, defaults included
        lines += ["Settings:", "", "```json", json.dumps(card["settings"], indent=2), "```", ""]
    if "collective" in card:
        lines += _collective_lines(card)
    else:
        lines += _ensemble_lines(card) if "members" in card else _training_lines(card)
    for heading, text in card.get("notes", {}).items():  # added after training (record_note)
        lines += [f"## {heading}", "", text.rstrip(), ""]
    encoder_type = card.get("encoder", {}).get("encoder_type")
    reranker = encoder_type in ("cross-encoder", RERANKER_ENSEMBLE)
    as_reranker = "bioel evaluate --linker rerank --retriever MODEL --reranker THIS_FOLDER --record-in-card"
    how = {
        "cross-encoder": as_reranker,
        RERANKER_ENSEMBLE: as_reranker,
        "generative": "bioel evaluate --linker generative --model THIS_FOLDER --record-in-card (as a reranker: "
        "--linker rerank --reranker THIS_FOLDER)",
    }.get(encoder_type, "bioel evaluate --linker dense --model THIS_FOLDER --record-in-card")
    # a collective model's BioSyn scores are its frozen name encoder's (mentions linked without their documents): not
    # the document model it was trained as, whose figures are the end-to-end table above
    scored = (
        ", retriever + this reranker"
        if reranker
        else ", its frozen name encoder alone: mentions linked by their text, without the document pass"
        if "collective" in card
        else ""
    )
    lines += [f"## Scores (BioSyn protocol{scored})", ""]
    if card["scores"]:
        lines += ["| dataset | split | mode | n | acc@1 | acc@5 |", "|---|---|---|---:|---:|---:|"]
        for key in sorted(card["scores"]):
            s = card["scores"][key]
            at5 = f"{s['acc@5']:.2f}" if "acc@5" in s else "-"
            mode = "reranker" if reranker or key.endswith("/rerank") else "linker"
            lines.append(f"| {s['dataset']} | {s['split']} | {mode} | {s['n']:,} | {s['acc@1']:.2f} | {at5} |")
        lines.append("")
        lines.append(f"Recorded by `{how}`." + (" Retriever and depth: see `card.json` scores." if reranker else ""))
    else:
        lines.append(f"Not evaluated yet: `{how}`.")
    (model_dir / CARD_MD).write_text("\n".join(lines) + "\n")


def _training_lines(card: dict) -> list[str]:
    lines = [
        "## Encoder",
        "",
        "```json",
        json.dumps(card["encoder"], indent=2),
        "```",
        "",
        f"Fingerprint: `{card['fingerprint']}`; initialised from `{card['init']}`; weights stored as {card['save_dtype']}.",
        "",
    ]
    if "trainable_parameters" in card:
        lines += [
            f"Trainable parameters: {card['trainable_parameters']:,} (token embeddings frozen, read from the base package).",
            "",
        ]
    lines += ["## Data", ""] + [f"- {k}: {v}" for k, v in card["data"].items()] + ["", "## Training", ""]
    # a cross-encoder trains on examples (a mention and its candidate concepts), the generative model on (input, name)
    # examples, the bi-encoders on pairs of texts
    unit = "examples" if card["encoder"].get("encoder_type") in ("cross-encoder", "generative") else "pairs"
    for stage, s in card["stages"].items():
        c = s["config"]
        loss = c.get("loss", "multi-similarity")
        lines.append(
            f"- {stage}: {s['pairs']:,} {unit}, {s['steps']:,} steps (batch {c['batch_size']} {unit}, lr {c['learning_rate']}, "
            f"{loss} loss{', margin ' + str(c['margin']) if loss == 'multi-similarity' else ''}, seed {c['seed']}), "
            f"loss {s['first_loss']:.4f} -> {s['mean_loss_last_50']:.4f} (mean of the last 50), {s['seconds'] / 60:.1f} min"
        )
        if s.get("dev"):
            best = s["best_dev"]
            scores = ", ".join(f"{h['epoch']}: {h['score']:.2f}" for h in s["dev"])
            lines.append(
                f"  - dev acc@1 by epoch (epoch: score): {scores}; kept: epoch "
                f"{best['epoch']} ({best['score']:.2f}); stopped by {s['stopped_by']}"
            )
    hw = card["hardware"]
    return lines + [
        "",
        f"Hardware: {hw['device']}{' (' + hw['cuda'] + ')' if hw['cuda'] else ''}, {hw['cpu_count']} CPUs, torch {hw['torch']}; "
        f"training time {card['training_seconds'] / 60:.1f} min.",
        "",
    ]


def _collective_lines(card: dict) -> list[str]:
    c, hw = card["collective"], card["hardware"]
    lines = [
        "## Model",
        "",
        "```json",
        json.dumps(card["encoder"], indent=2),
        "```",
        "",
        f"Fingerprint: `{card['fingerprint']}`; document encoder initialised from `{card['init']}`; weights stored as "
        f"{card['save_dtype']}. The name encoder is frozen (only the document side was trained).",
        "",
        "## Data",
        "",
    ] + [f"- {k}: {v}" for k, v in card["data"].items() if k != "corpora"]
    if "corpora" in card["data"]:  # which corpus annotates which types: the others' spans were masked, not scored
        lines += [
            "",
            "| split | corpus | types it annotates | documents | mentions by type | left out (other types) |",
            "|---|---|---|---:|---|---|",
        ]
        lines += [
            f"| {split} | `{c['path']}` | {', '.join(c['types'])} | {c['documents']:,} | "
            f"{', '.join(f'{t} {n:,}' for t, n in c['mentions'].items())} | "
            f"{', '.join(f'{t} {n:,}' for t, n in c.get('left_out', {}).items()) or '-'} |"
            for split, corpora in card["data"]["corpora"].items()
            for c in corpora
        ]
    lines += [
        "",
        "## Training (dev strict F1 after each epoch, spans at 0.5, mention vectors)",
        "",
        "| epoch | span loss | link loss | BIO loss | dev P | dev R | dev F1 | minutes |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in c["epochs"]:
        lines.append(
            f"| {e['epoch']} | {e['loss']['span']:.4f} | {e['loss']['link']:.4f} | {e['loss']['bio']:.4f} | "
            f"{100 * e['dev']['precision']:.2f} | {100 * e['dev']['recall']:.2f} | {100 * e['dev']['f1']:.2f} | {e['minutes']:.1f} |"
        )
    d, b = c["dev"], c["dev_bio"]
    lines += [
        "",
        f"Best epoch {c['best_epoch']}. Decoding chosen on the whole dev corpus: {json.dumps(c['decoding'])}: "
        f"dev strict P/R/F1 {100 * d['precision']:.2f} / {100 * d['recall']:.2f} / {100 * d['f1']:.2f}; the BIO decoder "
        f"with the same linking {100 * b['precision']:.2f} / {100 * b['recall']:.2f} / {100 * b['f1']:.2f}."
        + (
            ""
            if "by_corpus" not in d
            else " Pooled over the dev corpora, each scored on its own types: "
            + "; ".join(
                f"`{corpus}` {100 * s['precision']:.2f} / {100 * s['recall']:.2f} / {100 * s['f1']:.2f}"
                for corpus, s in d["by_corpus"].items()
            )
            + "."
        ),
        "",
    ]
    if c.get("test"):
        lines += [
            "## End to end on test (`python benchmarks/e2e_bc5cdr.py`, raw abstracts, strict / partial F1)",
            "",
            "| corpus | decoder | run | types | strict P | strict R | strict F1 | partial F1 |",
            "|---|---|---|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['corpus']} | {r['detector']} | {r['run']} | {r['types']} | {r['strict']['precision']:.2f} | "
            f"{r['strict']['recall']:.2f} | {r['strict']['f1']:.2f} | {r['partial']['f1']:.2f} |"
            for r in c["test"]
        ]
        lines += [""]
    lines += [
        f"Hardware: {hw['device']}{' (' + hw['cuda'] + ')' if hw['cuda'] else ''}, {hw['cpu_count']} CPUs, torch {hw['torch']}; "
        f"training time {card['training_seconds'] / 60:.1f} min.",
        "",
    ]
    return lines


def _ensemble_lines(card: dict) -> list[str]:
    if card["encoder"]["encoder_type"] == RERANKER_ENSEMBLE:
        how = (
            f"A retrieved concept's score: the weighted sum of the members' scores, plus "
            f"{card['encoder']['retriever_weight']:g} x the retriever's."
        )
    else:
        how = "Ranked by the weighted mean of the members' cosines (one index over their weighted, concatenated unit vectors)."
    lines = ["## Members", "", how, "", "| member | encoder | weight | fingerprint |", "|---|---|---:|---|"]
    for member in card["members"]:
        source = member["source"]
        where = source.get("path") or f"{source['package']} package, {source['checkpoint']}/"
        pooling = f", {source['pooling']} pooling" if "pooling" in source else ""
        lines.append(f"| `{where}`{pooling} | {member['encoder_type']} | {member['weight']:g} | `{member['fingerprint'][:16]}` |")
    return lines + ["", f"Fingerprint: `{card['fingerprint']}`.", ""]


def record_scores(model_dir: str | Path, report: dict) -> None:
    """Adds an evaluation report (from `bioel evaluate`) to the model card."""
    path = Path(model_dir) / CARD_JSON
    if not path.is_file():
        raise FileNotFoundError(
            f"{model_dir}: no {CARD_JSON}; only models made by `bioel train` or `bioel ensemble` carry a card"
        )
    card = json.loads(path.read_text())
    # a generative model is scored as a linker and as a reranker: each mode has its own entry
    mode = "/rerank" if report.get("linker") == "rerank" and card["encoder"].get("encoder_type") == "generative" else ""
    card["scores"][f"{report['dataset']}/{report['split']}{mode}"] = {
        **{k: report[k] for k in ("dataset", "split", "n", "acc@1", "acc@5") if k in report},  # acc@5 needs --k 5+
        **({"linker_options": report["linker_options"]} if report.get("linker") == "rerank" else {}),
    }
    write_card(model_dir, card)


def record_e2e(model_dir: str | Path, rows: list[dict]) -> None:
    """Puts a collective model's end-to-end test rows (benchmarks/e2e_bc5cdr.py: corpus, detector, run, types,
    strict and partial P/R/F1) in its card, replacing earlier ones."""
    path = Path(model_dir) / CARD_JSON
    card = json.loads(path.read_text())
    if "collective" not in card:
        raise ValueError(f"{model_dir}: end-to-end rows belong to a collective model's card")
    card["collective"]["test"] = rows
    write_card(model_dir, card)


def record_note(model_dir: str | Path, heading: str, text: str) -> None:
    """Adds (or replaces) a section of Markdown `text` under `heading` in a trained model's card: what was measured
    of the model after training (speed on other hardware, how its init was carried)."""
    path = Path(model_dir) / CARD_JSON
    if not path.is_file():
        raise FileNotFoundError(
            f"{model_dir}: no {CARD_JSON}; only models made by `bioel train` or `bioel ensemble` carry a card"
        )
    card = json.loads(path.read_text())
    card.setdefault("notes", {})[heading] = text
    write_card(model_dir, card)
