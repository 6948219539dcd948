import gzip
from pathlib import Path

import pytest

from bioel_core.kb import get_reader
from bioel_core.kb.ctd import CtdChemicalsReader, CtdDiseasesReader
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats

FIXTURES = Path(__file__).parent / "fixtures" / "ctd"
DISEASES_TSV = FIXTURES / "CTD_diseases.tsv"
DISEASES_CSV = FIXTURES / "CTD_diseases.csv"
CHEMICALS_TSV = FIXTURES / "CTD_chemicals.tsv"
HEADER_LINES = 9

DISEASE_CONCEPTS = [
    ConceptRecord(
        "C538288",
        "ctd-diseases",
        "10p Deletion Syndrome (Partial)",
        ("C10.597.606.643/C538288", "C16.131.077.327/C538288", "C16.320.180.190/C538288"),
        None,
        (),
        "MESH",
    ),
    ConceptRecord(
        "D000008",
        "ctd-diseases",
        "Abdominal Neoplasms",
        ("C04.588.033",),
        "Tumors or cancer of the ABDOMEN.",
        ("DO:DOID:0060135",),
        "MESH",
    ),
    ConceptRecord(
        "D000014",
        "ctd-diseases",
        "Abnormalities, Drug-Induced",
        ("C16.131.042",),
        "Congenital abnormalities caused by medicinal substances or drugs of abuse given to or taken by the "
        "mother, or to which she is inadvertently exposed during pregnancy.",
        ("DO:DOID:0060211",),
        "MESH",
    ),
    # an OMIM-primary CTD disease: the id's vocabulary is OMIM, its MeSH alternative an alt id
    ConceptRecord(
        "305400", "ctd-diseases", "Aarskog syndrome", ("C16.131.621.046",), None, ("DO:DOID:0050654", "MESH:C535331"), "OMIM"
    ),
]
DISEASE_NAMES = [
    ("C538288", "10p Deletion Syndrome (Partial)", "preferred"),
    ("C538288", "Chromosome 10, 10p- Partial", "synonym"),
    ("C538288", "Chromosome 10, monosomy 10p", "synonym"),
    ("C538288", "Monosomy 10p", "synonym"),
    ("D000008", "Abdominal Neoplasms", "preferred"),
    ("D000008", "Abdominal Neoplasm", "synonym"),
    ("D000008", "Cancer of Abdomen", "synonym"),
    ("D000014", "Abnormalities, Drug-Induced", "preferred"),
    ("D000014", "Abnormalities, Drug Induced", "synonym"),
    ("D000014", "Drug-Induced Abnormalities", "synonym"),
    ("305400", "Aarskog syndrome", "preferred"),
    ("305400", "Faciogenital Dysplasia", "synonym"),
    ("305400", "Scrotal shawl syndrome", "synonym"),
]


def split(items):
    items = list(items)
    return (
        [i for i in items if isinstance(i, ConceptRecord)],
        [(n.concept_id, n.name, n.name_type) for n in items if isinstance(n, NameRecord)],
        [i for i in items if isinstance(i, DeadLetter)],
        [i for i in items if isinstance(i, ReadStats)],
    )


def lines(path):
    return path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("path", [DISEASES_TSV, DISEASES_CSV], ids=["tsv", "csv"])
def test_diseases(path):
    concepts, names, dead, stats = split(CtdDiseasesReader().read([str(path)]))
    assert concepts == DISEASE_CONCEPTS
    assert names == DISEASE_NAMES
    assert dead == []
    assert len(stats) == 1 and stats[0].source == str(path)
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].skipped_by_filter) == (4, 4, {})


def test_chemicals():
    concepts, names, dead, stats = split(CtdChemicalsReader().read([str(CHEMICALS_TSV)]))
    assert concepts[1] == ConceptRecord(
        "D001241",
        "ctd-chemicals",
        "Aspirin",
        ("D02.241.223.100.050.500.050.100", "D02.241.511.390.050.100"),
        "The prototypical analgesic used in the treatment of mild to moderate pain. It has anti-inflammatory and "
        "antipyretic properties and acts as an inhibitor of cyclooxygenase which results in the inhibition of the "
        "biosynthesis of prostaglandins.",
        (),
        "MESH",
    )
    assert [c.concept_id for c in concepts] == ["C112297", "D001241", "D000001"]
    assert concepts[0].preferred_name == "10,10-bis(4-pyridinylmethyl)-9(10H)-anthracenone" and concepts[0].definition is None
    assert [n for n in names if n[0] == "D000001"] == [
        ("D000001", "Calcimycin", "preferred"),
        ("D000001", "A 23187", "synonym"),
        ("D000001", "A-23187", "synonym"),
        ("D000001", "A23187", "synonym"),
        ("D000001", "Antibiotic A23187", "synonym"),
    ]
    assert len(names) == 3 + 6 + 5
    assert dead == [] and stats[0].records_accepted == 3 and stats[0].reconciles()


