import gzip
from pathlib import Path

import pytest

from bioel_core.kb import get_reader
from bioel_core.kb.snomed import SnomedReader
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats

FIXTURES = Path(__file__).parent / "fixtures" / "snomed"
CONCEPTS = FIXTURES / "sct2_Concept_Snapshot_INT_20240101.txt"
DESCRIPTIONS = FIXTURES / "sct2_Description_Snapshot-en_INT_20240101.txt"
LANGUAGE = FIXTURES / "der2_cRefset_LanguageSnapshot-en_INT_20240101.txt"
US, GB = "900000000000509007", "900000000000508004"
DISORDER = ("disorder",)


def split(items):
    items = list(items)
    return (
        [i for i in items if isinstance(i, ConceptRecord)],
        [(n.concept_id, n.name, n.name_type) for n in items if isinstance(n, NameRecord)],
        [i for i in items if isinstance(i, DeadLetter)],
        {s.source: s for s in items if isinstance(s, ReadStats)},
    )


def read(paths, **options):
    return split(SnomedReader(**options).read([str(p) for p in paths]))


def test_with_us_language_refset():
    concepts, names, dead, stats = read([CONCEPTS, LANGUAGE, DESCRIPTIONS], language_refset_ids=[US])
    assert dead == []
    assert concepts == [
        ConceptRecord("22298006", "snomed", "Myocardial infarction", DISORDER, vocabulary="SNOMEDCT"),
        ConceptRecord("38341003", "snomed", "Hypertensive disorder, systemic arterial", DISORDER, vocabulary="SNOMEDCT"),
        ConceptRecord("50960005", "snomed", "Hemorrhage", ("morphologic abnormality",), vocabulary="SNOMEDCT"),
        ConceptRecord("195967001", "snomed", "Asthma", DISORDER, vocabulary="SNOMEDCT"),
    ]
    assert names == [
        ("22298006", "Myocardial infarction", "fsn"),
        ("22298006", "Myocardial infarction", "preferred"),
        ("22298006", "Heart attack", "synonym"),
        ("22298006", "Cardiac infarction", "synonym"),
        ("38341003", "Hypertensive disorder, systemic arterial", "preferred"),
        ("38341003", "Hypertensive disorder, systemic arterial", "fsn"),
        ("38341003", "High blood pressure", "synonym"),
        ("50960005", "Hemorrhage", "preferred"),
        ("50960005", "Bleeding", "synonym"),
        ("50960005", "Hemorrhage", "fsn"),
        ("195967001", "Asthma", "preferred"),
        ("195967001", "Asthma", "fsn"),
    ]
    concept_stats, language_stats, description_stats = stats[str(CONCEPTS)], stats[str(LANGUAGE)], stats[str(DESCRIPTIONS)]
    assert (concept_stats.records_read, concept_stats.records_accepted, concept_stats.skipped_by_filter) == (
        5,
        4,
        {"inactive": 1},
    )
    assert language_stats.records_accepted == 12
    assert language_stats.skipped_by_filter == {"language refset not selected": 4, "inactive": 1}
    assert description_stats.records_read == 17 and description_stats.records_accepted == 12
    assert description_stats.skipped_by_filter == {
        "inactive": 1,
        "not in language refset": 2,
        "other description type": 1,
        "concept not active": 1,
    }
    assert all(s.reconciles() for s in stats.values())


def test_gb_refset_gives_its_own_preferred_name():
    concepts, names, _, stats = read([CONCEPTS, LANGUAGE, DESCRIPTIONS], language_refset_ids=[GB])
    assert concepts == [ConceptRecord("50960005", "snomed", "Haemorrhage", ("morphologic abnormality",), vocabulary="SNOMEDCT")]
    assert names == [
        ("50960005", "Hemorrhage", "synonym"),
        ("50960005", "Haemorrhage", "preferred"),
        ("50960005", "Bleeding", "synonym"),
        ("50960005", "Hemorrhage", "fsn"),
    ]
    assert stats[str(DESCRIPTIONS)].skipped_by_filter["not in language refset"] == 10


