"""The two disease datasets of the BioSyn protocol as the benchmarks read them from the shared data folder: a split's
dictionary (`{split}_dictionary.txt`) and its queries (`processed_{split}`, those with a concept)."""

from __future__ import annotations

from pathlib import Path

from bioel_core.corpora import read_query_folder
from bioel_core.names import NameSet

DATASETS = ("ncbi-disease", "bc5cdr-disease")


def missing_datasets(data: Path) -> str | None:
    """The error line when `data` lacks one of the datasets, else None."""
    missing = [d for d in DATASETS if not (data / d).is_dir()]
    return f"error: {data}: missing {', '.join(missing)}" if missing else None


def split_data(data: Path, dataset: str, split: str, limit: int = 0) -> tuple[NameSet, list]:
    """The split's dictionary and its queries with a concept (the first `limit` of them, for a quick look)."""
    names = NameSet.from_biosyn(data / dataset / f"{split}_dictionary.txt")
    queries = [q for q in read_query_folder(data / dataset / f"processed_{split}") if q.concept_ids]
    return names, queries[:limit] if limit else queries
