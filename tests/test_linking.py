"""Linkers: the interface, exact and TF-IDF linking, save/load without pickle, the registry, name sources."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bioel_core.corpora import Candidate, Mention, read_query_folder
from bioel_core.evaluation import evaluate
from bioel_core.linking import (
    LINKERS,
    Linker,
    NameSet,
    available_linkers,
    build_linker,
    linker_class,
    load_linker,
    register_linker,
)
from bioel_core.linking.exact import NameIndex
from bioel_core.normalize import Normalizer, name_id
from schemas import TABLE_SCHEMAS

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpora"
DICTIONARY = FIXTURES / "biosyn" / "test_dictionary.txt"
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared benchmark data not found at {DATA}")


@pytest.fixture(scope="module")
def names():
    return NameSet.from_biosyn(DICTIONARY)


def test_nameset_from_biosyn_normalizes_strips_ids_and_drops_duplicates(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("D1||Breast-Cancer\nD1||breast cancer\n D2|123||Wilson's disease\nD3||breast cancer\n")
    ns = NameSet.from_biosyn(path)
    assert ns.names == ["breast cancer", "wilson s disease", "breast cancer"]
    assert ns.concept_ids == [("D1",), ("D2", "123"), ("D3",)]


def test_exact_linker_returns_every_entry_of_the_name_in_order(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("D1||breast cancer\nD2||breast neoplasm\nD3||Breast cancer\n")
    linker = build_linker("exact", NameSet.from_biosyn(path))
    out = linker.link(["Breast  Cancer", "unknown", Mention("breast-neoplasm")], k=5)
    assert [[c.concept_ids for c in cands] for cands in out] == [[("D1",), ("D3",)], [], [("D2",)]]
    assert linker.link(["breast cancer"], k=1)[0][0].score == 1.0 and len(linker.link(["breast cancer"], k=1)[0]) == 1


def test_tfidf_ranks_nearest_names_with_exact_matches_first(names):
    linker = build_linker("tfidf", names)
    (wilsons, hemorrhagic, exact) = linker.link(["Wilsons disease", "hemorrhagic", "breast cancer"], k=3)
    assert wilsons[0].name == "wilson disease" and wilsons[0].concept_ids == ("D006527", "277900")
    assert 0 < wilsons[0].score < 1 and [c.score for c in wilsons] == sorted((c.score for c in wilsons), reverse=True)
    assert hemorrhagic[0].name == "hemorrhage"
    assert exact[0].name == "breast cancer" and exact[0].score == 1.0
    assert len({c.name for c in exact}) == len(exact) == 3  # the exact name is not repeated by the search


def test_a_mention_with_nothing_left_once_normalized_gets_no_candidate(names):
    # searched, the empty query got the name nearest the empty string (the dense linker: 'disease' at 0.63)
    class Nearest(Linker):  # like a dense linker: every query it is asked gets a nearest name
        def search(self, queries, k):
            self.asked += queries
            return [[Candidate(("D1",), "disease", 0.63)] for _ in queries]

        @classmethod
        def build(cls, names, **options):
            linker = cls(names)
            linker.asked = []
            return linker

    linker = Nearest.build(names)
    found = linker.link(["-", "breast cancer", "", "()", Mention("  "), "gout"], k=2, batch_size=1)
    assert [len(c) for c in found] == [0, 1, 0, 0, 0, 1]
    assert linker.asked == ["breast cancer", "gout"]


def test_tfidf_k_and_queries_without_any_shared_ngram(names):
    linker = build_linker("tfidf", names)
    assert [len(c) for c in linker.link(["delirium", "zzzz", "disease"], k=2)] == [2, 0, 2]
    with pytest.raises(ValueError, match="k must be at least 1"):
        linker.link(["x"], k=0)


def test_context_expands_abbreviations_before_linking(names):
    linker = build_linker("exact", names)
    context = "Patients with copper toxicosis (CT) were seen."
    assert linker.link(["CT"], k=1) == [[]]
    assert linker.link(["CT", "CT"], k=1, contexts=[context, None])[0][0].concept_ids == ("215600",)
    assert linker.link(["CT", "CT"], k=1, contexts=[context, None])[1] == []


@pytest.mark.parametrize("kind, options", [("exact", {}), ("tfidf", {}), ("tfidf", {"analyzer": "char", "ngram_range": (2, 3)})])
def test_save_and_load_give_the_same_answers_without_pickle(tmp_path, names, kind, options):
    linker = build_linker(kind, names, **options)
    queries = ["wilsons disease", "breast cancer", "memory impairment", "delirium"]
    linker.save(tmp_path / "linker")
    loaded = load_linker(tmp_path / "linker")
    assert type(loaded) is type(linker) and loaded.options() == linker.options()
    assert loaded.link(queries, k=4) == linker.link(queries, k=4)
    config = json.loads((tmp_path / "linker" / "config.json").read_text())
    assert config["linker"] == kind and config["normalizer"]["version"] == Normalizer().version
    for npz in (tmp_path / "linker").glob("*.npz"):
        with zipfile.ZipFile(npz) as z:  # every member a plain array: loadable with allow_pickle=False
            assert all(name.endswith(".npy") for name in z.namelist())
        with np.load(npz, allow_pickle=False) as arrays:
            assert all(arrays[k].dtype != object for k in arrays.files)


def test_load_refuses_an_unfinished_or_other_folder(tmp_path, names):
    with pytest.raises(FileNotFoundError, match="not a saved linker"):
        load_linker(tmp_path)
    build_linker("exact", names).save(tmp_path / "exact")
    with pytest.raises(ValueError, match="holds a 'exact' linker"):
        linker_class("tfidf").load(tmp_path / "exact")


def test_registry_lists_and_plugs_in_linkers(names):
    assert {"exact", "tfidf"} <= set(available_linkers())
    with pytest.raises(ValueError, match="unknown linker 'nope'"):
        build_linker("nope", names)
    with pytest.raises(ValueError, match="unknown tfidf options"):
        build_linker("tfidf", names, window=3)
    register_linker("exact-again", "bioel_core.linking.exact:ExactLinker")
    try:
        assert isinstance(build_linker("exact-again", names), Linker)
    finally:
        del LINKERS["exact-again"]


WILSON_ROWS = [("D006527", "Wilson Disease"), ("D006527", "Hepatolenticular Degeneration"), ("D003693", "Delirium")]
CONCEPTS = {"D006527": ("Wilson Disease", ["OMIM:277900"]), "D003693": ("Delirium", [])}


def _write_names_table(folder: Path, rows=WILSON_ROWS, concepts=CONCEPTS) -> None:
    """A minimal finished ingest-kb output: concepts + names shards and a complete manifest; `rows`: (concept id,
    name), in the table's order; `concepts`: concept id -> (preferred name, alt ids)."""
    norm = Normalizer()
    (folder / "concepts").mkdir(parents=True)
    (folder / "names").mkdir()
    concept_table = pa.table(
        {
            "concept_id": list(concepts),
            "vocabulary": ["MESH"] * len(concepts),
            "kb": ["medic"] * len(concepts),
            "preferred_name": [p for p, _ in concepts.values()],
            "semantic_types": [[] for _ in concepts],
            "definition": [None for _ in concepts],
            "alt_ids": [a for _, a in concepts.values()],
        },
        schema=TABLE_SCHEMAS["concepts"],
    )
    names = pa.table(
        {
            "name_id": [name_id("medic", c, norm(n)) for c, n in rows],
            "concept_id": [c for c, _ in rows],
            "kb": ["medic"] * len(rows),
            "name": [n for _, n in rows],
            "name_norm": [norm(n) for _, n in rows],
            "name_type": ["preferred" if n == concepts.get(c, (n,))[0] else "synonym" for c, n in rows],
        },
        schema=TABLE_SCHEMAS["names"],
    )
    pq.write_table(concept_table, folder / "concepts" / "part-00000-of-00001.parquet")
    pq.write_table(names, folder / "names" / "part-00000-of-00001.parquet")
    (folder / "manifest.json").write_text(json.dumps({"complete": True, "normalizer": norm.to_dict()}))


