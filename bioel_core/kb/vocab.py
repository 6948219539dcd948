"""Concept-id vocabularies: which scheme an id belongs to, and its one qualified form `VOCAB:ID`.

A concept id is stored bare, in the vocabulary the concepts table's `vocabulary` column names (MeSH
`D003920` with `MESH`); alt ids may come from other vocabularies and are stored qualified (`OMIM:208900`).
`qualify` writes the form PubTator3 emits (`MESH:D003920`); `plain_id` is what scoring compares.
"""

from __future__ import annotations

import re

MESH, OMIM, UMLS, SNOMEDCT = "MESH", "OMIM", "UMLS", "SNOMEDCT"
#: what corpora write for a mention that no concept of the KB names (PubTator/BioSyn `-1`, n2c2/ShARe `CUI-less`)
NIL_IDS = frozenset({"-1", "cui-less"})
#: vocabularies bioel's readers write; their prefixes are the ones scoring ignores
KNOWN = (MESH, OMIM, UMLS, SNOMEDCT)
_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9_]*):(.+)")
_KNOWN_PREFIX = re.compile(rf"^(?:{'|'.join(KNOWN)}):", re.IGNORECASE)
# MeSH record UIs: descriptors (D) and supplementary concepts (C), 6 or 9 digits (D000001, D000086382); never 7,
# which is a UMLS CUI's shape (C0011849). MESH_ID adds MEDIC's root "Diseases" (the bare category C). OMIM numbers
MESH_UI = r"[CD](?:\d{6}|\d{9})"
MESH_ID = re.compile(rf"{MESH_UI}|C")
OMIM_ID = re.compile(r"\d{6}")
#: the shape of a concept id of each known vocabulary (as a concepts table stores it: bare)
ID_SHAPES = {MESH: re.compile(MESH_UI), OMIM: OMIM_ID, UMLS: re.compile(r"C\d{7}"), SNOMEDCT: re.compile(r"\d{6,18}")}


def qualify(vocabulary: str, concept_id: str) -> str:
    """`MESH`, `D003920` -> `MESH:D003920`; an id that already carries its vocabulary's prefix (`HP:0000118`, see
    `vocabulary_of`) is returned as it is."""
    return concept_id if split_prefix(concept_id)[0] == vocabulary.upper() else f"{vocabulary}:{concept_id}"


def is_nil_id(concept_id: str) -> bool:
    """An id that says "no concept" (a NIL mention's label), which no KB entry can have."""
    return concept_id.strip().lower() in NIL_IDS


def split_prefix(concept_id: str) -> tuple[str | None, str]:
    """`OMIM:208900` -> ("OMIM", "208900"); an id with no `VOCAB:` prefix -> (None, id)."""
    m = _PREFIX.fullmatch(concept_id)
    return (m.group(1).upper(), m.group(2)) if m else (None, concept_id)


def vocabulary_of(concept_id: str) -> tuple[str | None, str]:
    """(vocabulary, the id as a concepts table stores it) of a prefixed id as written: a known vocabulary's prefix
    is dropped (`UMLS:C0004096` -> C0004096), any other is part of the id, as scoring (`plain_id`) keeps it
    (`HP:0000118`: HP and MP number their terms alike); (None, id) without a prefix."""
    prefix, bare = split_prefix(concept_id)
    return prefix, bare if prefix in KNOWN else concept_id


def plain_id(concept_id: str) -> str:
    """The id with the prefix of a known vocabulary dropped (`MESH:D003920` -> `D003920`), so gold written
    either way compares equal; other prefixes are part of the id (`HP:0000118`)."""
    return _KNOWN_PREFIX.sub("", concept_id.strip())


def medic_vocabulary(concept_id: str) -> tuple[str, str] | None:
    """(vocabulary, bare id) of a MeSH or OMIM id, prefixed or not (`D001260`, `MESH:D001260`, `208900`,
    `OMIM:208900`); None for anything else."""
    prefix, bare = split_prefix(concept_id)
    if prefix in (None, MESH) and MESH_ID.fullmatch(bare):
        return MESH, bare
    if prefix in (None, OMIM) and OMIM_ID.fullmatch(bare):
        return OMIM, bare
    return None


def mesh_first(ids: list[tuple[str, str]]) -> tuple[str, str, tuple[str, ...]]:
    """(vocabulary, concept id, qualified alt ids) of one concept's (vocabulary, id) pairs: the MeSH id is the
    concept id whatever the order on the line (MEDIC lists some OMIM ids first); the others become alt ids."""
    ordered = sorted(ids, key=lambda v: v[0] != MESH)  # stable: otherwise the line's order
    (vocabulary, concept_id), rest = ordered[0], ordered[1:]
    return vocabulary, concept_id, tuple(qualify(v, i) for v, i in rest)
