"""Which files a folder of inputs contributes, one rule for every verb that takes a folder where files are
expected (the pipelines list remote folders through Beam with the same rule; bioel_core lists local ones).

A folder means the files directly inside it (not its subfolders), in sorted order, less what is never an
input: hidden files, bioel's own bookkeeping (`manifest.json`, `_lock.json`, `_stats.json`, and Hadoop/Spark's
`_SUCCESS` markers, all `_`-prefixed) and checksum sidecars (NCBI's PubMed baseline folder holds a
`pubmed25n0001.xml.gz.md5` beside every `pubmed25n0001.xml.gz`).
"""

from __future__ import annotations

from pathlib import Path

from bioel_core.outputs.layout import MANIFEST

CHECKSUM_SUFFIXES = (".md5", ".sha1", ".sha256", ".sha512")
GLOB_CHARS = frozenset("*?[")


def glob_root(pattern: str) -> str:
    """The folder a glob reads from (`DIR` of `DIR/*.xml.gz` or `DIR/**/x.xml`); any other path as given."""
    first = min((pattern.index(c) for c in GLOB_CHARS if c in pattern), default=None)
    return pattern if first is None else pattern[:first].rpartition("/")[0] or "."


def path_below(path: str, folder: str) -> str:
    """`path` relative to `folder` ('/'-separated), for a file listed from that folder (or glob root); its file name
    when it is not below it."""
    path, folder = path.replace("\\", "/"), folder.replace("\\", "/").rstrip("/")
    if folder in ("", ".") and not path.startswith("/") and "://" not in path:
        return path.removeprefix("./")
    return path[len(folder) + 1 :] if path.startswith(folder + "/") else path.rpartition("/")[2]


def is_input_name(name: str) -> bool:
    """True for a file name a folder of inputs contributes (see the module's rule)."""
    return not (name.startswith((".", "_")) or name == MANIFEST or name.lower().endswith(CHECKSUM_SUFFIXES))


def folder_files(folder: str | Path, flag: str = "input") -> list[str]:
    """The input files of a local folder, sorted; an error naming the folder when it holds none."""
    found = sorted(str(p) for p in Path(folder).iterdir() if p.is_file() and is_input_name(p.name))
    if not found:
        raise FileNotFoundError(f"{flag} {folder}: the folder holds no input file")
    return found
