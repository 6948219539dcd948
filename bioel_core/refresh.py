"""KB refresh (`bioel refresh`): when the KB changes, re-encode only the names that changed and rebuild only the
index shards they live in.

    old names ─┬─ diff by name_id ── names without a vector to carry ── encode (in process) ─┐
    new names ─┘        └─ diff report (names and concepts)                                  │
    old embeddings ── unchanged vectors carried ──────────────────────────────────────────────┴─ new embeddings
    old index ─────── untouched shards copied byte for byte, touched shards rebuilt from the new embeddings ── new index

The diff. A names row is keyed by name_id, a hash of (kb, concept_id, name_norm). A name_id in both tables
whose row differs (concept_id, name, name_type) is *changed*; a renamed synonym or a name moved to another
concept gets a new name_id, so it is one *removed* and one *added* name. The report gives that id view and a
concept view: concepts added, removed, renamed (preferred name changed), and per concept whose names changed
its names added, removed and changed, so a renamed synonym reads as "-old +new" under its concept.

The embeddings. A row (name_id, concept_id, vector) depends on the model and on (name_id, concept_id,
name_norm) alone, so a vector is carried over when those are unchanged, changed rows included (their display
name or type changed, not their text). Every other name of the new KB is encoded: the added names, and the
names the old run dead-lettered (retried, as a full `bioel embed` would). Encoding goes through
`encode_checked`, the rules `bioel embed` dead-letters by. The table is laid out as `bioel embed` writes it
(the same shards by stable_shard(str(name_id)), rows sorted by name_id), so it equals a full re-embed to float
tolerance, exactly where the encoder is batch-invariant (batch size 1); embeddings shards with no row changed
are copied byte for byte.

The index. A shard (shard_of(name_id) over the index manifest's shard count) is rebuilt when a row of it was
removed or added, with the IndexSpec the manifest records; every other shard is copied byte for byte, its
sha256 checked against the old manifest (every shard's, before any work, and the copy's). For flat shards the
result is the index a full build-index writes.

In process, not a Beam job: a KB release changes hundreds to thousands of names out of hundreds of thousands;
encoding them takes seconds, less than starting a worker pool. Memory is the new vectors plus the vectors of
the rebuilt shards. When most of the KB changed (a new normalizer changes every name_id), run `bioel embed` and
`bioel build-index` instead: they spread the same work over workers (a warning says so).

Outputs are new folders, never the inputs: the inputs are read to the end, a re-run after a crash needs them,
and an embeddings folder and its index cannot be swapped together atomically. Each output is published as
every pipeline publishes (bioel_core.outputs: a new generation, then the manifest pointer moved); the
embeddings go first, then the index, whose manifest names the new embeddings manifest's sha256. A killed
refresh publishes nothing unfinished: at worst the new embeddings folder is published and the index folder
still holds its previous state or none (run the refresh again). Local folders only.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bioel_core.embeddings import (
    TEXT_COLUMN,
    EncodeFailure,
    check_model_matches,
    encode_checked,
    is_version_of,
    manifest_sha256,
    read_embeddings_manifest,
    vectors_of,
)
from bioel_core.guards import check_output_folder, refuse_empty
from bioel_core.progress import bar as progress_bar
from bioel_core.index import IndexSpec, build_shard, read_index_manifest, shard_of
from bioel_core.index.build import faiss_threads
from bioel_core.index.layout import FOLDERS, shard_files
from bioel_core.index.sharded import file_sha256
from bioel_core.models import open_model
from bioel_core.outputs import LocalFileSystem, Manifest, OutputFolder, embeddings_table, name_chunks, shard_name, write_parquet
from bioel_core.outputs.details import EmbedDetails, EmbeddingsSource, IndexDetails, NamesSource
from bioel_core.settings.fields import SettingsError
from bioel_core.tables import KB_PIPELINE, data_root, read_output_manifest, read_table, stable_shard, table_files
from schemas import DEAD_LETTER_SCHEMA, embeddings_schema

log = logging.getLogger(__name__)

REPORT_FILE = "refresh_report.json"
NAME_COLUMNS = ("concept_id", "kb", "name", "name_norm", "name_type")
VECTOR_KEY = ("concept_id", TEXT_COLUMN)  # with name_id, all an embeddings row depends on besides the model
RUNNER = "in-process (bioel refresh)"
# the arguments refusals name (RefreshSettings' fields), unless the caller names them in its own words (`labels`)
ARGUMENTS = ("old", "new", "model", "embeddings", "index", "output_embeddings", "output_index")


def _labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    return {name: (labels or {}).get(name, name) for name in ARGUMENTS}


# ---------------------------------------------------------------------------------------------------- the diff


@dataclass
class NamesDiff:
    old: pa.Table  # the old names table, rows in name_id order
    new: pa.Table  # the new one, likewise
    added: np.ndarray  # rows of `new` whose name_id `old` lacks
    removed: np.ndarray  # rows of `old` whose name_id `new` lacks
    common_old: np.ndarray  # rows of both with the same name_id, aligned
    common_new: np.ndarray
    changed: np.ndarray  # bool over the common rows: some column other than name_id differs

    def changed_rows(self) -> tuple[pa.Table, pa.Table]:
        return self.old.take(self.common_old[self.changed]), self.new.take(self.common_new[self.changed])


def _by_name_id(names: pa.Table, where: str) -> pa.Table:
    names = names.take(pc.sort_indices(names, [("name_id", "ascending")]))
    ids = names.column("name_id").to_numpy()
    repeated = ids[1:][ids[1:] == ids[:-1]]
    if len(repeated):  # the diff is keyed by name_id; ingest-kb writes each once
        raise ValueError(f"{where}: name_id {repeated[0]} appears more than once in the names table")
    return names


def diff_names(old: pa.Table, new: pa.Table, labels: Mapping[str, str] | None = None) -> NamesDiff:
    """Two names tables compared by name_id and content; `labels` as `refresh`'s."""
    label = _labels(labels)
    old, new = _by_name_id(old, label["old"]), _by_name_id(new, label["new"])
    _, common_old, common_new = np.intersect1d(
        old.column("name_id").to_numpy(), new.column("name_id").to_numpy(), assume_unique=True, return_indices=True
    )
    changed = np.zeros(len(common_old), dtype=bool)
    for column in NAME_COLUMNS:
        changed |= pc.not_equal(old.column(column).take(common_old), new.column(column).take(common_new)).to_numpy(
            zero_copy_only=False
        )
    return NamesDiff(
        old, new, _others(new.num_rows, common_new), _others(old.num_rows, common_old), common_old, common_new, changed
    )


