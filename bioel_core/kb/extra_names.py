"""Extra names: more names for a KB's concepts, from a file a user writes by hand or `bioel_core.text.synonyms`
learns from annotated corpora, added by ingest-kb to the names of a KB of any format (`extra_names` of the ingest
settings), each with the name type `extra`.

The file (UTF-8, tab-separated, `#` lines are comments, blank lines are skipped):

    # synonyms of my lab
    concept_id	name
    D003920	sugar diabetes
    MESH:D009203	heart attack
    OMIM:222100	IDDM1

- The file may be gzipped. The first line that is not a comment is the header: it names the columns, `concept_id` and `name` among them
  (other columns, such as a learned file's `count`, are kept for the reader and ignored here).
- `concept_id` is the id as the KB or a corpus writes it, bare or with a vocabulary's prefix (`D009203`,
  `MESH:D009203`); `name` is the name as it is written in text (case matters for acronyms, as for the KB's own names).
- A name goes to the concept whose id is `concept_id` (compared as scoring compares ids, bioel_core.kb.vocab.plain_id),
  else to the one concept that lists it among its alt ids (MEDIC's OMIM ids). A name whose concept the KB lacks
  (or holds under an alt id of several concepts), a line without both fields, or a NIL id is dead-lettered with its
  file and line: nothing is dropped silently. A file whose header lacks a column is one dead letter and is not read on.

With `add_missing_concepts` (an ingest setting, off by default) a name whose id the KB lacks altogether makes that
concept instead of a dead letter: for a KB older than the names' source (MEDIC 2012 lacks cardiotoxicity, D066126,
which later corpora were annotated with). The concept's id is stored as the KB's reader stores its own
(`KBReader.classify`: `MESH:D066126` -> `D066126` of MESH) and must have its vocabulary's shape
(bioel_core.kb.vocab.ID_SHAPES; the reader's id pattern for another); its preferred name is
the first of its names in the files (by file, then line); every name of it is an extra name. An id several concepts
share is still a dead letter: there is no concept to make. So is, where the type declares a scope, an id of the kind
the dump itself holds (its reader's id pattern: a MeSH descriptor of a descriptor thesaurus): the dump lacks it only
if the scope left it out, and the scope stands ("cannabis", D002188, is no chemical of tree D).

A composite id, one id per part joined by `|` as BC5CDR and NCBI-disease write a composite mention ("hemorrhagic
cystitis": `D006470|D003556`), names no concept of any KB; with `add_missing_concepts` it makes a composite concept of
that id (the parts' bare ids, every part of one vocabulary and its shape; the scope's rule above is for a single id),
which links like any other and which scoring and the interchange copies read as its parts' ids.

Among several concepts sharing a name, an extra name's concept comes first (bioel_core.names.NameSet): the file says
which concept the name means where it is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from bioel_core.kb.io import Opener, ReaderContext, iter_lines
from bioel_core.kb.vocab import ID_SHAPES, is_nil_id, plain_id
from bioel_core.kb.base import KBReader, usable_name
from bioel_core.records import ConceptRecord, DeadLetter

COLUMNS = ("concept_id", "name")
COMPOSITE_SEPARATOR = "|"  # a composite concept's ids, one per part, as BC5CDR and NCBI-disease write them
COMPOSITE = "composite."  # a made vocabulary's mark for composite concepts (id_pattern_with)


@dataclass(frozen=True)
class ExtraName:
    source: str  # the file
    line: int
    concept_id: str  # as written
    name: str

    @property
    def key(self) -> str:
        """What a concept's id or alt id must equal (after plain_id) to take this name."""
        return plain_id(self.concept_id)

    def dead(self, reason: str) -> DeadLetter:
        return DeadLetter(self.source, f"line {self.line}", f"{self.concept_id}\t{self.name}", reason)


def read_extra_names(path: str, ctx: ReaderContext, opener: Opener | None = None) -> Iterator[ExtraName | DeadLetter]:
    """The names of one extra-names file and a dead letter (counted in `ctx`) per line that is not one. A name is
    counted read only: it is accepted, or dead-lettered, where its concept is looked up (`resolve`)."""
    columns: dict[str, int] | None = None
    for item in iter_lines(path, ctx, opener):  # undecodable lines, gzip faults and an empty file are its dead letters
        if isinstance(item, DeadLetter):
            yield item
            continue
        number, line = item
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if columns is None:
            columns = {c.strip(): i for i, c in enumerate(fields)}
            if not all(c in columns for c in COLUMNS):
                yield ctx.dead(
                    f"line {number}",
                    line,
                    "not an extra-names file: its header must name the tab-separated columns concept_id and name",
                    unread=True,
                )
                return
            continue
        concept_id, name = (fields[columns[c]].strip() if columns[c] < len(fields) else "" for c in COLUMNS)
        if not concept_id or not name:
            yield ctx.dead(f"line {number}", line, f"no {'concept_id' if not concept_id else 'name'} in this line")
        elif is_nil_id(concept_id):
            yield ctx.dead(f"line {number}", line, f"{concept_id!r} says no concept: a name needs one")
        else:
            ctx.stats.records_read += 1
            yield ExtraName(path, number, concept_id, name)


