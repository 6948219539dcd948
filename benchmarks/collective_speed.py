"""Linking BC5CDR test mentions with their gold spans given: the collective model's one pass per document against
the same model run once per mention on its context window (the mention and `--context` pieces each side).

    .venv/bin/python benchmarks/collective_speed.py [--model DIR] [--work DIR] [--limit N] [--json OUT]

Both modes encode, take the mention vectors the model links with (its `decoding.link_with`) and search the
type's names (the frozen name encoder's vectors, exact inner product) in one process on the same threads; the
names are encoded once before timing. The collective mode searches a document's mentions of a type together
(as `bioel link` does), the per-mention mode each mention alone. Also reported: each mode's linking accuracy on the gold spans (the top
concept is one of the gold ids), over the mentions whose gold id is in the KB of their type.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.kbs import DATA, prepare  # noqa: E402
from bioel_core.corpora import read_pubtator  # noqa: E402
from bioel_core.kb.vocab import plain_id  # noqa: E402

CORPUS = DATA / "bc5cdr-corpus" / "CDR_TestSet.PubTator.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="collective model folder (default: models/bc5cdr-collective)")
    parser.add_argument(
        "--work", default=str(ROOT / ".bench"), help="cache of KB tables, embeddings and indexes (benchmarks/kbs.py)"
    )
    parser.add_argument("--limit", type=int, default=0, help="first N test documents only (0: all 500)")
    parser.add_argument("--context", type=int, default=64, help="per-mention mode: pieces of context on each side")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    from bioel_core.models import CollectiveEncoder, model_folder
    from bioel_core.training.collective import NameSpace

    model_dir = str(model_folder(args.model or ROOT / "models" / "bc5cdr-collective"))
    model = CollectiveEncoder.load(model_dir)
    link_with = model.decoding["link_with"]
    kbs = prepare(Path(args.work), model_dir)
    spaces = {t: NameSpace.from_names_table(kbs[t]["kb"], model) for t in model.entity_types}
    docs = read_pubtator(CORPUS)[: args.limit or None]
    gold = [(d, m) for d in docs for m in d.mentions if m.entity_type in spaces]

    def correct(entity_type: str, vectors: np.ndarray, mentions: list) -> list[tuple[bool, bool]]:
        """(linkable, right) per mention: one search for the given mentions of one type."""
        _, rows = spaces[entity_type].best(vectors)
        out = []
        for m, row in zip(mentions, rows):
            ids = {plain_id(x) for c in m.concept_ids for x in c.replace("+", "|").split("|")}
            out.append((any(i in spaces[entity_type].rows_of for i in ids), spaces[entity_type].concept_ids[int(row)] in ids))
        return out

    def collective() -> list[tuple[bool, bool]]:
        out = []
        for d in docs:
            mentions = [m for m in d.mentions if m.entity_type in spaces]
            if not mentions:
                continue
            encoded = model.encode_document(d.text)
            spans = [model.covering_span(encoded, m.start, m.end) for m in mentions]
            vectors = model.query_vectors(encoded, d.text, spans, link_with)
            for t in spaces:  # the document's mentions of a type searched together, as `bioel link` does
                mine = [k for k, m in enumerate(mentions) if m.entity_type == t]
                if mine:
                    out += correct(t, vectors[mine], [mentions[k] for k in mine])
        return out

    def per_mention() -> list[tuple[bool, bool]]:
        out = []
        for d, m in gold:
            encoded, span = model.encode_around(d.text, m.start, m.end, args.context)
            out += correct(m.entity_type, model.query_vectors(encoded, d.text, [span], link_with), [m])
        return out

    rows = {}
    with torch.no_grad():
        for label, run in (("collective (one pass per document)", collective), ("per mention (context window)", per_mention)):
            began = time.perf_counter()
            results = run()
            seconds = time.perf_counter() - began
            scored = [ok for linkable, ok in results if linkable]
            rows[label] = {
                "mentions": len(results),
                "seconds": seconds,
                "mentions_per_s": len(results) / seconds,
                "accuracy": 100 * sum(scored) / max(1, len(scored)),
                "linkable": len(scored),
            }
    c, one = rows.values()
    ratio = c["mentions_per_s"] / one["mentions_per_s"]
    print(
        f"\nBC5CDR test, gold spans given: {len(docs)} documents, {len(gold):,} mentions; model {model_dir} "
        f"(link_with {link_with}); {torch.get_num_threads()} torch threads, {os.cpu_count()} CPUs"
    )
    print(f"{'mode':<38}{'seconds':>9}{'mentions/s':>12}{'accuracy':>10}{'linkable':>10}")
    for label, r in rows.items():
        print(f"{label:<38}{r['seconds']:>9.1f}{r['mentions_per_s']:>12.1f}{r['accuracy']:>10.2f}{r['linkable']:>10,}")
    print(f"collective / per mention: {ratio:.2f}x")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "model": model_dir,
                    "documents": len(docs),
                    "modes": rows,
                    "collective_vs_per_mention_cpu": ratio,
                    "context_pieces": args.context,
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