def _others(n: int, taken: np.ndarray) -> np.ndarray:
    keep = np.ones(n, dtype=bool)
    keep[taken] = False
    return np.nonzero(keep)[0]


def _name_example(row: dict) -> dict:
    return {k: row[k] for k in ("name_id", "concept_id", "name", "name_type")}


def _section(items: list, examples: int) -> dict:
    return {"count": len(items), "examples": items[:examples]}


def diff_report(diff: NamesDiff, old_concepts: pa.Table, new_concepts: pa.Table, examples: int) -> dict:
    """Names and concepts added, removed, renamed or changed: counts, and up to `examples` of each."""
    old_pref = dict(zip(old_concepts.column("concept_id").to_pylist(), old_concepts.column("preferred_name").to_pylist()))
    new_pref = dict(zip(new_concepts.column("concept_id").to_pylist(), new_concepts.column("preferred_name").to_pylist()))
    added, removed = diff.new.take(diff.added), diff.old.take(diff.removed)
    changed_old, changed_new = diff.changed_rows()

    def ordered(table: pa.Table, limit: int | None) -> list[dict]:
        rows = table.take(pc.sort_indices(table, [("concept_id", "ascending"), ("name", "ascending")]))
        return rows.slice(0, limit).to_pylist() if limit is not None else rows.to_pylist()

    shown_changes = pc.sort_indices(changed_new, [("concept_id", "ascending"), ("name_norm", "ascending")])[:examples]
    changes = [
        {
            "name_id": a["name_id"],
            "concept_id": b["concept_id"],
            "name_norm": b["name_norm"],
            "changes": {c: [a[c], b[c]] for c in NAME_COLUMNS if a[c] != b[c]},
        }
        for a, b in zip(changed_old.take(shown_changes).to_pylist(), changed_new.take(shown_changes).to_pylist())
    ]

    kept = old_pref.keys() & new_pref.keys()
    touched = set()
    for table in (added, removed, changed_old, changed_new):
        touched.update(pc.unique(table.column("concept_id")).to_pylist())
    names_changed = sorted(touched & kept)
    shown = pa.array(names_changed[:examples], pa.string())
    per_concept = {
        c: {"concept_id": c, "preferred_name": new_pref[c], "names_added": [], "names_removed": [], "names_changed": []}
        for c in names_changed[:examples]
    }
    for key, table in (("names_added", added), ("names_removed", removed)):
        for row in ordered(table.filter(pc.is_in(table.column("concept_id"), value_set=shown)), None):
            per_concept[row["concept_id"]][key].append(row["name"])
    mask = pc.is_in(changed_new.column("concept_id"), value_set=shown)
    for a, b in zip(changed_old.filter(mask).to_pylist(), changed_new.filter(mask).to_pylist()):
        per_concept[b["concept_id"]]["names_changed"].append(
            {"name_norm": b["name_norm"], **{c: [a[c], b[c]] for c in NAME_COLUMNS if a[c] != b[c]}}
        )

    renamed = sorted(c for c in kept if old_pref[c] != new_pref[c])
    return {
        "names": {
            "added": {"count": len(added), "examples": [_name_example(r) for r in ordered(added, examples)]},
            "removed": {"count": len(removed), "examples": [_name_example(r) for r in ordered(removed, examples)]},
            "changed": {"count": len(changed_old), "examples": changes},
            "note": "name_id hashes (kb, concept_id, name_norm): a renamed name or one moved to another concept is "
            "one removed and one added name; 'changed' are rows of the same name_id whose other columns differ",
        },
        "concepts": {
            "added": _section(
                [{"concept_id": c, "preferred_name": new_pref[c]} for c in sorted(new_pref.keys() - kept)], examples
            ),
            "removed": _section(
                [{"concept_id": c, "preferred_name": old_pref[c]} for c in sorted(old_pref.keys() - kept)], examples
            ),
            "renamed": _section([{"concept_id": c, "preferred_name": [old_pref[c], new_pref[c]]} for c in renamed], examples),
            "names_changed": {"count": len(names_changed), "examples": list(per_concept.values())},
        },
    }


