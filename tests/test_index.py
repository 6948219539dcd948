"""FAISS shards: shard assignment, exact sharded search, approximate kinds, integrity errors, the build-index
pipeline (runners, re-runs, killed runs, refusals), the index quality suite, the CLI, and the dense linker
over an index folder.

Fixtures are written as the embed stage writes them (embeddings/*.parquet + manifest.json referencing a
names folder), so these tests do not run an encoder except the dense-linker one.
"""

import json
import shutil

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bioel_core.embeddings import ModelMismatchError, manifest_sha256
from bioel_core.index import IndexIntegrityError, IndexSpec, ShardedIndex, shard_of
from bioel_core import index as bioel_index
from bioel_core.embeddings import vectors_of
from bioel_core.index.build import build_shard
from bioel_core.index.layout import FOLDERS, shard_bytes
from bioel_core.index.sharded import Shard
from bioel_core.normalize import Normalizer, name_id
from bioel_core.quality import report
from bioel_core.tables import IncompleteOutputError, data_root, read_table
from conftest import assert_published, assert_unpublished, report_figures, report_page
from pipelines import build_index, cli
from pipelines.options import pipeline_options
from schemas import CONCEPTS_SCHEMA, DEAD_LETTER_SCHEMA, NAMES_SCHEMA, SCHEMA_VERSION, embeddings_schema

FINGERPRINT = "ab" * 32
MULTI = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def write_names(out, name_ids, concept_ids, name_norms, alt_ids=None):
    """A finished ingest-kb folder holding exactly these names."""
    for table in ("concepts", "names", "dead_letter"):
        (out / table).mkdir(parents=True)
    concepts = sorted(set(concept_ids))
    alt_ids = alt_ids or {}
    pq.write_table(
        pa.table(
            {
                "concept_id": concepts,
                "vocabulary": ["MESH"] * len(concepts),
                "kb": ["medic"] * len(concepts),
                "preferred_name": concepts,
                "semantic_types": [[]] * len(concepts),
                "definition": [None] * len(concepts),
                "alt_ids": [alt_ids.get(c, []) for c in concepts],
            },
            schema=CONCEPTS_SCHEMA,
        ),
        out / "concepts/part-00000-of-00001.parquet",
    )
    n = len(name_ids)
    pq.write_table(
        pa.table(
            {
                "name_id": list(name_ids),
                "concept_id": list(concept_ids),
                "kb": ["medic"] * n,
                "name": list(name_norms),
                "name_norm": list(name_norms),
                "name_type": ["synonym"] * n,
            },
            schema=NAMES_SCHEMA,
        ),
        out / "names/part-00000-of-00001.parquet",
    )
    pq.write_table(DEAD_LETTER_SCHEMA.empty_table(), out / "dead_letter/part-00000-of-00001.parquet")
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "pipeline": "ingest-kb",
                "complete": True,
                "kb": "medic",
                "id_pattern": r"D\d{6}",
                "normalizer": Normalizer().to_dict(),
                "outputs": {"names": {"rows": n}},
            }
        )
    )
    return out


def write_embeddings(out, names_dir, name_ids, concept_ids, vectors, *, files=2, fingerprint=FINGERPRINT, model_path="/m"):
    """A finished embed folder in `bioel embed`'s layout."""
    (out / "embeddings").mkdir(parents=True)
    (out / "dead_letter").mkdir()
    d = vectors.shape[1]
    step = -(-len(name_ids) // files)
    for f in range(files):
        part = slice(f * step, (f + 1) * step)
        pq.write_table(
            pa.Table.from_arrays(
                [
                    pa.array(np.asarray(name_ids[part]), pa.int64()),
                    pa.array(list(concept_ids[part]), pa.string()),
                    pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(vectors[part]).ravel(), pa.float32()), d),
                ],
                schema=embeddings_schema(d),
            ),
            out / f"embeddings/part-{f:05d}-of-{files:05d}.parquet",
        )
    pq.write_table(DEAD_LETTER_SCHEMA.empty_table(), out / "dead_letter/part-00000-of-00001.parquet")
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "pipeline": "embed",
                "complete": True,
                "kb": "medic",
                "model": {"path": model_path, "fingerprint": fingerprint, "config": {}, "dim": d, "pooling": None},
                "names": {"path": str(names_dir), "manifest_sha256": manifest_sha256(names_dir), "rows": len(name_ids)},
            }
        )
    )
    return out


