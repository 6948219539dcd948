"""CTD's published vocabularies, CTD_diseases (MEDIC) and CTD_chemicals, as .tsv or .csv, optionally gzipped.

Lines starting with '#' are comments; the one after '# Fields:' names the columns. CSV (chosen by a
'.csv' in the file name) is parsed a line at a time, since CTD fields never span lines, so a malformed
line is dead-lettered alone. Lists inside a field are '|'-separated. Each file is read independently,
one concept per line, in constant memory.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Sequence

from bioel_core.kb.base import KBItem, KBReader
from bioel_core.kb.io import Opener, ReaderContext, iter_lines
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord


def split_list(field: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in field.split("|") if v.strip())


def split_line(line: str, is_csv: bool) -> list[str]:
    if is_csv:
        return next(csv.reader([line], strict=True))
    return line.split("\t")


class CtdReader(KBReader):
    """Shared by both vocabularies; subclasses name the columns."""

    columns: list[str] = []
    name_column = ""
    id_column = ""
    alt_ids_column: str | None = None

    def read(self, paths: Sequence[str], opener: Opener | None = None) -> Iterator[KBItem]:
        for path in paths:
            yield from self._read_file(path, opener)

    def _read_file(self, path: str, opener: Opener | None) -> Iterator[KBItem]:
        ctx = ReaderContext(path)
        is_csv = ".csv" in path.rsplit("/", 1)[-1].lower()
        columns = self.columns
        after_fields = False
        for item in iter_lines(path, ctx, opener):
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
            if len(cols) != len(columns):
                sep = "comma" if is_csv else "tab"
                yield ctx.dead(f"line {lineno}", line, f"expected {len(columns)} {sep}-separated columns, found {len(cols)}")
                continue
            row = dict(zip(columns, cols))
            concept_id, name = row[self.id_column].strip(), row[self.name_column].strip()
            if (dead := self.check_id(concept_id, ctx, f"line {lineno}", line)) is not None:
                yield dead
                continue
            if not name:
                yield ctx.dead(f"line {lineno}", line, f"empty {self.name_column}")
                continue
            ctx.accept()
            yield ConceptRecord(concept_id=concept_id, kb=self.kb, preferred_name=name,
                                semantic_types=split_list(row["TreeNumbers"]),
                                definition=row["Definition"].strip() or None,
                                alt_ids=split_list(row[self.alt_ids_column]) if self.alt_ids_column else ())
            yield NameRecord(concept_id, self.kb, name, "preferred")
            for synonym in split_list(row["Synonyms"]):
                yield NameRecord(concept_id, self.kb, synonym, "synonym")
        yield ctx.stats

    def _header(self, line: str, lineno: int, is_csv: bool, ctx: ReaderContext) -> tuple[list[str] | None, DeadLetter | None]:
        """The column names CTD lists after '# Fields:' (older releases lack some trailing columns), or a
        DeadLetter when the columns this reader needs are missing; the default columns are used then."""
        try:
            header = [c.strip() for c in split_line(line[1:].strip(), is_csv)]
        except csv.Error as err:
            return None, ctx.dead(f"line {lineno}", line, f"malformed column header: {err}")
        used = {self.name_column, self.id_column, "Definition", "TreeNumbers", "Synonyms", self.alt_ids_column} - {None}
        missing = sorted(used - set(header))
        if missing:
            return None, ctx.dead(f"line {lineno}", line, f"column header lacks {missing}; reading with the default columns {self.columns}")
        return header, None


class CtdDiseasesReader(CtdReader):
    kb = "ctd-diseases"
    id_pattern = re.compile(r"MESH:[CD]\d{6,9}|OMIM:\d{6}")
    columns = ["DiseaseName", "DiseaseID", "AltDiseaseIDs", "Definition", "ParentIDs", "TreeNumbers",
               "ParentTreeNumbers", "Synonyms", "SlimMappings"]
    name_column, id_column, alt_ids_column = "DiseaseName", "DiseaseID", "AltDiseaseIDs"


class CtdChemicalsReader(CtdReader):
    kb = "ctd-chemicals"
    id_pattern = re.compile(r"MESH:[CD]\d{6,9}")
    columns = ["ChemicalName", "ChemicalID", "CasRN", "Definition", "ParentIDs", "TreeNumbers",
               "ParentTreeNumbers", "Synonyms"]
    name_column, id_column = "ChemicalName", "ChemicalID"