def format_summary(report: dict) -> str:
    """A few lines for the terminal."""
    n, c, r = report["names"], report["concepts"], report["refresh"]
    lines = [
        f"names: +{n['added']['count']:,} -{n['removed']['count']:,} ~{n['changed']['count']:,} (changed in place); "
        f"concepts: +{c['added']['count']:,} -{c['removed']['count']:,}, {c['renamed']['count']:,} renamed, "
        f"{c['names_changed']['count']:,} with changed names",
        f"encoded {r['encoded']:,} names ({r['dead_lettered']:,} dead letters), carried {r['carried']:,} vectors; "
        f"embeddings shards rewritten {len(r['embeddings_shards_rewritten'])}/{r['embeddings_shards']}, "
        f"index shards rebuilt {len(r['index_shards_rebuilt'])}/{r['index_shards']}",
    ]
    lines += [f"  concept added: {e['concept_id']} {e['preferred_name']}" for e in c["added"]["examples"][:3]]
    lines += [f"  concept removed: {e['concept_id']} {e['preferred_name']}" for e in c["removed"]["examples"][:3]]
    lines += [
        f"  concept renamed: {e['concept_id']} {e['preferred_name'][0]!r} -> {e['preferred_name'][1]!r}"
        for e in c["renamed"]["examples"][:3]
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the inputs


@dataclass
class Inputs:
    old_names: Path
    new_names: Path
    embeddings: Path
    index: Path
    emb_manifest: dict
    index_manifest: dict
    spec: IndexSpec  # the index's, for the rebuilt shards
    new_names_manifest: dict

    @property
    def embedded(self) -> EmbedDetails:
        return EmbedDetails.from_dict(self.emb_manifest)

    @property
    def indexed(self) -> IndexDetails:
        return IndexDetails.from_dict(self.index_manifest)


def check_shard_file(path: Path, sha256: str, copy_to: Path | None = None) -> None:
    """Refuses an index file whose bytes are not the ones its manifest records; with `copy_to`, copied there in the
    same pass, so the bytes checked are the bytes published."""
    if file_sha256(path, copy_to) != sha256:
        raise ValueError(f"{path}: sha256 does not match the index manifest (corrupted or replaced); run `bioel build-index`")


def check_inputs(
    old_names: str | Path,
    new_names: str | Path,
    embeddings: str | Path,
    index: str | Path,
    labels: Mapping[str, str] | None = None,
) -> Inputs:
    """Every refusal of the inputs that needs no model, before any work: unfinished or foreign folders, embeddings
    not made from the old names, an index not built from the embeddings, missing files (the outputs:
    guards.check_output_folder); `labels` as `refresh`'s."""
    label = _labels(labels)
    old, new, emb, idx = (Path(p).resolve() for p in (old_names, new_names, embeddings, index))
    old_manifest = read_output_manifest(old, KB_PIPELINE, label["old"])
    new_manifest = read_output_manifest(new, KB_PIPELINE, label["new"])
    if old_manifest.get("kb") != new_manifest.get("kb"):
        raise ValueError(
            f"{label['old']} is KB {old_manifest.get('kb')!r} and {label['new']} is KB "
            f"{new_manifest.get('kb')!r}: a refresh compares two versions of one KB"
        )
    emb_manifest = read_embeddings_manifest(emb, label["embeddings"])
    embedded = EmbedDetails.from_dict(emb_manifest)
    if not is_version_of(embedded.names.manifest_sha256, old):
        raise ValueError(
            f"{label['old']} {old} is not the names folder the embeddings at {emb} were made from "
            f"({embedded.names.path}, by its manifest's sha256); pass that folder as {label['old']}"
        )
    listed = sorted(Path(f).name for f in emb_manifest["outputs"]["embeddings"]["files"])
    found = [f.name for f in table_files(emb, "embeddings")]
    layout = {shard_name(s, embedded.num_shards) for s in range(embedded.num_shards)}
    if listed != found or not layout.issuperset(found):
        raise ValueError(f"{label['embeddings']} {emb}: embeddings files {found} are not the {listed} its manifest lists")
    index_manifest = read_index_manifest(idx)
    indexed = IndexDetails.from_dict(index_manifest)
    if not is_version_of(indexed.embeddings.manifest_sha256, emb):
        raise ValueError(
            f"{label['index']} {idx} was not built from {label['embeddings']} {emb} (it names "
            f"{indexed.embeddings.path}, by its manifest's sha256)"
        )
    requested = indexed.index.requested
    try:
        spec = IndexSpec(**requested)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{label['index']} {idx}: its parameters {requested} are not an IndexSpec of this bioel ({err}); "
            "run `bioel build-index`"
        ) from None
    idx_root = data_root(idx, index_manifest)
    missing = [f for r in indexed.shards for f in shard_files(r).values() if not (idx_root / f).is_file()]
    if missing or sorted(r["shard"] for r in indexed.shards) != list(range(indexed.num_shards)):
        raise FileNotFoundError(
            f"{label['index']} {idx}: incomplete: shard file(s) missing: {', '.join(missing) or 'none'}, "
            f"manifest lists shards {sorted(r['shard'] for r in indexed.shards)}"
        )
    # before any work: a damaged shard found while the index is staged would come after the new embeddings were
    # published, leaving them with no index
    for record in indexed.shards:
        for key, relative in shard_files(record).items():
            check_shard_file(idx_root / relative, record[f"{key}_sha256"])
    return Inputs(old, new, emb, idx, emb_manifest, index_manifest, spec, new_manifest)


