"""PubMed XML and plain-text readers, and the read_documents dispatcher's one error contract."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from bioel_core.corpora import (
    FORMATS,
    DeletedDocument,
    Document,
    FormatError,
    iter_pubmed_xml,
    read_bioc_json,
    read_bioc_xml,
    read_documents,
    read_jsonl,
    read_pubmed_xml,
    read_pubtator,
    read_text,
    write_pubtator,
)
from bioel_core.records import DeadLetter
from conftest import FIXTURES, shared_file

PUBMED = FIXTURES / "pubmed"
BASELINE = PUBMED / "pubmed25n0001_sample.xml"
UPDATE = PUBMED / "pubmed25n1300_update_sample.xml"
CORPORA = FIXTURES / "corpora"


def _variant(tmp_path: Path, name: str, old: bytes, new: bytes) -> Path:
    data = BASELINE.read_bytes()
    assert old in data
    path = tmp_path / name
    path.write_bytes(data.replace(old, new, 1))
    return path


# ---- PubMed XML ----


def test_baseline_articles_titles_labelled_sections_and_markup():
    d1, d2, d3, d4 = read_pubmed_xml(BASELINE)
    assert (d1.doc_id, d1.version) == ("1000001", "1")  # not CommentsCorrections' PMID 1000099
    assert d1.title == "Famotidine-associated delirium and hemorrhagic cystitis."
    assert d1.abstract == "Famotidine caused delirium (DEL) and learning and memory impairment in rats."
    # PubTator's layout: title at 0, abstract after one space
    assert [(p.kind, p.offset) for p in d1.passages] == [("title", 0), ("abstract", len(d1.title) + 1)]
    assert d1.text == d1.title + " " + d1.abstract
    assert d2.version == "2"
    # inline markup kept as text, the title's line break one space, MathML as its text
    assert d2.title == "Ca2+ signalling in Escherichia coli sepsis with binding constant Kd."
    # labelled sections "LABEL: text", an empty section and CopyrightInformation left out
    assert d2.abstract == (
        "BACKGROUND: Sepsis due to E. coli raises intracellular Ca2+. "
        "METHODS: We measured H2O2 in 12 patients with septic shock (SS). "
        "CONCLUSIONS: Breast and ovarian cancer were not seen."
    )
    assert d3.title == "[Delirium after famotidine treatment]." and d3.abstract == ""  # title-only citation
    # a PubmedBookArticle is read from its BookDocument
    assert (d4.doc_id, d4.title, d4.abstract) == (
        "1000004",
        "Hereditary anemia",
        "CLINICAL CHARACTERISTICS: Hereditary anemia presents in childhood.",
    )


def test_same_text_as_pubtator_layout(tmp_path):
    """A PubMed document written as PubTator reads back with the same text and passages."""
    docs = read_pubmed_xml(BASELINE)
    write_pubtator(docs, tmp_path / "out.pubtator")
    assert [(d.doc_id, d.text) for d in read_pubtator(tmp_path / "out.pubtator")] == [(d.doc_id, d.text) for d in docs]


def test_gzip_is_sniffed_from_the_bytes(tmp_path):
    assert read_pubmed_xml(PUBMED / "pubmed25n0001_sample.xml.gz") == read_pubmed_xml(BASELINE)
    misnamed = tmp_path / "pubmed.xml"
    misnamed.write_bytes((PUBMED / "pubmed25n0001_sample.xml.gz").read_bytes())
    assert read_pubmed_xml(misnamed) == read_pubmed_xml(BASELINE)


def test_update_file_revision_and_delete_citation():
    revised, *deleted = read_pubmed_xml(UPDATE)
    assert isinstance(revised, Document) and revised.title.endswith("(revised).")
    assert deleted == [DeletedDocument("1000002", "1", str(UPDATE)), DeletedDocument("1000003", "1", str(UPDATE))]


def test_article_without_pmid_is_dead_lettered_and_reading_goes_on(tmp_path):
    path = _variant(tmp_path, "nopmid.xml", b'<PMID Version="2">1000002</PMID>', b"")
    items = read_pubmed_xml(path)
    assert [type(i).__name__ for i in items] == ["Document", "DeadLetter", "Document", "Document"]
    dead = items[1]
    assert (dead.source, dead.location, dead.reason) == (str(path), "article 2", "PubmedArticle has no MedlineCitation/PMID")
    assert dead.raw.startswith("<PubmedArticle") and "PubMed-not-MEDLINE" in dead.raw


def test_article_without_an_english_title_takes_its_vernacular_title(tmp_path):
    # NLM leaves ArticleTitle empty when a non-English article has no English title; the original-language
    # VernacularTitle is then the article's title (the document had an empty title, or was dead-lettered as textless)
    path = _variant(
        tmp_path, "vernacular.xml", b"<ArticleTitle>[Delirium after famotidine treatment].</ArticleTitle>", b"<ArticleTitle/>"
    )
    assert read_pubmed_xml(path)[2].title == "Délire après un traitement par la famotidine."
    assert read_pubmed_xml(BASELINE)[2].title == "[Delirium after famotidine treatment]."  # the English one first


def test_article_without_text_is_dead_lettered(tmp_path):
    path = _variant(
        tmp_path, "notext.xml", b"<ArticleTitle>[Delirium after famotidine treatment].</ArticleTitle>", b"<ArticleTitle/>"
    )
    data = path.read_bytes().replace(
        "<VernacularTitle>Délire après un traitement par la famotidine.</VernacularTitle>".encode(), b""
    )
    path.write_bytes(data)
    dead = read_pubmed_xml(path)[2]
    assert isinstance(dead, DeadLetter)
    assert (dead.location, dead.reason) == ("article 3 (PMID 1000003)", "neither a title nor an abstract with text")


@pytest.mark.parametrize(
    "make, location, reason",
    [
        (
            lambda p: _variant(p, "bad.xml", b"<Title>Invented reports</Title>", b"<Title>Invented reports</Titl>"),
            "article 2 (PMID 1000002), line 96, column 41",
            "malformed XML: mismatched tag",
        ),
        (
            lambda p: _variant(p, "latin1.xml", "Revue inventée".encode(), "Revue inventée".encode("latin-1")),
            "article 3 (PMID 1000003), line 143",
            "invalid UTF-8",
        ),
    ],
)
def test_damaged_article_is_one_dead_letter_and_the_rest_is_read(tmp_path, make, location, reason):
    """Issue 13 case 10: a malformed or undecodable article no longer ends the file."""
    items = read_pubmed_xml(make(tmp_path))
    dead = [i for i in items if isinstance(i, DeadLetter)]
    assert len(items) == 4 and len(dead) == 1
    assert dead[0].location == location and dead[0].reason.startswith(reason)
    assert [i.doc_id for i in items if isinstance(i, Document)] == [
        d.doc_id for d in read_pubmed_xml(BASELINE) if d.doc_id not in location
    ]


@pytest.mark.parametrize(
    "make, location, reason",
    [
        (
            lambda p: _cut(p, "cut.xml", BASELINE.read_bytes(), b"<Title>Revue"),
            r"article 3 \(PMID 1000003\), line 143, column 16",
            r"unread rest of file: 389 bytes on 11 lines from line 133 \(the file ends inside the record \(truncated\?\): no element found\)",
        ),
        (
            lambda p: _cut(p, "cut.xml.gz", (PUBMED / "pubmed25n0001_sample.xml.gz").read_bytes(), None),
            "file",
            "truncated or corrupt gzip stream",
        ),  # verified before any article (CORRUPT_INPUT_POLICY)
        (lambda p: _write(p, "empty.xml", b""), "file", "empty file"),
        (lambda p: _write(p, "other.xml", b"<collection><document/></collection>"), "line 1", "root element is <collection>"),
    ],
)
def test_file_faults_raise_naming_file_article_and_line(tmp_path, make, location, reason):
    path = make(tmp_path)
    read = []
    with pytest.raises(FormatError, match=f"{location}: {reason}") as err:
        for item in iter_pubmed_xml(str(path)):
            read.append(item)
    assert err.value.source == str(path)
    assert all(isinstance(i, Document) for i in read)  # what came before the fault was yielded


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    (tmp_path / name).write_bytes(data)
    return tmp_path / name


def _cut(tmp_path: Path, name: str, data: bytes, before: bytes | None) -> Path:
    return _write(tmp_path, name, data[: data.index(before)] if before else data[: len(data) * 2 // 3])


def test_truncated_gzip_gives_one_dead_letter_and_no_article(tmp_path):
    # the articles before the cut decompress, but a stream that fails its check is not trusted at all
    data = gzip.compress(BASELINE.read_bytes(), mtime=0)
    path = _write(tmp_path, "cut.xml.gz", data[: len(data) - 200])
    (item,) = read_documents([path], "pubmed-xml")
    assert isinstance(item, DeadLetter) and "truncated or corrupt gzip" in item.reason and item.location == "file"


# ---- plain text ----


def test_text_one_document_per_file(tmp_path):
    path = _write(tmp_path, "12345.txt.gz", gzip.compress("\ufeffTitle line\nSecond line, café.\n".encode()))
    (doc,) = read_text(str(path))
    assert doc.doc_id == "12345" and doc.passages[0].kind == "text"
    # offsets count into the file's text; the trailing newline is not part of the document
    assert doc.text == "Title line\nSecond line, café."


def test_text_one_document_per_line(tmp_path):
    path = _write(tmp_path, "batch.txt", b"PMID1\tFirst text.\n\nno id on this line\n\tmissing id\nbad \xff byte\n")
    items = read_text(str(path), per_line=True)
    assert [(d.doc_id, d.text) for d in items[:2]] == [("PMID1", "First text."), ("batch:3", "no id on this line")]
    assert [(d.location, d.reason.split(":")[0]) for d in items[2:]] == [
        ("line 4", "'ID<TAB>TEXT' line with an empty id or text"),
        ("line 5", "invalid UTF-8"),
    ]


@pytest.mark.parametrize(
    "data, per_line, location, reason",
    [
        (b"", False, "file", "empty file"),
        (b"  \n", False, "file", "empty file"),
        (b"ok\n\xe9t\xe9\n", False, "file (line 2)", "invalid UTF-8"),
        (b"", True, "file", "empty file"),
    ],
)
def test_text_faults(tmp_path, data, per_line, location, reason):
    (item,) = read_documents([_write(tmp_path, "doc.txt", data)], "text", per_line=per_line)
    assert isinstance(item, DeadLetter) and item.location == location and item.reason.startswith(reason)


# ---- read_documents: every format, one contract ----


@pytest.mark.parametrize(
    "fmt, path, read",
    [
        ("pubtator", CORPORA / "sample.pubtator", read_pubtator),
        ("bioc-xml", CORPORA / "sample.bioc.xml", read_bioc_xml),
        ("bioc-json", CORPORA / "sample.bioc.json", read_bioc_json),
        ("jsonl", CORPORA / "sample.jsonl", read_jsonl),
        ("pubmed-xml", BASELINE, read_pubmed_xml),
    ],
)
def test_read_documents_agrees_with_each_reader_plain_and_gzipped(tmp_path, fmt, path, read):
    gz = _write(tmp_path, path.name + ".gz", gzip.compress(path.read_bytes(), mtime=0))
    expected = read(path)
    assert list(read_documents([path], fmt)) == expected
    assert list(read_documents([str(gz)], fmt)) == expected


def test_read_documents_reads_paths_in_order_with_deletions():
    items = list(read_documents([BASELINE, UPDATE], "pubmed-xml"))
    assert [(type(i).__name__, i.doc_id) for i in items[-3:]] == [
        ("Document", "1000001"),
        ("DeletedDocument", "1000002"),
        ("DeletedDocument", "1000003"),
    ]


def test_read_documents_pubtator_bad_document_is_dead_lettered_with_file_line(tmp_path):
    good = (CORPORA / "sample.pubtator").read_text()
    bad = "7|t|Some title\n7|a|An abstract.\n7\t0\t4\tSoma\tDisease\tD1\n\n"
    path = _write(tmp_path, "mixed.pubtator", (bad + good).encode())
    items = list(read_documents([path], "pubtator"))
    assert [type(i).__name__ for i in items] == ["DeadLetter", "Document", "Document"]
    assert items[0].location == "line 3" and "differs from the document text" in items[0].reason
    undecodable = _write(tmp_path, "latin1.pubtator", good.replace("rats.", "rats\xe9.").encode("latin-1"))
    items = list(read_documents([undecodable], "pubtator"))
    assert [type(i).__name__ for i in items] == ["DeadLetter", "Document"]
    assert items[0].location == "line 2" and items[0].reason.startswith("document dropped: invalid UTF-8")


def test_read_documents_jsonl_and_bioc_skip_bad_records(tmp_path):
    path = _write(
        tmp_path, "a.jsonl", b'{"pmid": "1", "title": "ok"}\n{broken\n{"title": "no pmid"}\n{"pmid": "2", "title": "ok"}\n'
    )
    items = list(read_documents([path], "jsonl"))
    assert [getattr(i, "doc_id", None) or (i.location, i.reason.split(":")[0]) for i in items] == [
        "1",
        ("line 2", "not JSON"),
        ("line 3", "missing pmid"),
        "2",
    ]
    bioc = _write(
        tmp_path,
        "c.json",
        b'{"documents": [{"id": "", "passages": []}, {"id": "9", "passages": [{"offset": 0, "text": "Some text"}]}]}',
    )
    dead, doc = read_documents([bioc], "bioc-json")
    assert (dead.location, dead.reason) == ("document ?", "document has no id") and doc.doc_id == "9"


@pytest.mark.parametrize("fmt", FORMATS)
def test_read_documents_never_raises_on_bad_files(tmp_path, fmt):
    gz = gzip.compress(BASELINE.read_bytes(), mtime=0)
    paths = [_write(tmp_path, "empty", b""), _write(tmp_path, "cut.gz", gz[: len(gz) // 2])]
    items = list(read_documents(paths, fmt))
    assert items and isinstance(items[0], DeadLetter) and items[0].source == str(paths[0]) and "empty" in items[0].reason
    assert isinstance(items[-1], DeadLetter) and items[-1].source == str(paths[1])
    assert (items[-1].location, items[-1].reason.split(":")[0]) == (
        "file",
        "truncated or corrupt gzip stream",
    )  # no line of it is read


@pytest.mark.parametrize(
    "path, given, hint",
    [
        (CORPORA / "bc5cdr_test_excerpt.bioc.xml", "pubtator", "BioC XML: pass --input-format bioc-xml"),
        (CORPORA / "bc5cdr_test_excerpt.bioc.xml", "pubmed-xml", "BioC XML: pass --input-format bioc-xml"),
        (CORPORA / "bc5cdr_test_excerpt.pubtator", "bioc-xml", "PubTator: pass --input-format pubtator"),
        (CORPORA / "bc5cdr_test_excerpt.pubtator", "jsonl", "PubTator: pass --input-format pubtator"),
        # a JSONL line is a JSON object, but not a BioC one
        (CORPORA / "sample.jsonl", "bioc-json", "JSONL: pass --input-format jsonl"),
        (CORPORA / "sample.jsonl", "pubtator", "JSONL: pass --input-format jsonl"),
        (CORPORA / "sample.bioc.json", "jsonl", "BioC JSON: pass --input-format bioc-json"),
        (CORPORA / "bare_list.bioc.json", "pubtator", "BioC JSON: pass --input-format bioc-json"),
        # PubTator Central's BioC JSON lines: one object per line, yet not JSONL
        (CORPORA / "pubtator_central.jsonl", "jsonl", "BioC JSON: pass --input-format bioc-json"),
        # read as BioC XML, PubMed XML was an empty collection: no document and no dead letter
        (BASELINE, "bioc-xml", "PubMed XML: pass --input-format pubmed-xml"),
    ],
)
def test_every_dead_letter_of_a_file_in_another_format_ends_with_the_format_to_pass(tmp_path, monkeypatch, path, given, hint):
    """A BioC XML file linked as PubTator was dead-lettered with "line 1: annotation or relation line before any
    title/abstract line", as if the file were broken. Plain, gzipped after a byte-order mark, or read in ranges
    (each range hinted by its file's start), every record now says which format the file is."""
    from bioel_core.corpora import corpus_inputs
    from bioel_core.kb import io as kb_io

    gz = _write(tmp_path, path.name + ".gz", gzip.compress(b"\xef\xbb\xbf" + path.read_bytes(), mtime=0))
    for file in (str(path), str(gz)):
        items = list(read_documents([file], given, format_flag="--input-format"))
        assert items and all(isinstance(i, DeadLetter) and i.reason.endswith(f" (this looks like {hint})") for i in items)
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 500)
    pieces = corpus_inputs([str(path)], given)
    assert [i for piece in pieces for i in read_documents([piece], given, format_flag="--input-format")] == (
        list(read_documents([str(path)], given, format_flag="--input-format"))
    )


