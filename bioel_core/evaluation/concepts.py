"""Document-level concept scores, the BioCreative V CDR measure, and the gold ids a KB cannot name.

Concept P/R/F1 (the CDR task's disease normalization measure, which PubTator and TaggerOne report): per document,
the SET of (entity type, concept id) pairs predicted is compared with the set the gold states; spans play no part,
and a concept named ten times in a document counts once. Micro-averaged over documents, per entity type and over all.
What is left out is what `e2e` leaves out (`scored_mentions`): annotations without a concept id (PubTator `-1`, NIL
predictions) and the parts of a composite mention stated apart (BioC IndividualMention). Ids are compared plain
(`plain_id`: `MESH:D003920` = `D003920`).

Composite ids. A BC5CDR composite mention states one id per part, `D002318|D012131` for "cardiovascular, and
respiratory depression": each id is a (type, id) pair of the document, on either side, as the BioCreative V CDR
evaluation kit (BC5CDR_Evaluation-0.0.3, `Evaluate id`) reads the id field; on the kit's own sample its TP / FP / FN
are these (tests/test_e2e_concepts.py, whose fixture the kit scored). So score a linker by the ids it writes (a
PubTator or BioC copy: one id a mention), not by `annotation_mentions`, whose alt ids would each count as a claim.

Unlinkable gold (`unlinkable`): the gold annotations with an id none of whose ids is in their type's KB (the
concepts table's ids and alt ids, `kb_ids`), and the document-level gold pairs whose id is not: what no linker with
those KBs can get right, so the recall ceiling a score should be read against.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path

from bioel_core.corpora.records import Document, Mention
from bioel_core.evaluation.e2e import micro_scores, scored_mentions
from bioel_core.kb.vocab import plain_id

ALL_TYPES = "all"


def _prf(correct: int, n_pred: int, matched: int, n_gold: int) -> dict:
    return asdict(micro_scores([(correct, n_pred, matched, n_gold)]))


def _pairs(items: Iterable[Document | Mention], keep) -> dict[str, set[tuple[str, str]]]:
    """{document: {(type, id)}}: every id of every annotation `keep` takes (a composite's ids each)."""
    pairs: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for m, ids in scored_mentions(items, keep, defaultdict(int)):
        pairs[m.doc_id] |= {(m.entity_type, i) for i in ids}
    return pairs


def document_concept_counts(
    gold: Iterable[Document | Mention], pred: Iterable[Document | Mention], entity_types: Iterable[str] | None = None
) -> dict[str, dict[str, list[int]]]:
    """{document: {entity type: [correct, predicted, matched, gold] (type, id) pairs}} over the documents of either
    side; a type absent from a document is absent from its counts."""
    types = set(entity_types) if entity_types else None
    keep = lambda m: not types or not m.entity_type or m.entity_type in types  # noqa: E731 (as e2e_scores keeps them)
    g, p = _pairs(gold, keep), _pairs(pred, keep)
    out: dict[str, dict[str, list[int]]] = {}
    for doc in set(g) | set(p):
        gold_pairs, predicted = g.get(doc, set()), p.get(doc, set())
        counts: dict[str, list[int]] = out.setdefault(doc, defaultdict(lambda: [0, 0, 0, 0]))
        for pair in predicted:
            counts[pair[0]][0] += pair in gold_pairs
            counts[pair[0]][1] += 1
        for pair in gold_pairs:
            counts[pair[0]][2] += pair in predicted
            counts[pair[0]][3] += 1
    return out


def concept_scores(
    gold: Iterable[Document | Mention], pred: Iterable[Document | Mention], entity_types: Iterable[str] | None = None
) -> dict[str, dict]:
    """{entity type: P/R/F1 (percent) and counts, ..., "all": over every type}: document-level concept scores."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # correct, n_pred, matched, n_gold
    for by_type in document_concept_counts(gold, pred, entity_types).values():
        for etype, c in by_type.items():
            counts[etype] = [a + b for a, b in zip(counts[etype], c)]
    out = {t: _prf(*counts[t]) for t in sorted(counts)}
    out[ALL_TYPES] = _prf(*(sum(c[k] for c in counts.values()) for k in range(4)))
    return out


def kb_ids(kb_dir: str | Path) -> set[str]:
    """Every plain id an ingest-kb output names: its concepts' ids and alt ids."""
    from bioel_core.tables import read_table  # tables need pyarrow; scoring does not

    table = read_table(kb_dir, "concepts", ["concept_id", "alt_ids"])
    ids = {plain_id(c) for c in table.column("concept_id").to_pylist()}
    return ids | {plain_id(a) for alts in table.column("alt_ids").to_pylist() for a in alts}


def unlinkable(gold: Iterable[Document | Mention], ids_by_type: Mapping[str, set[str]]) -> dict[str, dict]:
    """Per entity type with a KB in `ids_by_type`: gold annotations with an id and those none of whose ids the KB
    names; gold document-level (type, id) pairs and those whose id it does not name; and both shares in percent."""
    gold = list(gold)
    keep = lambda m: m.entity_type in ids_by_type  # noqa: E731
    out = {t: {"with_id": 0, "unlinkable": 0, "concepts": 0, "concepts_unlinkable": 0} for t in ids_by_type}
    for m, ids in scored_mentions(gold, keep, defaultdict(int)):
        out[m.entity_type]["with_id"] += 1
        out[m.entity_type]["unlinkable"] += not (ids & ids_by_type[m.entity_type])
    for pairs in _pairs(gold, keep).values():
        for etype, concept_id in pairs:
            out[etype]["concepts"] += 1
            out[etype]["concepts_unlinkable"] += concept_id not in ids_by_type[etype]
    for c in out.values():
        c["unlinkable_share"] = 100 * c["unlinkable"] / c["with_id"] if c["with_id"] else 0.0
        c["concepts_unlinkable_share"] = 100 * c["concepts_unlinkable"] / c["concepts"] if c["concepts"] else 0.0
    return out


def kb_folders(values: Iterable[str], flag: str = "kb") -> dict[str, Path]:
    """Entity type -> ingest-kb output folder, from `TYPE=DIR` values or a `bioel build` bundle folder (its kb/TYPE
    folders); ValueError naming `flag` for anything else."""
    from bioel_core.bundle import BuiltBundle, own_sources

    out: dict[str, Path] = {}
    for value in values:
        etype, sep, folder = value.partition("=")
        if sep:
            if not etype or not folder:
                raise ValueError(f"{flag} {value}: expected TYPE=KB_DIR or a bundle folder")
            out[etype] = Path(folder)
        else:
            bundle = BuiltBundle.read(value, flag)
            out.update({t: Path(f) for t, f in own_sources(bundle.folder, bundle.manifest["link"]["folders"])["names"]})
    return out


def unlinkable_in(gold: Iterable[Document | Mention], folders: Mapping[str, str | Path]) -> dict[str, dict]:
    """`unlinkable` against the KBs in `folders` (entity type -> ingest-kb output)."""
    return unlinkable(gold, {t: kb_ids(f) for t, f in folders.items()})
