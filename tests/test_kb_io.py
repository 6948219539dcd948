"""What every KB reader gets from the shared reading helpers (bioel_core/kb/io.py)."""

import dataclasses
import gzip
import shutil

import pytest

from bioel_core.kb import get_reader
from bioel_core.kb.io import UTF8_BOM
from bioel_core.records import ConceptRecord, DeadLetter, NameRecord, ReadStats
from conftest import FIXTURES

# each reader with its fixture files (the MeSH TSV reader with its trees file: a trees file with a BOM was not
# recognised and was read as a thesaurus, 33,552 bogus names and no semantic types)
CASES = {
    "medic-biosyn": ["biosyn/medic_raw.txt"],
    "biosyn-dict": ["biosyn/dictionary.txt"],
    "ctd-diseases": ["ctd/CTD_diseases.tsv", "ctd/CTD_diseases.csv"],
    "ctd-chemicals": ["ctd/CTD_chemicals_13col.csv"],
    "mesh-tsv": ["mesh_tsv/thesaurus.tsv", "mesh_tsv/trees.tsv"],
    "mesh-xml": ["mesh_xml/desc2024.xml"],
    "umls": ["umls/MRCONSO.RRF", "umls/MRSTY.RRF", "umls/MRDEF.RRF"],
    "snomed": [
        "snomed/sct2_Concept_Snapshot_INT_20240101.txt",
        "snomed/sct2_Description_Snapshot-en_INT_20240101.txt",
        "snomed/der2_cRefset_LanguageSnapshot-en_INT_20240101.txt",
    ],
}


def read_all(kind, folder, files):
    items = list(get_reader(kind).read([str(folder / f.rsplit("/", 1)[-1]) for f in files]))
    # sources differ by folder only
    return [
        dataclasses.replace(i, source=i.source.rsplit("/", 1)[-1]) if isinstance(i, DeadLetter | ReadStats) else i for i in items
    ]


@pytest.mark.parametrize("kind", sorted(CASES))
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_every_reader_skips_a_byte_order_mark(kind, compress, tmp_path):
    # a UTF-8 BOM dead-lettered the first MEDIC record and hid the MeSH trees file's header
    plain, bom = tmp_path / "plain", tmp_path / "bom"
    plain.mkdir(), bom.mkdir()
    for f in CASES[kind]:
        data = (FIXTURES / f).read_bytes()
        name = f.rsplit("/", 1)[-1]
        shutil.copy(FIXTURES / f, plain / name)
        (bom / name).write_bytes(gzip.compress(UTF8_BOM + data) if compress else UTF8_BOM + data)
    expected, found = read_all(kind, plain, CASES[kind]), read_all(kind, bom, CASES[kind])
    assert any(isinstance(i, ConceptRecord) for i in expected) and any(isinstance(i, NameRecord) for i in expected)
    assert found == expected
    assert not any(isinstance(i, NameRecord) and "\ufeff" in i.name for i in found)