def test_a_bad_record_is_hinted_only_when_its_file_plainly_is_another_format(tmp_path):
    bad = b"7|t|Some title\n7|a|An abstract.\n7\t0\t4\tSoma\tDisease\tD1\n\n"
    for data, fmt in (
        (bad, "pubtator"),  # the format named: its own reason alone
        (b'{"pmid": "1", "title": "ok"}\n{"title": "no pmid"}\n', "jsonl"),
        (b"Heart attack after cisplatin.\n", "pubtator"),  # no format's start
        (b'{"id": "1", "text": "Gout."}\n{"id": "2", "text": "Gout."}\n', "pubtator"),  # neither JSONL nor BioC
        (b"<html><body>Gout.</body></html>\n", "pubtator"),
    ):  # XML of no corpus format
        dead = [
            i
            for i in read_documents([_write(tmp_path, "corpus", data)], fmt, format_flag="--input-format")
            if isinstance(i, DeadLetter)
        ]
        assert dead and not any("looks like" in d.reason for d in dead), data
    (dead,) = read_documents([_write(tmp_path, "gold.xml", (CORPORA / "sample.bioc.xml").read_bytes())], "pubtator")
    assert dead.reason.endswith(" (this looks like BioC XML: format bioc-xml)")  # no flag: the format's name


