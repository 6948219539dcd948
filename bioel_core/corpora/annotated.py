"""Annotated corpora read whole and strictly, for the verbs that score or learn from annotations (evaluate-e2e,
calibrate-nil, train's corpora): `read_annotated(path, fmt, flag)`, and `is_composite_part`, the annotations those
verbs leave out.

`fmt` is one of FORMATS_WITH_MENTIONS (the formats that can carry annotations, named as `bioel link`'s
input formats); any other is refused naming the path, since a corpus of text only would score as
if nothing were found. `path` is a file, a folder of files, or a finished `bioel link` output folder, read for
its copy in `fmt`. Every record goes through `read_documents` (gzip, byte-order marks, the same parsing as `bioel
link`), but the first bad record raises its FormatError (file, record, reason) instead of becoming a dead letter.
When the file plainly is another format (bioel_core.corpora.sniff), the error ends with the flag to pass, as a dead
letter's reason does, since a misnamed format otherwise reads as a broken file ("line 1: annotation or relation line
before any title/abstract line"). A document id given twice (in one file or two) with other text or annotations
is refused the same way: scored, its two blocks' annotations would merge, and `bioel link` keeps the later one; a
repeat of the same document (the NCBI disease training set gives PMID 8528200 twice) is read as given.

BC5CDR's BioC release states the parts of a composite mention as annotations of their own (infon `CompositeRole` =
`IndividualMention`, "end-stage liver disease" of "end-stage or malignant liver disease" with two locations), where
its PubTator release names them in the composite's line; read as mentions, they would be gold spans (and ids) the
PubTator release has not. The verbs skip them (`is_composite_part`), so both releases score, calibrate and train the
same.

A training or dev corpus may annotate only some of a model's entity types (NCBI-disease: diseases, no chemicals).
It is then given as `TYPE[,TYPE...]=PATH` (`CorpusSpec.parse`) and read as a `TypedCorpus`: the types it annotates
travel with its documents, so a learner neither takes its unannotated types' spans as negatives nor scores
predictions of them as false. With one type named, every mention of a type the model does not have is of that type
(NCBI's SpecificDisease, DiseaseClass, Modifier and CompositeMention are all diseases); mentions of the model's other
types, and with several types named mentions of any type not named, are outside what the corpus is declared to
annotate: left out, and counted (`TypedCorpus.left_out`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from bioel_core.corpora.read import DOCUMENT_DROPPED, FORMATS, FORMATS_WITH_MENTIONS, read_documents
from bioel_core.corpora.records import Document, FormatError, Mention
from bioel_core.corpora.sniff import FORMAT_NAMES
from bioel_core.records import DeadLetter

_COMPOSITE_PART = ("CompositeRole", "IndividualMention")  # a BioC annotation infon (Mention.infons)
_GIVEN_AGAIN = "given again with other text or annotations (first in {}): which one is meant is unclear; give each document once"


def is_composite_part(mention: Mention) -> bool:
    """Whether a BioC annotation is a part of a composite mention stated apart (see the module docstring)."""
    return _COMPOSITE_PART in mention.infons


def corpus_files(path: str | Path, fmt: str, flag: str = "") -> list[str]:
    """The files of format `fmt` a path names: a file is itself; a finished `bioel link` output folder gives its
    copy in `fmt` (the parts, or the one single-file copy, in the generation its manifest names); any other
    folder gives its input files (bioel_core.inputs), e.g. the parts folder `OUTPUT/gen-.../pubtator/`. `flag`
    names the option in errors."""
    from bioel_core.inputs import folder_files
    from bioel_core.outputs.layout import MANIFEST
    from bioel_core.tables import data_root, read_manifest

    where, name = f"{flag} {path}".strip(), FORMAT_NAMES.get(fmt, fmt)
    folder = Path(path)
    if not folder.is_dir():
        if not folder.is_file():
            raise FileNotFoundError(f"{where}: no such file or folder")
        return [str(path)]
    if not (folder / MANIFEST).is_file():
        return folder_files(folder, flag or f"{name} folder")
    manifest = read_manifest(folder)
    if manifest.get("pipeline") != "link":
        raise ValueError(f"{where}: a `bioel {manifest.get('pipeline')}` output, not a `bioel link` one with {name} annotations")
    if fmt not in manifest.get("outputs", {}):
        copies = [k for k in manifest.get("outputs", {}) if k in FORMATS]
        raise ValueError(
            f"{where}: this `bioel link` output has no {name} copy (its copies: {', '.join(copies) or 'none'}); "
            f"re-run link with the copy format {fmt}"
        )
    root = data_root(folder, manifest)
    return [str(root / f) for f in manifest["outputs"][fmt]["files"]]


def read_annotated(path: str | Path, fmt: str, flag: str = "", format_flag: str = "") -> list[Document]:
    """Every document of the `fmt` corpus a path names (see corpus_files); ValueError for a format that carries no
    annotations, FormatError for the first bad record. `format_flag` names the option that sets `fmt`, for the hint
    on a file of another format."""
    if fmt not in FORMATS_WITH_MENTIONS:
        raise ValueError(
            f"{f'{flag} {path}'.strip()}: the {fmt} format carries no annotations "
            f"(formats that do: {', '.join(FORMATS_WITH_MENTIONS)})"
        )
    documents, first = [], {}
    for file in corpus_files(path, fmt, flag):
        for item in read_documents(file, fmt, format_flag=format_flag, flag_formats=FORMATS_WITH_MENTIONS):
            if isinstance(item, DeadLetter):
                # a dead letter's "document dropped" is what bulk linking does with it; here the whole read stops
                raise FormatError(item.source, item.location, item.reason.removeprefix(DOCUMENT_DROPPED))
            earlier = first.setdefault(item.doc_id, item)
            if earlier is not item and earlier != item:
                raise FormatError(item.source, f"document {item.doc_id}", _GIVEN_AGAIN.format(earlier.source))
            documents.append(item)
    return documents


def pubtator_files(path: str | Path, flag: str = "") -> list[str]:
    """The PubTator files a path names: a file, a folder of files, or a finished `bioel link` output folder's
    PubTator copy (`corpus_files`)."""
    return corpus_files(path, "pubtator", flag)


def read_pubtator(path: str | Path, flag: str = "") -> list[Document]:
    """Every document of a PubTator file, parts folder or `bioel link` output folder; FormatError (file, line,
    reason) for the first bad one (`read_annotated`)."""
    return read_annotated(path, "pubtator", flag)


# a type prefix is a comma-separated list of names without a path separator or space; `./a=b.txt` is a path
_TYPE_PREFIX = re.compile(r"[^\s/\\=,]+(,[^\s/\\=,]+)*")


@dataclass(frozen=True)
class CorpusSpec:
    """A corpus flag's value `[TYPE[,TYPE...]=]PATH`: the path and the entity types it annotates (None: all of the
    model's)."""

    path: str
    types: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, value: str, flag: str = "") -> CorpusSpec:
        prefix, sep, path = value.partition("=")
        if not sep or not _TYPE_PREFIX.fullmatch(prefix):
            return cls(value)
        types = tuple(prefix.split(","))
        if not path.strip():
            raise ValueError(f"{f'{flag} {value}'.strip()}: expected [TYPE[,TYPE...]=]PATH, PATH not empty")
        if len(set(types)) != len(types):
            raise ValueError(f"{f'{flag} {value}'.strip()}: an entity type is named twice")
        return cls(path, types)

    def __str__(self) -> str:
        return f"{','.join(self.types)}={self.path}" if self.types else self.path

    def read(self, fmt: str, entity_types, flag: str = "", format_flag: str = "") -> TypedCorpus:
        """The corpus's documents with the mentions of the types it annotates (module docstring); ValueError for a
        named type that is not one of `entity_types` (the model's)."""
        entity_types = tuple(entity_types)
        unknown = [t for t in self.types or () if t not in entity_types]
        if unknown:
            raise ValueError(
                f"{f'{flag} {self}'.strip()}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
                f"an entity type of the model (its types: {', '.join(entity_types)})"
            )
        documents = read_annotated(self.path, fmt, flag, format_flag)
        types = self.types or entity_types
        left_out: Counter = Counter()

        def in_scope(m: Mention) -> Mention | None:
            if m.entity_type in types:
                return m
            if len(types) == 1 and self.types and m.entity_type not in entity_types:
                return replace(m, entity_type=types[0])  # a subtype of the one type the corpus annotates
            left_out[m.entity_type] += 1
            return None

        if self.types:
            documents = [replace(d, mentions=[k for k in map(in_scope, d.mentions) if k is not None]) for d in documents]
        return TypedCorpus(str(self.path), types, documents, dict(sorted(left_out.items())))


@dataclass
class TypedCorpus:
    """A corpus's documents and the entity types it annotates (its spans of other types are not known)."""

    source: str
    types: tuple[str, ...]
    documents: list[Document] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)  # mentions by type outside the declared types

    def summary(self) -> dict:
        """What a model card records of it."""
        mentions = Counter(m.entity_type for d in self.documents for m in d.mentions)
        return {
            "path": self.source,
            "types": list(self.types),
            "documents": len(self.documents),
            "mentions": dict(sorted(mentions.items())),
            **({"left_out": self.left_out} if self.left_out else {}),
        }