def kb_folders(root, vectors, seed=0):
    """names + embeddings folders for `vectors`, with random 63-bit name ids and three names a concept."""
    rng = np.random.default_rng(seed)
    n = len(vectors)
    ids = rng.choice(2**62, size=n, replace=False).astype(np.int64)
    concepts = [f"D{i // 3:06d}" for i in range(n)]
    names = write_names(root / "names", ids, concepts, [f"name {i}" for i in range(n)])
    return write_embeddings(root / "emb", names, ids, concepts, vectors), ids


def sign_vectors(n, d, seed):
    """±1 vectors: normalized they are ±1/sqrt(d), exact in float32, so every inner product is exact and equal
    scores are truly equal whatever order a BLAS kernel sums in; with d=16 there are 17 possible scores."""
    rng = np.random.default_rng(seed)
    return rng.choice(np.array([-1.0, 1.0], np.float32), size=(n, d))


def clustered(n, d, seed, clusters=40, spread=0.6):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, d)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, d)).astype(np.float32) * spread / np.sqrt(d)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def build(emb, out, kind="flat", shards=3, extra=(), **spec):
    return build_index.run(
        str(emb), str(out), pipeline_options(list(extra)), num_shards=shards, spec=IndexSpec(kind=kind, **spec)
    )


def shard_files(folder):
    root = data_root(folder)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.glob("*/shard-*"))}


@pytest.fixture(scope="module")
def ties(tmp_path_factory):
    """600 sign vectors (40 of them copies of earlier ones, one 12 times) in a flat index of 4 shards."""
    root = tmp_path_factory.mktemp("ties")
    base = sign_vectors(548, 16, seed=1)
    vectors = np.concatenate([base, base[:40], np.repeat(base[40:41], 12, axis=0)])
    emb, ids = kb_folders(root, vectors)
    manifest = build(emb, root / "flat", shards=4)
    return root, vectors, ids, manifest


def test_shard_of_is_stable_spread_and_total():
    ids = np.arange(100_000, dtype=np.int64) * 8  # strided ids: a plain modulo would use 1 shard of 8
    counts = np.bincount(shard_of(ids, 8), minlength=8)
    assert counts.min() > 11_500 and counts.max() < 13_500
    # pinned (splitmix64 worked out with Python ints): a change here moves names between shards and breaks
    # incremental refresh of existing indexes
    ids_ = [0, 1, 2, 3, 12345678901234567, 2**62, -5, 2**63 - 1]
    assert shard_of(ids_, 4).tolist() == [0, 1, 2, 0, 3, 1, 2, 1]
    assert shard_of(ids_, 7).tolist() == [0, 6, 1, 4, 4, 0, 5, 3]
    assert (shard_of(ids, 1) == 0).all()
    with pytest.raises(ValueError, match="at least 1"):
        shard_of(ids, 0)