# ---------------------------------------------------------------------------------------------- the refresh


@dataclass
class Encoded:
    name_ids: np.ndarray
    concept_ids: list[str]
    vectors: np.ndarray
    dead_letters: list[dict]


def encode_names(encoder, names: pa.Table, batch_size: int) -> Encoded:
    """`names` rows encoded in the chunks and batches `bioel embed` forms (outputs.name_chunks)."""
    ids = names.column("name_id").to_numpy()
    concepts, texts = names.column("concept_id").to_pylist(), names.column(TEXT_COLUMN).to_pylist()
    kept, vectors, dead = [], [], []
    with progress_bar(total=len(ids), unit="names", desc="encode") as bar:
        for rows in name_chunks(ids, names.column(TEXT_COLUMN), batch_size):
            for i, result in zip(rows, encode_checked(encoder, [texts[i] for i in rows], batch_size)):
                if isinstance(result, EncodeFailure):
                    dead.append({"source": "encoder", "location": f"name_id {ids[i]}", "raw": texts[i], "reason": result.reason})
                else:
                    kept.append(i)
                    vectors.append(result)
            bar.update(len(rows))
    kept = np.array(kept, dtype=np.int64)
    return Encoded(
        ids[kept],
        [concepts[i] for i in kept],
        np.stack(vectors).astype(np.float32) if vectors else np.empty((0, encoder.dim), np.float32),
        dead,
    )


