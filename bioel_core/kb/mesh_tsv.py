"""The MeSH thesaurus TSV (`data_mesh_thesaurus.tsv.gz`: one row per descriptor entry term) and, optionally,
its tree-number TSV (`data_mesh_trees.tsv`), whose tree numbers become the concepts' semantic types and are what a
tree scope (bioel_core.kb.scope) judges; a descriptor out of scope has each of its rows counted as filtered.
A row whose TermName is control characters only is dead-lettered, and a descriptor whose DescriptorName is, is
named by its first usable term.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Sequence

from bioel_core.kb.base import KBItem, KBReader, preferred_name, usable_name
from bioel_core.kb.io import Opener, ReaderContext, iter_lines, open_kb_file, tsv_rows
from bioel_core.kb.scope import Scope
from bioel_core.kb.vocab import MESH
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord

THESAURUS_COLUMNS = [
    "DescriptorUI",
    "DescriptorName",
    "ConceptUI",
    "TermUI",
    "TermName",
    "ConceptPreferredTermYN",
    "IsPermutedTermYN",
    "LexicalTag",
    "RecordPreferredTermYN",
]
TREES_FIRST_COLUMNS = ["DescriptorUI", "DescriptorName", "tree_location"]
ABBREVIATION_TAGS = {"ABB", "ACR"}


def _header(path: str, opener: Opener | None) -> list[str]:
    """The first line's columns (only to tell a trees file from a thesaurus); a broken file reads as []
    here and is dead-lettered when it is read for real."""
    try:
        with open_kb_file(path, opener) as fh:
            return fh.readline(1 << 16).decode("utf-8", "replace").rstrip("\r\n").split("\t")  # bounded: any line may be junk
    except (EOFError, OSError, zlib.error):
        return []


class MeshTsvReader(KBReader):
    kb = "mesh"
    vocabulary = MESH
    id_pattern = re.compile(r"D\d{6,9}")

    def __init__(self, include_permuted: bool = True, scope: Scope | dict | None = None):
        """`scope`: its tree filters (e.g. tree_include ["D"], Chemicals and Drugs) keep the descriptors in scope;
        they need the trees TSV among the inputs."""
        self.include_permuted, self.scope = include_permuted, Scope.of(scope)

    def input_groups(self, paths: Sequence[str], opener: Opener | None = None) -> list[list[str]]:
        # the trees file annotates every thesaurus file, so they are read together; a tree scope without one is
        # refused here, before the pipeline starts (in `read`, a worker's traceback)
        self._trees_files(paths, opener)
        return [list(paths)]

    def _trees_files(self, paths: Sequence[str], opener: Opener | None) -> list[str]:
        found = [p for p in paths if _header(p, opener)[:3] == TREES_FIRST_COLUMNS]
        if self.scope.by_tree and not found:
            raise ValueError(
                f"a tree scope ({self.scope.to_dict()}) needs the MeSH trees TSV among the inputs "
                f"(columns {TREES_FIRST_COLUMNS}...)"
            )
        return found

    def read(self, paths: Sequence[str], opener: Opener | None = None) -> Iterator[KBItem]:
        trees_paths = self._trees_files(paths, opener)
        trees: dict[str, list[str]] = {}
        for path in trees_paths:
            yield from self._read_trees(path, trees, opener)
        for path in paths:
            if path not in trees_paths:
                yield from self._read_thesaurus(path, trees, opener)

    def _read_trees(self, path: str, trees: dict[str, list[str]], opener: Opener | None) -> Iterator[KBItem]:
        ctx = ReaderContext(path)
        for item in iter_lines(path, ctx, opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line = item
            if lineno == 1:
                continue  # header
            cols = line.split("\t")
            if len(cols) < 3 or not self.id_pattern.fullmatch(cols[0]) or not cols[2]:
                yield ctx.dead(f"line {lineno}", line, "expected DescriptorUI, DescriptorName, tree_location")
                continue
            ctx.accept()
            trees.setdefault(cols[0], []).append(cols[2])
        yield ctx.stats

    def _read_thesaurus(self, path: str, trees: dict[str, list[str]], opener: Opener | None) -> Iterator[KBItem]:
        ctx = ReaderContext(path)
        seen: set[str] = set()
        out_of_scope: dict[str, str | None] = {}  # descriptor -> why it is out of scope (None: in scope)
        for item in tsv_rows(path, ctx, THESAURUS_COLUMNS, "MeSH thesaurus", opener):
            if isinstance(item, DeadLetter):
                yield item
                continue
            lineno, line, row = item
            descriptor, term = row["DescriptorUI"].strip(), row["TermName"].strip()
            if (dead := self.check_id(descriptor, ctx, f"line {lineno}", line)) is not None:
                yield dead
                continue
            if not term:
                yield ctx.dead(f"line {lineno}", line, "empty TermName")
                continue
            if row["IsPermutedTermYN"] == "Y" and not self.include_permuted:
                ctx.filtered("permuted term")
                continue
            if descriptor not in out_of_scope:
                out_of_scope[descriptor] = self.scope.tree_reason(trees.get(descriptor, ()))
            if out_of_scope[descriptor] is not None:
                ctx.filtered(out_of_scope[descriptor])
                continue
            if not usable_name(term):  # dead here, so that the descriptor's next usable row creates it
                yield self.no_name(ctx, f"line {lineno}", line, "TermName is")
                continue
            ctx.accept()
            if descriptor not in seen:
                seen.add(descriptor)
                # the DescriptorName or, when it is control characters only, the descriptor's first usable term
                name = preferred_name([row["DescriptorName"].strip(), term])
                yield ConceptRecord(
                    concept_id=descriptor,
                    kb=self.kb,
                    preferred_name=name,
                    semantic_types=tuple(sorted(trees.get(descriptor, ()))),
                    vocabulary=self.vocabulary,
                )
            if row["RecordPreferredTermYN"] == "Y":
                name_type = "preferred"
            elif row["LexicalTag"] in ABBREVIATION_TAGS:
                name_type = "abbreviation"
            else:
                name_type = "entry_term"
            yield NameRecord(descriptor, self.kb, term, name_type)
        yield ctx.stats
