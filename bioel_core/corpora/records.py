"""Plain record types for documents, mentions and linker candidates.

Offsets are character offsets into `Document.text` (passages laid out at their own offsets), end exclusive,
as PubTator and BioC state them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the longest text a document may lay out: far beyond any article (annotate.MAX_DOCUMENT_CHARS is 1M), and a bound
# that holds before a text is built, so a passage offset of 10^15 is refused instead of asked of memory
MAX_TEXT_CHARS = 100_000_000


@dataclass(frozen=True)
class Mention:
    """A mention of an entity: gold, detected or queried.

    `concept_ids` is empty for a mention with no concept (PubTator `-1`) or not yet linked; several ids
    mean a composite mention ("breast and ovarian cancer") or alternative ids of one concept (MeSH + OMIM).
    `parts` are the sub-mentions a corpus states for a composite mention (BC5CDR's seventh column).
    `link_text` is what a linker should look up when it differs from `text`: a detected abbreviation
    carries the long form its document defines for it ('' = link by `text`).
    """

    text: str
    doc_id: str = ""
    start: int | None = None
    end: int | None = None
    entity_type: str = ""
    concept_ids: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    ann_id: str = ""  # BioC annotation id, kept so relations can refer to it
    link_text: str = ""
    # The id field exactly as the corpus wrote it (PubTator column 6, the BioC id infon); writers emit it while it
    # still splits to `concept_ids`, because the split is lossy (tmVar `c|SUB|G|Ex2+860|C`).
    id_field: str | None = None  # None: not read from a corpus (detected or linked)
    infons: tuple[tuple[str, str], ...] = ()  # BioC annotation infons other than type, the id and parts


@dataclass(frozen=True)
class Passage:
    """A run of text at its document offset. A BioC passage stated as sentences becomes one Passage per
    sentence (`sentence_of` = the BioC passage's own offset), so every table that stores passages keeps the text."""

    kind: str  # "title", "abstract", ... (BioC passage type infon)
    offset: int
    text: str
    infons: tuple[tuple[str, str], ...] = ()  # BioC passage infons other than `type`, in file order
    sentence_of: int | None = None


@dataclass(frozen=True)
class Relation:
    """A document-level relation, e.g. PubTator `PMID<TAB>CID<TAB>D015738<TAB>D003693`.

    `args` are concept ids (PubTator) or annotation ids (BioC nodes); `roles` name them when the format does.
    """

    kind: str
    args: tuple[str, ...]
    roles: tuple[str, ...] = ()
    rel_id: str = ""
    infons: tuple[tuple[str, str], ...] = ()  # BioC: every infon verbatim, the kind's included
    nodes: bool = False  # BioC: args/roles are `<node refid role>` (annotation ids), not infons


@dataclass
class Document:
    doc_id: str
    passages: list[Passage] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    version: str = ""  # PubMed's PMID Version ('' where the format has none)
    # the input file it was read from (read_documents sets it), for what names the document later, e.g. a dead
    # letter of linking; not part of the document, so not compared
    source: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        """All passages placed at their offsets, gaps filled with spaces (PubTator: title + ' ' + abstract);
        ValueError for passages that overlap or lay the text out beyond MAX_TEXT_CHARS."""
        last = max(self.passages, key=lambda p: p.offset + len(p.text), default=None)
        if last is not None and last.offset + len(last.text) > MAX_TEXT_CHARS:
            raise ValueError(
                f"document {self.doc_id}: passage {last.kind!r} at offset {last.offset:,} lays the text out "
                f"beyond {MAX_TEXT_CHARS:,} characters"
            )
        out = ""
        for p in sorted(self.passages, key=lambda p: p.offset):
            if p.offset < len(out):
                raise ValueError(f"document {self.doc_id}: passage {p.kind!r} at offset {p.offset} overlaps the previous one")
            out += " " * (p.offset - len(out)) + p.text
        return out

    def passage(self, kind: str) -> str:
        """The text of the first passage of `kind`, '' if none."""
        return next((p.text for p in self.passages if p.kind == kind), "")

    @property
    def title(self) -> str:
        return self.passage("title")

    @property
    def abstract(self) -> str:
        return self.passage("abstract")


@dataclass(frozen=True)
class DeletedDocument:
    """A PubMed update file's DeleteCitation entry: the document must be dropped from earlier outputs."""

    doc_id: str
    version: str = ""
    source: str = ""


@dataclass(frozen=True)
class Candidate:
    """One ranked answer of a linker: the ids of a matched name, the name, and the linker's score."""

    concept_ids: tuple[str, ...]
    name: str
    score: float


class UnwritableDocument(ValueError):
    """A document an output format cannot hold (e.g. a `|` in a PubTator document id); the caller dead-letters it."""


class FormatError(ValueError):
    """A malformed input record; the message names file, line (or record) and reason."""

    def __init__(self, source: str, location: str, reason: str):
        super().__init__(f"{source}: {location}: {reason}")
        self.source, self.location, self.reason = source, location, reason
