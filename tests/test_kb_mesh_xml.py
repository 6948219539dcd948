import gzip
from pathlib import Path

from bioel_core.kb import get_reader
from bioel_core.kb.mesh_xml import MeshXmlReader
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats

FIXTURE = Path(__file__).parent / "fixtures" / "mesh_xml" / "desc2024.xml"

CALCIMYCIN = ConceptRecord(
    "D000001",
    "mesh",
    "Calcimycin",
    ("D03.633.100.221.173",),
    "An ionophorous, polyether antibiotic from Streptomyces chartreusensis. It binds and transports CALCIUM and other "
    "divalent cations across membranes and uncouples oxidative phosphorylation while inhibiting ATPase of rat liver "
    "mitochondria.",
    vocabulary="MESH",
)
AIDS = ConceptRecord(
    "D000163",
    "mesh",
    "Acquired Immunodeficiency Syndrome",
    ("C01.221.812.281.401", "C01.925.782.815.616.400.080", "C20.673.480.080"),
    "An acquired defect of cellular immunity associated with infection by the human immunodeficiency virus (HIV), a "
    "CD4-positive T-lymphocyte count under 200 cells/microliter or less than 14% of total lymphocytes, and increased "
    "susceptibility to opportunistic infections and malignant neoplasms.",
    vocabulary="MESH",
)
MI = ConceptRecord(
    "D009203", "mesh", "Myocardial Infarction", ("C14.280.647.500", "C14.907.585.500", "C23.550.513.355.750"), vocabulary="MESH"
)
NAMES = [
    ("D000001", "Calcimycin", "preferred"),
    ("D000001", "A-23187", "entry_term"),
    ("D000001", "A23187", "entry_term"),
    ("D000001", "Antibiotic A23187", "entry_term"),
    ("D000163", "AIDS Wasting Syndrome", "entry_term"),
    ("D000163", "Acquired Immunodeficiency Syndrome", "preferred"),
    ("D000163", "AIDS", "abbreviation"),
    ("D000163", "Immunodeficiency Syndrome, Acquired", "entry_term"),
    ("D000163", "Acquired Immuno-Deficiency Synd.", "abbreviation"),
    ("D009203", "Myocardial Infarction", "preferred"),
    ("D009203", "Heart Attack", "entry_term"),
]


def split(items):
    items = list(items)
    return (
        [i for i in items if isinstance(i, ConceptRecord)],
        [(n.concept_id, n.name, n.name_type) for n in items if isinstance(n, NameRecord)],
        [i for i in items if isinstance(i, DeadLetter)],
        [i for i in items if isinstance(i, ReadStats)],
    )


def read(*paths):
    return split(MeshXmlReader().read([str(p) for p in paths]))


def line_of(path, needle: bytes) -> int:
    data = path.read_bytes()
    return data[: data.index(needle)].count(b"\n") + 1


def variant(tmp_path, old: bytes, new: bytes, name="desc2024.xml"):
    data = FIXTURE.read_bytes()
    assert old in data
    path = tmp_path / name
    path.write_bytes(data.replace(old, new, 1))
    return path


def test_descriptor_records():
    concepts, names, dead, stats = read(FIXTURE)
    assert concepts == [CALCIMYCIN, AIDS, MI]
    assert names == NAMES
    assert dead == []
    assert len(stats) == 1 and stats[0].source == str(FIXTURE)
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (3, 3, 0)


def test_gzip_and_registry(tmp_path):
    gz = tmp_path / "desc2024.xml.gz"
    gz.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    concepts, names, dead, _ = read(gz)
    assert (concepts, names, dead) == ([CALCIMYCIN, AIDS, MI], NAMES, [])
    assert isinstance(get_reader("mesh-xml"), MeshXmlReader)


def test_unclosed_element_ends_the_file_with_a_dead_letter(tmp_path):
    path = variant(tmp_path, b"<String>Heart Attack</String>", b"<String>Heart Attack")
    concepts, names, dead, stats = read(path)
    assert concepts == [CALCIMYCIN, AIDS]  # what came before the fault stands
    assert names == NAMES[:9]
    assert len(dead) == 1
    assert dead[0].location == "record 3 (DescriptorUI D009203)"
    # the parser notices at the </Term> closing the line after the unclosed <String>
    assert dead[0].reason == f"malformed XML: mismatched tag: line {line_of(path, b'<String>Heart Attack') + 1}, column 7"
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (3, 2, 1)
    assert stats[0].reconciles()


def test_file_cut_inside_a_record(tmp_path):
    data = FIXTURE.read_bytes()
    path = tmp_path / "desc2024.xml"
    path.write_bytes(data[: data.index(b"<TreeNumberList>", data.index(b"D000163"))])
    concepts, _, dead, stats = read(path)
    assert concepts == [CALCIMYCIN]
    assert [d.location for d in dead] == ["record 2 (DescriptorUI D000163)"]
    assert "no element found" in dead[0].reason or "unclosed" in dead[0].reason
    assert stats[0].reconciles() and stats[0].records_read == 2


