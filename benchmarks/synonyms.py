"""Synonyms learned from the training corpora (bioel_core.text.synonyms): learns the shipped extra-names files of
models/synonyms/ and measures them on the dev sets with an in-process proxy of the dictionary path (the dictionary
detector with the stop list, each mention linked by exact name, an extra name's concept first), before and after.

    .venv/bin/bioel ingest-kb --input-format medic-biosyn --input ../shared/data/medic/medic_06Jul2012.txt --output /tmp/medic_kb
    .venv/bin/bioel ingest-kb --input-format mesh-tsv --input ../shared/data/mesh/data_mesh_thesaurus.tsv.gz \\
        ../shared/data/mesh/data_mesh_trees.tsv --tree-include D --output /tmp/mesh_kb
    .venv/bin/python benchmarks/synonyms.py --medic-kb /tmp/medic_kb --mesh-kb /tmp/mesh_kb [--learn-from train+dev] \\
        [--write] [--json OUT]

Learned from the corpora `--learn-from` names (benchmarks/training_corpora.py; diseases: BC5CDR Disease mentions and
NCBI-disease, every mention type; chemicals: BC5CDR Chemical mentions); the rule's thresholds (RULE) were chosen on
BC5CDR dev and NCBI-disease dev with this proxy, learning from train; the shipped files are learned from train+dev (the
refit), which leaves no dev set held out; test sets are not read. Scores on the held-out dev sets: strict (span and
id) mention P/R/F1 and document-level concept F (the set of ids per document) of the dictionary path alone, not of the
shipped linker (`bioel link` adds the document model's spans).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bioel_core.corpora import Document  # noqa: E402
from bioel_core.kb.vocab import is_nil_id, plain_id  # noqa: E402
from bioel_core.linking.exact import NameIndex  # noqa: E402
from bioel_core.names import NameSet  # noqa: E402
from bioel_core.tables import read_manifest, read_table  # noqa: E402
from bioel_core.text.detect import DictionaryDetector, StopList, acronym_names  # noqa: E402
from bioel_core.text.synonyms import LearnedSynonyms, learn_synonyms  # noqa: E402
from benchmarks.training_corpora import LEARN_FROM, corpora  # noqa: E402

MODELS = ROOT / "models"
RULE = {"min_count": 1, "min_share": 0.8, "min_precision": 0.5}
KBS = {  # type: (KB flag, stop list, shipped file)
    "Disease": ("medic_kb", "stoplists/disease-medic.json", "synonyms/disease-medic.tsv"),
    "Chemical": ("mesh_kb", "stoplists/chemical-mesh.json", "synonyms/chemical-mesh.tsv"),
}


def with_synonyms(names: NameSet, learned: LearnedSynonyms | None) -> NameSet:
    """The KB's names with the learned ones first, as ingest-kb's extra names and NameSet order them."""
    if learned is None:
        return names
    extra = [(names.normalizer(s.name), (s.concept_id,)) for s in learned.synonyms]
    return NameSet.from_pairs([*extra, *zip(names.names, names.concept_ids)], names.normalizer, names.source, normalized=True)


def proxy_scores(docs: list[Document], names: NameSet, entity_type: str, stop_list: StopList, uppercase: list[str]) -> dict:
    """Strict mention P/R/F1 (span and an id) and document-level concept F of dictionary detection + exact lookup."""
    detector = DictionaryDetector.from_name_set(names, entity_type=entity_type, stop_list=stop_list, uppercase_only=uppercase)
    index = NameIndex(names)
    tp = fp = fn = doc_tp = doc_pred = doc_gold = 0
    for doc in docs:
        gold = {(m.start, m.end): {plain_id(c) for c in m.concept_ids} for m in doc.mentions}
        pred = {}
        for m in detector.detect(doc):
            found = index.candidates(names, names.normalizer(m.link_text or m.text), 1)
            if found:
                pred[(m.start, m.end)] = {plain_id(c) for c in found[0].concept_ids}
        right = sum(bool(ids & gold.get(span, set())) for span, ids in pred.items())
        tp, fp = tp + right, fp + len(pred) - right
        fn += sum(not (ids & pred.get(span, set())) for span, ids in gold.items())
        gold_ids = {c for ids in gold.values() for c in ids if not is_nil_id(c)}
        pred_ids = {min(ids & gold_ids or ids) for ids in pred.values()}  # an id or alt id that is gold counts
        doc_tp, doc_pred, doc_gold = doc_tp + len(pred_ids & gold_ids), doc_pred + len(pred_ids), doc_gold + len(gold_ids)

    def f1(p: float, r: float) -> float:
        return round(2 * p * r / max(p + r, 1e-9), 4)

    p, r = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return {
        "strict": {"precision": round(p, 4), "recall": round(r, 4), "f1": f1(p, r)},
        "document_concept_f1": f1(doc_tp / max(doc_pred, 1), doc_tp / max(doc_gold, 1)),
    }


def run_type(entity_type: str, kb: str, learn_from: str, models: Path, write: bool, command: str) -> dict:
    _, stop_path, out = KBS[entity_type]
    names, stop_list = NameSet.from_names_table(kb), StopList.load(models / stop_path)
    table = read_table(kb, "names", ["name", "name_norm"]).to_pydict()
    uppercase = acronym_names(zip(table["name"], table["name_norm"]))
    sources, train, devs = corpora(entity_type, learn_from)
    learned = learn_synonyms(
        train,
        names,
        entity_types={entity_type},
        stop_list=stop_list,
        uppercase_only=uppercase,
        keep_missing=True,
        learned_from=sources,
        **RULE,
    )
    dumps = read_manifest(kb)["inputs"]
    learned.dictionary = ", ".join(f"{Path(i['path']).name} (sha256 {i['sha256'][:16]})" for i in dumps)
    learned.dictionary += f": {len(names):,} names"
    learned.command = command
    if write:
        (models / out).parent.mkdir(parents=True, exist_ok=True)
        learned.save(models / out)
    result = {"synonyms": len(learned.synonyms), "not_in_kb": learned.not_in_kb, "dev": {}}
    acronyms = acronym_names((s.name, names.normalizer(s.name)) for s in learned.synonyms)
    for dev, docs in devs.items():
        result["dev"][dev] = {
            "before": proxy_scores(docs, names, entity_type, stop_list, uppercase),
            "after": proxy_scores(docs, with_synonyms(names, learned), entity_type, stop_list, [*uppercase, *acronyms]),
        }
        print(entity_type, dev, json.dumps(result["dev"][dev]), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--medic-kb", required=True, help="MEDIC 2012 ingested (ingest-kb --input-format medic-biosyn)")
    parser.add_argument("--mesh-kb", help="MeSH 2024 tree D ingested (ingest-kb --input-format mesh-tsv)")
    parser.add_argument("--learn-from", choices=LEARN_FROM, default="train", help="the gold corpora (default train)")
    parser.add_argument("--models", type=Path, default=MODELS, help="the folder whose stoplists/ are read and synonyms/ written")
    parser.add_argument("--write", action="store_true", help="write the learned files to MODELS/synonyms/")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    command = "python benchmarks/synonyms.py " + shlex.join(sys.argv[1:])
    report = {"rule": RULE, "learn_from": args.learn_from, "types": {}}
    for entity_type, (flag, _, _) in KBS.items():
        if getattr(args, flag):
            report["types"][entity_type] = run_type(
                entity_type, getattr(args, flag), args.learn_from, args.models, args.write, command
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
