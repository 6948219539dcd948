"""An entity type's scope in its KB: which concepts of a dump belong to the type. Declared per type in the ingest
contract (IngestSettings.scope), applied by the readers that know each concept's place (tree numbers, semantic
types, categories), and accounted for: every record the scope drops is counted as filtered under a reason naming the
setting that dropped it (`out of scope (scope.tree_exclude): ...`), which the ingest manifest sums in its
`out_of_scope`. Out of scope is not bad input: nothing is dead-lettered.

Tree branches (MeSH tree numbers, as in MeSH, CTD's TreeNumbers): a branch is a category letter (`D`) or a tree number
(`D08`, `D08.811`); a tree number lies under a branch when it is the branch or continues it by whole segments
(`D08.811.277` is under `D08.811`, `D08.8110` is not). A concept filed at several places is in scope when SOME of its
tree numbers is under a `tree_include` branch (any, when none is given) and not under a `tree_exclude` branch; so
it is dropped by the excludes only when EVERY included tree number lies under them (an enzyme, D08.811, is dropped;
angiotensin II, filed under the peptides D12.644 and the hormones D06 too, stays: the rule benchmarks/sanity_audit.py
measured against BC5CDR's gold). A concept with no tree number (MeSH's category descriptors, which the
trees file does not list) is out of scope when `tree_include` is given, as it cannot be shown to be included; a
record of a kind MeSH does not file in its trees (a supplementary concept record, `C...`) is not judged by the tree
filters and is kept (CTD rows are judged by their own TreeNumbers, else by their parents': ParentTreeNumbers).

UMLS semantic groups are resolved to their TUIs from NLM's SemGroups.txt (`ABBR|Group name|TUI|Type name` a line), a
file the user gives: no copy of NLM's table is kept here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import cached_property

# a MeSH tree branch: a category letter, or a tree number of 2-digit top and 3-digit lower segments
TREE_BRANCH = re.compile(r"[A-Z](?:\d{2}(?:\.\d{3})*)?")
TUI = re.compile(r"T\d{3}")
# every scope reason starts so; what follows in parentheses is the setting that dropped the record
OUT_OF_SCOPE = "out of scope"


def reason(setting: str, why: str) -> str:
    return f"{OUT_OF_SCOPE} (scope.{setting}): {why}"


NO_TREE_NUMBER = reason("tree_include", "no tree number")
NOT_INCLUDED = reason("tree_include", "no tree number under an included branch")
EXCLUDED = reason("tree_exclude", "every included tree number under an excluded branch")
NO_SEMANTIC_TYPE = reason("semantic_types", "no selected semantic type")
NO_CATEGORY = reason("categories", "no selected category")


def under(tree_number: str, branches: Iterable[str]) -> bool:
    """Whether `tree_number` lies under one of `branches` (whole segments: a category letter, or the branch followed
    by '.', or by '/' as CTD extends MeSH tree numbers)."""
    for branch in branches:
        if tree_number.startswith(branch) and (
            len(branch) == 1 or len(tree_number) == len(branch) or tree_number[len(branch)] in "./"
        ):
            return True
    return False


def out_of_scope_counts(skipped_by_filter: Mapping[str, int]) -> dict[str, int]:
    """The scope's share of a reader's filter counts, by reason."""
    return {why: n for why, n in sorted(skipped_by_filter.items()) if why.startswith(OUT_OF_SCOPE)}


@dataclass(frozen=True)
class Scope:
    """A declared scope, resolved (semantic groups already made TUIs). Empty fields restrict nothing. Built from its
    `to_dict` form (`Scope.of`), which is what reader options carry and an ingest manifest records."""

    tree_include: tuple[str, ...] = ()
    tree_exclude: tuple[str, ...] = ()
    semantic_types: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @cached_property
    def _types(self) -> frozenset[str]:
        return frozenset(self.semantic_types)

    @classmethod
    def of(cls, scope: Mapping | Scope | None) -> Scope:
        if isinstance(scope, Scope):
            return scope
        return cls(**{k: tuple(v) for k, v in (scope or {}).items()})

    def to_dict(self) -> dict:
        return {k: list(v) for k, v in asdict(self).items() if v}

    @property
    def declared(self) -> bool:
        """Whether any field restricts the KB."""
        return any(asdict(self).values())

    @property
    def by_tree(self) -> bool:
        return bool(self.tree_include or self.tree_exclude)

    def tree_reason(self, tree_numbers: Iterable[str]) -> str | None:
        """Why a concept filed at `tree_numbers` is out of scope, or None when it is in."""
        if not self.by_tree:
            return None
        numbers = list(tree_numbers)
        if self.tree_include:
            if not numbers:
                return NO_TREE_NUMBER
            numbers = [n for n in numbers if under(n, self.tree_include)]
            if not numbers:
                return NOT_INCLUDED
        if numbers and all(under(n, self.tree_exclude) for n in numbers):
            return EXCLUDED
        return None

    def semantic_type_reason(self, tuis: Iterable[str]) -> str | None:
        """Why a concept of semantic types `tuis` is out of scope, or None."""
        if self.semantic_types and self._types.isdisjoint(tuis):
            return NO_SEMANTIC_TYPE
        return None

    def category_reason(self, categories: Iterable[str]) -> str | None:
        """Why a concept of `categories` (CTD's SlimMappings) is out of scope, or None."""
        if self.categories and set(self.categories).isdisjoint(categories):
            return NO_CATEGORY
        return None


def read_semantic_groups(path: str) -> dict[str, list[str]]:
    """NLM's SemGroups.txt (`ABBR|Group name|TUI|Type name` a line) -> group abbreviation -> its TUIs, in file order.
    A line of another shape raises ValueError naming the file and line."""
    groups: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            cols = line.split("|")
            if len(cols) != 4 or not cols[0].strip() or not TUI.fullmatch(cols[2].strip()):
                raise ValueError(f"{path}: line {lineno}: expected ABBR|Group name|TUI|Type name, got {line[:120]!r}")
            groups.setdefault(cols[0].strip(), []).append(cols[2].strip())
    if not groups:
        raise ValueError(f"{path}: no semantic group (expected ABBR|Group name|TUI|Type name lines)")
    return groups