def test_read_documents_refuses_caller_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown corpus format"):
        list(read_documents([BASELINE], "medline"))
    with pytest.raises(OSError):
        list(read_documents([tmp_path / "missing.xml"], "pubmed-xml"))


def test_shared_abstracts_through_the_dispatcher():
    path = shared_file("pubmed_abstracts/abstracts_ncbi_bc5cdr.jsonl")
    items = list(read_documents([path], "jsonl"))
    assert len(items) == 2292 and all(isinstance(i, Document) for i in items)


# ---- issue 13 case 10: damaged articles and the legacy MEDLINE layout ----


def test_malformed_articles_are_one_dead_letter_each_and_later_articles_are_read():
    path = PUBMED / "pubmed_damaged_sample.xml"
    items = read_pubmed_xml(path)
    assert [type(i).__name__ for i in items] == [
        "Document",
        "DeadLetter",
        "DeadLetter",
        "DeadLetter",
        "Document",
        "DeletedDocument",
    ]
    assert [i.doc_id for i in items if not isinstance(i, DeadLetter)] == ["3000101", "3000105", "3000001"]
    bare_lt, cut, bare_amp = items[1:4]
    assert (
        bare_lt.location.startswith("article 2 (PMID 3000102), line 16")
        and bare_lt.reason == "malformed XML: not well-formed (invalid token)"
    )
    assert cut.location == "article 3 (PMID 3000103), line 20" and "not closed before the next record" in cut.reason
    assert bare_amp.location == "article 4 (PMID 3000104), line 29, column 32" and bare_amp.reason.startswith("malformed XML")
    assert all(d.source == str(path) and d.raw.startswith("<PubmedArticle>") for d in (bare_lt, cut, bare_amp))
    # the dispatcher the link pipeline uses: every record is accounted for
    assert [type(i).__name__ for i in read_documents([path], "pubmed-xml")] == [type(i).__name__ for i in items]