@pytest.mark.parametrize("k", [1, 2, 5, 13, 40])
def test_sharded_flat_top_k_equals_one_index_flat_ip_with_ties_by_name_id(ties, k):
    _, vectors, ids, _ = ties
    queries = np.concatenate([vectors[[40, 0, 7]], sign_vectors(60, 16, seed=2)])
    got = ShardedIndex(ties[0] / "flat").search(queries, k)

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    one = faiss.IndexFlatIP(16)
    one.add(unit)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    top_scores, _ = one.search(q, k)
    all_scores, all_rows = one.search(q, len(vectors))
    for j in range(len(q)):
        order = np.lexsort((ids[all_rows[j]], -all_scores[j]))[:k]  # score desc, then name_id asc
        assert got.name_ids[j].tolist() == ids[all_rows[j][order]].tolist()
        assert got.scores[j].tolist() == top_scores[j].tolist()
    # the 12 copies of vector 40 tie at the top of query 0: the smallest name ids win, whatever shard holds them
    copies = np.sort(ids[np.flatnonzero((vectors == vectors[40]).all(axis=1))])
    top = min(k, len(copies))
    assert len(copies) == 13 and got.name_ids[0, :top].tolist() == copies[:top].tolist()
    concept_of = dict(zip(ids.tolist(), [f"D{i // 3:06d}" for i in range(len(ids))]))
    assert got.concept_ids[5].tolist() == [concept_of[i] for i in got.name_ids[5].tolist()]


def test_flat_shards_answer_from_their_mapped_vectors_as_index_flat_ip_does(tmp_path, monkeypatch):
    """Flat shards are searched by one matrix product over the vectors FAISS maps (faster than FAISS's own flat
    search here), not by IndexFlatIP.search: the same hits and scores as one IndexFlatIP over all vectors."""
    vectors = np.random.default_rng(5).normal(size=(700, 24)).astype(np.float32)
    emb, ids = kb_folders(tmp_path, vectors)
    build(emb, tmp_path / "flat", shards=3)
    index = ShardedIndex(tmp_path / "flat")
    assert all(s.exact is not None for s in index.shards)
    queries = np.random.default_rng(6).normal(size=(50, 24)).astype(np.float32)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    one = faiss.IndexFlatIP(24)
    one.add(unit)
    scores, rows = one.search(queries / np.linalg.norm(queries, axis=1, keepdims=True), 7)

    def refused(*_a, **_k):
        raise AssertionError("a flat shard was searched by FAISS")

    monkeypatch.setattr(faiss.IndexFlatIP, "search", refused)
    got = index.search(queries, 7)
    assert got.name_ids.tolist() == ids[rows].tolist()
    np.testing.assert_allclose(got.scores, scores, rtol=0, atol=1e-6)


def test_search_pads_when_fewer_vectors_than_k(ties):
    got = ShardedIndex(ties[0] / "flat").search(ties[1][:2], 700)
    assert (got.name_ids[:, :600] >= 0).all() and (got.name_ids[:, 600:] == -1).all()
    assert np.isneginf(got.scores[:, 600:]).all() and got.concept_ids[0, 650] is None


def test_manifest_records_shards_checksums_model_and_source(ties):
    root, vectors, _, manifest = ties
    assert manifest["pipeline"] == "build-index" and manifest["complete"] and all(manifest["reconciliation"].values())
    assert manifest["vectors"] == len(vectors) == sum(r["vectors"] for r in manifest["shards"])
    assert [r["shard"] for r in manifest["shards"]] == [0, 1, 2, 3]
    assert manifest["model_fingerprint"] == FINGERPRINT == manifest["model"]["fingerprint"]
    assert manifest["embeddings"]["path"] == str((root / "emb").resolve()) and manifest["names"]["path"].endswith("names")
    assert manifest["index"]["dimension"] == 16 and manifest["index"]["metric"] == "inner_product"
    for r in manifest["shards"]:
        assert len(r["index_sha256"]) == 64 and r["index_file"].endswith(".faiss") and r["id_map_file"].endswith(".parquet")
    assert json.loads((root / "flat/manifest.json").read_text()) == manifest