def test_bad_id_and_missing_name_are_dead_lettered(tmp_path):
    path = variant(tmp_path, b"<DescriptorUI>D000163</DescriptorUI>", b"<DescriptorUI>Q000163</DescriptorUI>")
    data = path.read_bytes().replace(b"<String>Myocardial Infarction</String>\n  </DescriptorName>", b"</DescriptorName>", 1)
    path.write_bytes(data)
    concepts, names, dead, stats = read(path)
    assert concepts == [CALCIMYCIN]
    assert names == NAMES[:4]
    assert [d.location for d in dead] == ["record 2 (DescriptorUI Q000163)", "record 3 (DescriptorUI D009203)"]
    assert "'Q000163' does not match the mesh id pattern" in dead[0].reason
    assert dead[1].reason == "missing DescriptorName/String"
    assert "<DescriptorUI>Q000163</DescriptorUI>" in dead[0].raw
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (3, 1, 2)


def test_a_record_is_named_by_its_first_usable_name(tmp_path):
    # a DescriptorName of control characters only (XML 1.0 admits U+007F-U+009F) was the concept's preferred_name,
    # written empty: a critical quality failure that refused the whole ingest. A record with no usable name at all is
    # dead-lettered, names and all
    junk = b"<String>&#x7f;&#x80;</String>"
    data = FIXTURE.read_bytes().replace(b"<String>Myocardial Infarction</String>", junk)  # Heart Attack is left
    for calcimycin in (b"Calcimycin", b"A-23187", b"A23187", b"Antibiotic A23187"):  # every name of D000001
        data = data.replace(b"<String>" + calcimycin + b"</String>", junk)
    path = tmp_path / "desc2024.xml"
    path.write_bytes(data)
    concepts, names, dead, stats = read(path)
    assert concepts == [AIDS, ConceptRecord("D009203", "mesh", "Heart Attack", MI.semantic_types, vocabulary="MESH")]
    # names are as read: the junk one is the normalizer's to dead-letter, Heart Attack stays an entry term
    assert names == NAMES[4:9] + [("D009203", "\x7f\x80", "preferred"), ("D009203", "Heart Attack", "entry_term")]
    assert [(d.location, d.reason) for d in dead] == [
        (
            "record 1 (DescriptorUI D000001)",
            "no name with a printable character: DescriptorName/String and every term are control characters only",
        )
    ]
    assert "<DescriptorUI>D000001</DescriptorUI>" in dead[0].raw
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (3, 2, 1)


def test_invalid_utf8_is_a_parse_error_at_its_record_and_the_records_after_it_are_read(tmp_path):
    path = variant(tmp_path, b"<String>AIDS</String>", b"<String>AI\xffDS</String>")
    concepts, _, dead, stats = read(path)
    assert concepts == [CALCIMYCIN, MI]  # the whole file stopped at record 2
    assert dead[0].location == "record 2 (DescriptorUI D000163)"
    line = line_of(path, b"AI\xffDS")
    assert dead[0].reason == f"malformed XML: not well-formed (invalid token): line {line}, column 16"
    assert stats[0].reconciles()


def test_junk_between_records_is_one_dead_letter_and_the_records_after_it_are_read(tmp_path):
    path = variant(tmp_path, b"</DescriptorRecord>\n<DescriptorRecord", b"</DescriptorRecord>\n<<junk\n<DescriptorRecord")
    concepts, _, dead, stats = read(path)
    assert concepts == [CALCIMYCIN, AIDS, MI]  # the whole file stopped at the junk
    line = line_of(path, b"<<junk")
    assert [(d.location, d.reason, d.raw) for d in dead] == [
        (
            "after record 1",
            f"not a <DescriptorRecord> record: 7 bytes of text or markup between records on line {line}",
            "<<junk\n",
        )
    ]
    assert stats[0].records_read == 4 and stats[0].reconciles()