def test_legacy_medline_citation_set_is_read_with_its_deletions():
    path = PUBMED / "medline_legacy_sample.xml"
    first, second, *deleted = read_pubmed_xml(path)
    assert (first.doc_id, first.version, first.title) == ("2000101", "1", "Sjögren syndrome after famotidine: a case report.")
    assert first.abstract == "A patient developed sicca symptoms and delirium."  # not CommentsCorrections' PMID
    assert (second.doc_id, second.title, second.abstract) == ("2000102", "[Beta-catenin in gout].", "")
    assert deleted == [DeletedDocument("2000050", "1", str(path)), DeletedDocument("2000051", "1", str(path))]


def test_stray_content_between_articles_is_dead_lettered(tmp_path):
    data = BASELINE.read_bytes().replace(
        b"</PubmedArticle>\n<PubmedArticle>", b"</PubmedArticle>\nstray text</Oops>\n<PubmedArticle>", 1
    )
    items = read_pubmed_xml(_write(tmp_path, "stray.xml", data))
    dead = [i for i in items if isinstance(i, DeadLetter)]
    assert [d.reason for d in dead] == [
        "text outside any record of <PubmedArticleSet>",
        "malformed XML: stray end tag in <PubmedArticleSet>",
    ]
    assert len([i for i in items if isinstance(i, Document)]) == 4


