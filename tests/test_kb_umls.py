import gzip
import shutil
from pathlib import Path

import pytest

from bioel_core.kb import get_reader
from bioel_core.kb.umls import UmlsReader
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats

FIXTURES = Path(__file__).parent / "fixtures" / "umls"
FILES = ["MRCONSO.RRF", "MRSTY.RRF", "MRDEF.RRF"]
DISEASE = "T047:Disease or Syndrome"

ASTHMA_DEF = (
    "A form of bronchial disorder with three distinct components: airway hyper-responsiveness "
    "(RESPIRATORY HYPERSENSITIVITY), airway INFLAMMATION, and intermittent AIRWAY OBSTRUCTION."
)
DM_DEF = "A heterogeneous group of disorders characterized by HYPERGLYCEMIA and GLUCOSE INTOLERANCE."
MI_DEF = "NECROSIS of the MYOCARDIUM caused by an obstruction of the blood supply to the heart (CORONARY CIRCULATION)."


def split(items):
    items = list(items)
    return (
        [i for i in items if isinstance(i, ConceptRecord)],
        [i for i in items if isinstance(i, NameRecord)],
        [i for i in items if isinstance(i, DeadLetter)],
        {s.source: s for s in items if isinstance(s, ReadStats)},
    )


def read(paths, **options):
    return split(UmlsReader(**options).read([str(p) for p in paths]))


def copy_fixtures(tmp_path, gz=False):
    paths = []
    for name in FILES:
        target = tmp_path / (name + (".gz" if gz else ""))
        with open(FIXTURES / name, "rb") as src, gzip.open(target, "wb") if gz else open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        paths.append(target)
    return paths


def write(path, text_or_bytes):
    data = text_or_bytes.encode() if isinstance(text_or_bytes, str) else text_or_bytes
    path.write_bytes(data)
    return path


def names_of(names, cui):
    return [(n.name, n.name_type) for n in names if n.concept_id == cui]


def test_concepts_names_types_and_definitions():
    concepts, names, dead, stats = read([FIXTURES / f for f in FILES])
    assert dead == []
    assert concepts == [
        ConceptRecord("C0004096", "umls", "Asthma", (DISEASE,), ASTHMA_DEF, vocabulary="UMLS"),
        ConceptRecord("C0011849", "umls", "Diabetes Mellitus", (DISEASE,), DM_DEF, vocabulary="UMLS"),
        ConceptRecord(
            "C0027051", "umls", "Myocardial Infarction", (DISEASE, "T046:Pathologic Function"), MI_DEF, vocabulary="UMLS"
        ),
    ]
    assert names_of(names, "C0004096") == [("Asthma", "preferred"), ("Asthma, Bronchial", "synonym")]
    # the preferred atom (TS=P, STT=PF, ISPREF=Y) is the second row here, not the first
    assert names_of(names, "C0011849") == [
        ("DM", "abbreviation"),
        ("Diabetes Mellitus", "preferred"),
        ("diabetes mellitus", "synonym"),
    ]
    assert names_of(names, "C0027051") == [
        ("Myocardial Infarction", "preferred"),
        ("Heart Attack", "synonym"),
        ("MI", "abbreviation"),
    ]
    assert all(n.kb == "umls" for n in names)


def test_filter_counts_and_reconciliation():
    _, _, _, stats = read([FIXTURES / f for f in FILES])
    conso, sty, mrdef = (stats[str(FIXTURES / f)] for f in FILES)
    assert (conso.records_read, conso.records_accepted, conso.dead_lettered) == (13, 8, 0)
    assert conso.skipped_by_filter == {"LAT not selected": 2, "suppressed": 3}
    assert (sty.records_read, sty.records_accepted) == (6, 4)
    assert sty.skipped_by_filter == {"concept not selected": 1, "CUI not in MRCONSO": 1}
    assert (mrdef.records_read, mrdef.records_accepted) == (6, 3)
    assert mrdef.skipped_by_filter == {"not the first definition": 1, "concept not selected": 1, "suppressed": 1}
    assert all(s.reconciles() for s in stats.values())


