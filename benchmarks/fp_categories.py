"""False positives and misses of a `bioel link` output against a gold PubTator corpus, by category (issue 42: "the
false-positive categories on BC5CDR dev before and after each change").

A prediction is a linked annotation (NIL rows left out); it is a true positive when a gold annotation of its document
has its span, its type and one of its ids (bioel_core.evaluation.e2e's strict rule; a composite concept's ids are its
parts'). Every other prediction falls in the first category that fits:

- `wrong_id`: a gold annotation of the type has its exact span, with other ids;
- `wrong_type`: a gold annotation of another type has its exact span;
- `boundary`: it overlaps a gold annotation of its type (right id or not);
- no gold annotation overlaps it, and it is
  - `statistic_or_number`: a statistic (`OR=12.6`, `n=101`) or a bare number;
  - `protein_descriptor`: typed Chemical and linked to a protein, enzyme or nucleic-acid descriptor
    (benchmarks.sanity_audit.protein_descriptors; needs the MeSH trees file);
  - `expansion`: linked by an abbreviation's long form (its link text is not its text);
  - `short_symbol`: at most 5 characters with no space (`ANCA`, `VIP`, `APC`);
  - `not_annotated`: anything else ("death", "insulin").

A gold annotation no prediction matches is a miss: `missed_wrong_id` (a prediction of its type has its span),
`missed_boundary` (one overlaps it) or `missed_not_found`.

    python benchmarks/fp_categories.py --gold CDR_DevelopmentSet.PubTator.txt --pred LINK_OUTPUT [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.sanity_audit import MESH_TREES, protein_descriptors  # noqa: E402
from bioel_core.corpora.annotated import is_composite_part, read_annotated  # noqa: E402
from bioel_core.kb.extra_names import concept_parts  # noqa: E402
from bioel_core.kb.vocab import plain_id  # noqa: E402
from bioel_core.tables import read_table  # noqa: E402
from bioel_core.text.abbreviations import is_bare_number, is_statistic  # noqa: E402

COLUMNS = ["doc_id", "start", "end", "mention", "link_text", "entity_type", "concept_id", "alt_ids", "nil"]
SHORT = 5
TOP = 12


def _ids(values) -> frozenset[str]:
    """Plain ids of a mention's ids as read (the reader has split `D1|D2` and made `-1` no id), or of a row's concept
    and alt ids (a composite concept's id `D1|D2` is its parts' ids, as the interchange copies write it)."""
    return frozenset(plain_id(part) for v in values if v for part in concept_parts(v))


def gold_spans(path: str) -> dict[str, list[tuple[int, int, str, frozenset[str], str]]]:
    """doc id -> gold (start, end, type, plain ids, text), composite parts stated apart and id-less ones left out."""
    gold: dict[str, list] = defaultdict(list)
    for doc in read_annotated(path, "pubtator", "--gold"):
        for m in doc.mentions:
            ids = _ids(m.concept_ids)
            if ids and not is_composite_part(m):
                gold[doc.doc_id].append((m.start, m.end, m.entity_type, ids, m.text))
    return gold


def categorize(gold: dict[str, list], rows: list[dict], proteins: dict[str, str]) -> dict:
    """Counts and top strings per category and type (see the module docstring)."""
    fp: dict[str, Counter] = defaultdict(Counter)
    strings: dict[tuple[str, str], Counter] = defaultdict(Counter)
    tp: Counter = Counter()
    found: set[tuple] = set()
    preds_by_doc: dict[str, list] = defaultdict(list)
    for r in rows:
        if r["nil"] or not r["concept_id"]:
            continue
        ids = _ids([r["concept_id"], *(r.get("alt_ids") or ())])
        start, end, etype, text = r["start"], r["end"], r["entity_type"], r["mention"]
        preds_by_doc[r["doc_id"]].append((start, end, etype, ids))
        golds = gold.get(r["doc_id"], [])
        exact = [g for g in golds if (g[0], g[1]) == (start, end)]
        hit = [g for g in exact if g[2] == etype and g[3] & ids]
        if hit:
            tp[etype] += 1
            found.update((r["doc_id"], *g[:3]) for g in hit)
            continue
        overlapping = [g for g in golds if g[0] < end and start < g[1]]
        if any(g[2] == etype for g in exact):
            category = "wrong_id"
        elif exact:
            category = "wrong_type"
        elif any(g[2] == etype for g in overlapping):
            category = "boundary"
        elif is_statistic(text) or is_bare_number(text):
            category = "statistic_or_number"
        elif etype == "Chemical" and r["concept_id"] in proteins:
            category = "protein_descriptor"
        elif r["link_text"] and r["link_text"] != text:
            category = "expansion"
        elif len(text) <= SHORT and " " not in text:
            category = "short_symbol"
        else:
            category = "not_annotated"
        fp[etype][category] += 1
        strings[etype, category][text] += 1
    missed: dict[str, Counter] = defaultdict(Counter)
    for doc_id, golds in gold.items():
        for g in golds:
            if (doc_id, *g[:3]) in found:
                continue
            same_type = [p for p in preds_by_doc.get(doc_id, []) if p[2] == g[2]]
            if any((p[0], p[1]) == (g[0], g[1]) for p in same_type):
                category = "missed_wrong_id"
            elif any(p[0] < g[1] and g[0] < p[1] for p in same_type):
                category = "missed_boundary"
            else:
                category = "missed_not_found"
            missed[g[2]][category] += 1
            strings[g[2], category][g[4]] += 1
    return {
        "true_positives": dict(tp),
        "false_positives": {t: dict(c.most_common()) for t, c in sorted(fp.items())},
        "missed": {t: dict(c.most_common()) for t, c in sorted(missed.items())},
        "top": {f"{t}/{c}": s.most_common(TOP) for (t, c), s in sorted(strings.items())},
    }


def print_report(report: dict) -> None:
    for etype in sorted(set(report["false_positives"]) | set(report["missed"])):
        fps, miss = report["false_positives"].get(etype, {}), report["missed"].get(etype, {})
        print(
            f"\n{etype}: {report['true_positives'].get(etype, 0):,} true positives, {sum(fps.values()):,} false, {sum(miss.values()):,} missed"
        )
        for category, n in [*fps.items(), *miss.items()]:
            top = ", ".join(f"{s} {k}" for s, k in report["top"][f"{etype}/{category}"][:8])
            print(f"  {category:<20} {n:>5}  {top}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold", required=True, help="a gold PubTator corpus")
    parser.add_argument("--pred", required=True, help="a finished `bioel link` output folder")
    parser.add_argument("--mesh-trees", default=str(MESH_TREES), help="MeSH's tree TSV, for protein descriptors")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    rows = read_table(args.pred, "annotations", COLUMNS).to_pylist()
    report = categorize(gold_spans(args.gold), rows, protein_descriptors(Path(args.mesh_trees)))
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
