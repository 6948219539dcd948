"""UMLS Metathesaurus RRF files: MRCONSO (names), MRSTY (semantic types) and MRDEF (definitions).

MetamorphoSys writes every RRF file sorted by CUI, so the files are merge-joined by CUI in one pass and
memory holds one CUI's rows, never the Metathesaurus. A row whose CUI sorts before the one read just
before it is dead-lettered ("out of CUI order"): a merge-join cannot go back for it.
Files are told apart by basename (MRCONSO.RRF, MRSTY.RRF, MRDEF.RRF, each optionally gzipped).
MRSTY/MRDEF rows join only concepts with a selected MRCONSO row; with exclude_suppressed, suppressed
definitions are skipped too, and the first remaining definition is kept. A concept is named by its preferred row's STR
or, when that is control characters only, by its first usable one; a concept whose selected rows have none has them
dead-lettered.

A large uncompressed MRCONSO is read in parallel: `input_groups` cuts it into ranges that start at a new CUI and
cuts MRSTY and MRDEF before the same CUIs (a binary search each, as the files are sorted), so each group joins
its own CUIs and every line of every file is read by exactly one group. The CUI order is checked within a
range; in a sorted file (as MetamorphoSys writes) the tables are the same as from one whole-file read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from bioel_core.kb.base import KBItem, KBReader, preferred_name
from bioel_core.kb.io import (
    FileRange,
    Input,
    Opener,
    ReaderContext,
    input_path,
    is_gzip_file,
    iter_lines,
    open_raw,
    split_at_keys,
    split_lines,
)
from bioel_core.kb.scope import Scope
from bioel_core.kb.vocab import UMLS
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord

FIELDS = {
    "MRCONSO": [
        "CUI",
        "LAT",
        "TS",
        "LUI",
        "STT",
        "SUI",
        "ISPREF",
        "AUI",
        "SAUI",
        "SCUI",
        "SDUI",
        "SAB",
        "TTY",
        "CODE",
        "STR",
        "SRL",
        "SUPPRESS",
        "CVF",
    ],
    "MRSTY": ["CUI", "TUI", "STN", "STY", "ATUI", "CVF"],
    "MRDEF": ["CUI", "AUI", "ATUI", "SATUI", "SAB", "DEF", "SUPPRESS", "CVF"],
}
# the field a row is useless without
REQUIRED = {"MRCONSO": "STR", "MRSTY": "TUI", "MRDEF": "DEF"}
FILE_NAME = re.compile(r"(MRCONSO|MRSTY|MRDEF)\.RRF(?:\.gz)?", re.IGNORECASE)
ABBREVIATION_TTYS = {"AB", "ACR", "AA"}
SUPPRESSED = {"O", "E", "Y"}  # obsolete, suppressed by editors, suppressed by source; N is kept


def cui_of(line: bytes) -> str:
    return line.split(b"|", 1)[0].decode("utf-8", "replace")


def same_cui(previous: bytes, line: bytes) -> bool:
    return line.split(b"|", 1)[0] == previous.split(b"|", 1)[0]


def _first_line(part: FileRange, opener: Opener | None) -> bytes:
    with open_raw(part.path, opener) as fh:
        fh.seek(part.start)
        return fh.readline()


class Row(NamedTuple):
    lineno: int
    cui: str
    fields: dict[str, str]


def is_preferred(fields: dict[str, str]) -> bool:
    return fields["TS"] == "P" and fields["STT"] == "PF" and fields["ISPREF"] == "Y"


def preferred_row(rows: list[Row]) -> Row:
    """The row of the concept's name: UMLS's preferred name is the English row with TS=P, STT=PF, ISPREF=Y (every
    language has such a row, and MetamorphoSys need not sort English first); without English, the first such row."""
    preferred = [row for row in rows if is_preferred(row.fields)]
    return next((row for row in preferred if row.fields["LAT"] == "ENG"), preferred[0] if preferred else rows[0])


def concept_name(rows: list[Row], preferred: Row) -> str | None:
    """The concept's name: its preferred row's STR or, when that is control characters only, the first usable STR of
    the other rows; None when none is usable."""
    return preferred_name([preferred.fields["STR"], *(row.fields["STR"] for row in rows if row is not preferred)])


def cui_groups(rows: Iterable[Row | DeadLetter]) -> Iterator[list[Row] | DeadLetter]:
    """Consecutive rows of one CUI as a list; dead letters pass through."""
    group: list[Row] = []
    for row in rows:
        if isinstance(row, DeadLetter):
            yield row
            continue
        if group and row.cui != group[0].cui:
            yield group
            group = []
        group.append(row)
    if group:
        yield group


class Cursor:
    """One-row look-ahead over a CUI-sorted file, so the join takes the rows up to a given CUI."""

    def __init__(self, rows: Iterator[Row | DeadLetter], ctx: ReaderContext):
        self.rows, self.ctx = rows, ctx
        self.head = next(rows, None)

    def matching(self, cui: str | None, selected: bool) -> Iterator[Row | DeadLetter]:
        """Dead letters and the rows of `cui` (when its concept is selected); rows of CUIs that sort before it
        have no MRCONSO concept and are counted as filtered. cui=None drains the file."""
        while self.head is not None and (isinstance(self.head, DeadLetter) or cui is None or self.head.cui <= cui):
            item, self.head = self.head, next(self.rows, None)
            if isinstance(item, DeadLetter):
                yield item
            elif item.cui != cui:
                self.ctx.filtered("CUI not in MRCONSO")
            elif not selected:
                self.ctx.filtered("concept not selected")
            else:
                yield item


class UmlsReader(KBReader):
    kb = "umls"
    vocabulary = UMLS
    id_pattern = re.compile(r"C\d{7}")

    def __init__(
        self,
        languages: Sequence[str] | None = ("ENG",),
        sabs: Sequence[str] | None = None,
        exclude_suppressed: bool = True,
        preferred_only: bool = False,
        ttys: Sequence[str] | None = None,
        scope: Scope | dict | None = None,
    ):
        """`scope`: its semantic types (MRSTY TUIs, a semantic group's resolved by bioel_core.kb.scope) keep the
        concepts of one of them; they need MRSTY among the inputs."""
        # None (or empty) means no restriction
        self.languages = set(languages) if languages else None
        self.sabs = set(sabs) if sabs else None
        self.ttys = set(ttys) if ttys else None
        self.scope = Scope.of(scope)
        self.exclude_suppressed = exclude_suppressed
        self.preferred_only = preferred_only

    def input_groups(self, paths: Sequence[str], opener: Opener | None = None) -> list[list[Input]]:
        """One group of all the files, or, for a large uncompressed MRCONSO, one group a CUI range."""
        kinds = [match.group(1).upper() if (match := FILE_NAME.fullmatch(p.rsplit("/", 1)[-1])) else None for p in paths]
        if self.scope.semantic_types and "MRSTY" not in kinds:  # refused here, before the pipeline starts
            raise ValueError(f"semantic types {list(self.scope.semantic_types)} need MRSTY.RRF among the inputs")
        if "MRCONSO" not in kinds or None in kinds or len(set(kinds)) < len(kinds):
            return [list(paths)]  # read() dead-letters what does not belong
        files = dict(zip(kinds, paths))
        conso = split_lines(files.pop("MRCONSO"), opener, same_cui)
        if len(conso) == 1 or any(is_gzip_file(p, opener) for p in files.values()):
            return [list(paths)]  # small, gzipped, or joined with a gzipped MRSTY/MRDEF that cannot be cut
        starts = [cui_of(_first_line(r, opener)) for r in conso[1:]]
        groups = [[r] for r in conso]
        for path in files.values():
            for group, part in zip(groups, split_at_keys(path, starts, cui_of, opener)):
                group.append(part)
        return groups

    def filter_reason(self, fields: dict[str, str]) -> str | None:
        """Why an MRCONSO row is left out, or None to keep it."""
        if self.languages is not None and fields["LAT"] not in self.languages:
            return "LAT not selected"
        if self.exclude_suppressed and fields["SUPPRESS"] in SUPPRESSED:
            return "suppressed"
        if self.sabs is not None and fields["SAB"] not in self.sabs:
            return "SAB not selected"
        if self.ttys is not None and fields["TTY"] not in self.ttys:
            return "TTY not selected"
        if self.preferred_only and not is_preferred(fields):
            return "not preferred"
        return None

    def read(self, paths: Sequence[Input], opener: Opener | None = None) -> Iterator[KBItem]:
        files: dict[str, Input] = {}
        for path in paths:
            match = FILE_NAME.fullmatch(input_path(path).rsplit("/", 1)[-1])
            if match is None or match.group(1).upper() in files:
                ctx = ReaderContext(input_path(path))
                reason = (
                    "not a UMLS file (expected MRCONSO.RRF, MRSTY.RRF or MRDEF.RRF, optionally .gz)"
                    if match is None
                    else f"a second {match.group(1).upper()} file in one input group"
                )
                yield ctx.dead("file", "", reason)
                yield ctx.stats
                continue
            files[match.group(1).upper()] = path
        ctxs = {kind: ReaderContext(input_path(path)) for kind, path in files.items()}
        rows = {kind: self._rows(kind, path, ctxs[kind], opener) for kind, path in files.items()}
        empty = ReaderContext("")  # stands in for a file that was not given: it never sees a row
        sty = Cursor(rows.get("MRSTY", iter(())), ctxs.get("MRSTY", empty))
        defs = Cursor(rows.get("MRDEF", iter(())), ctxs.get("MRDEF", empty))
        conso_ctx = ctxs.get("MRCONSO", empty)
        for group in cui_groups(rows.get("MRCONSO", iter(()))):
            if isinstance(group, DeadLetter):
                yield group
                continue
            cui = group[0].cui
            kept = []
            for row in group:
                if (reason := self.filter_reason(row.fields)) is not None:
                    conso_ctx.filtered(reason)
                else:
                    kept.append(row)
            preferred = preferred_row(kept) if kept else None
            name = concept_name(kept, preferred) if preferred else None
            if name is None:  # no usable STR: the concept's rows are dead-lettered and it is not written
                for row in kept:
                    line = "|".join(row.fields.values()) + "|"  # the row as read
                    yield self.no_name(conso_ctx, f"line {row.lineno}", line, f"every selected STR of {cui} is")
                kept = []
            sty_rows = []
            for item in sty.matching(cui, bool(kept)):
                if isinstance(item, DeadLetter):
                    yield item
                else:
                    sty_rows.append(item)
            why = self.scope.semantic_type_reason(r.fields["TUI"] for r in sty_rows) if kept else None
            if why is not None:
                for _ in kept:  # a concept of no selected semantic type: its rows are filtered, as are its MRSTY rows
                    conso_ctx.filtered(why)
                for _ in sty_rows:
                    sty.ctx.filtered("concept not selected")
                kept, sty_rows = [], []
            for _ in kept:
                conso_ctx.accept()
            for _ in sty_rows:
                sty.ctx.accept()
            semantic_types = [f"{r.fields['TUI']}:{r.fields['STY']}" for r in sty_rows]
            definition = None
            for item in defs.matching(cui, bool(kept)):
                if isinstance(item, DeadLetter):
                    yield item
                elif self.exclude_suppressed and item.fields["SUPPRESS"] in SUPPRESSED:
                    defs.ctx.filtered("suppressed")
                elif definition is not None:
                    defs.ctx.filtered("not the first definition")
                else:
                    defs.ctx.accept()
                    definition = item.fields["DEF"].strip()
            if kept:
                yield from self._concept(cui, kept, preferred, name, tuple(semantic_types), definition)
        for cursor in (sty, defs):
            yield from cursor.matching(None, False)
        for ctx in ctxs.values():
            yield ctx.stats

    def _rows(self, kind: str, path: Input, ctx: ReaderContext, opener: Opener | None) -> Iterator[Row | DeadLetter]:
        """Well-formed rows of one RRF file in CUI order; every other line is dead-lettered or filtered here."""
        names = FIELDS[kind]
        last_cui = ""
        for item in iter_lines(path, ctx, opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line = item
            if not line.strip():
                ctx.filtered("blank line")
                continue
            parts = line.split("|")
            if len(parts) != len(names) + 1 or parts[-1] != "":
                yield ctx.dead(
                    f"line {lineno}",
                    line,
                    f"expected {len(names)} fields each ending in '|' ({kind}), found {line.count('|')} '|' separators",
                )
                continue
            fields = dict(zip(names, parts))
            cui = fields["CUI"]
            if (dead := self.check_id(cui, ctx, f"line {lineno}", line)) is not None:
                yield dead
                continue
            if not fields[REQUIRED[kind]].strip():
                yield ctx.dead(f"line {lineno}", line, f"empty {REQUIRED[kind]}")
                continue
            if cui < last_cui:
                yield ctx.dead(f"line {lineno}", line, f"out of CUI order: {cui} after {last_cui}")
                continue
            last_cui = cui
            yield Row(lineno, cui, fields)

    def _concept(
        self, cui: str, rows: list[Row], preferred: Row, name: str, semantic_types: tuple[str, ...], definition: str | None
    ) -> Iterator[KBItem]:
        yield ConceptRecord(
            concept_id=cui,
            kb=self.kb,
            preferred_name=name,
            semantic_types=semantic_types,
            definition=definition,
            vocabulary=self.vocabulary,
        )
        for row in rows:
            if row is preferred:
                name_type = "preferred"
            elif row.fields["TTY"] in ABBREVIATION_TTYS:
                name_type = "abbreviation"
            else:
                name_type = "synonym"
            yield NameRecord(cui, self.kb, row.fields["STR"], name_type)
