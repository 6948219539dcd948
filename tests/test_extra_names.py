"""Extra names (bioel_core.kb.extra_names): the file format, their ingest into a KB of any format (a name whose
concept the KB lacks dead-lettered), their concept first among those sharing a name, and the synonyms learned from
an annotated corpus (bioel_core.text.synonyms) in that format."""

import gzip
import json

import pytest

from bioel_core.corpora import read_pubtator
from bioel_core.kb.extra_names import ExtraName, id_pattern_with, made_kind, new_concept, read_extra_names, resolve
from bioel_core.kb.io import ReaderContext
from bioel_core.names import NameSet
from bioel_core.normalize import Normalizer
from bioel_core.settings import IngestSettings, SettingsError, from_mapping
from bioel_core.tables import read_manifest, read_table
from bioel_core.text.detect import StopList
from bioel_core.text.synonyms import learn_synonyms
from conftest import FIXTURES
from pipelines import cli, ingest_kb
from pipelines.options import pipeline_options

MEDIC_RAW = str(FIXTURES / "biosyn/medic_raw.txt")
EXTRA = FIXTURES / "extra_names"


def read_all(path) -> tuple[list, ReaderContext]:
    ctx = ReaderContext(str(path))
    return list(read_extra_names(str(path), ctx)), ctx


def test_an_extra_names_file_skips_comments_and_dead_letters_lines_without_a_concept_or_name():
    items, ctx = read_all(EXTRA / "medic_extra.tsv")
    names = [(i.line, i.concept_id, i.name) for i in items if isinstance(i, ExtraName)]
    assert names == [
        (4, "D001260", "A-T"),
        (5, "MESH:C565588", "EB with diaphragmatic hernia"),
        (6, "OMIM:613097", "STHAG six"),
        (7, "D009203", "myocardial infarction"),
        (10, "C567755", "Louis-Bar Syndrome"),
    ]
    dead = [(d.location, d.reason) for d in items if not isinstance(d, ExtraName)]
    assert dead == [("line 8", "'-1' says no concept: a name needs one"), ("line 9", "no name in this line")]
    # names are counted read only: accepted or dead-lettered where their concept is looked up
    assert (ctx.stats.records_read, ctx.stats.records_accepted, ctx.stats.dead_lettered) == (7, 0, 2)


def test_a_file_without_the_header_is_one_dead_letter_and_a_gzipped_one_is_read(tmp_path):
    items, ctx = read_all(EXTRA / "wrong_header.tsv")
    assert len(items) == 1 and items[0].unread and "header must name" in items[0].reason
    assert (ctx.stats.records_read, ctx.stats.dead_lettered) == (1, 1)
    packed = tmp_path / "extra.tsv.gz"
    packed.write_bytes(gzip.compress((EXTRA / "medic_extra.tsv").read_bytes()))
    assert [i.name for i in read_all(packed)[0] if isinstance(i, ExtraName)][0] == "A-T"
    (tmp_path / "bad.tsv").write_bytes(b"concept_id\tname\nD001260\t\xff\xfe\n")
    (dead,), _ = read_all(tmp_path / "bad.tsv")
    assert dead.location == "line 2" and dead.reason.startswith("invalid UTF-8")


def test_a_name_goes_to_its_concept_else_the_one_concept_with_it_as_alt_id():
    assert resolve("D001260", [("D001260", "medic", False), ("D001260", "medic", False)]) == ("D001260", "medic")
    # its own id wins over an alt id of another concept
    assert resolve("613097", [("C567755", "medic", True), ("613097", "medic", False)]) == ("613097", "medic")
    assert resolve("613097", [("C567755", "medic", True)]) == ("C567755", "medic")
    assert resolve("613097", [("C1", "medic", True), ("C2", "medic", True)]) == (
        "2 concepts list it as an alt id (C1, C2): which one is unclear"
    )
    assert resolve("D009203", []) == "concept D009203 is not in the KB (neither a concept id nor an alt id)"


def ingest_with_extra_names(out, **options) -> dict:
    """The fixture MEDIC ingested with medic_extra.tsv's names (a reconciled manifest)."""
    manifest = ingest_kb.run(
        "medic-biosyn",
        [MEDIC_RAW],
        str(out),
        pipeline_options([]),
        num_shards=2,
        extra_names=[str(EXTRA / "medic_extra.tsv")],
        **options,
    )
    assert all(manifest["reconciliation"].values())
    return manifest


