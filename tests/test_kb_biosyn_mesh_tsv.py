import gzip

import pytest

from bioel_core.kb import get_reader
from bioel_core.kb.biosyn import MEDIC_ID, BioSynDictionaryReader
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats
from conftest import FIXTURES


def split(items):
    items = list(items)
    by = lambda t: [i for i in items if isinstance(i, t)]  # noqa: E731
    return by(ConceptRecord), by(NameRecord), by(DeadLetter), by(ReadStats)


def test_medic_biosyn_reader_exact_records():
    concepts, names, dead, stats = split(get_reader("medic-biosyn").read([str(FIXTURES / "biosyn/medic_raw.txt")]))
    assert [c.concept_id for c in concepts] == ["C565588", "C567755", "D001260", "C"]
    assert concepts[1] == ConceptRecord(
        "C567755", "medic", "Tooth Agenesis, Selective, 6", alt_ids=("OMIM:613097",), vocabulary="MESH"
    )
    assert [(n.concept_id, n.name, n.name_type) for n in names if n.concept_id == "D001260"] == [
        ("D001260", "Ataxia Telangiectasia", "preferred"),
        ("D001260", "Louis-Bar Syndrome", "synonym"),
        ("D001260", "AT", "synonym"),
    ]
    assert dead == []
    assert stats[0].records_read == 4 and stats[0].reconciles()


def test_biosyn_dictionary_reader_ids_whitespace_and_bad_lines():
    path = str(FIXTURES / "biosyn/dictionary.txt")
    # --id-pattern enforces a scheme: the MEDIC one here
    concepts, names, dead, stats = split(get_reader("biosyn-dict", id_pattern=MEDIC_ID.pattern).read([path]))
    assert [(c.concept_id, c.alt_ids, c.vocabulary) for c in concepts] == [
        ("D001260", ("OMIM:208900",), "MESH"),
        ("D015458", (), "MESH"),
    ]
    assert [n.name for n in names] == ["ataxia telangiectasia", "louis bar syndrome", "t cell leukemia", "leukemia t cell"]
    assert [(d.location, d.source) for d in dead] == [("line 5", path), ("line 6", path)]
    assert "does not match" in dead[0].reason and "||name" in dead[1].reason
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (6, 4, 2)
    # with no pattern any id is taken: 'not-an-id' is an id of the dictionary's own vocabulary
    concepts, _, dead, _ = split(get_reader("biosyn-dict").read([path]))
    assert ("not-an-id", "LOCAL") in [(c.concept_id, c.vocabulary) for c in concepts] and [d.location for d in dead] == ["line 6"]


def test_medic_concept_id_is_the_mesh_id_whatever_the_order(tmp_path):
    # some MEDIC lines list the OMIM id first: the OMIM number became the concept id and the MeSH id an alt id,
    # so 6.6% of BC5CDR disease links were bare OMIM numbers that MeSH gold counts wrong
    path = str(FIXTURES / "biosyn/medic_omim_first.txt")
    concepts, names, dead, _ = split(get_reader("medic-biosyn").read([path]))
    assert dead == []
    assert [(c.concept_id, c.vocabulary, c.alt_ids) for c in concepts] == [
        ("613162", "OMIM", ()),  # OMIM only: an OMIM concept, and it says so
        ("D019082", "MESH", ("OMIM:270400",)),
        ("D001260", "MESH", ("OMIM:208900",)),
        ("C536126", "MESH", ("OMIM:236670",)),
    ]
    assert {n.concept_id for n in names if n.name.startswith("Sjogren")} == {"D019082"}
    # a BioSyn dictionary of MEDIC ids gets the same rule
    dictionary = FIXTURES / "biosyn/dictionary.txt"
    flipped = tmp_path / "flipped.txt"
    flipped.write_text(
        "".join(line.replace("D001260|208900", "208900|D001260") + "\n" for line in dictionary.read_text().splitlines()[:2])
    )
    concepts, _, _, _ = split(BioSynDictionaryReader().read([str(flipped)]))
    assert [(c.concept_id, c.alt_ids) for c in concepts] == [("D001260", ("OMIM:208900",))]