def exact_top_k(vectors, ids, queries, k):
    one = faiss.IndexFlatIP(vectors.shape[1])
    one.add(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    return ids[one.search(queries / np.linalg.norm(queries, axis=1, keepdims=True), k)[1]]


@pytest.fixture(scope="module")
def approximate(tmp_path_factory):
    """3,000 clustered 32-d vectors; the three approximate kinds, 2 shards each, and the exact top 10."""
    root = tmp_path_factory.mktemp("approx")
    vectors = clustered(3000, 32, seed=3)
    emb, ids = kb_folders(root, vectors, seed=3)
    built = {kind: build(emb, root / kind, kind, shards=2) for kind in ("ivf-flat", "hnsw", "ivf-pq")}
    queries = clustered(200, 32, seed=4)
    return root, queries, built, exact_top_k(vectors, ids, queries, 10)


@pytest.mark.parametrize("kind,min_recall", [("ivf-flat", 0.95), ("hnsw", 0.95), ("ivf-pq", 0.85)])
def test_approximate_kinds_save_load_and_recall_against_flat(approximate, kind, min_recall):
    root, queries, built, truth = approximate
    found = ShardedIndex(root / kind).search(queries, 10).name_ids
    recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)])
    assert recall >= min_recall
    params = built[kind]["shards"][0]["params"]
    assert params["kind"] == kind
    if kind.startswith("ivf"):
        assert params["nlist"] <= params["train_size"] // 39 and params["training"]["sample_seed"] == [0, 0]
        assert built[kind]["shards"][1]["params"]["training"]["sample_seed"] == [0, 1]
    if kind == "ivf-pq":
        assert params["factory"].endswith("Refine(SQfp16)") and 32 % params["pq_m"] == 0
        assert sum(shard_bytes(r) for r in built[kind]["shards"]) < 3000 * 32 * 4  # smaller than the float32 vectors
        assert all(r["refine_file"].startswith("refine/") for r in built[kind]["shards"])


@pytest.mark.parametrize("refine", ["fp16", "sq8", "flat", "none"])
def test_every_re_ranking_store_kind_is_split_and_searched_as_faiss_builds_it(tmp_path, refine):
    vectors = clustered(3000, 32, seed=5)
    name_ids = np.arange(3000, dtype=np.int64)
    spec = IndexSpec(kind="ivf-pq", refine=refine)
    built = build_shard(0, 1, name_ids, [f"C{i}" for i in name_ids], vectors, spec, 32)
    stem = "shard-00000-of-00001"
    split = {f"refine/{stem}.faiss"} if refine != "none" else set()
    assert set(built.files) == {f"shards/{stem}.faiss", f"id_maps/{stem}.parquet"} | split
    for relative, data in built.files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(data)
    record = built.record
    shard = Shard(
        0,
        faiss.read_index(str(tmp_path / record["index_file"]), faiss.IO_FLAG_MMAP_IFC),
        name_ids,
        None,
        record["params"],
        tmp_path / record["refine_file"] if refine != "none" else None,
    )
    reference, _ = bioel_index.build_index(vectors, spec, (0,))
    queries = clustered(50, 32, seed=6)
    D, I = shard.search(queries, 10)
    D_ref, I_ref = reference.search(queries, 10)
    np.testing.assert_array_equal(I, I_ref)
    np.testing.assert_array_equal(D, D_ref)


def test_a_separate_re_ranking_store_answers_as_faiss_index_refine_and_is_unmapped_after_each_search(approximate):
    """The reference: FAISS's own IndexRefine built in memory from the same shard rows; the store file must
    not stay mapped once a search is over (only the IVF-PQ part does)."""
    root, queries, built, _ = approximate
    index, folder = ShardedIndex(root / "ivf-pq"), data_root(root / "ivf-pq")
    emb = read_table(built["ivf-pq"]["embeddings"]["path"], "embeddings")
    vectors, name_ids = vectors_of(emb.column("vector"), 32), emb.column("name_id").to_numpy()
    q = np.ascontiguousarray(queries / np.linalg.norm(queries, axis=1, keepdims=True), dtype=np.float32)
    for shard, record in zip(index.shards, built["ivf-pq"]["shards"]):
        mine = np.nonzero(shard_of(name_ids, 2) == shard.number)[0]
        mine = mine[np.argsort(name_ids[mine])]  # a shard's rows are in name_id order
        reference, params = bioel_index.build_index(vectors[mine], IndexSpec(kind="ivf-pq"), (shard.number,))
        assert params == record["params"]
        D, I = shard.search(q, 10)
        D_ref, I_ref = reference.search(q, 10)
        np.testing.assert_array_equal(I, I_ref)
        np.testing.assert_array_equal(D, D_ref)
        np.testing.assert_array_equal(shard.stored_vectors(I[0]), reference.reconstruct_batch(I[0]))
    index.search(queries, 10, exact_scores=True)
    mapped = open("/proc/self/maps").read()
    assert str(folder / "shards") in mapped and str(folder / "refine") not in mapped