def test_ingest_adds_extra_names_to_their_concepts_and_dead_letters_the_rest(tmp_path):
    out = tmp_path / "kb"
    manifest = ingest_with_extra_names(out)
    extra = {(r["concept_id"], r["name"]) for r in read_table(out, "names").to_pylist() if r["name_type"] == "extra"}
    assert extra == {
        ("D001260", "A-T"),
        ("C565588", "EB with diaphragmatic hernia"),  # MESH:C565588: the bare id of the concept
        ("C567755", "STHAG six"),  # OMIM:613097, an alt id of C567755
        ("C567755", "Louis-Bar Syndrome"),
    }
    dead = {(d["source"].rsplit("/", 1)[-1], d["location"], d["reason"]) for d in read_table(out, "dead_letter").to_pylist()}
    assert dead == {
        ("medic_extra.tsv", "line 7", "concept D009203 is not in the KB (neither a concept id nor an alt id)"),
        ("medic_extra.tsv", "line 8", "'-1' says no concept: a name needs one"),
        ("medic_extra.tsv", "line 9", "no name in this line"),
    }
    (file_in,) = [i for i in manifest["inputs"] if i["path"].endswith("medic_extra.tsv")]
    assert (file_in["records_read"], file_in["records_accepted"], file_in["dead_lettered"]) == (7, 4, 3)
    assert file_in["sha256"] and read_manifest(out)["extra_names"] == [file_in["path"]]
    # the name the KB gives D001260 and the file C567755 links first to C567755
    names = NameSet.from_names_table(out)
    assert [ids[0] for n, ids in zip(names.names, names.concept_ids) if n == "louis bar syndrome"] == ["C567755", "D001260"]


def test_with_add_missing_concepts_a_name_of_an_id_the_kb_lacks_makes_that_concept(tmp_path):
    """medic_extra.tsv's "myocardial infarction" (D009203, which the fixture KB lacks) makes its concept; the other
    names go to their concepts as before, the lines that name no concept stay dead letters."""
    out = tmp_path / "kb"
    manifest = ingest_with_extra_names(out, add_missing_concepts=True)
    assert manifest["counts"]["concepts"]["made_from_extra_names"] == 1 and manifest["add_missing_concepts"] is True
    made = [c for c in read_table(out, "concepts").to_pylist() if c["concept_id"] == "D009203"]
    assert [(c["vocabulary"], c["kb"], c["preferred_name"], c["alt_ids"]) for c in made] == [
        ("MESH", "medic", "myocardial infarction", [])
    ]
    extra = {(r["concept_id"], r["name"]) for r in read_table(out, "names").to_pylist() if r["name_type"] == "extra"}
    assert ("D009203", "myocardial infarction") in extra and len(extra) == 5
    assert [d["location"] for d in read_table(out, "dead_letter").to_pylist()] == ["line 8", "line 9"]
    (file_in,) = [i for i in manifest["inputs"] if i["path"].endswith("medic_extra.tsv")]
    assert (file_in["records_read"], file_in["records_accepted"], file_in["dead_lettered"]) == (7, 5, 2)


def test_a_concept_is_made_only_of_an_id_of_its_vocabularys_shape():
    """mesh-tsv reads descriptors (D...), yet a supplementary concept (C...) is a MeSH id it may make; an id of no
    MeSH shape, or without a printable name, makes none. A dictionary of a user's own ids keeps its id pattern."""
    from bioel_core.kb import get_reader

    def names(concept_id, *texts):
        return [ExtraName("x.tsv", i + 2, concept_id, t) for i, t in enumerate(texts)]

    mesh = get_reader("mesh-tsv")
    made = new_concept(names("MESH:C000589078", "remimazolam", "remimazolam besylate"), mesh)
    assert (made.concept_id, made.vocabulary, made.kb, made.preferred_name) == ("C000589078", "MESH", "mesh", "remimazolam")
    assert new_concept(names("X12", "thing"), mesh) == (
        r"concept X12 is not in the KB, and no concept is made of it: it is not an id of MESH (pattern [CD](?:\d{6}|\d{9}))"
    )
    assert "has a printable character" in new_concept(names("D066126", "\x07"), mesh)
    # with a scope, a descriptor the thesaurus lacks is one the scope left out: it stays out; a supplementary one is made
    scoped = get_reader("mesh-tsv", scope={"tree_include": ["D"]})
    assert "the entity type's scope left it out" in new_concept(names("D002188", "cannabis"), scoped)
    assert new_concept(names("C000589078", "remimazolam"), scoped).concept_id == "C000589078"
    own = get_reader("biosyn-dict", kb="lab", id_pattern=r"LAB-\d+")
    assert new_concept(names("LAB-7", "lab disease"), own).concept_id == "LAB-7"
    assert "pattern LAB-\\d+" in new_concept(names("LAB7", "lab disease"), own)
    # what the manifest records and the quality checks test: the reader's pattern, or a made vocabulary's shape
    assert id_pattern_with(r"D\d{6,9}", ["MESH", "MESH"]) == r"(?:D\d{6,9})|(?:[CD](?:\d{6}|\d{9}))"
    assert id_pattern_with(r"D\d{6,9}", []) == r"D\d{6,9}" == id_pattern_with(r"D\d{6,9}", ["LOCAL"])


