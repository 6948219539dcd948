"""Documents in, annotation rows out: find the mentions (detected, or given by the corpus), link each with
the linker of its entity type in one batched call per type, and mark as NIL those scored below the type's
threshold. The bulk-linking pipeline runs this per batch of documents; it never needs Beam.

A document that cannot be annotated (empty, larger than the limit, a given mention whose offsets run past
the text or whose text differs from the slice it names) raises `DocumentError` from `check`, so the caller
can dead-letter it and go on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from bioel_core.corpora.records import Document, Mention
from bioel_core.linking.base import Linker
from bioel_core.text.detect import MentionDetector

MAX_DOCUMENT_CHARS = 1_000_000  # far beyond any abstract or PMC article body; guards workers' memory


class DocumentError(ValueError):
    pass


@dataclass
class EntityTarget:
    """One entity type's KB: its linker, its detector (None when mentions are given), its NIL threshold."""

    entity_type: str
    linker: Linker
    kb_version: str
    detector: MentionDetector | None = None
    nil_threshold: float | None = None


def content_sha256(document: Document, with_mentions: bool) -> str:
    """What a document's annotations depend on: its passages and, when mentions are given, those."""
    payload = {"id": document.doc_id, "passages": [[p.kind, p.offset, p.text] for p in document.passages]}
    if with_mentions:
        payload["mentions"] = [[m.start, m.end, m.text, m.entity_type] for m in document.mentions]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def _without_overlaps(mentions: list[Mention]) -> list[Mention]:
    """Across entity types the longest span wins; on equal length the earlier target (and start) does."""
    kept: list[Mention] = []
    for m in sorted(mentions, key=lambda m: (-(m.end - m.start), m.start)):
        if all(m.end <= k.start or k.end <= m.start for k in kept):
            kept.append(m)
    return sorted(kept, key=lambda m: (m.start, m.end))


class DocumentAnnotator:
    def __init__(self, targets: Sequence[EntityTarget], model_version: str, detect: bool = True,
                 max_chars: int = MAX_DOCUMENT_CHARS, batch_size: int = 256):
        if not targets:
            raise ValueError("at least one entity type with its KB index is needed")
        if detect and any(t.detector is None for t in targets):
            raise ValueError("mention detection needs a detector for every entity type")
        self.targets = {t.entity_type: t for t in targets}
        self.model_version, self.detect, self.max_chars, self.batch_size = model_version, detect, max_chars, batch_size

    def check(self, document: Document) -> str:
        """The document's text, or DocumentError naming the reason it cannot be annotated."""
        try:
            text = document.text
        except ValueError as err:
            raise DocumentError(str(err)) from None
        if not text.strip():
            raise DocumentError("empty document: no text in any passage")
        if len(text) > self.max_chars:
            raise DocumentError(f"document of {len(text):,} characters exceeds the limit of {self.max_chars:,}")
        if not self.detect:
            for m in document.mentions:
                if m.start is None or m.end is None or not 0 <= m.start < m.end <= len(text):
                    raise DocumentError(f"mention {m.text!r} at {m.start}-{m.end} lies outside the text ({len(text)} characters)")
                if text[m.start:m.end] != m.text:
                    raise DocumentError(f"mention {m.text!r} at {m.start}-{m.end} does not match the text there "
                                        f"({text[m.start:m.end]!r})")
        return text

    def target_of(self, mention: Mention) -> EntityTarget | None:
        """The mention's entity type's KB; a target typed '' takes mentions of any type without their own."""
        return self.targets.get(mention.entity_type) or self.targets.get("")

    def mentions(self, document: Document) -> list[Mention]:
        """Detected mentions, or the given ones whose entity type has a KB here (others are not linked)."""
        if self.detect:
            return _without_overlaps([m for t in self.targets.values() for m in t.detector.detect(document)])
        return [m for m in document.mentions if self.target_of(m) is not None]

    def annotate(self, documents: Sequence[Document]) -> list[list[dict]]:
        """Annotation rows (the annotations table's columns) per document, in order; call `check` first."""
        found = [self.mentions(d) for d in documents]
        best: dict[tuple[int, int], tuple] = {}
        for target in self.targets.values():
            where = [(i, j) for i, ms in enumerate(found) for j, m in enumerate(ms) if self.target_of(m) is target]
            if not where:
                continue
            texts = [found[i][j].link_text or found[i][j].text for i, j in where]
            for key, candidates in zip(where, target.linker.link(texts, k=1, batch_size=self.batch_size)):
                best[key] = candidates[0] if candidates else None
        out = []
        for i, (document, mentions) in enumerate(zip(documents, found)):
            rows = []
            for j, m in enumerate(mentions):
                target, top = self.target_of(m), best[(i, j)]
                score = top.score if top else 0.0
                nil = top is None or (target.nil_threshold is not None and score < target.nil_threshold)
                rows.append({"doc_id": document.doc_id, "start": m.start, "end": m.end, "mention": m.text,
                             "link_text": m.link_text or m.text, "entity_type": m.entity_type,
                             "concept_id": None if nil else top.concept_ids[0], "matched_name": top.name if top else None,
                             "score": float(score), "nil": nil, "model_version": self.model_version,
                             "kb_version": target.kb_version})
            out.append(rows)
        return out