def test_keep_suppressed_and_all_languages():
    concepts, names, _, stats = read([FIXTURES / f for f in FILES], languages=None, exclude_suppressed=False)
    assert [c.concept_id for c in concepts] == ["C0004096", "C0011849", "C0020538", "C0027051"]
    assert ("Asthme", "synonym") in names_of(names, "C0004096")
    assert ("Asthma NOS", "synonym") in names_of(names, "C0004096")
    assert names_of(names, "C0020538") == [("Hypertension", "preferred")]
    assert ("Infarction myocardial", "synonym") in names_of(names, "C0027051")
    # the suppressed CSP definition comes first in MRDEF, so it is now the one kept
    assert concepts[3].definition == "death of an area of the myocardium resulting from occlusion of a coronary artery."
    assert stats[str(FIXTURES / "MRCONSO.RRF")].records_accepted == 13


def test_sab_tty_and_preferred_only_filters():
    paths = [FIXTURES / f for f in FILES]
    _, names, _, stats = read(paths, sabs=["MSH"])
    assert {n.name for n in names} == {
        "Asthma",
        "Asthma, Bronchial",
        "Diabetes Mellitus",
        "Myocardial Infarction",
        "Heart Attack",
    }
    assert stats[str(paths[0])].skipped_by_filter == {"LAT not selected": 2, "suppressed": 3, "SAB not selected": 3}

    _, names, _, stats = read(paths, ttys=["AB", "MH"])
    assert [(n.name, n.name_type) for n in names] == [
        ("Asthma", "preferred"),
        ("DM", "abbreviation"),
        ("Diabetes Mellitus", "preferred"),
        ("Myocardial Infarction", "preferred"),
        ("MI", "abbreviation"),
    ]
    assert stats[str(paths[0])].skipped_by_filter["TTY not selected"] == 3

    concepts, names, _, stats = read(paths, preferred_only=True)
    assert [(n.concept_id, n.name, n.name_type) for n in names] == [
        ("C0004096", "Asthma", "preferred"),
        ("C0011849", "Diabetes Mellitus", "preferred"),
        ("C0027051", "Myocardial Infarction", "preferred"),
    ]
    assert stats[str(paths[0])].skipped_by_filter["not preferred"] == 5
    assert all(s.reconciles() for s in stats.values())


def test_semantic_type_filter_keeps_the_concepts_of_the_selected_tuis():
    paths = [FIXTURES / f for f in FILES]
    concepts, names, dead, stats = read(paths, scope={"semantic_types": ["T046", "T191"]})
    assert [c.concept_id for c in concepts] == ["C0027051"] and dead == []
    assert concepts[0].semantic_types == (DISEASE, "T046:Pathologic Function")  # all its types, not only the selected
    assert {n.concept_id for n in names} == {"C0027051"}
    conso, sty, mrdef = (stats[str(p)] for p in paths)
    assert conso.skipped_by_filter == {
        "LAT not selected": 2,
        "suppressed": 3,
        "out of scope (scope.semantic_types): no selected semantic type": 5,
    }
    assert sty.skipped_by_filter == {"concept not selected": 3, "CUI not in MRCONSO": 1} and sty.records_accepted == 2
    assert mrdef.records_accepted == 1
    assert all(s.reconciles() for s in stats.values())
    with pytest.raises(ValueError, match=r"semantic types \['T046'\] need MRSTY.RRF among the inputs"):
        UmlsReader(scope={"semantic_types": ["T046"]}).input_groups([str(FIXTURES / "MRCONSO.RRF")])


def test_gzip_inputs_read_the_same(tmp_path):
    plain = read([FIXTURES / f for f in FILES])[:3]
    assert read(copy_fixtures(tmp_path, gz=True))[:3] == plain


