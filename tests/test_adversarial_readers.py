"""Issue 40: bad records, generated per class of bad input for every corpus reader the class applies to, each put
between valid records (document 2 of 5): the valid records are all kept, the bad one is exactly the dead letters
stated (naming file and record), and nothing raises.

`CASES` is the table (a module-level list, so a benchmarks script can import it with `outcome` to print bad-input
class x reader -> kept / dead letters).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from bioel_core.corpora import Document, read_documents
from bioel_core.records import DeadLetter

IDS = ("1", "2", "3", "4", "5")
BAD = "2"  # the record every case spoils
DEEP = 100_000  # nesting that raised RecursionError


# ---- valid records, one builder per reader --------------------------------------------------------------------


def _title(doc_id: str) -> str:
    return f"Aspirin and heart attack, record {doc_id}."


def _jsonl(doc_id: str, title: str | None = None) -> str:
    return json.dumps({"pmid": doc_id, "title": title or _title(doc_id), "abstract": "An abstract."})


def _bioc_json(doc_id: str, **passage) -> str:
    """A document over several lines (as the BioC writers indent it); `passage` replaces keys of its passage."""
    return json.dumps(
        {
            "id": doc_id,
            "infons": {},
            "passages": [
                {
                    "infons": {"type": "title"},
                    "offset": 0,
                    "text": _title(doc_id),
                    "annotations": [
                        {
                            "id": "T1",
                            "infons": {"type": "Chemical", "identifier": "D001241"},
                            "text": "Aspirin",
                            "locations": [{"offset": 0, "length": 7}],
                        }
                    ],
                    **passage,
                }
            ],
            "relations": [],
        },
        indent=1,
    )


def _bioc_xml(doc_id: str, text: str | None = None, offset: str = "0") -> str:
    return (
        f'<document><id>{doc_id}</id><passage><infon key="type">title</infon><offset>{offset}</offset>'
        f'<text>{text or _title(doc_id)}</text><annotation id="T1"><infon key="type">Chemical</infon>'
        f'<infon key="MESH">D001241</infon><location offset="{offset}" length="7"/><text>Aspirin</text></annotation>'
        f"</passage></document>"
    )


def _pubtator(doc_id: str, title: str | None = None, extra: str = "") -> str:
    title = title or _title(doc_id)
    return f"{doc_id}|t|{title}\n{doc_id}|a|An abstract.\n{doc_id}\t0\t7\tAspirin\tChemical\tD001241\n{extra}"


def _pubmed(doc_id: str, title: str | None = None) -> str:
    return (
        f'<PubmedArticle><MedlineCitation Status="MEDLINE" Owner="NLM"><PMID Version="1">{doc_id}</PMID><Article>'
        f"<ArticleTitle>{title or _title(doc_id)}</ArticleTitle><Abstract><AbstractText>An abstract.</AbstractText>"
        f"</Abstract></Article></MedlineCitation></PubmedArticle>"
    )


def _text(doc_id: str, text: str | None = None) -> str:
    return f"{doc_id}\t{text or _title(doc_id)}"


RECORD = {
    "jsonl": _jsonl,
    "bioc-json": _bioc_json,
    "bioc-xml": _bioc_xml,
    "pubtator": _pubtator,
    "pubmed-xml": _pubmed,
    "text": _text,
}

# ---- files: the records as each format joins them -----------------------------------------------------------

XML_DECLARATION = b"<?xml version='1.0' encoding='UTF-8'?>\n"


def _file(reader: str, records: list[bytes], doctype: bytes = b"") -> bytes:
    if reader in ("jsonl", "text"):
        return b"\n".join(records) + b"\n"
    if reader == "pubtator":
        return b"\n".join(records)
    if reader == "bioc-json":  # a collection over several lines, as the BioC writers indent it
        return b'{"source": "test", "date": "", "key": "", "infons": {},\n "documents": [\n' + b",\n".join(records) + b"\n]}\n"
    root = b"collection" if reader == "bioc-xml" else b"PubmedArticleSet"
    doctype = doctype or (
        b"<!DOCTYPE collection SYSTEM 'BioC.dtd'>\n"
        if reader == "bioc-xml"
        else b'<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" '
        b'"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">\n'
    )
    head = b"<source>test</source><date/><key/>\n" if reader == "bioc-xml" else b""
    return XML_DECLARATION + doctype + b"<" + root + b">\n" + head + b"\n".join(records) + b"\n</" + root + b">\n"


@dataclass(frozen=True)
class Case:
    """One class of bad input for one reader: `bad` is record 2 of 5 as bytes; the file holds valid records 1, 3, 4
    and 5 around it (`doctype` replaces an XML file's DOCTYPE). The outcome must be exactly `kept` (document ids, in
    order) and `dead` dead letters, each naming the file and, in its location, `names`."""

    fault: str
    reader: str
    bad: bytes
    kept: tuple[str, ...]
    dead: int
    names: str
    doctype: bytes = b""
    per_line: bool = False

    @property
    def id(self) -> str:
        return f"{self.fault}-{self.reader}"

    def data(self) -> bytes:
        records = [self.bad if i == BAD else RECORD[self.reader](i).encode() for i in IDS]
        return _file(self.reader, records, self.doctype)


OTHERS = tuple(i for i in IDS if i != BAD)
XXE = b'<!DOCTYPE root [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
BOMB = (
    b'<!DOCTYPE root [<!ENTITY a "aaaaaaaaaa">'
    + b"".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">'.encode() for p, c in zip("abcdefgh", "bcdefghi"))
    + b"]>\n"
)
BIOC_JSON_LINE = f"line {4 + _bioc_json('1').count(chr(10))}"  # where record 2 starts: after 2 lines and record 1


def _case(fault: str, reader: str, bad: str | bytes, dead: int = 1, names: str = "", **kw) -> Case:
    kept = OTHERS if dead else IDS
    return Case(fault, reader, bad if isinstance(bad, bytes) else bad.encode(), kw.pop("kept", kept), dead, names, **kw)


CASES: list[Case] = [
    # malformed markup or syntax
    _case("malformed markup", "bioc-xml", _bioc_xml(BAD).replace("</text>", "", 1), names="document 2 (id 2), line 6, column"),
    _case("malformed markup", "bioc-xml", _bioc_xml(BAD).removesuffix("</document>"), names="document 2 (id 2)"),
    _case("malformed markup", "pubmed-xml", _pubmed(BAD).replace("</ArticleTitle>", "</Title>"), names="article 2 (PMID 2)"),
    _case("malformed markup", "bioc-json", _bioc_json(BAD).replace('"Chemical"', "Chemical"), names=BIOC_JSON_LINE),
    _case("malformed markup", "jsonl", _jsonl(BAD)[:-5], names="line 2"),
    _case("malformed markup", "pubtator", _pubtator(BAD, extra=f"{BAD}\tnot an annotation\n"), names="line "),
    # bytes that are not UTF-8 (Latin-1 é)
    *[
        _case(
            "invalid UTF-8",
            reader,
            RECORD[reader](BAD).encode().replace(b"heart", b"h\xe9art"),
            names=names,
            per_line=reader == "text",
        )
        for reader, names in (
            ("bioc-xml", "document 2 (id 2), line 6"),
            ("pubmed-xml", "article 2 (PMID 2)"),
            ("bioc-json", "line "),
            ("jsonl", "line 2"),
            ("pubtator", "line "),
            ("text", "line 2"),
        )
    ],
    # a lone surrogate: a JSON escape, an XML character reference, or its UTF-8-style bytes (ED A0 80)
    _case("lone surrogate", "jsonl", _jsonl(BAD, "half a pair \ud800 here"), names="document 2"),  # written `\\ud800`
    _case("lone surrogate", "bioc-json", _bioc_json(BAD, text="half a pair \ud800 here"), names="document 2"),
    _case("lone surrogate", "bioc-xml", _bioc_xml(BAD).replace("attack", "att&#xD800;ack"), names="document 2 (id 2)"),
    _case("lone surrogate", "pubmed-xml", _pubmed(BAD, "half a pair &#xD800; here"), names="article 2 (PMID 2)"),
    _case("lone surrogate", "pubtator", _pubtator(BAD).encode().replace(b"heart", b"he\xed\xa0\x80art"), names="line "),
    _case("lone surrogate", "text", _text(BAD).encode().replace(b"heart", b"he\xed\xa0\x80art"), names="line 2", per_line=True),
    # nesting 100,000 deep: JSON refused at its depth limit; XML parsed without recursion (valid, so kept)
    _case("deep nesting", "jsonl", _jsonl(BAD)[:-1] + ', "x": ' + "[" * DEEP + "]" * DEEP + "}", names="line 2"),
    _case(
        "deep nesting",
        "bioc-json",
        _bioc_json(BAD).replace('"infons": {}', '"infons": {"x": ' + "[" * DEEP + "]" * DEEP + "}", 1),
        names=BIOC_JSON_LINE,
    ),
    _case("deep nesting", "bioc-xml", _bioc_xml(BAD).replace("<passage>", "<x>" * DEEP + "</x>" * DEEP + "<passage>"), dead=0),
    _case("deep nesting", "pubmed-xml", _pubmed(BAD, "<i>" * DEEP + "Deep" + "</i>" * DEEP), dead=0),
    # an offset beyond any text: checked before a text is laid out or sliced
    _case("huge offset", "bioc-json", _bioc_json(BAD, offset=1e15), names="document 2"),
    _case("huge offset", "bioc-xml", _bioc_xml(BAD, offset="1000000000000000"), names="document 2 (id 2)"),
    _case("huge offset", "bioc-xml", _bioc_xml(BAD, offset="9" * 5000), names="document 2 (id 2)"),
    _case("huge offset", "pubtator", _pubtator(BAD).replace("\t0\t7\t", "\t1000000000000000\t1000000000000007\t"), names="line "),
    _case("huge offset", "pubtator", _pubtator(BAD).replace("\t0\t7\t", f"\t{'9' * 5000}\t{'9' * 5001}\t"), names="line "),
    # a value of the wrong type
    _case("wrong type", "bioc-json", _bioc_json(BAD, text=5), names="document 2"),
    _case("wrong type", "bioc-json", _bioc_json(BAD, infons=["title"]), names="document 2"),
    _case("wrong type", "jsonl", json.dumps({"pmid": BAD, "title": 5}), names="line 2"),
    # an id that is neither a string nor an integer
    *[
        _case("bad id", "jsonl", f'{{"pmid": {bad}, "title": "{_title(BAD)}"}}', names="line 2")
        for bad in ('{"a": 1}', "[1, 2]", "true", "NaN")
    ],
    _case("bad id", "bioc-json", _bioc_json(BAD).replace(f'"id": "{BAD}"', '"id": {"a": 1}', 1), names="document ?"),
    # entities a DTD declares are never expanded nor fetched: the record using one is a dead letter
    _case("external entity", "bioc-xml", _bioc_xml(BAD, "&xxe;"), doctype=XXE, names="document 2 (id 2)"),
    _case("external entity", "pubmed-xml", _pubmed(BAD, "&xxe;"), doctype=XXE, names="article 2 (PMID 2)"),
    _case("entity bomb", "bioc-xml", _bioc_xml(BAD, "&i;"), doctype=BOMB, names="document 2 (id 2)"),
    _case("entity bomb", "pubmed-xml", _pubmed(BAD, "&i;"), doctype=BOMB, names="article 2 (PMID 2)"),
    # valid: an end tag inside a CDATA section or a comment is text, not the record's end
    _case(
        "CDATA/comment holding the end tag",
        "bioc-xml",
        _bioc_xml(BAD).replace("</text>", "<![CDATA[ </document> ]]></text><!-- </document> -->", 1),
        dead=0,
    ),
    _case(
        "CDATA/comment holding the end tag",
        "pubmed-xml",
        _pubmed(BAD, "Heart <![CDATA[</PubmedArticle>]]> attack<!-- </PubmedArticle> -->"),
        dead=0,
    ),
    # a PubTator document whose blank line is missing: its id and offsets tell it from the next one
    _case("missing blank line", "pubtator", _pubtator(BAD).rstrip("\n"), dead=0),
    # the stream ends inside record 2: the rest of the file (record 2 on) is one dead letter saying how much
    *[
        _case("truncated stream", reader, RECORD[reader](BAD)[:60] + "\x00CUT", kept=("1",), names=names)
        for reader, names in (("bioc-xml", "document 2 (id 2)"), ("bioc-json", BIOC_JSON_LINE), ("pubmed-xml", "article 2"))
    ],
]


def _cut(case: Case) -> bytes:
    """A truncated case's file: everything up to its cut mark."""
    data = case.data()
    return data[: data.index(b"\x00CUT")] if b"\x00CUT" in data else data


