"""Synonyms learned from annotated corpora: the texts annotators linked to a concept the KB does not name so,
written as an extra-names file (bioel_core.kb.extra_names) that ingest-kb adds to the KB's names, so the dictionary
detector finds them and the exact-name lookup links them to the annotators' concept.

`learn_synonyms`'s rule, per mention text normalized as the KB's names are (the same text however written):
- at least `min_count` gold mentions of the entity types have this text and id C; a composite mention's ids (one
  per part: "hemorrhagic cystitis", `D006470|D003556`) are one C, `A|B`, which scoring reads as both ids (a composite
  concept, made by an ingest with `add_missing_concepts`); a mention with no id or a NIL id counts against every C;
- C holds at least `min_share` of the text's mentions;
- the text is not on the detector's stop list;
- where a dictionary detector with the KB's names and the candidates matches the text in the training documents, at
  least `min_precision` of the matches are gold mentions of the types (the annotators mark it where it stands); a
  text the detector's rules never match there (a short form it does not define, a comma inside) fails;
- it changes something: the KB lacks the name, or links it first to another concept (a learned name comes first,
  bioel_core.names.NameSet);
- the KB knows C (as a concept id or an alt id); the others are counted (`not_in_kb`), and written only with
  `keep_missing`, for an ingest that makes them concepts (`add_missing_concepts`, bioel_core.kb.extra_names).
The name written is the text's most frequent surface form, so an acronym keeps its capitals (the detector's
uppercase rule, bioel_core.text.detect.acronym_names).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bioel_core.corpora.records import Document
from bioel_core.kb.extra_names import COLUMNS, COMPOSITE_SEPARATOR, concept_parts
from bioel_core.kb.vocab import is_nil_id, plain_id
from bioel_core.names import NameSet
from bioel_core.text.detect import DictionaryDetector, StopList, acronym_names

SYNONYMS_KIND = "bioel-learned-synonyms"


@dataclass(frozen=True)
class Synonym:
    concept_id: str  # as the corpus writes it
    name: str  # the most frequent surface form
    count: int  # gold mentions with this text and id
    share: float  # count / mentions with this text
    precision: float  # gold mentions / detector matches of the text in the training documents


@dataclass
class LearnedSynonyms:
    synonyms: list[Synonym]
    rule: dict  # the thresholds
    learned_from: list[str] = field(default_factory=list)
    entity_types: list[str] = field(default_factory=list)
    dictionary: str = ""
    not_in_kb: int = 0  # texts that passed the rule with an id the KB does not know
    kept_missing: bool = False  # whether those are among `synonyms`
    command: str = ""

    def save(self, path: str | Path) -> None:
        """An extra-names file, its provenance in `#` lines above the header (read_extra_names skips them)."""
        header = [
            f"kind: {SYNONYMS_KIND}",
            f"rule: {', '.join(f'{k} {v}' for k, v in self.rule.items())}",
            f"learned from: {'; '.join(self.learned_from)}",
            f"entity types: {', '.join(self.entity_types) or 'any'}",
            f"dictionary: {self.dictionary}",
            f"synonyms: {len(self.synonyms)}; passed the rule with an id the KB lacks: {self.not_in_kb}"
            + (" (kept: an ingest with add_missing_concepts makes them concepts)" if self.kept_missing else ""),
        ] + ([f"command: {self.command}"] if self.command else [])
        lines = [f"# {h}" for h in header] + ["\t".join((*COLUMNS, "count", "share", "precision"))]
        lines += [f"{s.concept_id}\t{s.name}\t{s.count}\t{s.share:.3f}\t{s.precision:.3f}" for s in self.synonyms]
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def learn_synonyms(
    documents_with_gold: Iterable[Document],
    names: NameSet,
    *,
    entity_types: Collection[str] | None = None,
    stop_list: StopList | None = None,
    uppercase_only: Collection[str] = (),
    min_count: int = 1,
    min_share: float = 0.8,
    min_precision: float = 0.5,
    keep_missing: bool = False,
    learned_from: Sequence[str] = (),
) -> LearnedSynonyms:
    """The synonyms of the module docstring's rule, from gold mentions of `entity_types` (any type when None),
    for the KB `names` (normalizer, names and ids); `stop_list` and `uppercase_only` are the KB detector's."""
    docs = list(documents_with_gold)
    normalize = names.normalizer
    by_id: dict[str, Counter[str | None]] = defaultdict(Counter)
    surfaces: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for doc in docs:
        for m in doc.mentions:
            if entity_types is not None and m.entity_type not in entity_types:
                continue
            text = normalize(m.text)
            if not text:
                continue
            ids = [c for c in m.concept_ids if not is_nil_id(c)]
            only = COMPOSITE_SEPARATOR.join(ids) if ids and len(ids) == len(m.concept_ids) else None
            by_id[text][only] += 1
            if only is not None:
                surfaces[(text, only)][m.text] += 1
    stopped = stop_list.names if stop_list is not None else frozenset()
    candidates: dict[str, tuple[str, int, float]] = {}
    for text, id_counts in by_id.items():
        concept_id, count = max(
            ((c, n) for c, n in id_counts.items() if c is not None), key=lambda x: (x[1], x[0]), default=(None, 0)
        )
        share = count / sum(id_counts.values())
        if concept_id is not None and count >= min_count and share >= min_share and text not in stopped:
            candidates[text] = (concept_id, count, share)
    # the one-concept names' precision as without composites, whose longer matches would hide a word's misses inside
    # them ("hemorrhagic" in "hemorrhagic cystitis"); a composite's with every candidate
    single = {t: c for t, c in candidates.items() if COMPOSITE_SEPARATOR not in c[0]}
    precision = _precision(docs, names, single, entity_types, stop_list, uppercase_only, surfaces)
    if len(single) < len(candidates):
        of_all = _precision(docs, names, candidates, entity_types, stop_list, uppercase_only, surfaces)
        precision.update((t, p) for t, p in of_all.items() if t not in single)
    first_id: dict[str, str] = {}  # the id the KB links each name to first, and every id it knows
    known: set[str] = set()
    for name, concept_ids in zip(names.names, names.concept_ids):
        first_id.setdefault(name, plain_id(concept_ids[0]))
        known.update(plain_id(i) for i in concept_ids)
    synonyms, not_in_kb = [], 0
    for text, (concept_id, count, share) in sorted(candidates.items()):
        if precision.get(text, 0.0) < min_precision or first_id.get(text) == plain_id(concept_id):
            continue
        parts = concept_parts(concept_id)
        if len(parts) > 1 and not all(plain_id(part) in known for part in parts):
            continue  # a composite of concepts the KB does not all know: nothing to make it of
        if plain_id(concept_id) not in known:
            not_in_kb += 1
            if not keep_missing:
                continue
        surface = max(surfaces[(text, concept_id)].items(), key=lambda s: (s[1], s[0]))[0]
        synonyms.append(Synonym(concept_id, surface, count, round(share, 3), round(precision[text], 3)))
    return LearnedSynonyms(
        synonyms,
        {"min_count": min_count, "min_share": min_share, "min_precision": min_precision},
        list(learned_from),
        sorted(entity_types or ()),
        names.source,
        not_in_kb,
        keep_missing,
    )


def _precision(docs, names, candidates, entity_types, stop_list, uppercase_only, surfaces) -> dict[str, float]:
    """Per candidate text: the share of its dictionary matches in `docs` that are gold mention spans of the types."""
    acronyms = acronym_names((surface, text) for (text, _), forms in surfaces.items() if text in candidates for surface in forms)
    detector = DictionaryDetector(
        [*names.names, *candidates],
        names.normalizer,
        stop_list=stop_list,
        uppercase_only=[*uppercase_only, *acronyms],
    )
    matched: Counter[str] = Counter()
    gold: Counter[str] = Counter()
    for doc in docs:
        spans = {(m.start, m.end) for m in doc.mentions if entity_types is None or m.entity_type in entity_types}
        for m in detector.name_matches(doc):
            if m.name in candidates:
                matched[m.name] += 1
                gold[m.name] += (m.start, m.end) in spans
    return {text: gold[text] / n for text, n in matched.items()}