def test_file_level_faults(tmp_path):
    empty = tmp_path / "empty.xml"
    empty.write_bytes(b"")
    wrong_root = tmp_path / "qual2024.xml"
    wrong_root.write_text('<?xml version="1.0"?>\n<QualifierRecordSet><QualifierRecord/></QualifierRecordSet>\n')
    truncated = tmp_path / "desc2024.xml.gz"
    truncated.write_bytes(gzip.compress(FIXTURE.read_bytes())[:-400])
    concepts, _, dead, stats = read(empty, wrong_root, truncated, FIXTURE)
    assert [(Path(d.source).name, d.location) for d in dead[:2]] == [("empty.xml", "file"), ("qual2024.xml", "file")]
    assert dead[0].reason == "empty file"
    # a file of another kind is not read: its records are unknown, so it fails the run's dead-letter check
    assert dead[1].reason == (
        "unread rest of file: 82 bytes on 2 lines from line 1 (root element is <QualifierRecordSet>, "
        "not <DescriptorRecordSet> or <SupplementalRecordSet>)"
    )
    assert dead[2].source == str(truncated) and dead[2].location == "file"
    assert "truncated or corrupt gzip stream" in dead[2].reason
    assert concepts[0] == CALCIMYCIN and concepts[-3:] == [CALCIMYCIN, AIDS, MI]
    assert [s.source for s in stats] == [str(empty), str(wrong_root), str(truncated), str(FIXTURE)]
    assert all(s.reconciles() for s in stats)


def _large(tmp_path, copies: int, damage_copy: int | None = None):
    """The fixture's three records `copies` times over (one copy's 'Heart Attack' string left unclosed)."""
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    records = b"".join(lines[3:-1])
    body = [
        records.replace(b"<String>Heart Attack</String>", b"<String>Heart Attack") if i == damage_copy else records
        for i in range(copies)
    ]
    path = tmp_path / "desc2024.xml"
    path.write_bytes(b"".join(lines[:3]) + b"".join(body) + lines[-1])
    return path


def _read_groups(groups):
    items = [item for group in groups for item in MeshXmlReader().read(group)]
    concepts, names, dead, stats = split(items)
    totals = [sum(getattr(s, f) for s in stats) for f in ("records_read", "records_accepted", "dead_lettered")]
    return concepts, names, dead, totals


def test_a_large_file_is_read_in_record_ranges_with_the_whole_files_items(tmp_path, monkeypatch):
    from bioel_core.kb import io as kb_io

    path = _large(tmp_path, 15)
    reader = MeshXmlReader()
    assert reader.input_groups([str(path)]) == [[str(path)]]
    whole = _read_groups([[str(path)]])
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 3000)
    groups = reader.input_groups([str(path)])
    assert len(groups) >= 5 and all(len(g) == 1 for g in groups)
    data = path.read_bytes()
    for (before,), (after,) in zip(groups, groups[1:]):
        assert before.end == after.start and data[after.start :].startswith(b"<DescriptorRecord ")
        assert after.first_record == data[: after.start].count(b"<DescriptorRecord ")
    assert _read_groups(groups) == whole and whole[3] == [45, 45, 0]


def test_malformed_xml_in_a_range_is_the_whole_files_dead_letter(tmp_path, monkeypatch):
    from bioel_core.kb import io as kb_io

    path = _large(tmp_path, 15, damage_copy=7)
    whole = _read_groups([[str(path)]])
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 3000)
    ranged = _read_groups(MeshXmlReader().input_groups([str(path)]))
    line = line_of(path, b"<String>Heart Attack\n") + 1  # the </Term> after the damaged copy's unclosed <String>
    assert [(d.location, d.reason) for d in whole[2]] == [
        ("record 24 (DescriptorUI D009203)", f"malformed XML: mismatched tag: line {line}, column 7")
    ]
    # the whole file stopped at the fault, so that only its ranges after the fault were read
    assert ranged == whole and len(whole[0]) == 44 and whole[3] == [45, 44, 1]


SUPP = FIXTURE.parent / "supp2024.xml"
BEVONIUM = ConceptRecord(
    "C000002", "mesh", "bevonium", (), "structure given in first source", ("MESH:D001561",), vocabulary="MESH"
)
HLTS = ConceptRecord(
    "C538248",
    "mesh",
    "Hypotrichosis-lymphedema-telangiectasia syndrome",
    (),
    "A rare syndrome of sparse hair, lymphedema and telangiectasia.",
    ("MESH:D008209",),
    vocabulary="MESH",
)
# the mapped descriptors, asterisk dropped, each once, in the record's order; never the indexing information,
# pharmacological actions or previous indexing, and never a qualifier
SUPP_AFTER_HLTS = [
    ConceptRecord(
        "C076029", "mesh", "olanzapine", (), "an antipsychotic thienobenzodiazepine", ("MESH:D001569",), vocabulary="MESH"
    ),
    ConceptRecord(
        "C486453",
        "mesh",
        "olanzapine-fluoxetine combination",
        alt_ids=("MESH:D005473", "MESH:D001569", "MESH:D004338"),
        vocabulary="MESH",
    ),
    ConceptRecord("C531624", "mesh", "Familial spinal arachnoiditis", alt_ids=("MESH:D001099",), vocabulary="MESH"),
    ConceptRecord("C112297", "mesh", "10,10-bis(4-pyridinylmethyl)-9(10H)-anthracenone", vocabulary="MESH"),
]