def test_input_groups_and_registry():
    reader = get_reader("umls", languages=("ENG",))
    assert isinstance(reader, UmlsReader)
    paths = [str(FIXTURES / f) for f in FILES]
    assert reader.input_groups(paths) == [paths]


def test_bad_rows_are_dead_lettered(tmp_path):
    conso_lines = (FIXTURES / "MRCONSO.RRF").read_bytes().splitlines(keepends=True)
    bad = [
        b"C0001175|ENG|P|L0001175|PF|S0010340|Y|A0019182||M0000245|D000163|MSH|MH|D000163|Acquired Immunodeficiency Syndrome|0|N|\n",
        b"X0001175|ENG|P|L0001175|PF|S0010340|Y|A0019182||M0000245|D000163|MSH|MH|D000163|AIDS|0|N||\n",
        b"C0001175|ENG|P|L0001175|PF|S0010340|Y|A0019182||M0000245|D000163|MSH|MH|D000163|Acquired Immunod\xe9ficiency|0|N||\n",
    ]
    out_of_order = b"C0001175|ENG|P|L0001175|PF|S0010340|Y|A0019182||M0000245|D000163|MSH|MH|D000163|AIDS|0|N||\n"
    conso = write(tmp_path / "MRCONSO.RRF", b"".join(bad + conso_lines[:4] + [out_of_order] + conso_lines[4:]))
    sty_lines = (FIXTURES / "MRSTY.RRF").read_text().splitlines(keepends=True)
    sty = write(
        tmp_path / "MRSTY.RRF",
        "".join(sty_lines[:2] + ["C0004096|T047|B2.2.1.2.1|Disease or Syndrome|AT17683839|256|\n"] + sty_lines[2:]),
    )
    mrdef = write(tmp_path / "MRDEF.RRF", "")
    concepts, names, dead, stats = read([conso, sty, mrdef])

    reasons = {(d.source, d.location): d.reason for d in dead}  # the join interleaves files, so no fixed order
    assert len(dead) == 6 and sorted(reasons) == sorted(
        [
            (str(conso), "line 1"),
            (str(conso), "line 2"),
            (str(conso), "line 3"),
            (str(conso), "line 8"),
            (str(sty), "line 3"),
            (str(mrdef), "file"),
        ]
    )
    assert "expected 18 fields" in reasons[str(conso), "line 1"] and "found 17" in reasons[str(conso), "line 1"]
    assert "'X0001175' does not match the umls id pattern" in reasons[str(conso), "line 2"]
    assert reasons[str(conso), "line 3"].startswith("invalid UTF-8")
    assert reasons[str(conso), "line 8"] == "out of CUI order: C0001175 after C0004096"
    assert reasons[str(sty), "line 3"] == "out of CUI order: C0004096 after C0011849"
    assert reasons[str(mrdef), "file"] == "empty file"
    # the good rows still come out, only without definitions
    assert [c.concept_id for c in concepts] == ["C0004096", "C0011849", "C0027051"]
    assert all(c.definition is None for c in concepts)
    assert len(names) == 8
    assert stats[str(conso)].dead_lettered == 4 and stats[str(conso)].records_read == 17
    assert all(s.reconciles() for s in stats.values())


def test_truncated_gzip_gives_one_dead_letter_and_no_record(tmp_path):
    conso, sty, mrdef = copy_fixtures(tmp_path, gz=True)
    data = conso.read_bytes()
    conso.write_bytes(data[: len(data) - 40])
    concepts, _, dead, stats = read([conso, sty, mrdef])
    assert len(dead) == 1 and dead[0].source == str(conso)
    assert dead[0].location == "file"  # verified before any line is read (CORRUPT_INPUT_POLICY)
    assert "truncated or corrupt gzip stream" in dead[0].reason
    assert concepts == []
    assert all(s.reconciles() for s in stats.values())