def _records(name: str) -> tuple[bytes, bytes]:
    """A fixture's prolog up to its set's start tag, and its records up to the set's end tag."""
    data = (PUBMED / name).read_bytes()
    root = b"<MedlineCitationSet>" if b"<MedlineCitationSet>" in data else b"<PubmedArticleSet>"
    head, body = data.split(root)
    return head + root, body[: body.rindex(b"</")]


@pytest.mark.parametrize(
    "names",
    [
        ("pubmed25n0001_sample.xml", "pubmed_damaged_sample.xml", "pubmed25n1300_update_sample.xml"),
        ("medline_legacy_sample.xml",),
    ],
)
def test_a_large_file_read_in_ranges_gives_the_whole_files_items(tmp_path, monkeypatch, names):
    from bioel_core.corpora import corpus_inputs, read_documents
    from bioel_core.kb import io as kb_io

    head, _ = _records(names[0])
    bodies = [_records(n)[1] for n in names]
    path = tmp_path / "large.xml"  # real records, a malformed and an unclosed one among them, comments between
    path.write_bytes(
        head
        + b"".join(b"".join(bodies) + b"\n<!-- <PubmedArticle> in a comment -->\n" for _ in range(12))
        + b"</"
        + head.rsplit(b"<", 1)[1]
    )
    whole = list(read_documents([str(path)], "pubmed-xml"))
    assert corpus_inputs([str(path)], "pubmed-xml") == [str(path)]
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 3000)
    pieces = corpus_inputs([str(path)], "pubmed-xml")
    assert len(pieces) >= 5 and pieces[0].start == 0 and pieces[-1].end is None
    data = path.read_bytes()
    for before, after in zip(pieces, pieces[1:]):
        assert before.end == after.start and data[after.start : after.start + 1] == b"<"
        assert after.first_line == data[: after.start].count(b"\n") + 1
    ranged = [item for piece in pieces for item in read_documents([piece], "pubmed-xml")]
    assert ranged == whole
    assert sum(isinstance(i, DeadLetter) for i in whole) >= (12 if len(names) > 1 else 0)
    assert len({i.doc_id for i in whole if isinstance(i, Document)}) >= 2


