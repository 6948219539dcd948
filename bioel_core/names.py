"""The names a linker searches: normalized names with the id set each one links to.

Built from a BioSyn dictionary (`ID||name`, the ids of a line are one set) or from the Parquet names
table of an ingest-kb output (a name links to its concept id plus the concept's alt ids; the names of type `extra`
come first, so a name shared by several concepts links first to the one its extra-names file gave it). Names are
normalized with the normalizer the table was built with (BioSyn's policy for dictionaries), and queries
must go through the same one: `NameSet.normalizer`. Identical (name, ids) entries are kept once, in
order of first appearance, so a duplicated line cannot take two places in a top k.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bioel_core.corpora.biosyn import iter_dictionary
from bioel_core.normalize import Normalizer, NormalizerConfig
from bioel_core.records import EXTRA_NAME_TYPE


@dataclass
class NameSet:
    names: list[str]  # normalized
    concept_ids: list[tuple[str, ...]]  # per name: the ids it links to (first = concept id)
    normalizer: Normalizer
    source: str = ""

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def from_pairs(
        cls,
        pairs: Iterable[tuple[str, tuple[str, ...]]],
        normalizer: Normalizer | None = None,
        source: str = "",
        normalized: bool = False,
    ) -> NameSet:
        normalizer = normalizer or Normalizer()
        seen: set[tuple[str, tuple[str, ...]]] = set()
        names, ids = [], []
        for name, cids in pairs:
            key = (name if normalized else normalizer(name), tuple(cids))
            if key[0] and key not in seen:
                seen.add(key)
                names.append(key[0])
                ids.append(key[1])
        return cls(names, ids, normalizer, source)

    @classmethod
    def from_biosyn(cls, path: str | Path, normalizer: Normalizer | None = None) -> NameSet:
        """A dictionary with no name to link against (no line, or every name empty once normalized) is refused."""
        names = cls.from_pairs(((e.name, e.concept_ids) for e in iter_dictionary(path)), normalizer, str(path))
        if not names:
            raise ValueError(
                f"{path}: no name to link against (no 'ID||name' line whose name is left non-empty by normalization)"
            )
        return names

    @classmethod
    def from_names_table(cls, table_dir: str | Path) -> NameSet:
        """What `from_pairs` would make of the table's (name_norm, (concept_id, *alt_ids)) rows, extra names first,
        deduplicated and ordered in Arrow, and each concept's id tuple made once and shared by its names: a
        UMLS-size KB is held in a link worker at about half the memory of one tuple a row."""
        # imported here: bioel_core.tables needs the schemas package, a BioSyn dictionary does not
        from bioel_core.tables import read_manifest, read_table

        normalizer = table_normalizer(read_manifest(table_dir), table_dir)
        names = read_table(table_dir, "names", ["concept_id", "name_norm", "name_type"])
        # an extra name's concept first of those sharing the name: its file says what the name means in text
        later = pc.not_equal(names["name_type"], EXTRA_NAME_TYPE).to_numpy(zero_copy_only=False)
        if not later.all():  # else the order stands, and a UMLS-size table is not copied for nothing
            names = names.take(np.argsort(later, kind="stable"))  # stable: else the table's order
        names = names.filter(pc.not_equal(names["name_norm"], ""))
        rows = pa.table({"name": names["name_norm"], "concept": names["concept_id"], "row": np.arange(len(names))})
        first = rows.group_by(["name", "concept"], use_threads=False).aggregate([("row", "min")])["row_min"]
        names = names.take(np.sort(first.to_numpy()))
        concepts = read_table(table_dir, "concepts", ["concept_id", "alt_ids"])
        shared = np.fromiter(
            ((c, *alt) for c, alt in zip(concepts["concept_id"].to_pylist(), concepts["alt_ids"].to_pylist())),
            dtype=object,
            count=concepts.num_rows,
        )
        where = pc.fill_null(pc.index_in(names["concept_id"], value_set=concepts["concept_id"]), -1).to_numpy()
        lone = np.flatnonzero(where < 0)
        concept_ids: list[tuple[str, ...]] = shared.take(np.maximum(where, 0)).tolist() if len(shared) else [()] * len(where)
        for at in lone.tolist():  # a name whose concept the concepts table lacks links to its concept id alone
            concept_ids[at] = (names["concept_id"][at].as_py(),)
        return cls(names["name_norm"].to_pylist(), concept_ids, normalizer, str(table_dir))

    @classmethod
    def load(cls, path: str | Path) -> NameSet:
        """Either kind of source: a folder is an ingest-kb output, a file a BioSyn dictionary."""
        return cls.from_names_table(path) if Path(path).is_dir() else cls.from_biosyn(path)

    # ---- the copy a saved linker keeps (Parquet, no pickle) ----
    def save(self, path: str | Path) -> None:
        table = pa.table(
            {
                "name": pa.array(self.names, pa.string()),
                "concept_ids": pa.array([list(c) for c in self.concept_ids], pa.list_(pa.string())),
            }
        )
        pq.write_table(table, path)

    @classmethod
    def read_saved(cls, path: str | Path, normalizer: Normalizer, source: str = "") -> NameSet:
        d = pq.read_table(path).to_pydict()
        return cls(d["name"], [tuple(c) for c in d["concept_ids"]], normalizer, source)


def table_normalizer(manifest: dict, table_dir: str | Path) -> Normalizer:
    """The normalizer an ingest-kb output's names were normalized with, from its manifest; the queries
    matched against those names must go through it."""
    normalizer = Normalizer(NormalizerConfig.from_dict(manifest.get("normalizer", {})))
    if manifest.get("normalizer", {}).get("version", normalizer.version) != normalizer.version:
        raise ValueError(f"{table_dir}: the manifest's normalizer version differs from its config; rebuild the table")
    return normalizer