def test_registry_and_independent_groups():
    assert isinstance(get_reader("ctd-diseases"), CtdDiseasesReader)
    assert isinstance(get_reader("ctd-chemicals"), CtdChemicalsReader)
    assert CtdDiseasesReader().input_groups([str(DISEASES_TSV), str(DISEASES_CSV)]) == [[str(DISEASES_TSV)], [str(DISEASES_CSV)]]


@pytest.mark.parametrize("source", [CHEMICALS_TSV, FIXTURES / "CTD_chemicals_13col.csv"])
def test_a_large_file_read_in_ranges_gives_the_whole_files_items(tmp_path, monkeypatch, source):
    from bioel_core.kb import io as kb_io

    # an extra column no known layout has: a range that missed the header would dead-letter every row
    sep = "," if source.suffix == ".csv" else "\t"
    lines = source.read_text().splitlines()
    fields = lines.index("# Fields:") + 1
    header = [line + (sep + "Extra" if i == fields else "") + "\n" for i, line in enumerate(lines) if line.startswith("#")]
    body = [line + sep + "x\n" for line in lines if not line.startswith("#") and line.strip()] * 40
    body[57] = "a line\twithout the columns\n"
    path = tmp_path / source.name
    path.write_text("".join(header + body))
    reader = CtdChemicalsReader()
    whole = list(reader.read([str(path)]))
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 3000)
    groups = reader.input_groups([str(path)])
    assert len(groups) > 3 and all(len(g) == 1 for g in groups)
    pieces = [list(reader.read(group)) for group in groups]
    items = [i for piece in pieces for i in piece if not isinstance(i, ReadStats)]
    assert items == [i for i in whole if not isinstance(i, ReadStats)]
    assert sum(isinstance(i, DeadLetter) for i in items) == 1
    stats = [i for piece in pieces for i in piece if isinstance(i, ReadStats)]
    assert sum(s.records_read for s in stats) == next(i for i in whole if isinstance(i, ReadStats)).records_read


def test_gzip_variants(tmp_path):
    for src in (DISEASES_TSV, DISEASES_CSV):
        target = tmp_path / (src.name + ".gz")
        target.write_bytes(gzip.compress(src.read_bytes()))
        concepts, names, dead, _ = split(CtdDiseasesReader().read([str(target)]))
        assert (concepts, names, dead) == (DISEASE_CONCEPTS, DISEASE_NAMES, [])


def test_chemical_reader_rejects_omim_ids(tmp_path):
    path = tmp_path / "CTD_chemicals.tsv"
    path.write_bytes(b"".join(lines(CHEMICALS_TSV)) + b"Aarskog syndrome\tOMIM:305400\t\t\t\t\t\t\n")
    concepts, _, dead, stats = split(CtdChemicalsReader().read([str(path)]))
    assert len(concepts) == 3
    assert [(d.location, d.source) for d in dead] == [(f"line {HEADER_LINES + 4}", str(path))]
    assert "'OMIM:305400' does not match the ctd-chemicals id pattern" in dead[0].reason
    assert stats[0].reconciles() and stats[0].dead_lettered == 1


def test_bad_tsv_lines(tmp_path):
    header, rows = lines(DISEASES_TSV)[:HEADER_LINES], lines(DISEASES_TSV)[HEADER_LINES:]
    bad = [
        b"Acne Vulgaris\tMESH:D000152\tDO:DOID:6543\n",  # 3 columns
        b"Acne Keloid\tMESH:X000153\t\t\tMESH:D000152\tC17.800.030\tC17.800\t\tSkin disease\n",
        b"Acne R\xf6sacea\tMESH:D012393\t\t\t\tC17.800.030\tC17.800\t\tSkin disease\n",
        b"\tMESH:D000154\t\t\t\tC17.800.030\tC17.800\t\tSkin disease\n",
        b"\n",
    ]
    path = tmp_path / "CTD_diseases.tsv"
    path.write_bytes(b"".join(header + rows[:2] + bad + rows[2:]))
    concepts, names, dead, stats = split(CtdDiseasesReader().read([str(path)]))
    assert concepts == DISEASE_CONCEPTS and names == DISEASE_NAMES
    first = HEADER_LINES + 3
    assert [d.location for d in dead] == [f"line {first}", f"line {first + 1}", f"line {first + 2}", f"line {first + 3}"]
    assert dead[0].reason == "expected 9 tab-separated columns, found 3"
    assert "'MESH:X000153' does not match the ctd-diseases id pattern" in dead[1].reason
    assert dead[2].reason.startswith("invalid UTF-8")
    assert dead[3].reason == "empty DiseaseName"
    assert dead[0].raw == "Acne Vulgaris\tMESH:D000152\tDO:DOID:6543"
    s = stats[0]
    assert (s.records_read, s.records_accepted, s.dead_lettered, s.skipped_by_filter) == (9, 4, 4, {"blank line": 1})
    assert s.reconciles()


