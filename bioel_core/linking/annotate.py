"""Documents in, annotation rows out: find the mentions (detected, or given by the corpus), link each with
the linker of its entity type in one batched call per type, and mark as NIL those scored below the type's
threshold. The bulk-linking pipeline runs this per batch of documents; it never needs Beam.

Given mentions of an entity type without a KB are kept, NIL (`no_index`): a run's outputs hold every mention it
was given. A document that cannot be annotated (empty, larger than the limit, a given mention whose offsets run past
the text or whose text differs from the slice it names) raises `DocumentError` from `check`, so the caller
can dead-letter it and go on.

Short forms a document does not define are linked only where their context supports the type (issue 42 item 3): a
detected mention of one word of at most 5 characters ("APC", "VEGF", "CBD"; `is_short_form`), not defined in the
document ("adenomatous polyposis coli (APC)") and not linked by a long form, is dropped before overlaps are resolved
when its type sets `short_form_support` and neither its prior (the share of its occurrences in the training corpora
that were gold mentions of the type, from the type's stop list) nor the document model's span score for its
span and type reaches that support; with neither known (a short form never seen in training, linked without a
document model) it is kept. The model's own spans passed its span threshold, so at support up to that threshold they
stand.

A span the document model found that is a short form the document defines as something else, its long form heading
no mention of the span's type ("gestational day (GD)", "hormone therapy (HT)": no disease), is dropped
(`_defined_elsewise`), as the dictionaries drop their own matches of such a short form (bioel_core.text.detect).

A span the document model found that links NIL gives way, where its type sets `inner_names`, to the KB names the
dictionaries found inside it that link (`DocumentAnnotator._backed_off`): the model read "acute heart failure" or
"childhood leukaemia", which no KB name is near enough, where the KB names "heart failure" and "leukemia". Suited to
names whose head is their last words (diseases: chosen on BC5CDR and NCBI-disease dev), not to compound names, whose
parts name other things (a chemical's "acetate", "urea").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from bioel_core.corpora.records import Document, Mention
from bioel_core.heap import long_lived
from bioel_core.linking import DEFAULT_RERANK_DEPTH, DETECTORS, DOCUMENT_RUNTIMES
from bioel_core.linking.base import Linker
from bioel_core.normalize import Normalizer
from bioel_core.outputs.fs import LOCAL, FileSystem, absolute
from bioel_core.text.abbreviations import ABBREVIATION_RULES, is_bare_number, is_statistic
from bioel_core.text.spelling import SPELLING_RULES, SpellingVariants
from bioel_core.text.detect import (
    COORDINATION_RULES,
    NAME_MATCH_RULES,
    MentionDetector,
    StopList,
    defined_short_forms,
    is_short_form,
    plausible_long_form,
)
from bioel_core.settings.fields import SettingsError

MAX_DOCUMENT_CHARS = 1_000_000  # far beyond any abstract or PMC article body; guards workers' memory
# the entity type of a mention detected with an index given without a type (the KB manifests name no type), so
# that PubTator and BioC outputs never get an empty type column
UNTYPED = "Entity"
# the kb_version of a given mention's annotation whose entity type has no KB here: NIL, linked with no KB
NO_KB_VERSION = ""
# The version of the short-form rule (ShortFormSupport, DocumentAnnotator._context_supported): part of a linking run's
# settings when a type sets its support, so an incremental run links again what an older rule annotated.
SHORT_FORM_RULES = "prior-or-span-score/1"
# The version of the rule by which a NIL span of the model's gives way to the KB names inside it (`inner_names`).
INNER_NAMES_RULES = "nil-span-to-inner-names/1"
# The version of detection's rules, what it never keeps (_no_statistics, _defined_elsewise), where the dictionaries'
# names match and their coordinated mentions: part of every detecting run's settings, so an incremental run detects
# again what older rules found. Version 2 of the model's short forms: a span it drops lends its link to no other mention.
# model-spans-stopped: a span of the model's that its type's stop list holds is dropped, as the dictionaries' matches are.
DETECTION_RULES = f"no-statistics/1 model-short-forms-as-defined/2 model-spans-stopped/1 {NAME_MATCH_RULES} {COORDINATION_RULES}"


def no_index_reason(entity_type: str) -> str:
    """Why a given mention is NIL when its entity type has no KB (an index) in the run."""
    return f"no index for type {entity_type}"


class DocumentError(ValueError):
    pass


@dataclass(frozen=True)
class ShortFormSupport:
    """When an undefined short form of one entity type is linked: its prior or its span score reaches `min_support`."""

    min_support: float
    priors: StopList | None = None  # the type's stop list: its short forms' training counts

    def supported(self, short_form: str, span_score: float | None) -> bool:
        prior = self.priors.prior(short_form) if self.priors is not None else None
        evidence = [x for x in (prior, span_score) if x is not None]
        return not evidence or max(evidence) >= self.min_support


@dataclass
class EntityTarget:
    """One entity type's KB: its linker, its detector (None when mentions are given), its NIL threshold."""

    entity_type: str
    linker: Linker
    kb_version: str
    detector: MentionDetector | None = None
    nil_threshold: float | None = None
    #: concept id -> (vocabulary, alt ids), from the KB's concepts table; what annotation rows carry beside the id
    concepts: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    short_forms: ShortFormSupport | None = None  # None: short forms are linked as any mention
    inner_names: bool = False  # a NIL span of the document model's gives way to the linked KB names inside it
    # whether a span's text is, normalized as the KB's names are, a name of the type's stop list (None: it has none)
    stopped: Callable[[str], bool] | None = None