def test_unknown_and_duplicate_files_are_dead_lettered(tmp_path):
    other = write(tmp_path / "MRREL.RRF", "C0004096|A0027009|...|\n")
    second = tmp_path / "copy" / "MRSTY.RRF"
    second.parent.mkdir()
    shutil.copy(FIXTURES / "MRSTY.RRF", second)
    concepts, _, dead, stats = read([FIXTURES / f for f in FILES] + [other, second])
    assert [(d.source, d.location) for d in dead] == [(str(other), "file"), (str(second), "file")]
    assert "not a UMLS file" in dead[0].reason
    assert dead[1].reason == "a second MRSTY file in one input group"
    assert len(concepts) == 3
    assert len(stats) == 5 and all(s.reconciles() for s in stats.values())


def test_the_benchmarks_synthetic_mrconso_reads_cleanly_and_is_reproducible(tmp_path):
    # benchmarks/ingest.py --synthetic-rows measures ingest on this file: every row must be read, none dead-lettered
    from benchmarks.synthetic_mrconso import write_mrconso

    path = write_mrconso(tmp_path / "a", 3_000, seed=1)
    assert path.read_bytes() == write_mrconso(tmp_path / "b", 3_000, seed=1).read_bytes()
    lines = path.read_text().splitlines()
    assert len(lines) == 3_000 and all(line.count("|") == 18 for line in lines)
    assert [line.split("|")[0] for line in lines] == sorted(line.split("|")[0] for line in lines)
    concepts, names, dead, stats = read([path])
    stat = stats[str(path)]
    assert not dead and stat.records_read == 3_000
    assert stat.records_read == stat.records_accepted + sum(stat.skipped_by_filter.values())
    assert len(concepts) == len({line.split("|")[0] for line in lines})  # every concept has its English preferred atom
    assert 0.6 < len(names) / 3_000 < 0.9  # most atoms English and not suppressed


def test_the_synthetic_mrconso_appends_real_concepts_after_the_synthetic_ones(tmp_path):
    # benchmarks/umls_link.py puts MeSH's descriptors into the file so that real text holds the KB's names
    from benchmarks.synthetic_mrconso import mesh_terms, write_mrconso

    thesaurus = tmp_path / "thesaurus.tsv"
    header = (
        "DescriptorUI\tDescriptorName\tConceptUI\tTermUI\tTermName\tConceptPreferredTermYN\tIsPermutedTermYN\t"
        "LexicalTag\tRecordPreferredTermYN\n"
    )
    rows = [
        ("D003924", "Diabetes Mellitus, Type 2", "T1", "Diabetes Mellitus, Type 2", "NON\tY"),
        ("D003924", "Diabetes Mellitus, Type 2", "T2", "NIDDM", "ABB\tN"),
        ("D000001", "Calcimycin", "T3", "Calcimycin", "NON\tY"),
    ]
    write(thesaurus, header + "".join(f"{d}\t{n}\tM1\t{t}\t{term}\tY\tN\t{tags}\n" for d, n, t, term, tags in rows))
    real = mesh_terms(thesaurus)
    assert real == [["Diabetes Mellitus, Type 2", "NIDDM"], ["Calcimycin"]]
    path = write_mrconso(tmp_path / "umls", 300, seed=1, real=real)
    lines = path.read_text().splitlines()
    assert len(lines) == 303 and [line.split("|")[0] for line in lines] == sorted(line.split("|")[0] for line in lines)
    concepts, names, dead, _ = read([path])
    assert not dead
    by_cui = {}
    for name in names:
        by_cui.setdefault(name.concept_id, []).append(name.name)
    assert sorted(by_cui[lines[-1].split("|")[0]]) == ["Calcimycin"]
    assert sorted(by_cui[lines[-2].split("|")[0]]) == ["Diabetes Mellitus, Type 2", "NIDDM"]