def test_supplementary_concept_records():
    # suppYYYY.xml was refused whole as "root element is <SupplementalRecordSet>"
    concepts, names, dead, stats = read(SUPP)
    assert concepts == [BEVONIUM, HLTS, *SUPP_AFTER_HLTS] and dead == []
    assert names == [
        ("C000002", "bevonium", "preferred"),
        ("C000002", "bevonium sulfate (1:1)", "entry_term"),
        ("C538248", "Hypotrichosis-lymphedema-telangiectasia syndrome", "preferred"),
        ("C538248", "HLTS", "abbreviation"),
        ("C076029", "olanzapine", "preferred"),
        ("C076029", "Zyprexa", "entry_term"),
        ("C076029", "LY 170053", "entry_term"),
        ("C486453", "olanzapine-fluoxetine combination", "preferred"),
        ("C486453", "Symbyax", "entry_term"),
        ("C531624", "Familial spinal arachnoiditis", "preferred"),
        ("C112297", "10,10-bis(4-pyridinylmethyl)-9(10H)-anthracenone", "preferred"),
        ("C112297", "XE991", "entry_term"),
    ]
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (6, 6, 0)


def test_descriptor_mappings_are_the_alt_ids_written_to_the_concepts_table(tmp_path):
    # a supplementary concept's mapped descriptors were dropped: nothing tied olanzapine (C076029) to Benzodiazepines
    from bioel_core.tables import read_table
    from pipelines import ingest_kb
    from pipelines.options import pipeline_options

    ingest_kb.run("mesh-xml", [str(SUPP)], str(tmp_path / "kb"), pipeline_options([]), num_shards=1)
    rows = {r["concept_id"]: r for r in read_table(tmp_path / "kb", "concepts").to_pylist()}
    assert rows["C076029"]["alt_ids"] == ["MESH:D001569"] and rows["C076029"]["vocabulary"] == "MESH"
    assert rows["C486453"]["alt_ids"] == ["MESH:D001569", "MESH:D004338", "MESH:D005473"]  # the table sorts them
    assert rows["C112297"]["alt_ids"] == []


def test_a_mapping_to_anything_but_a_descriptor_dead_letters_its_record(tmp_path):
    data = SUPP.read_bytes()
    path = tmp_path / "supp2024.xml"
    for bad in (b"*Q000151", b"*C076029", b"", b"**D001569"):
        path.write_bytes(data.replace(b"<DescriptorUI>*D001569</DescriptorUI>", b"<DescriptorUI>" + bad + b"</DescriptorUI>", 1))
        concepts, names, dead, stats = read(path)
        assert [(d.location, d.reason) for d in dead] == [
            (
                "record 3 (SupplementalRecordUI C076029)",
                f"HeadingMappedTo DescriptorUI {bad.decode().removeprefix('*')!r} is not a descriptor UI D\\d{{6,9}}",
            )
        ]
        assert "<SupplementalRecordUI>C076029</SupplementalRecordUI>" in dead[0].raw
        assert concepts == [BEVONIUM, HLTS, *SUPP_AFTER_HLTS[1:]] and "C076029" not in {n[0] for n in names}
        assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (6, 5, 1)


def test_a_bad_supplementary_record_is_one_dead_letter(tmp_path):
    data = SUPP.read_bytes()
    first = data[data.index(b"<SupplementalRecord ") : data.index(b"</SupplementalRecord>") + len(b"</SupplementalRecord>\n")]
    bad = first.replace(
        b"<String>bevonium</String>\n  </SupplementalRecordName>", b"<String>bevonium</SupplementalRecordName>", 1
    )
    path = tmp_path / "supp2024.xml"
    # a descriptor's UI in a supplementary record, a malformed one, and a descriptor record where none belongs
    path.write_bytes(
        data.replace(
            first,
            first.replace(b"C000002", b"D000002", 1)
            + bad
            + FIXTURE.read_bytes().split(b"\n", 3)[3].rsplit(b"</Desc", 1)[0]
            + first,
            1,
        )
    )
    concepts, _, dead, stats = read(path)
    assert concepts == [BEVONIUM, HLTS, *SUPP_AFTER_HLTS]
    assert [d.location for d in dead] == [
        "record 1 (SupplementalRecordUI D000002)",
        "record 2 (SupplementalRecordUI C000002)",
        "after record 2",
    ]
    assert "concept id 'D000002' does not match the mesh id pattern C\\d{6,9}" == dead[0].reason
    assert dead[1].reason.startswith("malformed XML: mismatched tag: line ")
    assert dead[2].reason.startswith("not a <SupplementalRecord> record: ")
    assert (stats[0].records_read, stats[0].records_accepted, stats[0].dead_lettered) == (9, 6, 3) and stats[0].reconciles()