def test_search_parameters_can_be_overridden_at_open(approximate):
    root, queries, _, truth = approximate
    one_list = ShardedIndex(root / "ivf-flat", nprobe=1)
    assert all(s.index.nprobe == 1 for s in one_list.shards)
    wide = ShardedIndex(root / "ivf-flat", nprobe=10_000, threads=1)
    assert (wide.search(queries, 10).name_ids == truth).mean() > 0.99  # every list probed: exact up to ties


def test_small_ivf_shards_are_built_flat_and_say_so():
    params = IndexSpec(kind="ivf-pq").resolve(500, 32)
    assert params == {"kind": "flat", "factory": "Flat", "requested": "ivf-pq"}
    big = IndexSpec(kind="ivf-pq").resolve(1_000_000, 384)
    assert big["nlist"] == 4096 and big["nprobe"] == 64 and big["pq_m"] == 48 and big["pq_nbits"] == 8
    assert big["factory"] == "IVF4096,PQ48x8np,Refine(SQfp16)" and big["refine_k"] == 16
    with pytest.raises(ValueError, match="does not divide"):
        IndexSpec(kind="ivf-pq", pq_m=7).resolve(5000, 32)


def copy_index(ties, tmp_path):
    return shutil.copytree(ties[0] / "flat", tmp_path / "copy")


def test_missing_shard_is_named(ties, tmp_path):
    folder = copy_index(ties, tmp_path)
    (data_root(folder) / "shards/shard-00002-of-00004.faiss").unlink()
    with pytest.raises(FileNotFoundError, match="shard-00002-of-00004.faiss"):
        ShardedIndex(folder)


def test_corrupted_shard_fails_its_checksum_unless_verify_is_off(ties, tmp_path):
    folder = copy_index(ties, tmp_path)
    path = data_root(folder) / "shards/shard-00001-of-00004.faiss"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x40  # a vector value, not the header: the file still loads
    path.write_bytes(bytes(data))
    with pytest.raises(IndexIntegrityError, match="shard-00001-of-00004.faiss: sha256"):
        ShardedIndex(folder)
    assert ShardedIndex(folder, verify=False).ntotal == 600


def test_wrong_dimension_is_refused(ties, tmp_path):
    with pytest.raises(ValueError, match="16-d"):
        ShardedIndex(ties[0] / "flat").search(np.ones((2, 8), np.float32), 3)
    folder = copy_index(ties, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["index"]["dimension"] = 32
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexIntegrityError, match="dimension 16, the manifest says 32"):
        ShardedIndex(folder)
    (folder / "manifest.json").unlink()
    with pytest.raises(IncompleteOutputError):
        ShardedIndex(folder)