def _umls_release(tmp_path):
    """A small release with several CUIs a range: MRCONSO from the synthetic generator with a malformed line
    and a non-UTF-8 line inside, MRSTY and MRDEF rows for some of its CUIs and for CUIs it lacks."""
    from benchmarks.synthetic_mrconso import write_mrconso

    conso = write_mrconso(tmp_path, 400)
    lines = conso.read_bytes().splitlines(keepends=True)
    lines[123:123] = [b"C0000041|ENG|broken line\n", b"C0000041|ENG|P|L|PF|S|Y|A||||MSH|MH||\xff\xfe|0|N||\n"]
    conso.write_bytes(b"".join(lines))
    cuis = sorted({line.split(b"|", 1)[0].decode() for line in lines})
    sty = [f"{cui}|T047|B2.2.1.2.1|Disease or Syndrome|AT{i:08d}|256|\n" for i, cui in enumerate(cuis) if i % 3]
    sty.insert(10, "C0000000|T047|B|Disease or Syndrome|AT0|256|\n")  # sorts first: a CUI without MRCONSO rows
    sty.append("C9999999|T047|B|Disease or Syndrome|AT9|256|\n")
    defs = [f"{cui}|A1|AT{i}|S|MSH|definition {i}|N||\n" for i, cui in enumerate(cuis) if i % 4 == 1]
    write(tmp_path / "MRSTY.RRF", "".join(sorted(sty)))
    write(tmp_path / "MRDEF.RRF", "".join(defs))
    return [str(tmp_path / f) for f in FILES]


def test_a_large_mrconso_is_read_in_cui_ranges_with_the_whole_file_result(tmp_path, monkeypatch):
    from bioel_core.kb import io as kb_io

    paths = _umls_release(tmp_path)
    reader = UmlsReader()
    assert reader.input_groups(paths) == [paths]  # smaller than a range: one group
    whole = split(reader.read(paths))
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 2000)
    groups = reader.input_groups(paths)
    assert len(groups) > 5 and all(len(g) == 3 for g in groups)
    for kind, parts in zip(FILES, zip(*groups)):
        data = (tmp_path / kind).read_bytes()
        assert [p.path for p in parts] == [str(tmp_path / kind)] * len(groups)
        assert [p.start for p in parts][0] == 0 and parts[-1].end is None
        assert all(a.end == b.start for a, b in zip(parts, parts[1:]))  # the ranges tile the file
        for part in parts:  # each starts on a line, and knows its line number
            assert part.start == 0 or data[part.start - 1 : part.start] == b"\n"
            assert part.first_line == data[: part.start].count(b"\n") + 1
    conso = (tmp_path / "MRCONSO.RRF").read_bytes()
    for part in [g[0] for g in groups][1:]:  # a CUI is never cut
        before = conso[: part.start].splitlines()[-1].split(b"|")[0]
        assert conso[part.start :].split(b"|")[0] != before
    pieces = [split(reader.read(group)) for group in groups]
    concepts, names, dead = ([x for p in pieces for x in p[i]] for i in range(3))
    assert (concepts, names, dead) == whole[:3]
    assert len(dead) == 2 and {d.location for d in dead} == {"line 124", "line 125"}
    for kind in FILES:
        path = str(tmp_path / kind)
        ranged = [p[3][path] for p in pieces]
        assert sum(s.records_read for s in ranged) == whole[3][path].records_read
        assert sum(s.records_accepted for s in ranged) == whole[3][path].records_accepted


def test_a_gzipped_mrconso_or_mrsty_makes_one_group(tmp_path, monkeypatch):
    from bioel_core.kb import io as kb_io

    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 100)
    paths = [str(p) for p in copy_fixtures(tmp_path, gz=True)]
    assert UmlsReader().input_groups(paths) == [paths]
    mixed = [str(tmp_path / "plain" / "MRCONSO.RRF"), paths[1], paths[2]]  # MRCONSO as is, MRSTY and MRDEF gzipped
    (tmp_path / "plain").mkdir()
    shutil.copy(FIXTURES / "MRCONSO.RRF", mixed[0])
    assert UmlsReader().input_groups(mixed) == [mixed]
    concepts, _, dead, _ = split(UmlsReader().read(mixed))
    assert len(concepts) == 3 and dead == []


