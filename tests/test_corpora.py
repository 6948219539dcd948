"""Corpus readers and writers on hand-written format-true fixtures, and on the shared corpora when present."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest

from bioel_core.corpora import (
    FormatError,
    Mention,
    iter_dictionary,
    read_bioc_json,
    read_bioc_xml,
    read_jsonl,
    read_pubtator,
    read_query_folder,
    read_typo_map,
    write_bioc_json,
    write_bioc_xml,
    write_jsonl,
    write_pubtator,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpora"
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared benchmark data not found at {DATA}")


def _without_ids(docs):
    """Documents with writer-assigned annotation and relation ids (and the BioC infons a PubTator relation gets
    written with) blanked, for a round trip across formats."""
    return [
        dataclasses.replace(
            d,
            mentions=[dataclasses.replace(m, ann_id="") for m in d.mentions],
            relations=[dataclasses.replace(r, rel_id="", infons=()) for r in d.relations],
        )
        for d in docs
    ]


# ---- PubTator ----


def test_pubtator_reads_titles_annotations_composites_nil_and_relations():
    d1, d2 = read_pubtator(FIXTURES / "sample.pubtator")
    assert d1.doc_id == "1000001" and d1.title.startswith("Famotidine-associated")
    assert d1.text == d1.title + " " + d1.abstract
    assert len(d1.mentions) == 7 and len(d2.mentions) == 7
    comp = d1.mentions[2]
    assert (comp.text, comp.start, comp.end, comp.concept_ids, comp.parts) == (
        "hemorrhagic cystitis",
        35,
        55,
        ("D006470", "D003556"),
        ("hemorrhagic", "cystitis"),
    )
    assert d1.mentions[3].concept_ids == ()  # -1: no concept
    assert all(d1.text[m.start : m.end] == m.text for m in d1.mentions)
    assert d1.relations[0].kind == "CID" and d1.relations[0].args == ("D015738", "D003693")
    assert d2.mentions[1].concept_ids == ("D001943", "D010051")  # NCBI "+" composite
    assert d2.mentions[2].concept_ids == ("OMIM:215600",)
    assert d2.mentions[4].concept_ids == ("D006527", "277900")


def test_pubtator_round_trip_is_byte_identical(tmp_path):
    docs = read_pubtator(FIXTURES / "sample.pubtator")
    out = tmp_path / "out.pubtator"
    assert write_pubtator(docs, out) == 2
    # the id column is written as read ("+" composites included), so the file comes back byte for byte
    assert out.read_text() == (FIXTURES / "sample.pubtator").read_text()
    assert read_pubtator(out) == docs


WHOLE_FILE_READERS = [  # (library reader, fixture, the `bioel link --input-format` that reads it too)
    ("read_pubtator", "sample.pubtator", "pubtator"),
    ("read_jsonl", "sample.jsonl", "jsonl"),
    ("read_bioc_json", "sample.bioc.json", "bioc-json"),
    ("read_bioc_xml", "sample.bioc.xml", "bioc-xml"),
    ("iter_dictionary", "biosyn/test_dictionary.txt", None),
    ("read_query_file", "biosyn/processed_test/1000001.concept", None),
]


@pytest.mark.parametrize("reader, fixture, fmt", WHOLE_FILE_READERS)
def test_library_readers_read_a_byte_order_mark_crlf_or_gzip_as_the_plain_file(tmp_path, reader, fixture, fmt):
    """The library readers (evaluate-e2e --gold/--pred, calibrate-nil --gold, train --train-corpus, evaluate --dataset,
    the Python API) opened files as plain UTF-8 text: a byte-order mark (a file saved by a Windows editor) stuck to
    the first PMID or concept id, so evaluate-e2e failed ("document 1000001 starts before document \ufeff1000001
    ended"), a gold id never matched, or the first record did not parse; a gzipped file failed to decode.
    `bioel link` reads the same files."""
    import bioel_core.corpora as corpora
    from bioel_core.corpora import read_documents

    read = getattr(corpora, reader)
    raw = (FIXTURES / fixture).read_bytes()
    expected = list(read(FIXTURES / fixture))
    name = Path(fixture).name
    variants = {
        f"bom.{name}": b"\xef\xbb\xbf" + raw,
        f"crlf.{name}": b"\xef\xbb\xbf" + raw.replace(b"\n", b"\r\n"),
        f"{name}.gz": gzip.compress(b"\xef\xbb\xbf" + raw),
    }
    for variant, data in variants.items():
        (tmp_path / variant).write_bytes(data)
        assert list(read(tmp_path / variant)) == expected, variant
        if fmt:
            assert list(read_documents([str(tmp_path / variant)], fmt)) == expected, variant


@pytest.mark.parametrize(
    "lines, reason",
    [
        (["1|t|Some title", "1|a|An abstract.", "1\t0\t4\tSoma\tDisease\tD1"], "differs from the document text"),
        (["1|t|Some title", "1|a|An abstract.", "1\t0\t400\tSome\tDisease\tD1"], "outside document"),
        (["1\t0\t4\tSome\tDisease\tD1"], "before any title"),
        (["1|t|Some title", "1|a|An abstract.", "2\t0\t4\tSome\tDisease\tD1"], "names document '2'"),
        (["1|t|Some title", "1|a|An abstract.", "1\t0\tx"], "neither an annotation"),
        # offsets that are not whole numbers made the line a relation (kind ' 5', '0.0', '-1'): the gold annotation was
        # dropped without a word, and a gold of such lines only was refused as having no annotation, naming no line;
        # a digit Python's int() does not read ('²') raised "invalid literal for int()" naming neither file nor line
        (["1|t|Some title", "1|a|An abstract.", "1\t 0\t4\tSome\tDisease\tD1"], "offsets must be whole numbers"),
        (["1|t|Some title", "1|a|An abstract.", "1\t0.0\t4.0\tSome\tDisease\tD1"], "offsets must be whole numbers"),
        (["1|t|Some title", "1|a|An abstract.", "1\t-1\t4\tSome\tDisease\tD1"], "offsets must be whole numbers"),
        (["1|t|Some title", "1|a|An abstract.", "1\t\u00b2\t4\tSome\tDisease\tD1"], "offsets must be whole numbers"),
    ],
)
def test_pubtator_bad_lines_raise_with_file_line_and_reason(tmp_path, lines, reason):
    path = tmp_path / "bad.pubtator"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match=reason) as err:
        read_pubtator(path)
    assert str(path) in str(err.value) and f"line {len(lines)}" in str(err.value)


_GOUT = "1|t|Gout in a child.\n1|a|No more.\n1\t0\t4\tGout\tDisease\tD006073\n"
_DELIRIUM = "2|t|Famotidine and delirium.\n2|a|A case.\n2\t15\t23\tdelirium\tDisease\tD003693\n"
_CYSTITIS = "3|t|Cystitis.\n3|a|\n3\t0\t8\tCystitis\tDisease\tD003556\n"

# reader | bad input | records kept (ids) | dead letters (location, reason): `bioel link --input-format pubtator`,
# and the strict readers of gold and training corpora, which raise the first dead letter's reason
PUBTATOR_CASES = [
    ("no blank line between two documents", _GOUT + _DELIRIUM + "\n" + _CYSTITIS, ["1", "2", "3"], []),
    ("no blank line after a title-only document", "1|t|Some title\n2|t|Other title\n", ["1", "2"], []),
    ("no blank line anywhere, three documents", _GOUT + _DELIRIUM + _CYSTITIS, ["1", "2", "3"], []),
    (
        "no blank line, the second document's span off its own text",
        _GOUT + _DELIRIUM.replace("15\t23", "25\t33"),
        ["1"],
        [("line 6", "span 25-33 is outside document 2")],
    ),
    (
        "no blank line, the second document starts with its |a| line",
        _GOUT + "2|a|A case of delirium.\n2\t10\t18\tdelirium\tDisease\tD003693\n\n" + _CYSTITIS,
        ["3"],
        [
            ("line 1", "document 2 starts before document 1 ended (missing blank line), and document 2 does not start with its"),
            ("line 4", "document 2 starts before document 1 ended (missing blank line), and document 2 does not start with its"),
        ],
    ),
    (
        "no blank line, a line of the first document among the second's",
        _GOUT + _DELIRIUM + "1\t5\t7\tin\tDisease\tD1\n",
        [],
        [
            ("line 1", "document 2 starts before document 1 ended (missing blank line), and a line of document 1 is among"),
            ("line 4", "document 2 starts before document 1 ended (missing blank line), and a line of document 1 is among"),
        ],
    ),
    (
        "no blank line, one document starts twice",
        _GOUT + _DELIRIUM + _GOUT,
        [],
        [
            (f"line {n}", "document 2 starts before document 1 ended (missing blank line), and document 1 starts twice")
            for n in (1, 4, 7)
        ],
    ),
    (
        "no blank line, an undecodable line in the second document",
        (_GOUT + _DELIRIUM.replace("A case", "A cas\udce9")),
        ["1"],
        [("line 5", "document dropped: invalid UTF-8")],
    ),
]


@pytest.mark.parametrize("case, text, kept, dead", PUBTATOR_CASES, ids=[c[0] for c in PUBTATOR_CASES])
def test_pubtator_documents_without_a_blank_line_between_are_recovered_when_their_ids_tell_them_apart(
    tmp_path, case, text, kept, dead
):
    """A file missing one blank line put both documents into one dead letter. A title line of another id after a
    document's lines now starts a document (each checked alone: its offsets must fit its own text); where the ids do
    not tell the documents apart, each is one dead letter."""
    from bioel_core.corpora import read_documents
    from bioel_core.records import DeadLetter

    path = tmp_path / "corpus.pubtator"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    items = list(read_documents([str(path)], "pubtator"))
    assert [i.doc_id for i in items if not isinstance(i, DeadLetter)] == kept
    letters = [i for i in items if isinstance(i, DeadLetter)]
    assert [(d.location, d.reason[: len(r)]) for d, (_, r) in zip(letters, dead)] == dead and len(letters) == len(dead)
    assert all(d.source == str(path) and d.raw for d in letters)
    if not dead:  # recovered documents are the ones a file with its blank lines gives
        fixed = tmp_path / "fixed.pubtator"
        fixed.write_text("\n".join(("\n".join(doc) + "\n") for doc in _blocks(text)))
        assert items == [dataclasses.replace(d, source=str(path)) for d in read_documents([str(fixed)], "pubtator")]


def _blocks(text: str) -> list[list[str]]:
    """The lines of each document: a new block at each title line."""
    blocks: list[list[str]] = []
    for line in filter(None, text.splitlines()):
        if "|t|" in line:
            blocks.append([])
        blocks[-1].append(line)
    return blocks


def test_pubtator_padded_annotation_text_takes_the_span(tmp_path):
    """The NCBI training release pads one annotation's text with spaces; the span is kept, the padding dropped."""
    path = tmp_path / "padded.pubtator"
    path.write_text("1|t|Some title\n1|a|An abstract.\n1\t0\t4\tSome  \tDisease\tD1\n")
    assert read_pubtator(path)[0].mentions[0].text == "Some"


# ---- BioC ----


def test_bioc_xml_reads_bc5cdr_layout():
    (doc,) = read_bioc_xml(FIXTURES / "sample.bioc.xml")
    assert doc.doc_id == "1000001" and [p.kind for p in doc.passages] == ["title", "abstract"]
    assert doc.text == read_pubtator(FIXTURES / "sample.pubtator")[0].text
    ids = [m.concept_ids for m in doc.mentions]
    assert ids == [("D015738",), ("D003693",), ("D006470", "D003556"), (), ("D007859", "D008569")]
    disc = doc.mentions[-1]  # two locations: one span from first start to last end, linked by its own text
    assert (disc.start, disc.end, disc.text, disc.link_text) == (94, 124, "learning and memory impairment", "learning impairment")
    rel = doc.relations[0]
    assert (rel.kind, rel.args, rel.roles) == ("CID", ("D015738", "D003693"), ("Chemical", "Disease"))


def test_bioc_xml_refuses_another_xml_format_rather_than_read_it_as_no_document(tmp_path):
    """PubMed XML (or any XML without <collection> and <document>) read as BioC gave an empty corpus, not an error;
    an empty collection stays an empty corpus."""
    pubmed = tmp_path / "pubmed.xml"
    pubmed.write_text("<?xml version='1.0'?>\n<PubmedArticleSet><PubmedArticle/></PubmedArticleSet>\n")
    with pytest.raises(FormatError, match=r"root element is <PubmedArticleSet>, not <collection>"):
        read_bioc_xml(pubmed)
    empty = tmp_path / "empty.xml"
    empty.write_text("<collection><source>PubTator</source></collection>")
    assert read_bioc_xml(empty) == []


@pytest.mark.parametrize("fmt", ["xml", "json"])
def test_bioc_discontinuous_annotation_keeps_its_document_linkable_and_writable(tmp_path, fmt):
    """A discontinuous annotation (BC5CDR's BioC release states a composite's individual mention with two
    locations) became a mention whose text was not the text of its span: `bioel link --mentions given` dead-lettered
    its whole document ("does not match the text there"), and a document written back to BioC did not read again."""
    from bioel_core.linking.annotate import check_document

    (doc,) = read_bioc_xml(FIXTURES / "sample.bioc.xml")
    assert all(doc.text[m.start : m.end] == m.text for m in doc.mentions)
    assert check_document(doc, detect=False) == doc.text
    path = tmp_path / f"out.{fmt}"
    write, read = (write_bioc_xml, read_bioc_xml) if fmt == "xml" else (write_bioc_json, read_bioc_json)
    write([doc], path)
    (again,) = read(path)
    assert [(m.start, m.end, m.text, m.concept_ids) for m in again.mentions] == [
        (m.start, m.end, m.text, m.concept_ids) for m in doc.mentions
    ]


def test_bioc_json_reads_pubtator_central_layout():
    (doc,) = read_bioc_json(FIXTURES / "sample.bioc.json")
    assert doc.doc_id == "1000002"
    by_id = {m.ann_id: m for m in doc.mentions}
    assert by_id["T2"].concept_ids == ("MESH:D001943", "MESH:D010051")
    assert by_id["T4"].text == "CT" and (by_id["T4"].start, by_id["T4"].end) == (86, 88)
    assert by_id["T5"].concept_ids == ()
    rel = doc.relations[0]
    assert (rel.kind, rel.args, rel.roles) == ("Association", ("T1", "T3"), ("Disease", "Disease"))


@pytest.mark.parametrize("fmt", ["xml", "json"])
def test_bioc_round_trip_from_pubtator(tmp_path, fmt):
    docs = read_pubtator(FIXTURES / "sample.pubtator")
    path = tmp_path / f"out.{fmt}"
    write, read = (write_bioc_xml, read_bioc_xml) if fmt == "xml" else (write_bioc_json, read_bioc_json)
    assert write(docs, path) == 2
    assert _without_ids(read(path)) == _without_ids(docs)


def test_bioc_errors_name_file_and_place(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<collection><document><id>1</id><passage><offset>0</offset>\n<text>abc</passage></collection>")
    with pytest.raises(FormatError, match=r"document 1 \(id 1\), line 2, column \d+: malformed XML: mismatched tag"):
        read_bioc_xml(bad)
    mismatch = tmp_path / "bad.json"
    mismatch.write_text(
        '{"id": "7", "passages": [{"offset": 0, "text": "Some title", "annotations": '
        '[{"id": "a1", "infons": {}, "text": "Other", "locations": [{"offset": 0, "length": 4}]}]}]}'
    )
    with pytest.raises(FormatError, match=r"document 7, annotation a1: annotation text 'Other' differs"):
        read_bioc_json(mismatch)


# ---- JSONL ----


def test_jsonl_reads_and_writes(tmp_path):
    docs = read_jsonl(FIXTURES / "sample.jsonl")
    assert [d.doc_id for d in docs] == ["1000001", "1000003"]
    assert docs[0].text == read_pubtator(FIXTURES / "sample.pubtator")[0].text
    assert docs[1].abstract == ""
    write_jsonl(docs, tmp_path / "out.jsonl")
    assert read_jsonl(tmp_path / "out.jsonl") == docs


@pytest.mark.parametrize(
    "line, reason",
    [
        ("{not json", "not JSON"),
        ('{"title": "x"}', "missing pmid"),
        ('{"pmid": 5, "title": "", "abstract": ""}', "neither title nor abstract"),
    ],
)
def test_jsonl_bad_line(tmp_path, line, reason):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"pmid": "1", "title": "ok"}\n' + line + "\n")
    with pytest.raises(FormatError, match=f"line 2: .*{reason}"):
        read_jsonl(path)


# ---- BioSyn ----


def test_biosyn_query_folder_keeps_every_line_and_strips_ids():
    queries = read_query_folder(FIXTURES / "biosyn" / "processed_test")
    assert len(queries) == 8
    assert queries[2].text == queries[0].text  # a duplicate query stays
    assert queries[0] == Mention(
        text="delirium", doc_id="1000001", start=22, end=30, entity_type="Disease", concept_ids=("D003693",)
    )
    assert queries[5].text == "breast cancer|ovarian cancer" and queries[5].concept_ids == ("D001943", "D010051")
    assert queries[6].concept_ids == ("215600",)  # " 215600": leading space stripped


def test_biosyn_nil_query_is_read_without_ids(tmp_path):
    # BioSyn and PubTator write -1 for a mention no concept names; n2c2/ShARe-derived sets write CUI-less, which
    # was read as a concept id that no prediction could match
    (tmp_path / "1.concept").write_text("1||0|6||Disease||anotia||-1\n1||7|13||Disease||anotia||CUI-less\n")
    assert [q.concept_ids for q in read_query_folder(tmp_path)] == [(), ()]


def test_a_dictionary_line_with_a_nil_id_is_refused(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("D1||name\nCUI-less||unlinked finding\n")
    with pytest.raises(FormatError, match=r"dict.txt: line 2: id field 'CUI-less' labels a mention with no concept"):
        list(iter_dictionary(path))


def test_biosyn_dictionary_and_typo_map(tmp_path):
    entries = list(iter_dictionary(FIXTURES / "biosyn" / "test_dictionary.txt"))
    assert len(entries) == 12
    assert entries[6].concept_ids == ("D006527", "277900") and entries[10].concept_ids == ("215600",)
    bad = tmp_path / "dict.txt"
    bad.write_text("D1||name\nno separator here\n")
    with pytest.raises(FormatError, match=r"dict.txt: line 2: expected 'ID\|\|name'"):
        list(iter_dictionary(bad))
    typos = tmp_path / "typos.txt"
    typos.write_text("hemmorhage||haemorrhage\n")
    assert read_typo_map(typos) == {"hemmorhage": "haemorrhage"}


@pytest.mark.parametrize(
    "line, reason",
    [
        ("1||0|4||Disease||abc", "5 fields"),
        ("1||a|b||Disease||abc||D1", "not 'start|end'"),
        ("1||0|4||Disease||   ||D1", "empty mention"),
    ],
)
def test_biosyn_bad_query_line(tmp_path, line, reason):
    (tmp_path / "1.concept").write_text("1||0|4||Disease||abcd||D1\n" + line + "\n")
    with pytest.raises(FormatError, match=f"line 2: .*{reason}"):
        read_query_folder(tmp_path)


# ---- the shared corpora ----


@needs_data
@pytest.mark.parametrize(
    "name, docs, annotations",
    [
        ("bc5cdr-corpus/CDR_TrainingSet.PubTator.txt", 500, 9385),
        ("bc5cdr-corpus/CDR_DevelopmentSet.PubTator.txt", 500, 9591),
        ("bc5cdr-corpus/CDR_TestSet.PubTator.txt", 500, 9809),
        ("ncbi-disease/raw_corpus/NCBItrainset_corpus.txt", 593, None),
        ("ncbi-disease/raw_corpus/NCBIdevelopset_corpus.txt", 100, 787),
        ("ncbi-disease/raw_corpus/NCBItestset_corpus.txt", 100, 960),
    ],
)
def test_shared_pubtator_corpora_read_completely(name, docs, annotations):
    read = read_pubtator(DATA / name)
    assert len(read) == docs
    if annotations is not None:
        assert sum(len(d.mentions) for d in read) == annotations
    assert all(d.text[m.start : m.end] == m.text for d in read for m in d.mentions)


@needs_data
@pytest.mark.parametrize(
    "folder, n",
    [
        ("ncbi-disease/processed_test", 960),
        ("ncbi-disease/processed_traindev", 5921),
        ("bc5cdr-disease/processed_test", 4287),
        ("bc5cdr-disease/processed_traindev", 8309),
    ],
)
def test_shared_biosyn_query_counts(folder, n):
    assert len(read_query_folder(DATA / folder)) == n


@needs_data
def test_shared_abstracts_jsonl():
    assert len(read_jsonl(DATA / "pubmed_abstracts" / "abstracts_ncbi_bc5cdr.jsonl")) == 2292


def test_mention_is_a_plain_value():
    assert Mention("x") == Mention("x") and hash(Mention("x", concept_ids=("a",)))