def test_a_gzipped_or_damaged_large_file_is_read_whole(tmp_path, monkeypatch):
    from bioel_core.corpora import corpus_inputs
    from bioel_core.kb import io as kb_io

    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 500)
    gz = tmp_path / "large.xml.gz"
    gz.write_bytes(gzip.compress((PUBMED / "pubmed25n0001_sample.xml").read_bytes()))
    assert corpus_inputs([str(gz)], "pubmed-xml") == [str(gz)]
    cut = tmp_path / "cut.xml"  # ends inside a record: the whole-file read reports where
    cut.write_bytes((PUBMED / "pubmed25n0001_sample.xml").read_bytes()[:-300])
    assert corpus_inputs([str(cut)], "pubmed-xml") == [str(cut)]


# ---- issue 40: markup that is no record boundary, and entities a record may not use ----

_DTD_LINE = BASELINE.read_text().splitlines()[1]
_XXE = '<!DOCTYPE PubmedArticleSet [\n  <!ENTITY xxe SYSTEM "file:///etc/passwd">\n]>'
_BOMB = (
    '<!DOCTYPE PubmedArticleSet [\n  <!ENTITY lol "lol">\n'
    + "".join(f'  <!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">\n' for i in range(1, 10))
    + "]>"
)
_ABSTRACT_1 = b"memory impairment in rats.</AbstractText>"
_TITLE_3 = b"<ArticleTitle>[Delirium after famotidine treatment].</ArticleTitle>"
_BETWEEN = b"</PubmedArticle>\n<PubmedArticle>"