def test_dictionary_of_another_scheme_with_its_declared_vocabulary():
    # a SNOMED CT dictionary was dead-lettered line by line (ids had to be MEDIC-shaped)
    path = str(FIXTURES / "biosyn/snomed_dictionary.txt")
    concepts, names, dead, stats = split(
        get_reader("biosyn-dict", kb="snomed-dict", vocabulary="snomedct", id_pattern=r"(?:SNOMEDCT:)?\d{6,18}").read([path])
    )
    assert dead == [] and stats[0].records_accepted == 4
    assert [(c.concept_id, c.vocabulary, c.alt_ids, c.kb) for c in concepts] == [
        ("22298006", "SNOMEDCT", (), "snomed-dict"),
        ("195967001", "SNOMEDCT", ("SNOMEDCT:304527002",), "snomed-dict"),
        ("38341003", "SNOMEDCT", (), "snomed-dict"),
    ]  # a written SNOMEDCT: prefix is the declared vocabulary's
    assert [(n.concept_id, n.name_type) for n in names][:2] == [("22298006", "preferred"), ("22298006", "synonym")]
    # a pattern still dead-letters what it does not match, naming the line
    _, _, dead, _ = split(get_reader("biosyn-dict", id_pattern=r"C\d{7}").read([path]))
    assert [d.location for d in dead] == ["line 1", "line 2", "line 3", "line 4"] and "C\\d{7}" in dead[0].reason


def test_composite_lines_name_each_of_their_concepts():
    # BioSyn's composite lines (D008581+D012008||recurrent meningitis) were dead-lettered
    path = str(FIXTURES / "biosyn/composite_dictionary.txt")
    concepts, names, dead, stats = split(get_reader("biosyn-dict").read([path]))
    assert dead == [] and (stats[0].records_read, stats[0].records_accepted) == (4, 4)
    assert [(n.concept_id, n.name, n.name_type) for n in names if "recurrent meningitis" in n.name] == [
        ("D008581", "recurrent meningitis", "synonym"),
        ("D012008", "recurrent meningitis", "synonym"),
    ]
    assert [(c.concept_id, c.alt_ids) for c in concepts][2:] == [("D001943", ("OMIM:114480",)), ("D010051", ())]