def test_nameset_from_names_table_uses_concept_and_alt_ids(tmp_path):
    _write_names_table(tmp_path / "kb")
    ns = NameSet.load(tmp_path / "kb")
    assert ns.names == ["wilson disease", "hepatolenticular degeneration", "delirium"]
    assert ns.concept_ids[0] == ("D006527", "OMIM:277900") and ns.concept_ids[2] == ("D003693",)
    (cands,) = build_linker("tfidf", ns).link(["Hepatolenticular degenerations"], k=1)
    assert cands[0].concept_ids == ("D006527", "OMIM:277900")


def test_nameset_from_names_table_is_from_pairs_over_the_rows_with_one_id_tuple_a_concept(tmp_path):
    """Rows repeating a (name, concept) once normalized are kept once; a name two concepts share stays with both, in
    the table's order; a concept the concepts table lacks keeps its id alone; and the names of a concept hold one
    shared id tuple (what keeps a UMLS-size NameSet small), whose entries the exact index finds by name."""
    rows = [
        ("D006527", "Wilson Disease"),
        ("D003693", "Delirium"),
        ("D006527", "Wilson's disease"),
        ("D006527", "wilson disease"),
        ("D000001", "Delirium"),
        ("D006527", "Hepatolenticular Degeneration"),
    ]
    _write_names_table(tmp_path / "kb", rows)
    got = NameSet.from_names_table(tmp_path / "kb")
    alt = {c: tuple(a) for c, (_, a) in CONCEPTS.items()}
    norm = Normalizer()
    want = NameSet.from_pairs(((norm(n), (c, *alt.get(c, ()))) for c, n in rows), norm, normalized=True)
    assert (got.names, got.concept_ids) == (want.names, want.concept_ids)
    assert got.names == ["wilson disease", "delirium", "wilson s disease", "delirium", "hepatolenticular degeneration"]
    assert got.concept_ids[3] == ("D000001",)
    assert got.concept_ids[0] is got.concept_ids[2] is got.concept_ids[4] == ("D006527", "OMIM:277900")
    index = NameIndex(got)
    assert index.row_names == ["wilson disease", "delirium", "wilson s disease", "hepatolenticular degeneration"]
    assert [index.entries(r) for r in range(4)] == [[0], [1, 3], [2], [4]]
    assert index.entries_of("delirium") == [1, 3] and index.entries_of("typhus") == []
    assert [c.concept_ids for c in index.candidates(got, "delirium", 5)] == [("D003693",), ("D000001",)]


@needs_data
@pytest.mark.parametrize("dataset, n, at_least", [("ncbi-disease", 960, 86.5), ("bc5cdr-disease", 4287, 91.5)])
def test_tfidf_calibrates_on_the_shared_test_sets(dataset, n, at_least):
    """A plain char 3-gram TF-IDF nearest name: about 87 (NCBI) / 92 (BC5CDR) acc@1 under the BioSyn protocol."""
    names = NameSet.from_biosyn(DATA / dataset / "test_dictionary.txt")
    scores, _ = evaluate(build_linker("tfidf", names), read_query_folder(DATA / dataset / "processed_test"), k=5)
    assert scores["n"] == n
    assert at_least <= scores["acc@1"] <= 95.0
    assert scores["acc@5"] >= scores["acc@1"]