def outcome(case: Case, folder: Path) -> tuple[list[str], list[DeadLetter]]:
    """The case's file written into `folder` and read: the ids of the documents kept, and the dead letters."""
    path = folder / f"{case.id.replace('/', '_').replace(' ', '_')}.input"
    path.write_bytes(_cut(case))
    items = list(read_documents([str(path)], case.reader, per_line=case.per_line))
    return [i.doc_id for i in items if isinstance(i, Document)], [i for i in items if isinstance(i, DeadLetter)]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_a_bad_record_costs_itself_alone(tmp_path, case):
    kept, dead = outcome(case, tmp_path)
    assert kept == list(case.kept)
    assert len(dead) == case.dead, [(d.location, d.reason) for d in dead]
    for letter in dead:
        assert letter.source.endswith(".input") and case.names in letter.location, letter
        assert letter.reason
        for text in (letter.source, letter.location, letter.raw, letter.reason):
            text.encode("utf-8")  # a dead letter is written out: it holds no lone surrogate


def test_every_reader_and_class_is_in_the_table():
    readers = {c.reader for c in CASES}
    assert readers == set(RECORD)
    for fault in ("invalid UTF-8", "lone surrogate"):
        assert {c.reader for c in CASES if c.fault == fault} == set(RECORD), fault


def test_an_entity_is_never_fetched_nor_expanded(tmp_path):
    """The external entity names /etc/passwd: no dead letter quotes it; the bomb's billion `a`s are never built."""
    for case in (c for c in CASES if c.fault in ("external entity", "entity bomb")):
        _, dead = outcome(case, tmp_path)
        assert all("root:" not in d.raw and "aaaaaaaaaaaaaaaaaaaa" not in d.raw for d in dead)
        assert all(d.reason.startswith("malformed XML: undefined entity") for d in dead), dead


@pytest.mark.parametrize("case", [pytest.param(c, id=c.reader) for c in CASES if c.fault == "truncated stream"])
def test_a_truncated_stream_says_how_much_was_not_read(tmp_path, case):
    _, (dead,) = outcome(case, tmp_path)
    assert dead.unread and "bytes" in dead.reason and ("not read" in dead.reason or "unread rest" in dead.reason), dead