def test_all_refsets_when_no_ids_given():
    concepts, names, _, stats = read([CONCEPTS, LANGUAGE, DESCRIPTIONS])
    # preferred in any refset counts as preferred; the first preferred synonym read names the concept
    assert ("50960005", "Haemorrhage", "preferred") in names and ("50960005", "Hemorrhage", "preferred") in names
    assert concepts[2] == ConceptRecord("50960005", "snomed", "Hemorrhage", ("morphologic abnormality",), vocabulary="SNOMEDCT")
    assert stats[str(DESCRIPTIONS)].records_accepted == 13
    assert stats[str(LANGUAGE)].records_accepted == 16


def test_preferred_acceptability_only():
    _, names, _, stats = read([CONCEPTS, LANGUAGE, DESCRIPTIONS], language_refset_ids=[US], acceptability="preferred")
    assert {t for _, _, t in names} == {"fsn", "preferred"} and len(names) == 8
    assert stats[str(DESCRIPTIONS)].skipped_by_filter["not preferred"] == 4
    assert stats[str(DESCRIPTIONS)].reconciles()


def test_without_refset_the_fsn_names_the_concept():
    concepts, names, dead, stats = read([CONCEPTS, DESCRIPTIONS])
    assert dead == []
    assert [(c.concept_id, c.preferred_name, c.semantic_types) for c in concepts] == [
        ("22298006", "Myocardial infarction", DISORDER),
        ("38341003", "Hypertensive disorder, systemic arterial", DISORDER),
        ("50960005", "Hemorrhage", ("morphologic abnormality",)),
        ("195967001", "Asthma", DISORDER),
    ]
    assert ("195967001", "Asthma NOS", "synonym") in names and ("50960005", "Haemorrhage", "synonym") in names
    assert {t for _, _, t in names} == {"fsn", "synonym"} and len(names) == 14
    assert stats[str(DESCRIPTIONS)].skipped_by_filter == {"inactive": 1, "other description type": 1, "concept not active": 1}


def test_fsn_with_inner_parentheses_keeps_them_in_the_name(tmp_path):
    desc = tmp_path / DESCRIPTIONS.name
    desc.write_text(
        DESCRIPTIONS.read_text().splitlines()[0] + "\n"
        "751689013\t20170731\t1\t900000000000207008\t22298006\ten\t900000000000003001\t"
        "Infarction (acute) of myocardium (disorder)\t900000000000448009\n"
    )
    concepts, names, _, _ = read([CONCEPTS, desc])
    assert concepts == [ConceptRecord("22298006", "snomed", "Infarction (acute) of myocardium", DISORDER, vocabulary="SNOMEDCT")]
    assert names == [("22298006", "Infarction (acute) of myocardium", "fsn")]


def test_registry_groups_and_options():
    assert isinstance(get_reader("snomed", language_refset_ids=[US]), SnomedReader)
    assert SnomedReader().input_groups(["a", "b", "c"]) == [["a", "b", "c"]]
    with pytest.raises(ValueError, match="acceptability"):
        SnomedReader(acceptability="acceptable")
    with pytest.raises(ValueError, match="no der2_cRefset_LanguageSnapshot"):
        list(SnomedReader(language_refset_ids=[US]).read([str(CONCEPTS), str(DESCRIPTIONS)]))