def test_a_composite_id_makes_a_composite_concept_of_one_vocabularys_ids():
    """BC5CDR writes a composite mention's ids one per part ("hemorrhagic cystitis": D006470|D003556); such an id makes
    one concept whose id keeps the parts, each of its vocabulary's shape, and the KB's id pattern admits it."""
    import re

    from bioel_core.kb import get_reader

    def names(concept_id, *texts):
        return [ExtraName("x.tsv", i + 2, concept_id, t) for i, t in enumerate(texts)]

    medic = get_reader("medic-biosyn")
    made = new_concept(names("MESH:D006470|D003556", "hemorrhagic cystitis"), medic)
    assert (made.concept_id, made.vocabulary, made.preferred_name) == ("D006470|D003556", "MESH", "hemorrhagic cystitis")
    assert made_kind(made) == "composite.MESH"
    # parts of two vocabularies, or a part of no vocabulary's shape: no concept
    assert new_concept(names("D006470|OMIM:116800", "x"), medic).endswith("one per part")
    assert "is not an id of" in new_concept(names("D006470|X1", "x"), medic)
    # the scope's rule is for one id of the dump's kind; a composite's parts are read for their shape only
    scoped = get_reader("mesh-tsv", scope={"tree_include": ["D"]})
    assert new_concept(names("D014527|D012492", "uric acid salts"), scoped).concept_id == "D014527|D012492"
    pattern = re.compile(id_pattern_with(medic.id_pattern.pattern, ["composite.MESH"]))
    assert pattern.fullmatch("D006470|D003556") and pattern.fullmatch("D006470|D003556|D001749")
    assert pattern.fullmatch("D006470") and not pattern.fullmatch("D006470|") and not pattern.fullmatch("D006470|X1")


@pytest.fixture(scope="module")
def medic_kb(tmp_path_factory):
    out = tmp_path_factory.mktemp("medic") / "kb"
    ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(out), pipeline_options([]), num_shards=2)
    return out


def test_ingest_without_extra_names_keeps_the_table_order(medic_kb):
    """Without extra names the names table's order stands (no name moves ahead of another)."""
    table = read_table(medic_kb, "names", ["name_norm"]).column("name_norm").to_pylist()
    assert NameSet.from_names_table(medic_kb).names == list(dict.fromkeys(table))


def test_an_extra_name_the_kb_also_gives_its_concept_stays_extra():
    """The KB names D001260 "Louis-Bar Syndrome" and so does an extra-names file: the row kept is the extra one, so
    the name still links first to D001260 where another concept shares it."""
    from bioel_core.normalize import name_id

    rows = [
        (name_id("medic", "D001260", "louis bar syndrome"), "D001260", "medic", surface, "louis bar syndrome", kind)
        for surface, kind in (("Louis-Bar Syndrome", "synonym"), ("Louis-Bar syndrome", "extra"), ("Louis Bar", "preferred"))
    ]
    assert ingest_kb.keep_best_name(rows)[5] == "extra"