def _in_stop_list(stop: StopList, normalizer: Normalizer) -> Callable[[str], bool]:
    names = stop.names
    return lambda text: normalizer(text) in names


def _no_statistics(mentions: list[Mention]) -> list[Mention]:
    """Detected mentions less statistics and bare numbers (`OR=12.6`, `A-- > T`, `799`): a name normalized to its
    letters ("A-T": `a t`) would otherwise match them, and neither is a mention of any entity type."""
    return [m for m in mentions if not is_statistic(m.text) and not is_bare_number(m.text)]


def concept_lookup(kb_dir: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """concept id -> (vocabulary, alt ids) of an ingest-kb output."""
    from bioel_core.tables import read_table

    table = read_table(kb_dir, "concepts", ["concept_id", "vocabulary", "alt_ids"])
    # read a slice at a time, one (vocabulary, ()) shared by the concepts without alt ids: a UMLS-size KB has
    # millions of concepts and a handful of vocabularies
    lookup: dict[str, tuple[str, tuple[str, ...]]] = {}
    plain: dict[str, tuple[str, tuple[str, ...]]] = {}
    for at in range(0, table.num_rows, 1 << 16):
        t = table.slice(at, 1 << 16).to_pydict()
        for c, v, a in zip(t["concept_id"], t["vocabulary"], t["alt_ids"]):
            shared = plain.setdefault(v, (v, ()))
            lookup[c] = (shared[0], tuple(a)) if a else shared
    return lookup


def content_sha256(document: Document, with_mentions: bool, settings: str = "") -> str:
    """What a document's annotations depend on besides the model and KB versions: its passages, when mentions are
    given those, and the annotator's other settings (`AnnotatorSpec.settings_sha256`), so an incremental run
    relinks a document whenever any of them changed."""
    payload = {"id": document.doc_id, "passages": [[p.kind, p.offset, p.text] for p in document.passages]}
    if with_mentions:
        # what a given mention is linked by counts too (a discontinuous BioC annotation's own text); left out when it
        # is the mention's text, so documents without one keep the hash they had
        payload["mentions"] = [
            [m.start, m.end, m.text, m.entity_type, *([m.link_text] if m.link_text else [])] for m in document.mentions
        ]
    if settings:
        payload["settings"] = settings
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def check_document(document: Document, detect: bool, max_chars: int = MAX_DOCUMENT_CHARS) -> str:
    """The document's text, or DocumentError naming the reason it cannot be annotated. A plain function (no model)
    so the pipeline can choose among several copies of a document before any linking."""
    try:
        text = document.text
    except ValueError as err:
        raise DocumentError(str(err)) from None
    if not text.strip():
        raise DocumentError("empty document: no text in any passage")
    if len(text) > max_chars:
        raise DocumentError(f"document of {len(text):,} characters exceeds the limit of {max_chars:,}")
    if not detect:
        for m in document.mentions:
            if m.start is None or m.end is None or not 0 <= m.start < m.end <= len(text):
                raise DocumentError(f"mention {m.text!r} at {m.start}-{m.end} lies outside the text ({len(text)} characters)")
            if text[m.start : m.end] != m.text:
                raise DocumentError(
                    f"mention {m.text!r} at {m.start}-{m.end} does not match the text there ({text[m.start : m.end]!r})"
                )
    return text


def _parts_linked(mentions: list[Mention]) -> list[Mention]:
    """A detected coordinated mention ("breast and ovarian cancer", its `parts` the names it holds) once per part,
    each linked by its part's name: the span is annotated with each concept (bioel_core.text.detect)."""
    out: list[Mention] = []
    for m in mentions:
        out.extend([replace(m, link_text=part, parts=()) for part in m.parts] if m.parts else [m])
    return out


def _without_overlaps(mentions: list[Mention]) -> list[Mention]:
    """Across entity types and detectors the longest span wins, then the earlier start; of the same span, the
    earlier in the list (the earlier target; the dictionary's before the model's)."""
    kept: list[Mention] = []
    for m in sorted(mentions, key=lambda m: (-(m.end - m.start), m.start)):
        if all(m.end <= k.start or k.end <= m.start for k in kept):
            kept.append(m)
    return sorted(kept, key=lambda m: (m.start, m.end))


def _names_inside(mentions: list[Mention], dictionary: list[Mention], model_spans: Mapping) -> dict[int, list[Mention]]:
    """For each of `mentions` the model found (its id in `model_spans`), the dictionaries' names lying inside its span
    that detection did not keep (the longer span won), by the mention's index."""
    kept = {id(m) for m in mentions}
    inside = {
        j: [d for d in dictionary if id(d) not in kept and m.start <= d.start and d.end <= m.end]
        for j, m in enumerate(mentions)
        if id(m) in model_spans
    }
    return {j: names for j, names in inside.items() if names}


def _defined_elsewise(
    document: Document, detected: list[Mention], dictionary: list[Mention], defined: Mapping[str, tuple[int, int]]
) -> list[Mention]:
    """The model's spans less those that are a short form the document defines (`defined`: defined_short_forms) as
    something other than a mention of their type: no mention of that type, the dictionaries' or the model's, heads its
    long form (`plausible_long_form`: "gestational day (GD)", "hormone therapy (HT)" define no disease). The
    dictionaries drop their own matches of such a short form (bioel_core.text.detect)."""
    if not any(m.text in defined for m in detected):
        return detected
    found: dict[str, set[tuple[int, int]]] = {}
    for m in dictionary + detected:
        found.setdefault(m.entity_type, set()).add((m.start, m.end))
    text = document.text
    return [
        m
        for m in detected
        if m.text not in defined or plausible_long_form(text, *defined[m.text], found[m.entity_type]) is not False
    ]


def combined_version(versions: dict[str, str]) -> str:
    """One version string for the KBs (or models) of every entity type (what a document's annotations depend on):
    the version itself when every type has the same one."""
    if len(set(versions.values())) == 1:
        return next(iter(versions.values()))
    return hashlib.sha256(json.dumps(sorted(versions.items())).encode()).hexdigest()


class DocumentAnnotator:
    def __init__(
        self,
        targets: Sequence[EntityTarget],
        model_version: str,
        detect: bool = True,
        max_chars: int = MAX_DOCUMENT_CHARS,
        batch_size: int = 256,
        document_model=None,
    ):
        """`document_model`: a collective model (bioel_core.models.collective) that finds (detect) or encodes
        (given) every mention of a document in one pass; each mention is then linked by its vector."""
        if not targets:
            raise ValueError("at least one entity type with its KB index is needed")
        if detect and document_model is None and any(t.detector is None for t in targets):
            raise ValueError("mention detection needs a detector for every entity type")
        self.document_model = document_model
        self.targets = {t.entity_type: t for t in targets}
        self.model_version, self.detect, self.max_chars, self.batch_size = model_version, detect, max_chars, batch_size
        self.kb_version = combined_version({t.entity_type: t.kb_version for t in targets})

    def check(self, document: Document) -> str:
        """The document's text, or DocumentError naming the reason it cannot be annotated."""
        return check_document(document, self.detect, self.max_chars)

    def target_of(self, mention: Mention) -> EntityTarget | None:
        """The mention's entity type's KB; a target typed '' takes mentions of any type without their own."""
        return self.target_for(mention.entity_type)

    def target_for(self, entity_type: str) -> EntityTarget | None:
        return self.targets.get(entity_type) or self.targets.get("")

    def mentions(self, document: Document) -> list[Mention]:
        """Detected mentions, or the given ones: every one, those of an entity type without a KB here annotated NIL
        (`no_index`), never dropped."""
        if self.detect:
            detected, defined = self._dictionary_mentions(document)
            return self._kept(document, detected, defined=defined)
        return list(document.mentions)

    def _dictionary_mentions(self, document: Document) -> tuple[list[Mention], Mapping[str, tuple[int, int]]]:
        """The dictionaries' mentions of the document, and its short-form definitions, found once: every detector
        and the rules read them."""
        defined = defined_short_forms(document)
        return [m for t in self.targets.values() if t.detector for m in t.detector.detect(document, defined)], defined

    def _kept(
        self, document: Document, detected: list[Mention], span_score=lambda m: None, defined: Mapping | None = None
    ) -> list[Mention]:
        """What detection keeps of the detectors' mentions, in both paths: no statistics, short forms only where their
        context supports them, the longest of overlapping spans, a coordinated mention once per part. `defined`: the
        document's defined_short_forms, when the caller has them (else found here, where needed)."""
        kept = self._context_supported(document, _no_statistics(detected), span_score, defined)
        return _parts_linked(_without_overlaps(kept))

    def _stopped(self, entity_type: str, text: str) -> bool:
        """Whether the type's stop list holds `text`: a span of the model's is no mention then, as a dictionary's match
        of it is none."""
        stopped = self.targets[entity_type].stopped
        return stopped is not None and stopped(text)

    def _context_supported(
        self, document: Document, mentions: list[Mention], span_score=lambda m: None, defined: Mapping | None = None
    ) -> list[Mention]:
        """`mentions` less the undefined short forms whose type's ShortFormSupport their prior and `span_score`
        (mention -> the document model's score of its span and type, or None) do not reach (module docstring)."""
        gated = [
            (m, target.short_forms)
            for m in mentions
            if (target := self.target_of(m)) is not None
            and target.short_forms is not None
            and is_short_form(m.text)
            and not m.link_text
        ]
        if not gated:
            return mentions
        if defined is None:
            defined = defined_short_forms(document)
        dropped = {id(m) for m, support in gated if m.text not in defined and not support.supported(m.text, span_score(m))}
        return [m for m in mentions if id(m) not in dropped]

    def annotate(self, documents: Sequence[Document]) -> list[list[dict]]:
        """Annotation rows (the annotations table's columns) per document, in order; call `check` first."""
        found, best = self._one_pass(documents) if self.document_model is not None else self._by_text(documents)
        return [self._rows(document, mentions, best, i) for i, (document, mentions) in enumerate(zip(documents, found))]

    def _by_text(self, documents: Sequence[Document]) -> tuple[list[list[Mention]], dict]:
        """Mentions from the detectors (or given), linked by their text in one batched call per entity type."""
        found = [self.mentions(d) for d in documents]
        best: dict[tuple[int, int], tuple] = {}
        for target in self.targets.values():
            where = [(i, j) for i, ms in enumerate(found) for j, m in enumerate(ms) if self.target_of(m) is target]
            if not where:
                continue
            texts = [found[i][j].link_text or found[i][j].text for i, j in where]
            for key, candidates in zip(where, target.linker.link(texts, k=1, batch_size=self.batch_size)):
                best[key] = candidates[0] if candidates else None
        return found, best

    def _one_pass(self, documents: Sequence[Document]) -> tuple[list[list[Mention]], dict]:
        """Each document encoded once by the document model: its mentions (detected, or the given ones) and their
        vectors. With dictionaries too (detector `both`), their spans join the model's, longest first, and are
        linked by their text. Encoding is per document, so vectors never depend on the batch; the name encoder (when
        the model links with it too) then runs once for the batch, and the searches once per entity type (one scan
        of each index instead of one per document): both are batch-invariant (float64 vectors, exact scores)."""
        import numpy as np
        import torch

        model, found, best = self.document_model, [], {}
        encoded_keys, collective, span_texts = [], [], []  # the mentions linked by vector, over the whole batch
        inner_names = {}  # (i, j) -> the dictionaries' names inside the model's span j of document i, kept as any
        by_text: dict[str, list[tuple[tuple[int, int], str]]] = {t: [] for t in self.targets}
        # the dictionaries' mentions of a document need no pass: found on the passes' threads, after each pass
        dictionaries = (lambda k: self._dictionary_mentions(documents[k])) if self.detect else None
        passes = model.encode_documents([d.text for d in documents], with_logits=self.detect, then=dictionaries)
        with torch.no_grad(), contextlib.closing(passes):
            for i, (document, (encoded, logits, found_by_dictionaries)) in enumerate(zip(documents, passes)):
                text = document.text
                if self.detect:
                    spans = [
                        s
                        for s in model.decode_spans(encoded, logits, model.decoding["thresholds"])
                        if s.entity_type in self.targets and not self._stopped(s.entity_type, text[s.start : s.end])
                    ]
                    # the model's spans by identity (a dictionary's mention of the same span is another mention):
                    # `spotted` holds them for the whole document, as an id() names one object only while it lives
                    # and the rules below drop mentions and make others (a coordinated mention's parts)
                    spotted = [Mention(text[s.start : s.end], document.doc_id, s.start, s.end, s.entity_type) for s in spans]
                    piece_span = {id(m): s.piece_span for m, s in zip(spotted, spans)}
                    scores = {id(m): s.score for m, s in zip(spotted, spans)}
                    dictionary, defined = found_by_dictionaries
                    detected = _defined_elsewise(document, spotted, dictionary, defined)

                    def span_score(m: Mention, encoded=encoded, logits=logits, scores=scores) -> float | None:
                        # where the two detectors meet: the model's score of a dictionary span too
                        if id(m) in scores:
                            return scores[id(m)]
                        return model.span_score(encoded, logits, m.start, m.end, m.entity_type)

                    mentions = self._kept(document, dictionary + detected, span_score, defined)
                    pieces = [piece_span.get(id(m)) for m in mentions]  # None: the dictionary's spans, linked by text
                    for j, within in _names_inside(
                        mentions, [m for m in dictionary if self.target_of(m).inner_names], piece_span
                    ).items():
                        if kept := self._kept(document, within, span_score, defined):
                            inner_names[(i, j)] = kept
                else:
                    mentions = self.mentions(document)
                    pieces = [model.covering_span(encoded, m.start, m.end) if self.target_of(m) else None for m in mentions]
                    for j in (j for j, p in enumerate(pieces) if p is None):  # no KB, or covers no word piece: not linked
                        best[(i, j)] = None
                found.append(mentions)
                encodable = [j for j, p in enumerate(pieces) if p is not None]
                if encodable:
                    piece_spans = [pieces[j] for j in encodable]
                    collective.append(model.collective_vectors(encoded, piece_spans))
                    texts = model.span_texts(encoded, text, piece_spans)
                    linkers = [self.target_of(mentions[j]).linker for j in encodable]
                    # with spelling, the name encoder reads a span as the by-text path's query (Linker.query)
                    span_texts += [linker.query(t) if linker.spelling else t for linker, t in zip(linkers, texts)]
                    encoded_keys += [(i, j) for j in encodable]
                if self.detect:
                    for j in (j for j, p in enumerate(pieces) if p is None):
                        m = mentions[j]
                        by_text[self.target_of(m).entity_type].append(((i, j), m.link_text or m.text))
        by_vector: dict[str, list[int]] = {t: [] for t in self.targets}
        if encoded_keys:  # the name encoder, when the model links with it too, once for the batch
            vectors = model.linking_vectors(np.concatenate(collective), span_texts, model.decoding["link_with"])
            for row, (i, j) in enumerate(encoded_keys):
                by_vector[self.target_of(found[i][j]).entity_type].append(row)
        for entity_type, target in self.targets.items():
            if by_vector[entity_type]:
                rows = by_vector[entity_type]
                keys = [encoded_keys[r] for r in rows]
                texts = [found[i][j].link_text or found[i][j].text for i, j in keys]
                for key, candidates in zip(keys, target.linker.search_vectors(vectors[rows], 1, texts=texts)):
                    best[key] = candidates[0] if candidates else None
            if by_text[entity_type]:
                keys, texts = zip(*by_text[entity_type])
                for key, candidates in zip(keys, target.linker.link(list(texts), k=1, batch_size=self.batch_size)):
                    best[key] = candidates[0] if candidates else None
        return self._backed_off(found, best, inner_names) if inner_names else (found, best)

    def _backed_off(self, found: list[list[Mention]], best: dict, inner_names: dict) -> tuple[list[list[Mention]], dict]:
        """The model's NIL spans replaced by the dictionaries' names inside them that link (module docstring), linked
        by their text; a span none of whose names links stays NIL. `inner_names`: (document index, mention index) ->
        the names inside that mention, kept as detection keeps any (`_kept`)."""
        nil_spans = {
            (i, j): within for (i, j), within in inner_names.items() if self._nil(self.target_of(found[i][j]), best.get((i, j)))
        }
        replaced: dict[tuple[int, int], list[tuple[Mention, object]]] = {}
        for target in self.targets.values():
            names = [(key, name) for key, within in nil_spans.items() for name in within if self.target_of(name) is target]
            if not names:
                continue
            texts = [name.link_text or name.text for _, name in names]
            for (key, name), candidates in zip(names, target.linker.link(texts, k=1, batch_size=self.batch_size)):
                top = candidates[0] if candidates else None
                if not self._nil(target, top):
                    replaced.setdefault(key, []).append((name, top))
        if not replaced:
            return found, best
        for linked in replaced.values():  # several types' names inside one span: in text order
            linked.sort(key=lambda r: r[0].start)
        mentions_now, best_now = [], {}
        for i, mentions in enumerate(found):
            out: list[Mention] = []
            for j, m in enumerate(mentions):
                for mention, top in replaced.get((i, j), [(m, best.get((i, j)))]):
                    best_now[(i, len(out))] = top
                    out.append(mention)
            mentions_now.append(out)
        return mentions_now, best_now

    @staticmethod
    def _nil(target: EntityTarget | None, top) -> bool:
        """No candidate (so a mention of a type without a KB), or the best one scored below its type's NIL threshold."""
        if top is None:
            return True
        return target.nil_threshold is not None and top.score < target.nil_threshold

    def _rows(self, document: Document, mentions: list[Mention], best: dict, i: int) -> list[dict]:
        rows = []
        for j, m in enumerate(mentions):
            target, top = self.target_of(m), best.get((i, j))
            score = top.score if top else 0.0
            nil = self._nil(target, top)
            concept_id = None if nil else top.concept_ids[0]
            vocabulary, alt_ids = target.concepts.get(concept_id, (None, ())) if concept_id else (None, ())
            rows.append(
                {
                    "doc_id": document.doc_id,
                    "start": m.start,
                    "end": m.end,
                    "mention": m.text,
                    "link_text": m.link_text or m.text,
                    "entity_type": m.entity_type,
                    "concept_id": concept_id,
                    "vocabulary": vocabulary,
                    "alt_ids": list(alt_ids),
                    "matched_name": top.name if top else None,
                    "score": float(score),
                    "nil": nil,
                    "model_version": self.model_version,
                    "kb_version": target.kb_version if target else NO_KB_VERSION,
                }
            )
        return rows

    def no_index(self, rows: Sequence[dict]) -> Counter:
        """Of annotation rows, those NIL because their entity type has no KB here, by entity type."""
        return Counter(r["entity_type"] for r in rows if self.target_for(r["entity_type"]) is None)


@dataclass(frozen=True)
class AnnotatorSpec:
    """Everything a worker needs to build its DocumentAnnotator: plain paths and numbers, cheap to ship.

    `indexes`, `stop_lists`, `nil_thresholds` and `type_models` are ((entity type, value), ...); type '' takes
    mentions of any type (given mode, where each keeps its own type) and labels the mentions it detects UNTYPED.
    `model` embeds the mentions of every type without a model of its own in `type_models` (LinkSettings: types.TYPE.model)."""

    model: str | None
    indexes: tuple[tuple[str, str], ...]
    detect: bool = True
    stop_lists: tuple[tuple[str, str], ...] = ()
    nil_thresholds: tuple[tuple[str, float], ...] = ()
    device: str = "cpu"
    max_chars: int = MAX_DOCUMENT_CHARS
    batch_size: int = 256
    abbreviations: bool = True
    detector: str | None = None  # with detect: one of DETECTORS; None: default_detector()
    document_runtime: str = "torch"  # what runs a collective model's document encoder: one of DOCUMENT_RUNTIMES
    reranker: str | None = (
        None  # a cross-encoder, generative or reranker-ensemble folder that reorders each mention's top `rerank_depth` concepts
    )
    rerank_depth: int = DEFAULT_RERANK_DEPTH
    type_models: tuple[tuple[str, str], ...] = ()
    # a generative model folder that links each mention by writing one of its type's names (whole-tree constrained
    # decoding) instead of the index's nearest names; the index still gives the names and the model's fingerprint
    generative: str | None = None
    # where the embeddings and names folders an index's manifests record by path lie now (a relocated bundle's own,
    # per entity type): each is still checked to be the version the index was built from
    embeddings: tuple[tuple[str, str], ...] = ()
    names: tuple[tuple[str, str], ...] = ()
    # per entity type: the support an undefined short form needs (ShortFormSupport); types without one link them all
    short_form_support: tuple[tuple[str, float], ...] = ()
    # the entity types whose NIL spans of the document model's give way to the linked KB names inside them
    inner_names: tuple[str, ...] = ()
    # British spellings in text read as the KB's American ones, in detection and linking (bioel_core.text.spelling)
    spelling_variants: bool = True

    def __post_init__(self):
        # workers open these folders: one started elsewhere (a Flink or Spark task manager on this machine) would read
        # a relative path against its own working folder
        for name in ("model", "reranker", "generative"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, absolute(getattr(self, name)))
        for name in ("indexes", "stop_lists", "type_models", "embeddings", "names"):
            object.__setattr__(self, name, tuple((t, absolute(path)) for t, path in getattr(self, name)))
        if self.detector is None:
            object.__setattr__(self, "detector", self.default_detector())
        if self.detector not in DETECTORS:
            raise SettingsError("detector", f"{self.detector!r} is not one of {', '.join(DETECTORS)}")
        if self.document_runtime not in DOCUMENT_RUNTIMES:
            raise SettingsError("document_runtime", f"{self.document_runtime!r} is not one of {', '.join(DOCUMENT_RUNTIMES)}")
        if self.document_runtime != "torch" and self.device != "cpu":
            raise SettingsError(
                "document_runtime", f"{self.document_runtime} runs on the CPU; with device {self.device}, use torch"
            )
        if not self.indexes:
            raise SettingsError("types.*.index", "required: at least one entity type's index (or a bundle)")
        if self.reranker is not None:
            from bioel_core.linking.rerank import check_reranker

            check_reranker(self.reranker)
        if self.rerank_depth < 1:
            raise SettingsError("rerank_depth", f"must be at least 1, got {self.rerank_depth}")
        if self.generative is not None:
            from bioel_core.linking.generative import check_generative

            if self.reranker is not None:
                raise SettingsError(
                    "generative", "links by writing names, while the reranker reorders the index's candidates: choose one"
                )
            check_generative(self.generative)
            # its scores are probabilities: a threshold outside [0, 1] would cut nothing or everything (one t calibrated
            # when they were log-probabilities is exp(t) now)
            for entity_type, threshold in self.nil_thresholds:
                if not 0.0 <= threshold <= 1.0:
                    raise SettingsError(
                        f"types.{entity_type}.nil_threshold",
                        f"{threshold}: with a generative model, scores are probabilities in [0, 1] (exp "
                        f"of the written name's mean token log-probability; a log-probability "
                        f"threshold t is exp(t) here)",
                    )
        for entity_type, support in self.short_form_support:
            if not 0.0 <= support <= 1.0:
                raise SettingsError(
                    f"types.{entity_type}.short_form_support",
                    f"{support}: a share of occurrences and a span probability, so in [0, 1]",
                )
        for entity_type, path in self.stop_lists:  # refused here, before any work, not in every worker
            try:
                StopList.load(path)
            except OSError as err:  # a missing file or a folder: the system's words alone name no setting
                raise SettingsError(f"types.{entity_type}.stop_list", f"{path}: {err.strerror}") from None
        known = {t for t, _ in self.indexes}
        for setting, pairs in (
            ("stop_list", self.stop_lists),
            ("nil_threshold", self.nil_thresholds),
            ("short_form_support", self.short_form_support),
            ("inner_names", tuple((t, True) for t in self.inner_names)),
            ("model", self.type_models),
        ):
            unknown = sorted({t for t, _ in pairs} - known)
            if unknown:
                raise SettingsError(
                    f"types.{unknown[0]}.index",
                    f"required: its {setting} is given; entity types {unknown} have no index (indexed: {sorted(known)})",
                )

    def default_detector(self) -> str:
        """`both` for a collective model linking every type in its one pass (better than either detector alone on
        BC5CDR dev: benchmarks/RESULTS.md), else the KB dictionaries."""
        from bioel_core.models.collective import is_collective

        one_model = not self.type_models and self.generative is None
        return "both" if one_model and self.model and is_collective(self.model) else "dictionary"

    def _sources(self, fs: FileSystem = LOCAL) -> dict[str, dict]:
        """Per entity type: index folder, names folder, the model record (ModelRecord) and fingerprint of its vectors
        and KB version, read from the manifests (index -> embeddings -> names) through `fs`, each checked to be complete
        and unchanged."""
        from bioel_core.embeddings import check_embeddings_unchanged, check_names_unchanged, manifest_sha256
        from bioel_core.index import read_index_manifest
        from bioel_core.outputs.details import ModelRecord

        out = {}
        embeddings, names = dict(self.embeddings), dict(self.names)
        for entity_type, index_dir in self.indexes:
            manifest = read_index_manifest(index_dir, fs=fs)
            emb_dir = check_embeddings_unchanged(index_dir, manifest, fs, at=embeddings.get(entity_type))
            names_dir = check_names_unchanged(emb_dir, fs, at=names.get(entity_type))
            model = ModelRecord.from_dict(manifest["model"])
            out[entity_type] = {
                "index": index_dir,
                "names": str(names_dir),
                "model": model,
                "fingerprint": model.vectors(),
                "kb_version": manifest_sha256(names_dir, fs),
            }
        return out

    def model_for(self, entity_type: str) -> str | None:
        """The model folder that embeds this type's mentions and built its index (None: the shipped default)."""
        return dict(self.type_models).get(entity_type, self.model)

    def versions(self, models: dict | None = None) -> tuple[str, str]:
        """(model version, KB version), after checking before any work that each entity type's model makes the
        vectors its index was built from (a document model: its name encoder). `models`: those `open_models` gave, to
        open them once for `open` too."""
        sources = self._sources()
        self._check_stop_lists(sources)
        models = self.open_models() if models is None else models
        fingerprints: dict[str, str] = {}
        whole: dict[int, str] = {}
        for entity_type, source in sources.items():
            model = models[self.model_for(entity_type)]
            found = source["model"].vectors_of(model)
            if found != source["fingerprint"]:
                name = self.model_for(entity_type) or "(default)"
                raise SettingsError(
                    f"types.{entity_type}.model" if entity_type else "model",
                    f"the model {name} (fingerprint {found[:12]}) is not the one the index "
                    f"{source['index']} was built with ({source['fingerprint'][:12]}); pass that model",
                )
            fingerprints[entity_type] = self._model_version(source, model, whole)
        return (combined_version(fingerprints), combined_version({t: s["kb_version"] for t, s in sources.items()}))

    def _model_version(self, source: dict, model, whole: dict) -> str:
        """A type's model version in the annotations: the fingerprint of the whole model that embeds its mentions (a
        document model retrained on the same name encoder links against the same index, yet annotates otherwise); with
        generative linking, which embeds no mention, that of the model the index was built with. `whole`: the
        fingerprints already taken, by model (one model serves every type: its weights are hashed once)."""
        if self.generative is not None:
            return source["model"].fingerprint
        if id(model) not in whole:
            whole[id(model)] = model.fingerprint()
        return whole[id(model)]

    def _check_stop_lists(self, sources: dict[str, dict]) -> None:
        """Each stop list against its type's KB names, before the workers open them."""
        from bioel_core.names import table_normalizer
        from bioel_core.tables import read_manifest

        for entity_type, path in self.stop_lists:
            names_dir = sources[entity_type]["names"]
            try:
                StopList.load(path).check_normalizer(table_normalizer(read_manifest(names_dir), names_dir))
            except ValueError as err:
                raise SettingsError(f"types.{entity_type}.stop_list", f"{path}: {err}") from None

    def open_models(self) -> dict:
        """Model folder -> its opened encoder, once per folder; the document model checked against the detector."""
        from bioel_core.models import open_model

        folders = dict.fromkeys(self.model_for(t) for t, _ in self.indexes)
        if self.detect and self.detector != "dictionary":
            folders[self.model] = None  # the span detector's model, even when every type has a name model of its own
        models = {folder: open_model(folder, device=self.device) for folder in folders}
        if self.model in models:
            self._checked(models[self.model])
        if self.document_runtime != "torch":
            if self.model not in models:
                raise SettingsError(
                    "document_runtime", f"{self.document_runtime} runs a collective model: no linker model is given"
                )
            models[self.model].use_runtime(self.document_runtime)
        return models

    def _checked(self, model):
        """The model, after checking that it can do what the detector asks of it."""
        if self.detect and self.detector != "dictionary" and not _is_document_model(model):
            typed = " (a type's own model is its name model; the span detector is the linker's model)" if self.type_models else ""
            raise SettingsError(
                "detector",
                f"{self.detector} needs a collective model (made by `bioel train`); "
                f"{self.model or 'the default model'} is a "
                f"{model.config().get('encoder_type')} name encoder" + typed,
            )
        if self.document_runtime != "torch" and not _is_document_model(model):
            raise SettingsError(
                "document_runtime",
                f"{self.document_runtime} runs a collective model's document encoder; {self.model or 'the default model'} "
                f"is a {model.config().get('encoder_type')} name encoder",
            )
        if _is_document_model(model) and (self.detector != "dictionary" or not self.detect) and self.type_models:
            raise SettingsError(
                "model",
                "a type's own model gives it a name model of its own, but the collective "
                "model's one pass links every type by its own vectors: use one model (the "
                "collective one)",
            )
        if _is_document_model(model) and (self.detector != "dictionary" or not self.detect) and self.generative:
            raise SettingsError(
                "generative",
                "links mentions by their text; the collective model's one pass links them by its vectors: use one or the other",
            )
        return model

    def inputs(self, labels: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
        """(setting, path) of every folder and file the annotator reads, for the refusal of an output among them;
        `labels`: the caller's words for the settings (index, model, reranker, generative, stop_list: the CLI's
        flags), default their names."""

        def label(name: str) -> str:
            return (labels or {}).get(name, name)

        return (
            [(label("index"), d) for _, d in self.indexes]
            + [(label("model"), m) for m in (self.model, *(m for _, m in self.type_models)) if m]
            + [(label(name), m) for name, m in (("reranker", self.reranker), ("generative", self.generative)) if m]
            + [(label("stop_list"), s) for _, s in self.stop_lists]
        )

    def settings_sha256(self) -> str:
        """Every setting besides the model fingerprint and KB versions that changes annotations: detection or given
        mentions, abbreviations (and the version of their rules), the stop lists' contents, the NIL thresholds and the indexes' versions (their
        manifests, kind and parameters of the search, less the run fields). Part of each document's incremental key
        (`content_sha256`)."""
        from bioel_core.embeddings import manifest_sha256
        from bioel_core.index.sharded import file_sha256 as file_sha

        payload = {
            "detect": self.detect and DETECTION_RULES,
            "detector": self.detector,
            "abbreviations": self.abbreviations and ABBREVIATION_RULES,
            "stop_lists": sorted((t, file_sha(p)) for t, p in self.stop_lists),
            "nil_thresholds": sorted((t, float(v)) for t, v in self.nil_thresholds),
            "indexes": sorted((t, manifest_sha256(d)) for t, d in self.indexes),
        }
        if self.short_form_support:  # absent when off, so runs without the rule keep their keys
            payload["short_forms"] = [SHORT_FORM_RULES, sorted((t, float(v)) for t, v in self.short_form_support)]
        if self.spelling_variants:
            payload["spelling"] = SPELLING_RULES
        if self.inner_names:
            payload["inner_names"] = [INNER_NAMES_RULES, sorted(self.inner_names)]
        if self.document_runtime != "torch":  # other token states (the float graph's last bits; int8 weights)
            payload["document_runtime"] = self.document_runtime
        # a reranker's or generative model's weights and config decide the concepts as much as the model's do
        if self.reranker:
            payload["reranker"] = {"depth": self.rerank_depth, "files": _model_files(self.reranker)}
        if self.generative:
            payload["generative"] = _model_files(self.generative)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def linker_sha256(self) -> str:
        """sha256 of everything that decides this linker's annotations, read without opening a model (a no-op
        incremental `bioel link` is found with it before any model loads): every setting (`describe`,
        `settings_sha256`), each model folder's config and weights files, and each type's index vectors fingerprint and
        KB version, checked as `versions` checks them but for the model's own fingerprint, which its files stand for."""
        from bioel_core.models import model_folder

        sources = self._sources()
        self._check_stop_lists(sources)
        folders = {self.model_for(t) for t in sources} | (
            {self.model} if self.detect and self.detector != "dictionary" else set()
        )
        payload = {
            "spec": self.describe(),
            "settings": self.settings_sha256(),
            "models": sorted((str(folder), _model_files(str(model_folder(folder)))) for folder in folders),
            "sources": sorted((t, s["fingerprint"], s["kb_version"]) for t, s in sources.items()),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def open(self, models: dict | None = None) -> DocumentAnnotator:
        """The annotator; `models`: the encoders `open_models` gave (already checked by `versions`), else opened here.
        What it builds lives as long as the worker: built with the garbage collector paused, then frozen
        (bioel_core.heap: minutes of a worker's start-up at a UMLS-size KB)."""
        with long_lived():
            return self._open(models)

    def _open(self, models: dict | None) -> DocumentAnnotator:
        import pyarrow as pa

        from bioel_core.linking.generative import GenerativeLinker, open_generative
        from bioel_core.linking.rerank import RerankLinker, open_reranker
        from bioel_core.names import NameSet
        from bioel_core.text.detect import DictionaryDetector

        # whole-tree generative linking needs no name encoder (versions() has checked the indexes' models)
        encoders = {} if self.generative is not None else self.open_models() if models is None else models
        encoder = encoders.get(self.model)
        reranker = open_reranker(self.reranker, self.device, reproducible=True) if self.reranker else None
        generative = open_generative(self.generative, self.device) if self.generative else None
        # the document model finds the mentions (detector `model`) or encodes the given ones in one pass
        one_pass = encoder is not None and _is_document_model(encoder) and (self.detector != "dictionary" or not self.detect)
        stop_lists, thresholds = dict(self.stop_lists), dict(self.nil_thresholds)
        short_form_support = dict(self.short_form_support)
        targets, fingerprints, whole = [], {}, {}  # whole: each model's fingerprint, taken once (_model_version)
        for entity_type, source in self._sources().items():
            names = NameSet.from_names_table(source["names"])
            spelling = SpellingVariants.from_names_table(source["names"]) if self.spelling_variants else None
            detector = None
            stop = StopList.load(stop_lists[entity_type]) if entity_type in stop_lists else None
            if self.detect and self.detector != "model":
                detector = DictionaryDetector.from_names_table(
                    source["names"],
                    names=names,
                    entity_type=entity_type or UNTYPED,
                    stop_list=stop,
                    abbreviations=self.abbreviations,
                    spelling=spelling,
                )
            fingerprints[entity_type] = self._model_version(source, encoders.get(self.model_for(entity_type)), whole)
            if generative is not None:  # the tree of the type's names, built in each worker (seconds)
                linker = GenerativeLinker(names, generative, self.generative, batch_size=self.batch_size, reproducible=True)
            else:
                model = self.model_for(entity_type)
                linker = self._dense_linker(entity_type, source, names, encoders[model], model)
            whole_names = linker.exact.row_of
            if reranker is not None:
                linker = RerankLinker(names, linker, reranker, self.reranker, self.rerank_depth)
            if spelling is not None:  # a query that is a name as written stays so (the exact index holds the names)
                linker.spelling = spelling.with_names(whole_names)
            targets.append(
                EntityTarget(
                    entity_type,
                    linker,
                    source["kb_version"],
                    detector,
                    thresholds.get(entity_type),
                    concept_lookup(source["names"]),
                    None if entity_type not in short_form_support else ShortFormSupport(short_form_support[entity_type], stop),
                    entity_type in self.inner_names,
                    None if stop is None else _in_stop_list(stop, names.normalizer),
                )
            )
        # what Arrow's allocator kept of the KB tables just read goes back to the system: with a UMLS-size KB,
        # hundreds of MB a link worker would otherwise hold for the whole job
        pa.default_memory_pool().release_unused()
        return DocumentAnnotator(
            targets,
            combined_version(fingerprints),
            self.detect,
            self.max_chars,
            self.batch_size,
            document_model=encoder.eval() if one_pass else None,
        )

    def _dense_linker(self, entity_type: str, source: dict, names, encoder, model: str | None):
        """The type's linker over the FAISS shards of its index; annotations must not depend on how documents are
        batched (reproducible). One method, so a benchmark may search the names otherwise (gpu_workers.py)."""
        from bioel_core.linking.dense import DenseLinker

        return DenseLinker.from_index(
            source["index"],
            names,
            encoder,
            model=model,
            names_dir=source["names"],
            batch_size=self.batch_size,
            reproducible=True,
        )

    def describe(self) -> dict:
        return asdict(self)


def _model_files(folder: str) -> list[tuple[str, str]]:
    """(relative path, sha256) of a model folder's config and weights files, its subfolders' too (a collective model's
    document/ side changes no index, so its files alone tell a retrained one). Not its cards: `bioel evaluate`
    recording its scores rewrites them, and they decide no link (the fingerprint they record is checked when the
    model opens)."""
    from bioel_core.index.sharded import file_sha256
    from bioel_core.models.cards import CARD_JSON

    root = Path(folder)
    return sorted(
        (p.relative_to(root).as_posix(), file_sha256(str(p)))
        for p in root.rglob("*")
        if p.is_file() and p.suffix in (".json", ".safetensors") and p.name != CARD_JSON
    )


def _is_document_model(encoder) -> bool:
    return getattr(encoder, "encoder_type", None) == "collective"
