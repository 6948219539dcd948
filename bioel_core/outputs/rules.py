"""The rules every verb's output folder obeys, each in one place: an output folder that belongs to another verb or
is one of the job's own inputs (a model's too) is refused before any work, and a finished job that produced no
rows at all publishes nothing.

Plain functions over paths and manifest dicts (no Beam), so the pipelines, refresh and the bundle builder share them.
"""

from __future__ import annotations

import fnmatch
import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from bioel_core.outputs.errors import EmptyOutputError
from bioel_core.outputs.names import MANIFEST, VERBS

if TYPE_CHECKING:
    from bioel_core.outputs.manifest import Manifest
    from bioel_core.outputs.publish import OutputFolder


def _local(path: str) -> Path | None:
    """A local path resolved (symlinks, `..`), or None for a URI (gs://, s3://): those compare as strings."""
    return None if "://" in str(path) else Path(path).resolve()


def _same_or_inside(inner: str, outer: str) -> bool:
    a, b = _local(inner), _local(outer)
    if a is None or b is None:
        a_s, b_s = str(inner).rstrip("/"), str(outer).rstrip("/")
        return a_s == b_s or a_s.startswith(b_s + "/")
    return a == b or b in a.parents


def check_output_folder(output: str, pipeline: str, inputs: Iterable[tuple[str, str]] = (), flag: str = "--output") -> None:
    """Refuse, before any work, an --output that another verb wrote (its manifest's `pipeline`), that is (or
    holds) one of this job's inputs, or that lies inside an input folder: publishing replaces the folder's tables,
    which would destroy them, and an output inside an input is read back, or removed, with that input.

    `inputs` are (flag, path) pairs as the user gave them (files, folders, globs), e.g. [("--index", "idx/medic"),
    ("--input", "corpus/*.xml")]; `flag` names the output in refusals (`bioel refresh` has two)."""
    if pipeline not in VERBS:
        raise ValueError(f"unknown pipeline {pipeline!r}; known: {VERBS}")
    check_not_an_input(output, inputs, flag)
    local = _local(output)
    if local is None:  # remote outputs: the staging layer's own checks apply
        return
    manifest = local / MANIFEST
    if not manifest.is_file():
        return
    try:
        written_by = json.loads(manifest.read_text()).get("pipeline")
    except (ValueError, AttributeError) as err:
        raise ValueError(f"--output {output}: {manifest} is not a readable manifest ({err}); refusing to replace it") from None
    if written_by != pipeline:
        raise ValueError(
            f"--output {output} holds a `bioel {written_by}` output ({manifest}); "
            f"`bioel {pipeline}` will not overwrite it: choose another folder"
        )


def check_model_output(output: str, inputs: Iterable[tuple[str, str]] = ()) -> None:
    """Refuse, before any training, a model --output that is (or holds) one of the run's inputs, lies inside an input
    folder, or holds a pipeline's output (a KB, embeddings, an index, links): the model's files would land among its
    tables, and that verb's next run would replace the folder. A model folder is allowed: a stopped run resumes there."""
    check_not_an_input(output, inputs)
    local = _local(output)
    if local is not None and (local / MANIFEST).is_file():
        raise ValueError(
            f"--output {output} holds a bioel pipeline output ({local / MANIFEST}); write the model to a folder of its own"
        )


def check_not_an_input(output: str, inputs: Iterable[tuple[str, str]], output_flag: str = "--output") -> None:
    """Refuse an output (a folder, or a file such as --json) that is (or holds) one of the job's inputs or lies inside
    an input folder: writing it would overwrite the input, or a later run given the folder would read it back."""
    from bioel_core.inputs import glob_root  # imports pyarrow, which `bioel --help` must not

    for flag, path in inputs:
        if not path:
            continue
        if _same_or_inside(path, output):
            raise ValueError(f"{output_flag} {output} is (or holds) the {flag} {path} of this job; write to a folder of its own")
        folder = glob_root(str(path))  # an input file has nothing inside it: only a folder (or a glob's) can hold the output
        if _same_or_inside(output, folder) and (folder == str(path) or _glob_reaches(str(path), folder, output)):
            raise ValueError(
                f"{output_flag} {output} is inside the {flag} folder {folder} of this job; write to a folder of its own"
            )