def test_ingest_kb_cli_takes_extra_names_and_refuses_a_missing_file(tmp_path, capsys):
    """With the quality checks on: `extra` is a name type the names table may hold."""
    args = ["ingest-kb", "--input-format", "medic-biosyn", "--input", MEDIC_RAW, "--output"]
    assert cli.main([*args, str(tmp_path / "kb"), "--extra-names", str(EXTRA / "medic_extra.tsv")]) == 0
    assert "3 dead letters" in capsys.readouterr().out
    assert cli.main([*args, str(tmp_path / "kb2"), "--extra-names", str(tmp_path / "absent.tsv")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "absent.tsv" in err[0] and "no such file" in err[0]


def test_ingest_settings_read_extra_names_as_paths_relative_to_the_file(tmp_path):
    settings = from_mapping(
        IngestSettings, {"format": "medic-biosyn", "dumps": ["m.txt"], "extra_names": ["x.tsv"]}, base=tmp_path
    )
    assert settings.extra_names == [str(tmp_path / "x.tsv")]
    with pytest.raises(SettingsError) as err:
        from_mapping(IngestSettings, {"format": "medic-biosyn", "dumps": ["m.txt"], "add_missing_concepts": True})
    assert err.value.field == "add_missing_concepts" and "needs extra-names files" in str(err.value)
    with pytest.raises(SettingsError) as err:
        from_mapping(IngestSettings, {"format": "medic-biosyn", "dumps": ["m.txt"], "extra_names": "x.tsv"}, base=tmp_path)
    assert err.value.field == "extra_names"


def learned(kb, **rule):
    docs = read_pubtator(str(EXTRA / "train.pubtator"))
    return learn_synonyms(docs, NameSet.from_names_table(kb), entity_types={"Disease"}, learned_from=["train.pubtator"], **rule)


def test_synonyms_are_learned_where_annotators_are_consistent_and_mark_the_text_where_it_stands(medic_kb):
    got = learned(medic_kb)
    # A-T: 4 mentions, all D001260, every occurrence annotated; tooth agenesis: once, a name the KB lacks.
    # Not learned: ataxia-telangiectasia and AT (the KB links them to D001260 already), sthag (half its mentions NIL),
    # hernia (1 of its 4 occurrences annotated)
    assert [(s.concept_id, s.name, s.count, s.share, s.precision) for s in got.synonyms] == [
        ("D001260", "A-T", 4, 1.0, 1.0),
        ("C567755", "tooth agenesis", 1, 1.0, 1.0),
    ]
    assert [s.name for s in learned(medic_kb, min_count=2).synonyms] == ["A-T"]
    assert [s.name for s in learned(medic_kb, min_share=0.5).synonyms] == ["A-T", "sthag", "tooth agenesis"]
    # hernia passes a rule without the precision test, but D009203 is no concept of the KB: counted, not written
    lax = learned(medic_kb, min_precision=0.0)
    assert "hernia" not in [s.name for s in lax.synonyms] and lax.not_in_kb == 1
    # ... unless kept, for an ingest that makes the concepts the KB lacks
    kept = learned(medic_kb, min_precision=0.0, keep_missing=True)
    assert ("D009203", "hernia") in [(s.concept_id, s.name) for s in kept.synonyms] and kept.not_in_kb == 1
    stopped = StopList({"a t": (5, 0)}, normalizer=Normalizer().to_dict())
    docs = read_pubtator(str(EXTRA / "train.pubtator"))
    assert [s.name for s in learn_synonyms(docs, NameSet.from_names_table(medic_kb), stop_list=stopped).synonyms] == [
        "tooth agenesis"
    ]


def test_a_composite_mention_is_learned_as_a_composite_of_the_concepts_the_kb_knows(medic_kb):
    from bioel_core.corpora.records import Document, Mention, Passage

    text = "Two had telangiectasia agenesis syndrome; one had agenesis telangiectasia."
    first, second = "telangiectasia agenesis syndrome", "agenesis telangiectasia"

    def mention(name, ids):
        start = text.index(name)
        return Mention(name, "1", start, start + len(name), "Disease", ids)

    doc = Document(
        "1", [Passage("abstract", 0, text)], [mention(first, ("D001260", "C567755")), mention(second, ("D001260", "D999999"))]
    )
    names = NameSet.from_names_table(medic_kb)
    got = learn_synonyms([doc], names, entity_types={"Disease"}, keep_missing=True)
    # a composite is no concept of the KB: written for an ingest that makes it; one with a part the KB lacks, never
    assert [(s.concept_id, s.name) for s in got.synonyms] == [("D001260|C567755", first)] and got.not_in_kb == 1
    assert learn_synonyms([doc], names, entity_types={"Disease"}).synonyms == []


def test_learned_synonyms_are_an_extra_names_file_with_their_provenance(medic_kb, tmp_path):
    path = tmp_path / "learned.tsv"
    learned(medic_kb).save(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# kind: bioel-learned-synonyms" and "# learned from: train.pubtator" in lines
    assert "concept_id\tname\tcount\tshare\tprecision" in lines
    items, _ = read_all(path)
    assert [(i.concept_id, i.name) for i in items] == [("D001260", "A-T"), ("C567755", "tooth agenesis")]
    out = tmp_path / "kb"
    manifest = ingest_kb.run("medic-biosyn", [MEDIC_RAW], str(out), pipeline_options([]), num_shards=1, extra_names=[str(path)])
    assert manifest["counts"]["dead_lettered"] == 0
    assert json.dumps(manifest).count("learned.tsv") >= 2  # among the inputs, and as the extra names