def test_two_worker_processes_and_reruns_write_identical_shards(ties, tmp_path):
    root = ties[0]
    again = build(root / "emb", tmp_path / "again", shards=4)
    multi = build(root / "emb", tmp_path / "multi", shards=4, extra=MULTI)
    first = shard_files(root / "flat")
    assert shard_files(tmp_path / "again") == first == shard_files(tmp_path / "multi")
    assert again["shards"] == ties[3]["shards"] == multi["shards"]
    assert multi["options"]["direct_num_workers"] == 2 and multi["index"]["faiss_threads"] == 1
    # the rows reached the builders through spill files, all removed: a generation holds the tables only
    for folder in (root / "flat", tmp_path / "again", tmp_path / "multi"):
        assert sorted(p.name for p in data_root(folder).iterdir() if p.is_dir()) == sorted(FOLDERS)


def test_ivf_rerun_gives_identical_files(approximate, tmp_path):
    root = approximate[0]
    build(root / "emb", tmp_path / "ivf", "ivf-flat", shards=2)
    assert shard_files(tmp_path / "ivf") == shard_files(root / "ivf-flat")


def test_killed_run_leaves_nothing_complete_and_a_rerun_finishes(ties, tmp_path, monkeypatch):
    out = tmp_path / "idx"

    def explode(*_a, **_k):
        raise RuntimeError("worker died")

    with monkeypatch.context() as m:
        m.setattr(build_index, "read_stats", explode)
        with pytest.raises(RuntimeError):
            build(ties[0] / "emb", out, shards=4)
    assert_unpublished(out)
    killed = out / "gen-20261124T000000Z-deadbeef0000" / "shards"  # what a SIGKILL leaves: a generation, no manifest
    killed.mkdir(parents=True)
    (killed / "shard-00000-of-00004.faiss").write_bytes(b"half written")
    with pytest.raises(IncompleteOutputError):
        ShardedIndex(out)
    build(ties[0] / "emb", out, shards=4)
    assert_published(out)
    assert ShardedIndex(out).ntotal == 600


def test_shards_no_name_hashed_to_are_empty_but_present(tmp_path):
    vectors = sign_vectors(5, 16, seed=6)
    emb, ids = kb_folders(tmp_path, vectors)
    manifest = build(emb, tmp_path / "idx", "hnsw", shards=8)
    assert [r["vectors"] for r in manifest["shards"]].count(0) >= 3 and manifest["vectors"] == 5
    got = ShardedIndex(tmp_path / "idx").search(vectors, 2)
    assert got.name_ids[:, 0].tolist() == ids.tolist()


def test_refusals_before_any_work(tmp_path):
    vectors = sign_vectors(30, 16, seed=5)
    emb, ids = kb_folders(tmp_path / "kb", vectors)
    out = tmp_path / "out"

    def refused(match, folder=emb, **kw):
        with pytest.raises((ValueError, IncompleteOutputError), match=match):
            build_index.run(
                str(folder),
                str(out),
                pipeline_options([]),
                num_shards=kw.get("shards", 2),
                spec=IndexSpec(kind=kw.get("kind", "flat"), pq_m=kw.get("pq_m")),
            )
        assert not out.exists()

    refused("at least 1", shards=0)
    refused("does not divide", kind="ivf-pq", pq_m=5)
    refused("not by `bioel embed`", folder=tmp_path / "kb" / "names")
    manifest = json.loads((emb / "manifest.json").read_text())
    (emb / "manifest.json").write_text(json.dumps({**manifest, "schema_version": "0.9"}))
    refused("schema version 0.9")
    (emb / "manifest.json").write_text(json.dumps({**manifest, "complete": False}))
    refused("incomplete")
    (emb / "manifest.json").write_text(json.dumps(manifest))
    wide = embeddings_schema(8)
    pq.write_table(
        pa.Table.from_arrays(
            [
                pa.array([1], pa.int64()),
                pa.array(["D000001"]),
                pa.FixedSizeListArray.from_arrays(pa.array(np.ones(8, np.float32)), 8),
            ],
            schema=wide,
        ),
        emb / "embeddings/part-00009-of-00010.parquet",
    )
    refused("mixed dimension")
    for f in (emb / "embeddings").glob("*.parquet"):
        pq.write_table(embeddings_schema(16).empty_table(), f)
    refused("empty")


