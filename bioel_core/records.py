"""Plain record types shared by every stage.

KB readers yield `ConceptRecord`, `NameRecord` and `DeadLetter` items in any order, so a pipeline routes
them by type with no special cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConceptRecord:
    concept_id: str
    kb: str
    preferred_name: str
    semantic_types: tuple[str, ...] = ()
    definition: str | None = None
    alt_ids: tuple[str, ...] = ()  # other ids of the concept, qualified `VOCAB:ID` (bioel_core.kb.vocab)
    vocabulary: str = ""  # the scheme concept_id belongs to (MESH, OMIM, UMLS, SNOMEDCT, a user's own)


@dataclass(frozen=True)
class NameRecord:
    """A surface name of a concept as the KB states it, before normalization."""

    concept_id: str
    kb: str
    name: str
    name_type: str  # one of NAME_TYPES


EXTRA_NAME_TYPE = "extra"  # a name of an extra-names file (bioel_core.kb.extra_names), not of the KB's dump
NAME_TYPES = ("preferred", "synonym", "abbreviation", "entry_term", "fsn", EXTRA_NAME_TYPE)


@dataclass(frozen=True)
class DeadLetter:
    """An input record that could not be used, with where it came from and why. `unread`: it stands for the rest of
    its file, or a whole file, which was not read as the format named (a fault its reader cannot read past, a file of
    another format): its records are unknown, so a run with one fails its checks whatever the dead-letter share."""

    source: str
    location: str  # "line 12", "record 4 (DescriptorUI D000001)", "byte 1024"
    raw: str
    reason: str
    unread: bool = False


#: how the reason of a dead letter that stands for the unread rest of a file begins (a reader that cannot resynchronise
#: after a fault: a file cut inside a record, content after the root element); the dead letter is marked `unread`
UNREAD_REST = "unread rest of file"


def unread_rest_reason(why: str, line: int, size: int | None = None, lines: int | None = None) -> str:
    """The reason of the dead letter of a file's rest from `line` on, `size` bytes on `lines` lines (None: not known,
    as behind a corrupt compressed stream), left unread because of `why`."""
    if size is None:
        extent = f"from line {line}"
    elif size == 0:
        extent = f"nothing after line {line}"
    else:
        extent = f"{size:,} bytes on {lines:,} line{'s' if lines != 1 else ''} from line {line}"
    return f"{UNREAD_REST}: {extent} ({why})"


@dataclass
class ReadStats:
    """Per-input-file counts a reader reports last, so the manifest can reconcile rows in and out.

    Invariant: records_read == records_accepted + dead_lettered + sum(skipped_by_filter.values()).
    A file-level fault (empty file, truncated gzip) counts as one record read and dead-lettered.
    """

    source: str
    records_read: int = 0  # data lines or XML records seen (headers and comments excluded)
    records_accepted: int = 0
    dead_lettered: int = 0
    skipped_by_filter: dict[str, int] = field(default_factory=dict)
    unread: str = ""  # where and why the file was not read to its end (its first dead letter marked `unread`)

    def skip(self, reason: str) -> None:
        self.skipped_by_filter[reason] = self.skipped_by_filter.get(reason, 0) + 1

    def reconciles(self) -> bool:
        filtered = sum(self.skipped_by_filter.values())
        return self.records_read == self.records_accepted + self.dead_lettered + filtered