def test_bad_csv_lines(tmp_path):
    header, rows = lines(DISEASES_CSV)[:HEADER_LINES], lines(DISEASES_CSV)[HEADER_LINES:]
    bad = [
        b'"Acne Vulgaris,MESH:D000152,,,,C17.800.030,C17.800,,Skin disease\n',  # unclosed quote
        b"Acne Vulgaris,MESH:D000152,,,,C17.800.030,C17.800,Skin disease\n",
    ]  # 8 columns
    path = tmp_path / "CTD_diseases.csv"
    path.write_bytes(b"".join(header + rows[:1] + bad + rows[1:]))
    concepts, _, dead, stats = split(CtdDiseasesReader().read([str(path)]))
    assert concepts == DISEASE_CONCEPTS
    assert [d.location for d in dead] == [f"line {HEADER_LINES + 2}", f"line {HEADER_LINES + 3}"]
    assert dead[0].reason.startswith("malformed CSV line")
    assert dead[1].reason == "expected 9 comma-separated columns, found 8"
    assert stats[0].reconciles() and stats[0].records_read == 6


def test_header_without_slim_mappings_is_followed(tmp_path):
    # older CTD releases have no SlimMappings column: the '# Fields:' header says how many columns to expect
    text = DISEASES_TSV.read_text().replace("\tSynonyms\tSlimMappings", "\tSynonyms")
    text = "\n".join(line.rsplit("\t", 1)[0] if not line.startswith("#") else line for line in text.splitlines()) + "\n"
    path = tmp_path / "CTD_diseases.tsv"
    path.write_text(text)
    concepts, names, dead, _ = split(CtdDiseasesReader().read([str(path)]))
    assert (concepts, names, dead) == (DISEASE_CONCEPTS, DISEASE_NAMES, [])


def test_header_missing_needed_columns_is_dead_lettered(tmp_path):
    path = tmp_path / "CTD_diseases.tsv"
    path.write_text(DISEASES_TSV.read_text().replace("# DiseaseName\tDiseaseID", "# Name\tID"))
    concepts, _, dead, stats = split(CtdDiseasesReader().read([str(path)]))
    assert [d.location for d in dead] == ["line 8"]
    assert "column header lacks ['DiseaseID', 'DiseaseName']" in dead[0].reason
    assert concepts == DISEASE_CONCEPTS  # read on with CTD's default columns
    assert stats[0].reconciles()


def test_truncated_gzip_and_empty_file(tmp_path):
    gz = tmp_path / "CTD_diseases.tsv.gz"
    data = gzip.compress(DISEASES_TSV.read_bytes())
    gz.write_bytes(data[:-30])
    empty = tmp_path / "CTD_diseases.csv"
    empty.write_bytes(b"")
    concepts, _, dead, stats = split(CtdDiseasesReader().read([str(gz), str(empty)]))
    assert concepts == []  # a gzip that fails its check contributes no record (CORRUPT_INPUT_POLICY)
    assert [(d.source, d.location) for d in dead] == [(str(gz), "file"), (str(empty), "file")]
    assert "truncated or corrupt gzip stream" in dead[0].reason
    assert dead[1].reason == "empty file"
    assert [s.source for s in stats] == [str(gz), str(empty)]
    assert all(s.reconciles() for s in stats)
    assert (stats[1].records_read, stats[1].dead_lettered) == (1, 1)


CHEMICALS_13 = FIXTURES / "CTD_chemicals_13col.csv"


