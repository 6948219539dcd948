"""BioSyn's processed data: query folders (`*.concept`, one file per document) and dictionaries.

Query line: `PMID||start|end||type||mention||ID`; a composite mention is `m1|m2` with ids `C1|C2`
(ids also joined with `+`). Dictionary line: `ID||name`, ids of one name joined with `|`. Whitespace
around ids is stripped (two NCBI test lines have a leading space). A line that does not parse raises
FormatError naming file, line and reason. A query with id `-1` or `CUI-less` (no concept) is read with no
concept ids; a dictionary line with such an id is a FormatError (a dictionary names concepts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bioel_core.corpora.pubtator import split_ids
from bioel_core.corpora.records import FormatError, Mention
from bioel_core.kb.io import open_text_file
from bioel_core.kb.vocab import is_nil_id

# a BioSyn dataset's splits scored, each with the training mentions a model evaluated on it may have seen
# (GenBioEL's subpopulations): processed_SPLIT is scored, processed_TRAIN_FOLDER[SPLIT] holds its training mentions
TRAIN_FOLDER = {"dev": "processed_train", "test": "processed_traindev"}


def read_query_file(path: str | Path) -> list[Mention]:
    source, out = str(path), []
    with open_text_file(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            where = f"line {lineno}"
            fields = line.split("||")
            if len(fields) != 5:
                raise FormatError(source, where, f"expected 'PMID||start|end||type||mention||ID' (5 fields), got {len(fields)}")
            pmid, span, etype, mention, ids_field = fields
            start, sep, end = span.partition("|")
            if not (sep and start.strip().isdigit() and end.strip().isdigit()):
                raise FormatError(source, where, f"span {span!r} is not 'start|end'")
            ids = split_ids(ids_field)  # () for -1: kept, the caller decides (BioSyn drops them before evaluating)
            if not mention.strip() or not ids_field.strip():
                raise FormatError(source, where, "empty mention or concept id field")
            out.append(
                Mention(text=mention, doc_id=pmid.strip(), start=int(start), end=int(end), entity_type=etype, concept_ids=ids)
            )
    return out


def read_query_folder(folder: str | Path) -> list[Mention]:
    """Every query of every `*.concept` file, files in name order, lines in file order (duplicates kept)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.concept"))
    if not files:
        raise FileNotFoundError(f"{folder}: no *.concept files (not a BioSyn query folder)")
    return [m for f in files for m in read_query_file(f)]


@dataclass(frozen=True)
class DictionaryEntry:
    name: str
    concept_ids: tuple[str, ...]


def iter_dictionary(path: str | Path) -> Iterator[DictionaryEntry]:
    source = str(path)
    with open_text_file(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            ids_field, sep, name = line.partition("||")
            ids = tuple(i.strip() for i in ids_field.split("|") if i.strip())
            if not sep or not ids or not name.strip():
                raise FormatError(source, f"line {lineno}", "expected 'ID||name' with a non-empty id and name")
            if any(is_nil_id(i) for i in ids):
                raise FormatError(
                    source,
                    f"line {lineno}",
                    f"id field {ids_field!r} labels a mention with no concept (NIL); a dictionary line names a concept",
                )
            yield DictionaryEntry(name.strip(), ids)


def read_typo_map(path: str | Path) -> dict[str, str]:
    """BioSyn's spelling map (`typo||correction` per line, e.g. NCBI's ncbi-spell-check.txt)."""
    out: dict[str, str] = {}
    with open_text_file(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            typo, sep, fix = raw.strip().partition("||")
            if not sep or not typo.strip() or not fix.strip():
                raise FormatError(str(path), f"line {lineno}", "expected 'typo||correction'")
            out[typo.strip()] = fix.strip()
    return out