def carried_vectors(diff: NamesDiff, old_emb_ids: np.ndarray) -> tuple[np.ndarray, int]:
    """The name_ids whose old vector stands (the name's concept_id and name_norm are unchanged and the old run
    embedded it), and how many names kept their text but have no old vector (old dead letters, retried)."""
    same = np.ones(len(diff.common_old), dtype=bool)
    for column in VECTOR_KEY:
        same &= pc.equal(diff.old.column(column).take(diff.common_old), diff.new.column(column).take(diff.common_new)).to_numpy(
            zero_copy_only=False
        )
    candidates = diff.new.column("name_id").to_numpy()[diff.common_new[same]]
    embedded = np.isin(candidates, old_emb_ids)
    return candidates[embedded], int((~embedded).sum())


@dataclass
class RefreshResult:
    embeddings_manifest: dict
    index_manifest: dict
    report: dict


def refresh(
    old_names: str | Path,
    new_names: str | Path,
    model: str | Path,
    embeddings: str | Path,
    index: str | Path,
    output_embeddings: str | Path,
    output_index: str | Path,
    *,
    device: str = "cpu",
    batch_size: int | None = None,
    examples: int = 10,
    gates: tuple = (None, None),
    labels: Mapping[str, str] | None = None,
) -> RefreshResult:
    """Refreshes `embeddings` and `index` (made from `old_names`) to `new_names` into two new folders; returns
    their manifests and the diff report. `batch_size` None: the one the embeddings were made with. `gates`: the
    quality.QualityGate each output must pass to be published (None: unchecked); embeddings that fail leave the
    index unbuilt. `labels`: what refusals call each argument (RefreshSettings field -> its name in the caller's
    vocabulary, the CLI's flags); default the field names."""
    if examples < 0:
        raise SettingsError("examples", f"must be at least 0, got {examples}")
    if batch_size is not None and batch_size < 1:
        raise SettingsError("batch_size", f"must be at least 1, got {batch_size}")
    label = _labels(labels)
    inputs = check_inputs(old_names, new_names, embeddings, index, label)
    sources = [
        (label[name], path)
        for name, path in (
            ("old", inputs.old_names),
            ("new", inputs.new_names),
            ("embeddings", inputs.embeddings),
            ("index", inputs.index),
            ("model", model),
        )
    ]
    # neither output may hold the other: publishing one would replace the other's tables
    check_output_folder(
        str(output_embeddings), "embed", sources + [(label["output_index"], output_index)], label["output_embeddings"]
    )
    check_output_folder(str(output_index), "build-index", sources, label["output_index"])
    embedded = inputs.embedded
    encoder = open_model(model, embedded.model.pooling, device).eval()
    check_model_matches(inputs.embeddings, encoder)
    batch_size = batch_size or embedded.batch_size

    diff = diff_names(read_table(inputs.old_names, "names"), read_table(inputs.new_names, "names"), label)
    report = diff_report(
        diff,
        read_table(inputs.old_names, "concepts", ["concept_id", "preferred_name"]),
        read_table(inputs.new_names, "concepts", ["concept_id", "preferred_name"]),
        examples,
    )

    old_emb_ids = read_table(inputs.embeddings, "embeddings", ["name_id"]).column("name_id").to_numpy()
    carried, retried = carried_vectors(diff, old_emb_ids)
    to_encode = diff.new.filter(pa.array(~np.isin(diff.new.column("name_id").to_numpy(), carried)))
    if to_encode.num_rows > diff.new.num_rows // 2:
        log.warning(
            "%d of %d names need encoding: `bioel embed` + `bioel build-index` would spread this over workers",
            to_encode.num_rows,
            diff.new.num_rows,
        )
    log.info("encoding %d names (batch size %d)", to_encode.num_rows, batch_size)
    encoded = encode_names(encoder, to_encode, batch_size)

    # rows that change: old vectors not carried, and new vectors; their shards are the ones rewritten / rebuilt
    dropped = old_emb_ids[~np.isin(old_emb_ids, carried)]
    moved = np.concatenate([dropped, encoded.name_ids])
    emb_shards, index_shards = embedded.num_shards, inputs.indexed.num_shards
    emb_touched = sorted({stable_shard(str(i), emb_shards) for i in moved.tolist()})
    index_touched = sorted(set(shard_of(moved, index_shards).tolist()))

    fs = LocalFileSystem()
    out_emb = OutputFolder(fs, str(Path(output_embeddings).resolve()), ("embeddings", "dead_letter"))
    out_idx = OutputFolder(fs, str(Path(output_index).resolve()), FOLDERS)
    report["refresh"] = {
        "carried": int(len(carried)),
        "encoded": to_encode.num_rows,
        "embedded": int(len(encoded.name_ids)),
        "dead_lettered": len(encoded.dead_letters),
        "retried_dead_letters": retried,
        "embeddings_shards": emb_shards,
        "embeddings_shards_rewritten": emb_touched,
        "index_shards": index_shards,
        "index_shards_rebuilt": index_touched,
    }
    report["old"] = {
        "names": str(inputs.old_names),
        "names_manifest_sha256": manifest_sha256(inputs.old_names),
        "embeddings": str(inputs.embeddings),
        "index": str(inputs.index),
    }
    report["new"] = {
        "names": str(inputs.new_names),
        "names_manifest_sha256": manifest_sha256(inputs.new_names),
        "embeddings": out_emb.output_dir,
        "index": out_idx.output_dir,
    }

    def build_embeddings() -> Manifest:
        _stage_embeddings(inputs, Path(out_emb.root), carried, encoded, emb_touched)
        (Path(out_emb.root) / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True))
        outputs = {table: out_emb.table_outputs(table) for table in out_emb.tables}
        # as `bioel embed`: no vector at all publishes nothing, nor an empty index
        return refuse_empty(_embeddings_manifest(inputs, Path(model), device, batch_size, outputs, report), out_emb)

    emb_out_manifest = out_emb.publish(build_embeddings, gates[0]).to_dict()

    def build_index() -> Manifest:
        records, vectors_read = _stage_index(inputs, Path(out_idx.root), data_root(out_emb.output_dir), index_touched)
        return _index_manifest(
            inputs,
            Path(out_emb.output_dir),
            records,
            vectors_read,
            report,
            {table: out_idx.table_outputs(table, rows=False) for table in out_idx.tables},
        )

    index_out_manifest = out_idx.publish(build_index, gates[1]).to_dict()
    return RefreshResult(emb_out_manifest, index_out_manifest, report)