def test_current_13_column_chemicals_read_by_header_names(tmp_path):
    # CTD_chemicals since 2025: 13 columns, synonyms split into MESHSynonyms and CTDCuratedSynonyms; the
    # 8-column reading dead-lettered the header ("lacks ['Synonyms']") and every row ("expected 8 found 13")
    for path in (CHEMICALS_13, tmp_path / "CTD_chemicals.csv.gz"):
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress(CHEMICALS_13.read_bytes()))
        concepts, names, dead, stats = split(CtdChemicalsReader().read([str(path)]))
        assert dead == []
        assert [(c.concept_id, c.vocabulary) for c in concepts] == [("D001241", "MESH"), ("D000001", "MESH"), ("C112297", "MESH")]
        aspirin = concepts[0]
        assert aspirin.preferred_name == "Aspirin" and aspirin.definition.startswith("The prototypical analgesic")
        assert aspirin.semantic_types == ("D02.241.223.100.050.500.050.100", "D02.241.511.390.050.100")
        assert [n[1:] for n in names if n[0] == "D001241"] == [
            ("Aspirin", "preferred"),
            ("Acetylsalicylic Acid", "synonym"),
            ("Acylpyrin", "synonym"),
            ("Easprin", "synonym"),
            ("2-(acetyloxy)benzoic acid", "synonym"),
            ("ASA", "synonym"),
        ]
        assert [n[1] for n in names if n[0] == "C112297"] == ["10,10-bis(4-pyridinylmethyl)-9(10H)-anthracenone", "XE991"]
        assert concepts[2].definition is None
        assert (stats[0].records_read, stats[0].records_accepted) == (3, 3) and stats[0].reconciles()


def test_columns_are_found_by_name_in_any_order(tmp_path):
    text = DISEASES_TSV.read_text().splitlines()
    order = [7, 1, 0, 2, 3, 4, 5, 6, 8]  # Synonyms first, then DiseaseID before DiseaseName
    out = []
    for line in text:
        if line.startswith("# DiseaseName"):
            cols = line[2:].split("\t")
            out.append("# " + "\t".join(cols[i] for i in order))
        elif line.startswith("#"):
            out.append(line)
        else:
            cols = line.split("\t")
            out.append("\t".join(cols[i] for i in order))
    path = tmp_path / "CTD_diseases.tsv"
    path.write_text("\n".join(out) + "\n")
    concepts, names, dead, _ = split(CtdDiseasesReader().read([str(path)]))
    assert (concepts, names, dead) == (DISEASE_CONCEPTS, DISEASE_NAMES, [])


def test_files_without_header_use_the_layout_of_their_column_count(tmp_path):
    old = [line for line in lines(CHEMICALS_TSV) if not line.startswith(b"#")]  # the old 8-column layout
    new = [line for line in lines(CHEMICALS_13) if not line.startswith(b"#")]
    (tmp_path / "old.tsv").write_bytes(b"".join(old))
    (tmp_path / "new.csv").write_bytes(b"".join(new) + b"Odd,MESH:D000002,x\n")
    concepts, names, dead, stats = split(CtdChemicalsReader().read([str(tmp_path / "old.tsv"), str(tmp_path / "new.csv")]))
    assert [c.concept_id for c in concepts] == ["C112297", "D001241", "D000001", "D001241", "D000001", "C112297"]
    assert ("D000001", "Antibiotic A23187", "synonym") in names and ("D001241", "ASA", "synonym") in names
    assert [(d.location, d.reason) for d in dead] == [("line 4", "expected 8 or 13 comma-separated columns, found 3")]
    assert all(s.reconciles() for s in stats)


def test_a_concept_is_named_by_its_first_usable_name(tmp_path):
    # a DiseaseName of control characters only was the concept's preferred_name, written empty: a critical quality
    # failure that refused the whole ingest. A row with no usable name at all is dead-lettered, names and all
    junk = [
        b"\x01\x02\tMESH:D000152\t\t\t\tC17.800.030\tC17.800\t\x03|Acne Vulgaris|Acne\tSkin disease\n",
        b"\x01\tMESH:D000153\t\t\t\tC17.800.030\tC17.800\t\x02\x03\tSkin disease\n",  # no usable name
    ]
    path = tmp_path / "CTD_diseases.tsv"
    path.write_bytes(b"".join(lines(DISEASES_TSV) + junk))
    concepts, names, dead, stats = split(CtdDiseasesReader().read([str(path)]))
    assert concepts[:4] == DISEASE_CONCEPTS and [(c.concept_id, c.preferred_name) for c in concepts[4:]] == [
        ("D000152", "Acne Vulgaris")
    ]
    # names are as read: the junk ones are the normalizer's to dead-letter, the synonyms stay synonyms
    assert names[len(DISEASE_NAMES) :] == [
        ("D000152", "\x01\x02", "preferred"),
        ("D000152", "\x03", "synonym"),
        ("D000152", "Acne Vulgaris", "synonym"),
        ("D000152", "Acne", "synonym"),
    ]
    assert [(d.location, d.reason, d.raw) for d in dead] == [
        (
            f"line {HEADER_LINES + 6}",
            "no name with a printable character: DiseaseName and every synonym are control characters only",
            junk[1].decode().rstrip("\n"),
        )
    ]
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (6, 5, 1) and stats[0].reconciles()
