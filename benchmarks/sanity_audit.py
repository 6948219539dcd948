"""Sanity audit of what bulk linking writes: the 2,292 shared abstracts linked with a bundle, then counted for
what no linker should write (issue 42). Prints, and writes with --json:

- mentions that are statistics (`OR=12.6`, `n=101`, `p<0.05`, `95% CI`: bioel_core.text.abbreviations.is_statistic)
  or bare numbers (`12`, `2.5%`);
- links whose mention is an abbreviation expansion (its `link_text` is not its text) whose long form crosses a
  clause end, a parenthesis or a statistic (`crosses_boundary`: what no Schwartz-Hearst long form may span);
- protein, enzyme and nucleic-acid descriptors typed Chemical: MeSH descriptors (from
  ../shared/data/mesh/data_mesh_trees.tsv) that the Chemical scope of the shipped diseases-chemicals bundle
  (BUNDLE_FILE's `[types.Chemical.ingest.scope]`, read from that file: the one list) excludes, by its rule
  (bioel_core.kb.scope: every tree number under D lies under an excluded branch). BC5CDR's chemical guideline, built
  on CHEMDNER's, annotates drugs and chemical compounds, peptides included, but not proteins, enzymes, genes or
  nucleic acids: so the bundle excludes enzymes (D08.811, with the cytochromes D08.244 and enzyme precursors
  D08.622), proteins (D12.776), nucleic acids (D13.444) and antisense elements (D13.150). "Every tree number" keeps
  what the corpus does annotate though MeSH also files it there (angiotensin II, D12.644 peptides and D06 hormones;
  hepatitis B surface antigen, D23.050): on BC5CDR train + dev, 3 of 9,269 gold Chemical annotations with a
  descriptor id fall under the rule;
- the 20 most linked mention strings per entity type, with the concept each is linked to most.

    python benchmarks/sanity_audit.py                      # builds benchmarks/diseases-chemicals.bundle.toml in .bench/
    python benchmarks/sanity_audit.py --bundle /path/to/bundle --work /tmp/audit
    python benchmarks/sanity_audit.py --links /tmp/audit/links   # count an existing `bioel link` output again
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.kbs import BIOEL, DATA, built, sh  # noqa: E402
from bioel_core.kb.scope import EXCLUDED, Scope  # noqa: E402
from bioel_core.settings import load_bundle_file  # noqa: E402
from bioel_core.tables import read_table  # noqa: E402
from bioel_core.text.abbreviations import crosses_boundary, is_bare_number, is_statistic  # noqa: E402

ABSTRACTS = DATA / "pubmed_abstracts" / "abstracts_ncbi_bc5cdr.jsonl"
MESH_TREES = DATA / "mesh" / "data_mesh_trees.tsv"
BUNDLE_FILE = ROOT / "benchmarks" / "diseases-chemicals.bundle.toml"
COLUMNS = ["doc_id", "start", "end", "mention", "link_text", "entity_type", "concept_id", "matched_name", "nil"]
EXAMPLES, TOP = 10, 20


def chemical_scope(bundle_file: Path = BUNDLE_FILE) -> Scope:
    """The Chemical scope the bundle file declares (resolved as its ingest applies it)."""
    return load_bundle_file(bundle_file).types["Chemical"].ingest.scope.resolve()


def protein_descriptors(trees_file: Path = MESH_TREES, scope: Scope | None = None) -> dict[str, str]:
    """MeSH descriptor id -> name, for the descriptors the Chemical scope (default: BUNDLE_FILE's) excludes: every
    tree number it includes lies under an excluded branch."""
    scope = scope or chemical_scope()
    trees: dict[str, list[str]] = defaultdict(list)
    names: dict[str, str] = {}
    with open(trees_file, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            trees[row["DescriptorUI"]].append(row["tree_location"])
            names[row["DescriptorUI"]] = row["DescriptorName"]
    return {d: names[d] for d, numbers in trees.items() if scope.tree_reason(numbers) == EXCLUDED}


def audit(rows: list[dict], proteins: dict[str, str]) -> dict:
    """The audit's counts, examples and top strings over annotation rows."""
    linked = [r for r in rows if not r["nil"] and r["concept_id"]]
    expansions = [r for r in rows if r["link_text"] and r["link_text"] != r["mention"]]
    found = {
        "statistic_mentions": [r for r in rows if is_statistic(r["mention"])],
        "bare_number_mentions": [r for r in rows if is_bare_number(r["mention"])],
        "expansions_crossing_a_clause": [r for r in expansions if crosses_boundary(r["link_text"])],
        "protein_descriptors_typed_chemical": [
            r for r in linked if r["entity_type"] == "Chemical" and r["concept_id"] in proteins
        ],
    }
    report = {
        "documents": len({r["doc_id"] for r in rows}),
        "mentions": len(rows),
        "linked": len(linked),
        "expansions": len(expansions),
        "counts": {k: len(v) for k, v in found.items()},
        "examples": {},
        "top": {},
    }
    for name, hits in found.items():
        strings = Counter((r["mention"], r["link_text"], r["concept_id"]) for r in hits)
        report["examples"][name] = [
            {"mention": m, "link_text": lt, "concept_id": c, "count": n} for (m, lt, c), n in strings.most_common(EXAMPLES)
        ]
    by_type: dict[str, Counter] = defaultdict(Counter)
    concept_of: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in linked:
        by_type[r["entity_type"]][r["mention"]] += 1
        concept_of[r["entity_type"], r["mention"]][(r["concept_id"], r["matched_name"])] += 1
    for etype in sorted(by_type):
        report["top"][etype] = [
            {
                "mention": m,
                "count": n,
                "concept_id": concept_of[etype, m].most_common(1)[0][0][0],
                "matched_name": concept_of[etype, m].most_common(1)[0][0][1],
            }
            for m, n in by_type[etype].most_common(TOP)
        ]
    return report


def print_report(report: dict) -> None:
    print(
        f"\n{report['documents']:,} documents, {report['mentions']:,} mentions, {report['linked']:,} linked, "
        f"{report['expansions']:,} linked by an abbreviation's long form"
    )
    for name, n in report["counts"].items():
        print(f"{name}: {n:,}")
        for e in report["examples"][name]:
            via = f" (via {e['link_text']!r})" if e["link_text"] and e["link_text"] != e["mention"] else ""
            print(f"    {e['count']:>5}  {e['mention']!r}{via} -> {e['concept_id']}")
    for etype, top in report["top"].items():
        print(f"\ntop {TOP} linked {etype} strings")
        for t in top:
            print(f"    {t['count']:>5}  {t['mention']!r} -> {t['concept_id']} {t['matched_name']!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", help=f"a built bundle folder (default: build {BUNDLE_FILE.name} into WORK/bundle-dc)")
    parser.add_argument("--links", help="an existing `bioel link` output of the abstracts to count (no linking)")
    parser.add_argument("--work", default=str(ROOT / ".bench"), help="where the bundle is built and the links written")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    work = Path(args.work)
    links = Path(args.links) if args.links else None
    if links is None:
        bundle = Path(args.bundle) if args.bundle else work / "bundle-dc"
        if not args.bundle:
            sh(BIOEL + ["build", BUNDLE_FILE, "--output", bundle, "--runner", "FnApiRunner"])
        links = work / f"audit-links-{bundle.name}"
        if not built(links):
            sh(
                BIOEL
                + [
                    "link",
                    "--bundle",
                    bundle,
                    "--input",
                    ABSTRACTS,
                    "--input-format",
                    "jsonl",
                    "--output",
                    links,
                    "--no-quality",
                    "--runner",
                    "FnApiRunner",
                ]
            )
    rows = read_table(links, "annotations", COLUMNS).to_pylist()
    report = {"links": str(links), **audit(rows, protein_descriptors())}
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