def _stage_embeddings(inputs: Inputs, staging: Path, carried: np.ndarray, encoded: Encoded, touched: list[int]) -> None:
    """The new embeddings and dead_letter tables in `staging` (a new generation)."""
    num_shards, dim = inputs.embedded.num_shards, inputs.embedded.model.dim
    fs, old_root = LocalFileSystem(), data_root(inputs.embeddings, inputs.emb_manifest)
    new_shard = np.array([stable_shard(str(i), num_shards) for i in encoded.name_ids.tolist()], dtype=np.int64)
    for shard in range(num_shards):
        name = shard_name(shard, num_shards)
        source, target = old_root / "embeddings" / name, staging / "embeddings" / name
        if shard not in touched:
            if source.exists():
                shutil.copyfile(source, target)
            continue
        old = pq.read_table(source) if source.exists() else embeddings_schema(dim).empty_table()
        old = old.filter(pc.is_in(old.column("name_id"), value_set=pa.array(carried, pa.int64())))
        mine = np.nonzero(new_shard == shard)[0]
        if old.num_rows + len(mine):  # `bioel embed` writes no file for a shard no name hashes to
            write_parquet(
                fs,
                str(target),
                embeddings_table(
                    np.concatenate([old.column("name_id").to_numpy(), encoded.name_ids[mine]]),
                    old.column("concept_id").to_pylist() + [encoded.concept_ids[i] for i in mine],
                    np.concatenate([vectors_of(old.column("vector"), dim), encoded.vectors[mine]]),
                    dim,
                ),
            )
    if encoded.dead_letters:
        dead = sorted(encoded.dead_letters, key=lambda d: d["location"])
        write_parquet(fs, str(staging / "dead_letter" / shard_name(0, 1)), pa.Table.from_pylist(dead, schema=DEAD_LETTER_SCHEMA))


