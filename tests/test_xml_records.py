"""The XML record cutter (bioel_core/xml_records.py) on its own: what it yields does not depend on where the stream's
chunks end, and memory holds one record at most however long the input is."""

import pytest

from bioel_core import xml_records
from bioel_core.xml_records import Fault, Record, XmlRecords
from test_adversarial_kb import XML_CASES

ROOTS = {"DescriptorRecordSet": ("DescriptorRecord",), "SupplementalRecordSet": ("SupplementalRecord",)}
SMALL_CASES = [c for c in XML_CASES if "overlong" not in c.bad]


def cut(path, **options):
    with open(path, "rb") as fh:
        return list(XmlRecords(ROOTS, **options).read(fh))


@pytest.mark.parametrize("case", SMALL_CASES, ids=[c.id for c in SMALL_CASES])
def test_the_cut_does_not_depend_on_where_chunks_end(case, tmp_path, monkeypatch):
    # every token the cutter looks for (end tags, comment and CDATA delimiters, "]>" in a DOCTYPE) split across reads
    (path,) = case.build(tmp_path)
    whole = cut(path)
    assert any(isinstance(p, Record) for p in whole)
    for chunk in (1, 2, 3, 5, 8):
        monkeypatch.setattr(xml_records, "CHUNK", chunk)
        assert cut(path) == whole, chunk


def test_a_long_record_or_junk_is_never_held_whole(tmp_path):
    limit = 10_000
    record = (
        b"<DescriptorRecord><DescriptorUI>D000001</DescriptorUI><String>" + b"A" * 200_000 + b"</String></DescriptorRecord>\n"
    )
    path = tmp_path / "desc.xml"
    path.write_bytes(
        b"<DescriptorRecordSet>\n"
        + record
        + b"B" * 200_000
        + b"\n"
        + record.replace(b"A" * 200_000, b"ok")
        + b"</DescriptorRecordSet>\n"
    )
    held = []

    class Watched(XmlRecords):
        def _more(self):
            held.append(len(self.data))
            return super()._more()

    with open(path, "rb") as fh:
        pieces = list(Watched(ROOTS, max_record_bytes=limit).read(fh))
    assert max(held) <= limit + xml_records.CHUNK
    assert [p.reason if isinstance(p, Fault) else p.data for p in pieces] == [
        f"record longer than 10,000 bytes ({len(record) - 1:,} bytes on line 2): not parsed",
        "not a <DescriptorRecord> record: 200,001 bytes of text or markup between records on line 3",
        record.replace(b"A" * 200_000, b"ok").rstrip(),
    ]
    assert pieces[0].data == record[: xml_records.RAW_BYTES] and pieces[1].data == b"B" * xml_records.RAW_BYTES


def test_a_record_not_closed_before_the_root_ends_costs_itself_alone(tmp_path):
    """It was cut to the end of the file: the rest of the file unread, although the root's end tag stood right after it.
    Now it ends where the root does, with the fault its parser names; a header kind inside a record (BioC's <infon>)
    never ends one."""
    path = tmp_path / "set.xml"
    path.write_bytes(b"<Set>\n<R><a>1</a></R>\n<R><a>2</a>\n</Set>\n")
    with path.open("rb") as fh:
        record, fault = XmlRecords({"Set": ("R",)}).read(fh)
    assert isinstance(record, Record) and isinstance(fault, Fault) and not fault.unread
    assert fault.reason == "malformed XML: <R> on line 3 is not closed before </Set> on line 4"
    assert (fault.error.message, fault.error.line) == ("no element found", 4)
    path.write_bytes(b"<Set><h>x</h>\n<R><h>1</h></R><R><h>2</h></R></Set>")
    with path.open("rb") as fh:
        pieces = list(XmlRecords({"Set": ("R",)}, headers=("h",)).read(fh))
    assert [(p.tag, p.ordinal) for p in pieces] == [("h", 1), ("R", 2), ("R", 3)]


def test_a_file_in_another_ascii_compatible_encoding_is_read_as_it_declares(tmp_path):
    """BioC and MeSH files may declare ISO-8859-1: each record is decoded as declared (it was an unread file when the
    cutter read UTF-8 only); an encoding that does not write markup as ASCII does is the file's unread rest."""
    from bioel_core.corpora.read import read_documents
    from bioel_core.corpora.records import Document
    from bioel_core.records import DeadLetter

    body = (
        "<collection><source>s</source><date>d</date><key>k</key>"
        "<document><id>1</id><passage><offset>0</offset><text>Maladie de Ménière</text></passage></document>"
        "<document><id>2</id><passage><offset>0</offset><text>café</text></passage></document></collection>"
    )
    latin = tmp_path / "latin.xml"
    latin.write_bytes(b'<?xml version="1.0" encoding="ISO-8859-1"?>\n' + body.encode("latin-1"))
    items = list(read_documents([str(latin)], "bioc-xml"))
    assert [d.text for d in items if isinstance(d, Document)] == ["Maladie de Ménière", "café"], items
    wide = tmp_path / "wide.xml"
    wide.write_bytes(b'<?xml version="1.0" encoding="UTF-16"?>\n' + body.encode("ascii", "replace"))
    (letter,) = [i for i in read_documents([str(wide)], "bioc-xml") if isinstance(i, DeadLetter)]
    assert letter.unread and "UTF-16" in letter.reason.upper(), letter