# reader | bad input | records kept | dead letters (and the reason of the first): `bioel link --input-format pubmed-xml`
# reads these files the same way (read_documents), and each run exits as its dead letters make it (the quality gate)
PUBMED_XML_CASES = [
    (
        "CDATA section in an abstract holding </PubmedArticle> and <PubmedArticle>",
        (
            _ABSTRACT_1,
            b"memory impairment in rats. <![CDATA[Quoted: </PubmedArticle>\n<PubmedArticle> & <PMID>9</PMID>]]></AbstractText>",
        ),
        4,
        0,
        None,
    ),
    (
        "comment in a title holding </PubmedArticle> and <PubmedBookArticle>",
        (_TITLE_3, _TITLE_3 + b"<!-- moved from </PubmedArticle>\n<PubmedBookArticle> -->"),
        4,
        0,
        None,
    ),
    (
        "processing instruction in a title holding </PubmedArticle>",
        (_TITLE_3, _TITLE_3 + b"<?editor note </PubmedArticle> <PubmedArticle> ?>"),
        4,
        0,
        None,
    ),
    (
        "comment between records holding <PubmedArticle>",
        (_BETWEEN, b"</PubmedArticle>\n<!-- <PubmedArticle> -->\n<PubmedArticle>"),
        4,
        0,
        None,
    ),
    (
        "CDATA section between records",
        (_BETWEEN, b"</PubmedArticle>\n<![CDATA[<PubmedArticle>]]>\n<PubmedArticle>"),
        4,
        1,
        "text outside any record of <PubmedArticleSet>",
    ),
    (
        "CDATA section never closed in a record",
        (_ABSTRACT_1, b"memory impairment <![CDATA[in rats.</AbstractText>"),
        3,
        1,
        "malformed XML: unclosed CDATA section",
    ),
    (
        "external entity declared in the DTD, used in a title",
        (_DTD_LINE.encode() + b"\n", _XXE.encode() + b"\n", _TITLE_3, b"<ArticleTitle>&xxe;</ArticleTitle>"),
        3,
        1,
        "malformed XML: undefined entity &xxe; (records are read without the file's DTD",
    ),
    (
        "entity bomb declared in the DTD, used in an abstract",
        (_DTD_LINE.encode() + b"\n", _BOMB.encode() + b"\n", _ABSTRACT_1, b"memory &lol9;</AbstractText>"),
        3,
        1,
        "malformed XML: undefined entity &lol9;",
    ),
]


def _edited(tmp_path: Path, edits: tuple[bytes, ...]) -> Path:
    data = BASELINE.read_bytes()
    for old, new in zip(edits[::2], edits[1::2]):
        assert old in data
        data = data.replace(old, new, 1)
    return _write(tmp_path, "edited.xml", data)


@pytest.mark.parametrize("case, edits, kept, dead, reason", PUBMED_XML_CASES, ids=[c[0] for c in PUBMED_XML_CASES])
def test_markup_and_entities_are_read_as_xml_does_when_records_are_cut(tmp_path, monkeypatch, case, edits, kept, dead, reason):
    """A CDATA section, comment or processing instruction holding `</PubmedArticle>` was cut as a record boundary
    (3 valid records: 9 dead letters); each is skipped whole now. An entity the DTD declares is never expanded: the
    record using it is one dead letter, the others are read. In ranges the file reads the same."""
    from bioel_core.corpora import corpus_inputs
    from bioel_core.kb import io as kb_io

    path = _edited(tmp_path, edits)
    items = list(read_documents([path], "pubmed-xml"))
    letters = [i for i in items if isinstance(i, DeadLetter)]
    assert (len(items) - len(letters), len(letters)) == (kept, dead), [getattr(i, "reason", i) for i in items]
    if reason:
        assert letters[0].reason.startswith(reason) and letters[0].source == str(path)
    if case.startswith("CDATA section in an abstract"):
        assert items[0].abstract.endswith("Quoted: </PubmedArticle> <PubmedArticle> & <PMID>9</PMID>")
        assert items[0].doc_id == "1000001"
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 1500)
    pieces = corpus_inputs([str(path)], "pubmed-xml")
    assert len(pieces) > 1 and [i for p in pieces for i in read_documents([p], "pubmed-xml")] == items


def test_an_unclosed_comment_is_sought_only_within_reach(tmp_path, monkeypatch):
    """Memory holds one record: a comment never closed is taken as damage once UNPARSED_REACH bytes pass."""
    from bioel_core.corpora import pubmed_xml

    monkeypatch.setattr(pubmed_xml, "UNPARSED_REACH", 200)
    path = _edited(tmp_path, (_TITLE_3, _TITLE_3 + b"<!-- never closed"))
    items = read_pubmed_xml(path)
    assert [type(i).__name__ for i in items] == ["Document", "Document", "DeadLetter", "Document"]
    assert items[2].reason.startswith("malformed XML") and items[2].location.startswith("article 3 (PMID 1000003)")