def _stage_index(inputs: Inputs, staging: Path, embeddings_staging: Path, touched: list[int]) -> tuple[list[dict], int]:
    """Untouched shards copied (sha256 checked), touched ones rebuilt from the new embeddings; returns the
    shard records and how many embeddings rows were read."""
    indexed = inputs.indexed
    num_shards, dim = indexed.num_shards, indexed.index.dimension
    old_root = data_root(inputs.index, inputs.index_manifest)
    records = []
    for record in indexed.shards:
        if record["shard"] in touched:
            continue
        for key, relative in shard_files(record).items():
            check_shard_file(old_root / relative, record[f"{key}_sha256"], copy_to=staging / relative)
        records.append(record)

    rows: dict[int, list[pa.Table]] = {s: [] for s in touched}
    vectors_read = 0
    for path in sorted((embeddings_staging / "embeddings").glob("*.parquet")):
        ids = pq.read_table(path, columns=["name_id"]).column("name_id").to_numpy()
        vectors_read += len(ids)
        shards = shard_of(ids, num_shards)
        if np.isin(shards, touched).any():
            table = pq.read_table(path)
            for shard in touched:
                if (shards == shard).any():
                    rows[shard].append(table.filter(pa.array(shards == shard)))
    # as the index was built (an HNSW graph depends on its build threads)
    with faiss_threads(indexed.index.faiss_threads):
        for shard in touched:
            table = pa.concat_tables(rows.pop(shard) or [embeddings_schema(dim).empty_table()])
            built = build_shard(
                shard,
                num_shards,
                table.column("name_id").to_numpy(),
                table.column("concept_id"),
                vectors_of(table.column("vector"), dim),
                inputs.spec,
                dim,
            )
            for relative, data in built.files.items():
                (staging / relative).write_bytes(data)
            records.append(built.record)
    return sorted(records, key=lambda r: r["shard"]), vectors_read


def _refresh_section(inputs: Inputs, report: dict) -> dict:
    r, n = report["refresh"], report["names"]
    return {
        "report": REPORT_FILE,
        "old_names": {"path": str(inputs.old_names), "manifest_sha256": report["old"]["names_manifest_sha256"]},
        "new_names": {"path": str(inputs.new_names), "manifest_sha256": report["new"]["names_manifest_sha256"]},
        "counts": {
            "names_added": n["added"]["count"],
            "names_removed": n["removed"]["count"],
            "names_changed": n["changed"]["count"],
            "carried": r["carried"],
            "encoded": r["encoded"],
            "dead_lettered": r["dead_lettered"],
        },
    }


def _embeddings_manifest(inputs: Inputs, model: Path, device: str, batch_size: int, outputs: dict, report: dict) -> Manifest:
    old, refreshed = inputs.embedded, report["refresh"]
    details = EmbedDetails(
        kb=old.kb,
        model=replace(old.model, path=str(model.resolve())),  # the same fingerprint, checked
        names=NamesSource.of(inputs.new_names, inputs.new_names_manifest),
        device=device,
        batch_size=batch_size,
        num_shards=old.num_shards,
        refresh={
            **_refresh_section(inputs, report),
            "old_embeddings": {"path": str(inputs.embeddings), "manifest_sha256": manifest_sha256(inputs.embeddings)},
            "shards_rewritten": refreshed["embeddings_shards_rewritten"],
        },
    )
    counts = {
        "names_read": refreshed["carried"] + refreshed["encoded"],
        "embedded": refreshed["carried"] + refreshed["embedded"],
        "dead_lettered": refreshed["dead_lettered"],
    }
    return details.manifest(counts, outputs, RUNNER)


def _index_manifest(
    inputs: Inputs, emb_dir: Path, records: list[dict], vectors_read: int, report: dict, outputs: dict
) -> Manifest:
    old, emb = inputs.indexed, read_embeddings_manifest(emb_dir)
    embeddings = EmbeddingsSource(
        path=str(emb_dir),
        manifest_sha256=manifest_sha256(emb_dir),
        rows=emb["outputs"]["embeddings"]["rows"],
        files=emb["outputs"]["embeddings"]["files"],
    )
    details = IndexDetails.of(
        embedded=EmbedDetails.from_dict(emb),
        embeddings=embeddings,
        index=old.index,
        num_shards=old.num_shards,
        shards=records,
        refresh={
            **_refresh_section(inputs, report),
            "old_index": {"path": str(inputs.index), "manifest_sha256": manifest_sha256(inputs.index)},
            "shards_rebuilt": report["refresh"]["index_shards_rebuilt"],
            "faiss_version": faiss.__version__,
        },
    )
    return details.manifest(vectors_read, outputs, RUNNER)