def test_bad_rows_are_dead_lettered(tmp_path):
    concepts_file = tmp_path / CONCEPTS.name
    concepts_file.write_text(
        CONCEPTS.read_text() + "12345\t20020131\t1\t900000000000207008\t900000000000074008\n"
        "73211009\t20020131\t2\t900000000000207008\t900000000000074008\n"
    )
    desc_lines = DESCRIPTIONS.read_bytes().splitlines(keepends=True)
    desc = tmp_path / DESCRIPTIONS.name
    desc.write_bytes(
        b"".join(
            desc_lines[:2]
            + [
                b"37443015\t20170731\t1\t900000000000207008\t22298006\ten\t900000000000013009\tHeart attack\n",  # 8 columns
                b"37441018\t20170731\t1\t900000000000207008\t22298006\ten\t900000000000013009\tC\xe6rdiac infarction\t900000000000448009\n",
                b"99999999\t20170731\t1\t900000000000207008\tMI\ten\t900000000000013009\tMI\t900000000000448009\n",
                b"99999998\t20170731\t1\t900000000000207008\t22298006\ten\t900000000000013009\t \t900000000000448009\n",
            ]
            + desc_lines[2:]
        )
    )
    language = tmp_path / LANGUAGE.name
    language.write_text(
        LANGUAGE.read_text() + "ffff0000-0000-5000-8000-000000000000\t20170731\t1\t900000000000207008\t"
        f"{US}\t37441018\t900000000000550004\n"
    )
    concepts, names, dead, stats = read([concepts_file, language, desc], language_refset_ids=[US])
    places = [(Path(d.source).name, d.location) for d in dead]
    assert places == [
        (CONCEPTS.name, "line 7"),
        (CONCEPTS.name, "line 8"),
        (LANGUAGE.name, "line 19"),
        (DESCRIPTIONS.name, "line 3"),
        (DESCRIPTIONS.name, "line 4"),
        (DESCRIPTIONS.name, "line 5"),
        (DESCRIPTIONS.name, "line 6"),
    ]
    reasons = [d.reason for d in dead]
    assert "id '12345' does not match the snomed id pattern" in reasons[0]
    assert reasons[1] == "active is '2', not 0 or 1"
    assert reasons[2] == "unknown acceptabilityId '900000000000550004'"
    assert reasons[3] == "expected 9 tab-separated columns, found 8"
    assert reasons[4].startswith("invalid UTF-8")
    assert "conceptId 'MI' does not match" in reasons[5]
    assert reasons[6] == "empty term"
    assert len(concepts) == 4 and len(names) == 12  # every good row still comes out
    assert all(s.reconciles() for s in stats.values())
    assert stats[str(desc)].dead_lettered == 4


def test_file_level_faults(tmp_path):
    gz = tmp_path / (DESCRIPTIONS.name + ".gz")
    data = gzip.compress(DESCRIPTIONS.read_bytes())
    gz.write_bytes(data[:-25])
    empty = tmp_path / CONCEPTS.name
    empty.write_bytes(b"")
    other = tmp_path / "sct2_Relationship_Snapshot_INT_20240101.txt"
    other.write_text("id\n")
    bad_header = tmp_path / LANGUAGE.name
    bad_header.write_text(LANGUAGE.read_text().replace("referencedComponentId", "componentId", 1))
    concepts, names, dead, stats = read([other, empty, bad_header, gz])
    assert [(Path(d.source).name, d.location) for d in dead[:3]] == [
        (other.name, "file"),
        (empty.name, "file"),
        (bad_header.name, "line 1"),
    ]
    assert "not an RF2 Snapshot" in dead[0].reason
    assert dead[1].reason == "empty file"
    assert dead[2].reason.startswith("header is not the RF2 header")
    assert dead[3].source == str(gz) and "truncated or corrupt gzip stream" in dead[3].reason
    # a gzip that fails its check contributes no record (CORRUPT_INPUT_POLICY), only its dead letter
    assert concepts == [] and names == []
    assert (stats[str(gz)].records_read, stats[str(gz)].dead_lettered) == (1, 1)
    assert len(stats) == 4 and all(s.reconciles() for s in stats.values())


def test_gzip_inputs_read_the_same(tmp_path):
    paths = []
    for src in (CONCEPTS, LANGUAGE, DESCRIPTIONS):
        paths.append(tmp_path / (src.name + ".gz"))
        paths[-1].write_bytes(gzip.compress(src.read_bytes()))
    assert read(paths, language_refset_ids=[US])[:3] == read([CONCEPTS, LANGUAGE, DESCRIPTIONS], language_refset_ids=[US])[:3]