def test_quality_passes_on_a_good_index_and_fails_on_a_tampered_id_map(ties, tmp_path):
    folder = copy_index(ties, tmp_path)
    summary = report(folder)
    assert summary["passed"] and summary["critical_failures"] == 0 and summary["pipeline"] == "build-index"
    assert summary["stats"]["vectors"] == summary["stats"]["embeddings_rows"] == 600
    page = report_page(summary)
    assert report_figures(page)["vectors"] == "600" and page.count("<svg") == 1 and "Vectors per shard" in page
    assert sum(summary["stats"]["shard_vectors"].values()) == 600 and len(summary["stats"]["shard_vectors"]) == 4

    path = data_root(folder) / "id_maps/shard-00003-of-00004.parquet"
    table = pq.read_table(path)
    name_ids = table.column("name_id").to_numpy().copy()
    name_ids[0] = 42  # an id the names table does not have, and not of this shard
    name_ids[1] = pq.read_table(data_root(folder) / "id_maps/shard-00000-of-00004.parquet").column("name_id")[0].as_py()
    pq.write_table(table.set_column(0, "name_id", pa.array(name_ids, pa.int64())), path)
    failed = {(c["table"], c["column"], c["expectation"]) for c in report(folder)["checks"] if not c["success"]}
    assert ("id_map", "unknown_name_id", "expect_column_values_to_be_null") in failed
    assert ("id_map", "name_id", "expect_column_values_to_be_unique") in failed
    assert ("id_map", "misplaced_name_id", "expect_column_values_to_be_null") in failed
    assert ("shards", "checksums_match", "expect_column_values_to_be_in_set") in failed
    assert not report(folder)["passed"]


def test_quality_counts_vectors_against_the_embeddings_table(ties, tmp_path):
    folder = copy_index(ties, tmp_path)
    path = data_root(folder) / "id_maps/shard-00000-of-00004.parquet"
    pq.write_table(pq.read_table(path).slice(1), path)
    failed = {(c["table"], c["expectation"]) for c in report(folder)["checks"] if not c["success"]}
    assert ("id_map", "expect_table_row_count_to_equal") in failed
    assert ("shards", "expect_column_pair_values_to_be_equal") in failed