def test_bad_inputs_become_dead_letters(tmp_path):
    bad_utf8 = tmp_path / "bad.txt"
    bad_utf8.write_bytes(b"D001260||ataxia\nD015458||caf\xe9 au lait\nD009369||tumor\n")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    truncated = tmp_path / "trunc.txt.gz"
    whole = gzip.compress("".join(f"D{i:06d}||name {i}\n" for i in range(5000)).encode())
    truncated.write_bytes(whole[: len(whole) // 2])
    concepts, names, dead, stats = split(get_reader("biosyn-dict").read([str(bad_utf8), str(empty), str(truncated)]))
    reasons = {(d.source.rsplit("/", 1)[-1], d.location): d.reason for d in dead}
    assert reasons[("bad.txt", "line 2")].startswith("invalid UTF-8")
    assert reasons[("empty.txt", "file")] == "empty file"
    assert any(src == "trunc.txt.gz" and "truncated" in r for (src, _), r in reasons.items())
    assert [n.name for n in names[:2]] == ["ataxia", "tumor"]
    assert all(s.reconciles() for s in stats)


def test_gzip_is_transparent(tmp_path):
    gz = tmp_path / "medic.txt.gz"
    gz.write_bytes(gzip.compress((FIXTURES / "biosyn/medic_raw.txt").read_bytes()))
    assert len(split(get_reader("medic-biosyn").read([str(gz)]))[0]) == 4


def test_mesh_tsv_reader_with_trees():
    reader = get_reader("mesh-tsv")
    paths = [str(FIXTURES / "mesh_tsv/thesaurus.tsv"), str(FIXTURES / "mesh_tsv/trees.tsv")]
    assert reader.input_groups(paths) == [paths]
    concepts, names, dead, stats = split(reader.read(paths))
    assert concepts == [
        ConceptRecord("D000001", "mesh", "Calcimycin", semantic_types=("D02.355.291.933.125",), vocabulary="MESH"),
        ConceptRecord("D001260", "mesh", "Ataxia Telangiectasia", semantic_types=("C10.574.500.100",), vocabulary="MESH"),
    ]
    assert [(n.name, n.name_type) for n in names if n.concept_id == "D001260"] == [
        ("Ataxia Telangiectasia", "preferred"),
        ("Louis-Bar Syndrome", "entry_term"),
        ("AT", "abbreviation"),
    ]
    assert dead == [] and all(s.reconciles() for s in stats)


def test_mesh_tsv_filters_permuted_and_dead_letters_bad_rows(tmp_path):
    text = (FIXTURES / "mesh_tsv/thesaurus.tsv").read_text()
    bad = tmp_path / "bad.tsv"
    bad.write_text(text + "X123\tBad\tM1\tT1\tBad\tY\tN\tNON\tY\nD000002\ttoo\tfew\n")
    concepts, names, dead, stats = split(get_reader("mesh-tsv", include_permuted=False).read([str(bad)]))
    assert "A 23187" not in [n.name for n in names]
    assert stats[0].skipped_by_filter == {"permuted term": 1}
    assert [(d.location, d.reason.split(" ")[0]) for d in dead] == [("line 8", "concept"), ("line 9", "expected")]
    assert stats[0].reconciles()


def test_mesh_tsv_tree_scope_keeps_one_branch_and_counts_the_rest():
    paths = [str(FIXTURES / "mesh_tsv/thesaurus.tsv"), str(FIXTURES / "mesh_tsv/trees.tsv")]
    scope = {"tree_include": ["D"]}
    concepts, names, dead, stats = split(get_reader("mesh-tsv", scope=scope).read(paths))
    assert [c.concept_id for c in concepts] == ["D000001"] and {n.concept_id for n in names} == {"D000001"}
    thesaurus = next(s for s in stats if s.source.endswith("thesaurus.tsv"))
    assert (
        thesaurus.skipped_by_filter == {"out of scope (scope.tree_include): no tree number under an included branch": 3}
        and thesaurus.reconciles()
    )
    with pytest.raises(ValueError, match="trees TSV"):
        list(get_reader("mesh-tsv", scope=scope).read(paths[:1]))
    with pytest.raises(ValueError, match="trees TSV"):  # when ingest-kb plans its work: in `read`, a worker's traceback
        get_reader("mesh-tsv", scope=scope).input_groups(paths[:1])


def test_medic_html_entities_are_unescaped(tmp_path):
    path = tmp_path / "medic.txt"
    path.write_text("D010300||Parkinson Disease|Parkinson&apos;s Disease|Lewy &amp; Body\n")
    _, names, dead, _ = split(get_reader("medic-biosyn").read([str(path)]))
    assert [n.name for n in names] == ["Parkinson Disease", "Parkinson's Disease", "Lewy & Body"] and dead == []


def test_a_umls_cui_is_not_taken_for_a_mesh_id(tmp_path):
    # MeSH record UIs are D or C followed by 6 or 9 digits (D000001, D000086382, C000002, C000657245); a UMLS CUI
    # is C followed by 7 (C0011849). A dictionary of CUIs (no --vocabulary) had every CUI labelled MESH, its alt
    # CUIs written `MESH:C...`, so `--id-prefix vocabulary` wrote MESH:C0011849 for a UMLS concept
    path = tmp_path / "cuis.txt"
    path.write_text(
        "C0011849|C0011860||diabetes mellitus\nUMLS:C0004096||asthma\nD000086382||COVID-19\n"
        "C000657245||COVID-19 drug treatment\nC000002||bevonium\n"
    )
    concepts, _, dead, _ = split(BioSynDictionaryReader().read([str(path)]))
    assert dead == []
    assert [(c.concept_id, c.vocabulary, c.alt_ids) for c in concepts] == [
        ("C0011849", "LOCAL", ("LOCAL:C0011860",)),
        ("C0004096", "UMLS", ()),
        ("D000086382", "MESH", ()),
        ("C000657245", "MESH", ()),
        ("C000002", "MESH", ()),
    ]
    # readers that admit MeSH ids only dead-letter the CUI instead of taking it for MeSH
    medic = tmp_path / "medic.txt"
    medic.write_text("C0011849||diabetes mellitus\nD003920||Diabetes Mellitus\n")
    concepts, _, dead, _ = split(get_reader("medic-biosyn").read([str(medic)]))
    assert [c.concept_id for c in concepts] == ["D003920"] and [d.location for d in dead] == ["line 1"]


def test_ids_of_other_vocabularies_keep_their_prefix_and_never_collide(tmp_path):
    # HP:0000118 and MP:0000118 are two concepts. Stored without their prefix ('0000118') they were one: MP's
    # concept was never written and its names became HP's synonyms; and as scoring keeps such prefixes
    # (plain_id('HP:0000118') == 'HP:0000118'), gold 'HP:0000118' never matched the stored '0000118'
    from bioel_core.kb.vocab import plain_id, qualify

    path = tmp_path / "ontologies.txt"
    path.write_text(
        "HP:0000118||Phenotypic abnormality\nMP:0000118||abnormal cell morphology\n"
        "DOID:0060135|HP:0000119||abdominal cancer\nOMIM:123||short omim\nUMLS:C0004096||asthma\n"
    )
    concepts, names, dead, _ = split(BioSynDictionaryReader().read([str(path)]))
    assert dead == []
    assert [(c.concept_id, c.vocabulary, c.alt_ids) for c in concepts] == [
        ("HP:0000118", "HP", ()),
        ("MP:0000118", "MP", ()),
        ("DOID:0060135", "DOID", ("HP:0000119",)),
        ("123", "OMIM", ()),
        ("C0004096", "UMLS", ()),
    ]
    assert [(n.concept_id, n.name) for n in names][:2] == [
        ("HP:0000118", "Phenotypic abnormality"),
        ("MP:0000118", "abnormal cell morphology"),
    ]
    assert all(plain_id(c.concept_id) == c.concept_id for c in concepts[:3])
    # the qualified form (--id-prefix vocabulary, alt ids) writes such an id once, as it is
    assert [qualify(c.vocabulary, c.concept_id) for c in concepts] == [
        "HP:0000118",
        "MP:0000118",
        "DOID:0060135",
        "OMIM:123",
        "UMLS:C0004096",
    ]


def test_a_nil_id_is_not_a_concept(tmp_path):
    # `-1` (BioSyn, PubTator) and `CUI-less` (n2c2, ShARe) label mentions no concept names; a dictionary built from
    # such mentions made them LOCAL concepts, and a concept with id -1 was written back as NIL in PubTator output
    path = tmp_path / "dict.txt"
    path.write_text("D003920||diabetes\n-1||unknown syndrome\nD006973|CUI-less||hypertension\nC0011849||dm\n")
    concepts, _, dead, _ = split(BioSynDictionaryReader().read([str(path)]))
    assert [c.concept_id for c in concepts] == ["D003920", "C0011849"]
    assert [(d.location, d.reason) for d in dead] == [
        ("line 2", "id '-1' labels a mention with no concept (NIL); a dictionary line names a concept"),
        ("line 3", "id 'CUI-less' labels a mention with no concept (NIL); a dictionary line names a concept"),
    ]


NO_NAME = "no name with a printable character: {} control characters only"


def test_a_medic_concept_is_named_by_its_first_usable_name(tmp_path):
    # a first name of control characters only was the concept's preferred_name, written empty: a critical quality
    # failure that refused the whole ingest. A line with no usable name at all is dead-lettered, names and all
    path = tmp_path / "medic.txt"
    path.write_bytes(b"D000001||\x01\x02|Usable Synonym|Other\nD000002||\x01|\x02\x03\nD000003||Fine\n")
    concepts, names, dead, stats = split(get_reader("medic-biosyn").read([str(path)]))
    assert [(c.concept_id, c.preferred_name) for c in concepts] == [("D000001", "Usable Synonym"), ("D000003", "Fine")]
    # names are as read: the junk one is the normalizer's to dead-letter, the synonym stays a synonym
    assert [(n.concept_id, n.name, n.name_type) for n in names] == [
        ("D000001", "\x01\x02", "preferred"),
        ("D000001", "Usable Synonym", "synonym"),
        ("D000001", "Other", "synonym"),
        ("D000003", "Fine", "preferred"),
    ]
    assert [(d.source, d.location, d.reason, d.raw) for d in dead] == [
        (str(path), "line 2", NO_NAME.format("every name is"), "D000002||\x01|\x02\x03")
    ]
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (3, 2, 1) and stats[0].reconciles()


def test_a_dictionary_line_without_a_usable_name_is_dead_and_the_next_line_creates_the_concept(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("D000001||\x01\x02\nD000001||usable name\nD000001||other name\nD000002||\x7f\x80\nD000003||fine\n")
    concepts, names, dead, stats = split(BioSynDictionaryReader().read([str(path)]))
    assert [(c.concept_id, c.preferred_name) for c in concepts] == [("D000001", "usable name"), ("D000003", "fine")]
    assert [(n.concept_id, n.name, n.name_type) for n in names] == [
        ("D000001", "usable name", "preferred"),
        ("D000001", "other name", "synonym"),
        ("D000003", "fine", "preferred"),
    ]
    assert [(d.location, d.reason) for d in dead] == [
        ("line 1", NO_NAME.format("the name is")),
        ("line 4", NO_NAME.format("the name is")),
    ]
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (5, 3, 2) and stats[0].reconciles()


def test_a_mesh_tsv_descriptor_is_named_by_its_first_usable_name(tmp_path):
    text = (FIXTURES / "mesh_tsv/thesaurus.tsv").read_text()
    first = len(text.splitlines()) + 1
    path = tmp_path / "thesaurus.tsv"
    path.write_text(
        text + "D000002\t\x01\x02\tM1\tT1\t\x01\x02\tY\tN\tNON\tY\n"  # the name and its own term unusable
        "D000002\t\x01\x02\tM1\tT2\tUsable Term\tN\tN\tNON\tN\n"
        "D000003\t\x01\tM2\tT3\t\x02\x03\tY\tN\tNON\tY\n"
    )  # no usable name at all
    concepts, names, dead, stats = split(get_reader("mesh-tsv").read([str(path)]))
    assert [(c.concept_id, c.preferred_name) for c in concepts] == [
        ("D000001", "Calcimycin"),
        ("D001260", "Ataxia Telangiectasia"),
        ("D000002", "Usable Term"),
    ]
    assert [(n.name, n.name_type) for n in names if n.concept_id == "D000002"] == [("Usable Term", "entry_term")]
    assert "D000003" not in {n.concept_id for n in names}
    assert [(d.location, d.reason) for d in dead] == [
        (f"line {first}", NO_NAME.format("TermName is")),
        (f"line {first + 2}", NO_NAME.format("TermName is")),
    ]
    assert stats[0].dead_lettered == 2 and stats[0].reconciles()