def test_the_preferred_name_is_the_english_one_when_several_languages_are_read(tmp_path):
    # every language has its own TS=P, STT=PF, ISPREF=Y row; UMLS's concept name is the English one. With French
    # read too and its row first in the file, the French string was the concept's name
    conso = write(
        tmp_path / "MRCONSO.RRF",
        "C0004096|FRE|P|L0|PF|S0|Y|A0||M1|D001249|MSHFRE|MH|D001249|Asthme|3|N||\n"
        "C0004096|ENG|P|L1|PF|S1|Y|A1||M1|D001249|MSH|MH|D001249|Asthma|0|N||\n"
        "C0004096|ENG|S|L2|PF|S2|Y|A2||M1|D001249|MSH|EN|D001249|Asthma, Bronchial|0|N||\n"
        "C0011849|FRE|P|L3|PF|S3|Y|A3||M2|D003920|MSHFRE|MH|D003920|Diabète|3|N||\n",
    )
    concepts, names, dead, _ = read([conso], languages=("ENG", "FRE"))
    assert dead == []
    assert [(c.concept_id, c.preferred_name) for c in concepts] == [("C0004096", "Asthma"), ("C0011849", "Diabète")]
    assert names_of(names, "C0004096") == [("Asthme", "synonym"), ("Asthma", "preferred"), ("Asthma, Bronchial", "synonym")]


def test_a_concept_is_named_by_its_first_usable_str(tmp_path):
    # a preferred row whose STR is control characters only was the concept's preferred_name, written empty: a
    # critical quality failure that refused the whole ingest. A concept with no usable STR has its rows dead-lettered
    junk = {
        ("C0004096", "Asthma"): "\x01\x02",  # the preferred row: the next selected row names the concept
        ("C0027051", "Myocardial Infarction"): "\x03",
        ("C0027051", "Heart Attack"): "\x04\x05",
        ("C0027051", "MI"): "\x06",
    }
    rows = [line.split("|") for line in (FIXTURES / "MRCONSO.RRF").read_text().splitlines()]
    conso = write(
        tmp_path / "MRCONSO.RRF", "".join("|".join(r[:14] + [junk.get((r[0], r[14]), r[14])] + r[15:]) + "\n" for r in rows)
    )
    paths = [conso, FIXTURES / "MRSTY.RRF", FIXTURES / "MRDEF.RRF"]
    concepts, names, dead, stats = read(paths)
    assert [(c.concept_id, c.preferred_name) for c in concepts] == [
        ("C0004096", "Asthma, Bronchial"),
        ("C0011849", "Diabetes Mellitus"),
    ]
    assert concepts[0].definition == ASTHMA_DEF and concepts[0].semantic_types == (DISEASE,)
    # names are as read: the junk one is the normalizer's to dead-letter, the synonym stays a synonym
    assert names_of(names, "C0004096") == [("\x01\x02", "preferred"), ("Asthma, Bronchial", "synonym")]
    assert names_of(names, "C0027051") == []
    lines = conso.read_text().splitlines()
    assert [(d.location, d.reason, d.raw) for d in dead] == [
        (
            f"line {n}",
            "no name with a printable character: every selected STR of C0027051 is control characters only",
            lines[n - 1],
        )
        for n in (9, 10, 11)
    ]  # the two suppressed rows are filtered, not dead
    conso_stats, sty, mrdef = (stats[str(p)] for p in paths)
    assert (conso_stats.records_read, conso_stats.records_accepted, conso_stats.dead_lettered) == (13, 5, 3)
    assert sty.skipped_by_filter == {"concept not selected": 3, "CUI not in MRCONSO": 1} and sty.records_accepted == 2
    assert all(s.reconciles() for s in stats.values())