def test_a_concept_is_named_by_its_first_usable_description(tmp_path):
    # a preferred synonym or FSN of control characters only was the concept's preferred_name, written empty: a
    # critical quality failure that refused the whole ingest. A description whose name is control characters only is
    # dead-lettered, so the concept is named by the next of its ranking, and a concept with none is not written: its
    # concept row is dead-lettered
    junk = {
        "Myocardial infarction": "\x01\x02",
        "Myocardial infarction (disorder)": "\x03 (disorder)",  # 22298006
        "Asthma": "\x04",
        "Asthma NOS": "\x05\x06",
        "Asthma (disorder)": "\x07 (disorder)",
    }  # 195967001: no usable name
    desc = tmp_path / DESCRIPTIONS.name
    rows = [line.split("\t") for line in DESCRIPTIONS.read_text().splitlines()]
    desc.write_text("".join("\t".join(r[:7] + [junk.get(r[7], r[7])] + r[8:]) + "\n" for r in rows))
    for options, skipped in (({"language_refset_ids": [US]}, 5), ({}, 3)):
        concepts, names, dead, stats = read([CONCEPTS, LANGUAGE, desc] if options else [CONCEPTS, desc], **options)
        assert [(c.concept_id, c.preferred_name) for c in concepts] == [
            ("22298006", "Heart attack"),
            ("38341003", "Hypertensive disorder, systemic arterial"),
            ("50960005", "Hemorrhage"),
        ]
        assert [n[1] for n in names if n[0] == "22298006"] == ["Heart attack", "Cardiac infarction"]
        assert "195967001" not in {n[0] for n in names}
        fsn, term = "term less its semantic tag is", "term is"
        nos = [] if options else [("line 17", term)]  # Asthma NOS is in no US refset: filtered before its name is read
        assert [(d.location, d.reason) for d in dead] == [
            (line, f"no name with a printable character: {what} control characters only")
            for line, what in [("line 2", fsn), ("line 3", term), ("line 16", term), *nos, ("line 18", fsn)]
        ] + [
            (
                "line 6",
                f"active concept 195967001 has no name: {2 + len(nos)} of its FSN and synonym descriptions were dead-lettered",
            )
        ]
        assert dead[-1].source == str(CONCEPTS) and stats[str(CONCEPTS)].dead_lettered == 1 and stats[str(CONCEPTS)].reconciles()
        assert sum(stats[str(desc)].skipped_by_filter.values()) == skipped and stats[str(desc)].reconciles()


def test_an_active_concept_without_a_name_is_accounted_for(tmp_path):
    # an active concept with no description was absent from the KB with no dead letter: its concept row counted as
    # accepted, so nothing told that it was missing
    concepts_file = tmp_path / CONCEPTS.name
    concepts_file.write_text(CONCEPTS.read_text() + "404684003\t20020131\t1\t900000000000207008\t900000000000074008\n")
    concepts, _, dead, stats = read([concepts_file, LANGUAGE, DESCRIPTIONS], language_refset_ids=[GB])
    # 404684003 has no description at all: a dead letter. The GB refset holds no description of three concepts:
    # filtered, as the option asked
    assert [c.concept_id for c in concepts] == ["50960005"]
    assert [(d.source, d.location, d.reason) for d in dead] == [
        (str(concepts_file), "line 7", "active concept 404684003 has no name: no active FSN or synonym description")
    ]
    assert dead[0].raw == "404684003\t20020131\t1\t900000000000207008\t900000000000074008"
    concept_stats = stats[str(concepts_file)]
    assert (concept_stats.records_read, concept_stats.records_accepted, concept_stats.dead_lettered) == (6, 1, 1)
    assert concept_stats.skipped_by_filter == {"inactive": 1, "no description kept: not in language refset": 3}
    assert all(s.reconciles() for s in stats.values())