def _glob_reaches(pattern: str, root: str, output: str) -> bool:
    """Whether the glob `pattern` (whose folder `root` holds `output`) could read what is written at `output`: a
    recursive one (**) reaches every folder below its root; another only what it matches, so the output folder or a
    folder holding it (`*.jsonl` never reads `links/`, `corpus/*` reads `corpus/links`)."""
    if "**" in pattern:
        return True
    local_root, local_output = _local(root), _local(output)
    if local_root is not None and local_output is not None:
        pattern = str(local_root / pattern[len(root) :].lstrip("/")) if root != "." else str(local_root / pattern)
        candidates: list[Path | str] = [local_output, *(p for p in local_output.parents if local_root in p.parents)]
    else:
        candidates = [output.rstrip("/")]
    return any(fnmatch.fnmatchcase(str(c), pattern) for c in candidates)


def dead_letter_sample(files: Iterable[str], opener: Callable[[str], BinaryIO] | None = None, limit: int = 3) -> list[str]:
    """The first few dead letters of the dead_letter Parquet files, as 'location: reason' lines."""
    import pyarrow.parquet as pq

    out: list[str] = []
    for f in files:
        with (opener or (lambda p: open(p, "rb")))(f) as fh:
            for row in pq.read_table(fh, columns=["source", "location", "reason"]).to_pylist():
                out.append(f"{row['source']} {row['location']}: {row['reason']}")
                if len(out) >= limit:
                    return out
    return out


def _rows_out(manifest: dict) -> tuple[int, int]:
    """(records read, rows that came out of them) for each pipeline's manifest."""
    counts, outputs = manifest.get("counts", {}), manifest.get("outputs", {})
    rows = lambda t: outputs.get(t, {}).get("rows", 0)  # noqa: E731
    kind = manifest.get("pipeline")
    if kind == "ingest-kb":
        return counts.get("records_read", 0), min(rows("concepts"), rows("names"))
    if kind == "embed":
        return counts.get("names_read", 0), rows("embeddings")
    if kind == "build-index":
        return counts.get("vectors_read", 0), manifest.get("vectors", 0)
    if kind == "link":
        records, docs = counts["records"], counts["documents"]
        read = records["documents"] + records["deletions"] + records["dead_lettered"]
        # a record came out when it was linked, kept unchanged or deleted (a superseded one implies a winner)
        return read, docs["linked"] + docs["unchanged"] + docs["deleted"]
    raise ValueError(f"manifest of unknown pipeline {kind!r}")


def check_not_empty(manifest: dict, dead_letters: Iterable[str] | Callable[[], Iterable[str]] = ()) -> None:
    """Raise EmptyOutputError when a job's inputs yielded no row at all (an empty file, random bytes, a
    dictionary whose every line is dead-lettered, a corpus whose every document is): call it on the manifest
    before publishing, so the previous output stands. `dead_letters`: a few 'location: reason' lines to name,
    or a function returning them (called only when the output is empty)."""
    read, out = _rows_out(manifest)
    if out:
        return
    sample = list(dead_letters() if callable(dead_letters) else dead_letters)
    reasons = f"; first dead letters: {' | '.join(sample)}" if sample else ""
    filtered: Counter[str] = Counter()  # a reader's filters (a language, a source, inactive rows) may have left nothing
    for source in manifest.get("inputs", []):
        filtered.update(source.get("skipped_by_filter") or {})
    if filtered:
        reasons += "; filtered: " + ", ".join(
            f"{why} ({n:,})" for why, n in sorted(filtered.items(), key=lambda w: (-w[1], w[0]))
        )
    raise EmptyOutputError(
        f"no rows: {read:,} input records read, none produced a row (all dead-lettered or filtered); nothing published{reasons}"
    )


def refuse_empty(manifest: Manifest, staged: OutputFolder) -> Manifest:
    """check_not_empty inside `OutputFolder.publish`'s build step, its dead letters read from the staged generation:
    raising there removes the new generation, so a job with no rows publishes nothing and the previous output
    stands. Returns the manifest."""
    check_not_empty(manifest.to_dict(), lambda: dead_letter_sample(staged.files("dead_letter"), staged.fs.open))
    return manifest
