"""Does the mention's document context help the cross-encoder reranker? (issue 15's "a little context where it helps")

Trains the cross-encoder as `bioel train cross-encoder --finetune-epochs EPOCHS` does (the retriever's hard
negatives, as many KB-synonym examples as mention examples, dev acc@1 after each epoch, best epoch kept, then the
retriever's weight chosen on dev), except that a training or dev mention reads `left < mention > right`: WORDS
words of its document on each side, normalized as queries are, when its document is in the corpora (PubTator files
whose offsets the BioSyn queries use). A distinct training mention takes the context of its first occurrence; the
KB-synonym examples have none. `--words 0` is the same recipe without context (`bioel train`'s), for the side-by-side
figure. Dev: the BioSyn protocol on each dataset's processed_dev against its dev_dictionary.txt, every occurrence with
its own context. Prints a table and writes JSON.

    python benchmarks/rerank_context.py --names MEDIC_KB --words 8 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.biosyn_sets import DATASETS, missing_datasets  # noqa: E402
from bioel_core.corpora import read_pubtator  # noqa: E402
from bioel_core.evaluation.biosyn_protocol import score_query  # noqa: E402
from bioel_core.linking.dense import DenseLinker  # noqa: E402
from bioel_core.linking.rerank import CrossEncoderReranker, KeptScores  # noqa: E402
from bioel_core.names import NameSet  # noqa: E402
from bioel_core.text.preprocess import split_composite  # noqa: E402
from bioel_core.training.loop import TrainConfig  # noqa: E402
from bioel_core.settings.train import EXAMPLE_SIZE as DEFAULT_EXAMPLE_SIZE  # noqa: E402
from bioel_core.settings.train import CrossEncoderSettings  # noqa: E402
from bioel_core.training.recipe import concept_alias, train_stage, usable_queries  # noqa: E402
from bioel_core.training.rerank import (  # noqa: E402
    RETRIEVER_WEIGHTS,
    dev_stages,
    listwise_loss,
    new_cross_encoder,  # noqa: E402
    rerank_examples,
    synonym_examples,
)

CORPORA = ("ncbi-disease/raw_corpus/*.txt", "bc5cdr-corpus/*.PubTator.txt")


def document_texts(data: Path) -> dict[str, str]:
    files = sorted(f for pattern in CORPORA for f in data.glob(pattern))
    return {d.doc_id: d.text for f in files for d in read_pubtator(f)}


class Contexts:
    """`left < mention > right` from a query's document, `words` normalized words a side; the mention alone when
    `words` is 0 or the document is unknown."""

    def __init__(self, texts: dict[str, str], normalize):
        self.texts, self.normalize = texts, normalize

    def __call__(self, query, mention: str, words: int) -> str:
        text = self.texts.get(query.doc_id)
        if not words or text is None or query.start is None:
            return mention
        left = self.normalize(text[: query.start]).split()[-words:]
        right = self.normalize(text[query.end :]).split()[:words]
        return " ".join([*left, "<", mention, ">", *right])


def dev_accuracy(dev, reads, reranker) -> list[tuple[int, int]]:
    """(hits, queries) of the rerank stage with `reranker` per dev set, each sub-mention reranked as `reads` gives it."""
    out = []
    for (stage, queries, subs), read in zip(dev, reads):
        stage.reranker = reranker
        answers = stage._reranked([r for rs in read for r in rs], stage.candidates([p for parts in subs for p in parts]), 1)
        hits, at = 0, 0
        for q, parts in zip(queries, subs):
            hits += score_query(q, parts, answers[at : at + len(parts)]).hit(1)
            at += len(parts)
        out.append((hits, len(queries)))
    return out


def pooled(counts: list[tuple[int, int]]) -> float:
    return 100.0 * sum(h for h, _ in counts) / sum(n for _, n in counts)


class Data:
    """What every run shares: the training mentions with their queries, the examples as the retriever makes them
    (each mention read alone), and the dev stages with each query's pool retrieved once."""

    def __init__(self, args, names: NameSet, retriever: DenseLinker):
        datasets = [str(args.data / d) for d in DATASETS]
        alias = concept_alias(names)
        self.train = [
            (query, names.normalizer(part), ids)
            for dataset in datasets
            for query, pairs in usable_queries(dataset, "train", alias)[0]
            for part, ids in pairs
        ]
        self.examples, self.counts = rerank_examples(
            retriever, names, [(m, ids) for _, m, ids in self.train], DEFAULT_EXAMPLE_SIZE
        )
        self.synonyms, _ = synonym_examples(retriever, names, len(self.examples), DEFAULT_EXAMPLE_SIZE, args.seed)
        # the stages' reranker is set by each score (dev_accuracy)
        self.dev = [
            (stage, queries, [[names.normalizer(p) for p in split_composite(q.text)] for q in queries])
            for stage, queries in dev_stages(retriever, names, datasets, None, args.depth)
        ]