def test_cli_build_index(ties, tmp_path, capsys):
    emb = str(ties[0] / "emb")
    assert (
        cli.main(
            [
                "build-index",
                "--input",
                emb,
                "--output",
                str(tmp_path / "i"),
                "--num-shards",
                "2",
                "--index-kind",
                "hnsw",
                "--ef-search",
                "50",
                "--faiss-threads",
                "1",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "indexed 600 vectors (hnsw, dim 16) in 2 shards" in out and "quality PASSED" in out
    assert err.startswith("build-index: 600 vectors, 2 shards in ") and err.endswith(" vectors/s)\n")
    assert ShardedIndex(tmp_path / "i").shards[0].params["ef_search"] == 50
    code = cli.main(["build-index", "--input", emb, "--output", str(tmp_path / "j"), "--num-shards", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "bioel build-index: error: --num-shards: must be at least 1, got 0"


# ---- the dense linker over an index folder --------------------------------------------------------------

PAIRS = [
    ("D001943", "breast cancer"),
    ("D001943", "breast carcinoma"),
    ("D010051", "ovarian cancer"),
    ("D001260", "ataxia telangiectasia"),
    ("D001260", "louis bar syndrome"),
    ("D003110", "colon cancer"),
    ("D015179", "colon cancer"),
    ("D015179", "colorectal neoplasm"),
]


@pytest.fixture(scope="module")
def encoder():
    torch = pytest.importorskip("torch")
    models = pytest.importorskip("bioel_core.models")
    torch.manual_seed(0)
    try:
        return models.ResCNNEncoder(num_blocks=1, filters=16, width=32)
    except FileNotFoundError as err:
        pytest.skip(str(err))


def test_dense_linker_over_a_flat_index_answers_as_the_in_memory_one(encoder, tmp_path):
    from bioel_core.linking import NameSet, load_linker
    from bioel_core.linking.dense import DenseLinker

    model_dir = encoder.save(tmp_path / "model")
    ids = [name_id("medic", c, n) for c, n in PAIRS]
    names_dir = write_names(
        tmp_path / "names", ids, [c for c, _ in PAIRS], [n for _, n in PAIRS], alt_ids={"D001260": ["208900"]}
    )
    vectors = encoder.encode([n for _, n in PAIRS])
    emb = write_embeddings(
        tmp_path / "emb",
        names_dir,
        ids,
        [c for c, _ in PAIRS],
        vectors,
        fingerprint=encoder.fingerprint(),
        model_path=str(model_dir),
    )
    build(emb, tmp_path / "idx", shards=3)

    names = NameSet.from_names_table(names_dir)
    memory = DenseLinker(names, encoder, str(model_dir))
    indexed = DenseLinker.from_index(tmp_path / "idx", encoder=encoder)
    queries = ["breast tumour", "ovary cancer", "bar syndrome louis", "colon cancer", "neoplasm of the colon"]
    for k in (1, 3, 8):
        got, want = indexed.link(queries, k=k), memory.link(queries, k=k)
        assert [[(c.concept_ids, c.name) for c in cs] for cs in got] == [[(c.concept_ids, c.name) for c in cs] for cs in want]
        assert [c.score for cs in got for c in cs] == pytest.approx([c.score for cs in want for c in cs], abs=1e-5)

    again = load_linker(indexed.save(tmp_path / "saved"))
    assert again.shards is not None and again.link(queries, k=3) == indexed.link(queries, k=3)
    assert DenseLinker.from_index(tmp_path / "idx").link(queries, k=3) == indexed.link(queries, k=3)  # model from the manifest

    other = type(encoder)(num_blocks=1, filters=8, width=32)
    with pytest.raises(ModelMismatchError, match="fingerprint"):
        DenseLinker.from_index(tmp_path / "idx", names, other)


def test_the_scale_benchmarks_streamed_exact_search_equals_brute_force():
    # benchmarks/index_scale.py --through-build-index scores recall against this streamed reference
    from benchmarks.index_scale import clustered_vectors, exact_top_k, mention_queries

    base = clustered_vectors(250_000, 16, seed=3)  # three generator chunks
    queries = mention_queries(base, 20, seed=3)
    found = exact_top_k(250_000, 16, 3, queries, 5)
    truth = np.argsort(-(queries @ base.T), axis=1, kind="stable")[:, :5]
    assert all(set(f) == set(t) for f, t in zip(found.tolist(), truth.tolist()))


@pytest.mark.parametrize("kind", ["ivf-flat", "ivf-pq"])
def test_an_ivf_shard_is_the_same_whatever_the_faiss_threads(kind):
    """k-means sums each thread's part of the sample: trained on the caller's FAISS threads, an IVF shard differed
    between build-index in process (a thread per core), with two workers (one thread each) and on another machine.
    (At this size, 1,024 lists trained on 51,200 vectors; the clustered fixtures above are too small to show it.)"""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(200, 64)).astype(np.float32)
    vectors = (centres[rng.integers(0, 200, 60_000)] + 0.3 * rng.normal(size=(60_000, 64))).astype(np.float32)
    ids = np.arange(len(vectors), dtype=np.int64)
    concepts = [f"D{i:06d}" for i in ids]
    before = faiss.omp_get_max_threads()
    built = []
    try:
        for threads in (1, 2, 3):
            faiss.omp_set_num_threads(threads)
            built.append(build_shard(0, 1, ids, concepts, vectors, IndexSpec(kind=kind), 64).files)
    finally:
        faiss.omp_set_num_threads(before)
    assert built[0] == built[1] == built[2]