def concept_keys(concept_id: str, alt_ids: Iterable[str]) -> Iterator[tuple[str, bool]]:
    """(key, via an alt id) of each id a KB concept answers to: the keys ExtraName.key is matched against."""
    yield plain_id(concept_id), False
    for alt in alt_ids:
        yield plain_id(alt), True


def resolve(key: str, found: Iterable[tuple[str, str, bool]]) -> tuple[str, str] | str:
    """The (concept_id, kb) an extra name of `key` goes to, of the KB concepts `found` answering to it
    ((concept_id, kb, via an alt id), possibly repeated: a concept read twice); else why none (a dead letter's reason)."""
    found = set(found)
    own = sorted({(c, kb) for c, kb, via_alt in found if not via_alt})
    by_alt = sorted({(c, kb) for c, kb, via_alt in found if via_alt})
    chosen = own or by_alt
    if len(chosen) == 1:
        return chosen[0]
    if not chosen:
        return f"concept {key} is not in the KB (neither a concept id nor an alt id)"
    how = "concepts have this id" if own else "concepts list it as an alt id"
    return f"{len(chosen)} {how} ({', '.join(c for c, _ in chosen[:5])}): which one is unclear"


def new_concept(names: Iterable[ExtraName], reader: KBReader) -> ConceptRecord | str:
    """The concept that `names` (of one key, which no concept of the KB answers to) make with `add_missing_concepts`,
    else why none (a dead letter's reason)."""
    names = sorted(names, key=lambda n: (n.source, n.line))
    raw_id = names[0].concept_id
    raw_parts = [part.strip() for part in concept_parts(raw_id)]  # one, unless a composite
    parts = [reader.classify(part) for part in raw_parts]
    vocabulary = parts[0][0]
    concept_id = COMPOSITE_SEPARATOR.join(bare for _, bare in parts)
    shape = ID_SHAPES.get(vocabulary, reader.id_pattern)  # a dump's pattern may admit fewer (MeSH descriptors only)
    if any(v != vocabulary for v, _ in parts) or not all(
        shape.fullmatch(bare) or shape.fullmatch(raw) for (_, bare), raw in zip(parts, raw_parts)
    ):
        return (
            f"concept {raw_id} is not in the KB, and no concept is made of it: it is not an id of "
            f"{vocabulary or reader.kb} (pattern {shape.pattern})" + (", one per part" if len(parts) > 1 else "")
        )
    if len(parts) == 1 and reader.scope.declared and reader.id_pattern.fullmatch(concept_id):
        return (
            f"concept {raw_id} is not in the KB, and no concept is made of it: the dump holds such ids, so the "
            "entity type's scope left it out (or the dump does not know it)"
        )
    preferred = next((n.name for n in names if usable_name(n.name)), None)
    if preferred is None:
        return f"concept {raw_id} is not in the KB, and none of its names has a printable character to name it"
    return ConceptRecord(concept_id=concept_id, kb=reader.kb, preferred_name=preferred, vocabulary=vocabulary)


def concept_parts(concept_id: str) -> list[str]:
    """A concept id's parts: a composite concept's one id per part, any other id alone."""
    return concept_id.split(COMPOSITE_SEPARATOR)


def made_kind(concept: ConceptRecord) -> str:
    """What `id_pattern_with` needs to know of a made concept: its vocabulary, marked COMPOSITE for a composite."""
    return (COMPOSITE if COMPOSITE_SEPARATOR in concept.concept_id else "") + concept.vocabulary


def id_pattern_with(id_pattern: str, made_kinds: Iterable[str]) -> str:
    """The pattern every concept id of a KB matches once `new_concept` made concepts of `made_kinds` (`made_kind`):
    the reader's, the shape of each such vocabulary, and for composites, those shapes joined by COMPOSITE_SEPARATOR
    (what the ingest manifest records and the quality checks test)."""
    shape = lambda v: ID_SHAPES[v].pattern if v in ID_SHAPES else id_pattern  # noqa: E731
    made_kinds = set(made_kinds)
    shapes = {shape(v) for v in made_kinds if not v.startswith(COMPOSITE)} - {id_pattern}
    part_shapes = {shape(v.removeprefix(COMPOSITE)) for v in made_kinds if v.startswith(COMPOSITE)}
    shapes |= {f"(?:{p})(?:{re.escape(COMPOSITE_SEPARATOR)}(?:{p}))+" for p in part_shapes}
    return "|".join(f"(?:{p})" for p in [id_pattern, *sorted(shapes)]) if shapes else id_pattern