def run(args, data: Data, contexts: Contexts, words: int) -> dict:
    began = time.perf_counter()
    workdir = args.workdir / f"words-{words}"
    shutil.rmtree(workdir, ignore_errors=True)  # a fresh run: train_stage would otherwise take a finished one as done
    read_as = {}
    for query, mention, _ in data.train:  # a distinct mention reads its first occurrence's context
        read_as.setdefault(mention, contexts(query, mention, words))
    examples = [replace(e, query=read_as[e.query]) for e in data.examples]
    reads = [[[contexts(q, p, words) for p in parts] for q, parts in zip(queries, subs)] for _, queries, subs in data.dev]
    max_length = args.max_length or (64 if words else 32)
    model = new_cross_encoder(None, max_length, "cpu", args.seed)
    reranker = CrossEncoderReranker(model)
    config = TrainConfig(
        epochs=args.epochs,
        batch_size=CrossEncoderSettings.batch_size,
        learning_rate=CrossEncoderSettings.lr,
        seed=args.seed,
        loss="listwise",
        max_steps=args.max_steps,
    )
    stats = train_stage(
        model,
        "rerank",
        examples + data.synonyms,
        config,
        workdir,
        False,
        dev_score=lambda: pooled(dev_accuracy(data.dev, reads, reranker)),
        loss_fn=listwise_loss,
    )
    kept, fused = KeptScores(reranker), {}
    for weight in RETRIEVER_WEIGHTS:
        model.retriever_weight = weight
        fused[weight] = dev_accuracy(data.dev, reads, kept)
    best = max(RETRIEVER_WEIGHTS, key=lambda w: (pooled(fused[w]), -w))
    row = {
        "words": words,
        "max_length": max_length,
        "mention_examples": len(examples),
        "synonym_examples": len(data.synonyms),
        "dev_alone_by_epoch": [d["score"] for d in stats.get("dev", [])],
        "weight": best,
        "dev_fused_by_weight": {str(w): pooled(c) for w, c in fused.items()},
        "dev_fused": {d: 100.0 * h / n for d, (h, n) in zip(DATASETS, fused[best])},
        "dev_fused_pooled": pooled(fused[best]),
        "minutes": (time.perf_counter() - began) / 60,
        "skipped": data.counts,
    }
    print(
        f"words {words}: alone by epoch {', '.join(f'{s:.2f}' for s in row['dev_alone_by_epoch'])}; weight {best:g}: "
        + ", ".join(f"{d} {a:.2f}" for d, a in row["dev_fused"].items())
        + f", pooled {row['dev_fused_pooled']:.2f} "
        f"({row['minutes']:.1f} min)",
        flush=True,
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--names", required=True, help="an ingest-kb output folder (MEDIC)")
    ap.add_argument("--retriever", default=str(ROOT / "models" / "disease-default"))
    ap.add_argument("--words", type=int, nargs="+", default=[0, 8], help="context words a side (0: the mention alone)")
    ap.add_argument(
        "--max-length",
        type=int,
        help="word pieces of mention (+ context) and concept names (default: 32 without context, as `bioel train`; 64 with)",
    )
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--max-steps", type=int, help="stop each run after this many steps (a quick look)")
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=Path(".bench/rerank_context"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    problem = missing_datasets(args.data)
    if problem:
        raise SystemExit(problem)
    names = NameSet.from_names_table(args.names)
    retriever = DenseLinker.build(names, args.retriever)
    data, contexts = Data(args, names, retriever), Contexts(document_texts(args.data), names.normalizer)
    rows = [run(args, data, contexts, words) for words in args.words]
    print("\n| words a side | dev alone by epoch | weight | NCBI dev | BC5CDR dev | pooled dev |\n|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['words']} | {', '.join(f'{s:.2f}' for s in r['dev_alone_by_epoch'])} | {r['weight']:g} | "
            f"{r['dev_fused']['ncbi-disease']:.2f} | {r['dev_fused']['bc5cdr-disease']:.2f} | {r['dev_fused_pooled']:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"retriever": args.retriever, "names": args.names, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
