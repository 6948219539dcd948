"""CTD's published vocabularies, CTD_diseases (MEDIC) and CTD_chemicals, as .tsv or .csv, optionally gzipped.

Lines starting with '#' are comments; the one after '# Fields:' names the columns, and every row is read by
those NAMES, never by position: CTD adds and reorders columns between releases (CTD_chemicals grew from 8
columns to 13, its synonyms now split into MESHSynonyms and CTDCuratedSynonyms). A file with no such header
is read with the known layout of its column count. CSV (chosen by a '.csv' in the file name) is parsed a line
at a time, since CTD fields never span lines, so a malformed line is dead-lettered alone. Lists inside a
field are '|'-separated. The name column names the concept or, when it is control characters only, the first usable
synonym. Each file is read independently, one concept per line, in constant memory; a large uncompressed one in
ranges by several workers, each range taking its columns from the header at the file's top.

Ids are `MESH:D...` (descriptors), `MESH:C...` (supplementary concepts, in both vocabularies) or `OMIM:...`: the
vocabulary goes to its own column and the concept id is stored bare; alt ids (`DO:DOID:...`, `OMIM:...`) are already
qualified and kept as written. ParentIDs are not read: a concept's place in the tree is its TreeNumbers (its semantic
types).

A scope (bioel_core.kb.scope) judges a row by its TreeNumbers or, when it has none (a supplementary chemical), by its
parents' (ParentTreeNumbers); a diseases file's categories are its SlimMappings column (a file without the column
has no category: a category scope then keeps nothing, and the ingest says so).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Sequence

from bioel_core.kb.base import KBItem, KBReader, preferred_name
from bioel_core.kb.io import FileRange, Input, Opener, ReaderContext, input_path, iter_lines, split_lines
from bioel_core.kb.scope import Scope
from bioel_core.kb.vocab import MESH, MESH_UI, medic_vocabulary
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord

# every column CTD has used for a concept's synonyms; those a file has are all read
SYNONYM_COLUMNS = ("Synonyms", "MESHSynonyms", "CTDCuratedSynonyms")


def split_list(field: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in field.split("|") if v.strip())


def split_line(line: str, is_csv: bool) -> list[str]:
    if is_csv:
        return next(csv.reader([line], strict=True))
    return line.split("\t")


class CtdReader(KBReader):
    """Shared by both vocabularies; subclasses name their columns and the layouts CTD has published."""

    vocabulary = MESH
    #: known column layouts, for files without a '# Fields:' header (told apart by their column count)
    layouts: tuple[list[str], ...] = ()
    name_column = ""
    id_column = ""
    alt_ids_column: str | None = None

    def __init__(self, scope: Scope | dict | None = None):
        self.scope = Scope.of(scope)

    def classify(self, raw_id: str) -> tuple[str, str]:
        return medic_vocabulary(raw_id) or super().classify(raw_id)

    def input_groups(self, paths: Sequence[str], opener: Opener | None = None) -> list[list[Input]]:
        """A group a file, or a range of one: a large uncompressed file is read by several workers."""
        return [[piece] for path in paths for piece in split_lines(path, opener)]

    def read(self, paths: Sequence[Input], opener: Opener | None = None) -> Iterator[KBItem]:
        for path in paths:
            yield from self._read_file(path, opener)

    def _read_file(self, piece: Input, opener: Opener | None) -> Iterator[KBItem]:
        path = input_path(piece)
        ctx = ReaderContext(path)
        is_csv = ".csv" in path.rsplit("/", 1)[-1].lower()
        # from the header; None: by the row's column count. A range below the header reads it from the file's top.
        columns = self._columns_above(path, is_csv, opener) if isinstance(piece, FileRange) and piece.start else None
        after_fields = False
        for item in iter_lines(piece, ctx, opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line = item
            if line.startswith("#"):
                if after_fields and line[1:].strip():
                    header, dead = self._header(line, lineno, is_csv, ctx)
                    if dead is not None:
                        yield dead
                    columns = header or columns
                after_fields = line[1:].strip() == "Fields:"
                continue
            if not line.strip():
                ctx.filtered("blank line")
                continue
            try:
                cols = split_line(line, is_csv)
            except csv.Error as err:
                yield ctx.dead(f"line {lineno}", line, f"malformed CSV line: {err}")
                continue
            row_columns = columns or next((c for c in self.layouts if len(c) == len(cols)), None)
            if row_columns is None or len(cols) != len(row_columns):
                sep = "comma" if is_csv else "tab"
                expected = len(columns) if columns else " or ".join(str(len(c)) for c in self.layouts)
                yield ctx.dead(f"line {lineno}", line, f"expected {expected} {sep}-separated columns, found {len(cols)}")
                continue
            yield from self._row(dict(zip(row_columns, cols)), ctx, lineno, line)
        yield ctx.stats

    def _row(self, row: dict[str, str], ctx: ReaderContext, lineno: int, line: str) -> Iterator[KBItem]:
        raw_id, name = row[self.id_column].strip(), row[self.name_column].strip()
        if (dead := self.check_id(raw_id, ctx, f"line {lineno}", line)) is not None:
            yield dead
            return
        if not name:
            yield ctx.dead(f"line {lineno}", line, f"empty {self.name_column}")
            return
        synonyms = [synonym for column in SYNONYM_COLUMNS for synonym in split_list(row.get(column, ""))]
        if (preferred := preferred_name([name, *synonyms])) is None:
            yield self.no_name(ctx, f"line {lineno}", line, f"{self.name_column} and every synonym are")
            return
        trees = split_list(row.get("TreeNumbers", ""))
        why = self.scope.tree_reason(trees or split_list(row.get("ParentTreeNumbers", ""))) or self.scope.category_reason(
            split_list(row.get("SlimMappings", ""))
        )
        if why is not None:
            ctx.filtered(why)
            return
        ctx.accept()
        vocabulary, concept_id = medic_vocabulary(raw_id)  # the id pattern admits MeSH and OMIM ids only
        yield ConceptRecord(
            concept_id=concept_id,
            kb=self.kb,
            preferred_name=preferred,
            semantic_types=trees,
            definition=row.get("Definition", "").strip() or None,
            alt_ids=split_list(row.get(self.alt_ids_column, "")) if self.alt_ids_column else (),
            vocabulary=vocabulary,
        )
        yield NameRecord(concept_id, self.kb, name, "preferred")
        for synonym in synonyms:
            yield NameRecord(concept_id, self.kb, synonym, "synonym")

    def _columns_above(self, path: str, is_csv: bool, opener: Opener | None) -> list[str] | None:
        """The columns the comment block at the top of `path` names (its faults are the first range's to report)."""
        scratch = ReaderContext(path)
        after_fields = False
        for item in iter_lines(path, scratch, opener):
            if isinstance(item, DeadLetter) or not item[1].startswith("#"):
                return None
            lineno, line = item
            if after_fields and line[1:].strip():
                return self._header(line, lineno, is_csv, scratch)[0]
            after_fields = line[1:].strip() == "Fields:"
        return None

    def _header(self, line: str, lineno: int, is_csv: bool, ctx: ReaderContext) -> tuple[list[str] | None, DeadLetter | None]:
        """The column names CTD lists after '# Fields:', or a DeadLetter when the id or name column is missing
        (rows are then read by the known layouts)."""
        try:
            header = [c.strip() for c in split_line(line[1:].strip(), is_csv)]
        except csv.Error as err:
            return None, ctx.dead(f"line {lineno}", line, f"malformed column header: {err}")
        missing = sorted({self.name_column, self.id_column} - set(header))
        if missing:
            return None, ctx.dead(
                f"line {lineno}",
                line,
                f"column header lacks {missing}; reading rows by the known "
                f"{self.kb} layouts of {', '.join(str(len(c)) for c in self.layouts)} columns",
            )
        return header, None


class CtdDiseasesReader(CtdReader):
    kb = "ctd-diseases"
    # the prefix is optional so that the stored (bare) ids match the pattern the quality suite checks
    id_pattern = re.compile(rf"(?:MESH:)?{MESH_UI}|(?:OMIM:)?\d{{6}}")
    layouts = (
        [
            "DiseaseName",
            "DiseaseID",
            "AltDiseaseIDs",
            "Definition",
            "ParentIDs",
            "TreeNumbers",
            "ParentTreeNumbers",
            "Synonyms",
            "SlimMappings",
        ],
        ["DiseaseName", "DiseaseID", "AltDiseaseIDs", "Definition", "ParentIDs", "TreeNumbers", "ParentTreeNumbers", "Synonyms"],
    )
    name_column, id_column, alt_ids_column = "DiseaseName", "DiseaseID", "AltDiseaseIDs"


class CtdChemicalsReader(CtdReader):
    kb = "ctd-chemicals"
    id_pattern = re.compile(rf"(?:MESH:)?{MESH_UI}")
    layouts = (
        ["ChemicalName", "ChemicalID", "CasRN", "Definition", "ParentIDs", "TreeNumbers", "ParentTreeNumbers", "Synonyms"],
        [
            "ChemicalName",
            "ChemicalID",
            "CasRN",
            "PubChemCID",
            "PubChemSID",
            "DTXSID",
            "InChIKey",
            "Definition",
            "ParentIDs",
            "TreeNumbers",
            "ParentTreeNumbers",
            "MESHSynonyms",
            "CTDCuratedSynonyms",
        ],
    )
    name_column, id_column = "ChemicalName", "ChemicalID"
