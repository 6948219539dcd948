"""Issue 13 (corpus formats): the interchange readers and writers on format-true fixtures of real producers'
layouts (tests/fixtures/corpora/README.md): round trips, writers into streams, what PubTator cannot hold."""

from __future__ import annotations

import io
import json
from pathlib import Path

import bioc
import pytest
from bioc import biocjson, biocxml

from bioel_core.corpora import (
    Document,
    Mention,
    Passage,
    read_bioc_json,
    read_bioc_xml,
    read_documents,
    read_pubtator,
    read_text,
    write_bioc_json,
    write_bioc_xml,
)
from bioel_core.corpora.interchange import WRITERS, unwritable, write_interchange
from bioel_core.corpora.pubtator import format_pubtator
from bioel_core.corpora.records import UnwritableDocument
from bioel_core.records import DeadLetter
from conftest import FIXTURES

CORPORA = FIXTURES / "corpora"
READERS = {"pubtator": read_pubtator, "bioc-xml": read_bioc_xml, "bioc-json": read_bioc_json}
ROUND_TRIP = {
    "pubtator": CORPORA / "roundtrip.pubtator",
    "bioc-xml": CORPORA / "roundtrip.bioc.xml",
    "bioc-json": CORPORA / "roundtrip.bioc.json",
}


def _only_documents(items):
    items = list(items)
    assert not [i for i in items if isinstance(i, DeadLetter)]
    return items


# ---- round trips: read -> write -> read gives identical Document records ----


@pytest.mark.parametrize("fmt", sorted(ROUND_TRIP))
def test_round_trip_is_identical(tmp_path, fmt):
    """Titles and no titles, sentence passages, document-level annotations, annotation and passage infons,
    relations with nodes and infons, `|` / `+` / tmVar ids, `-1`, and Sjögren, β-catenin, CJK and emoji
    (offsets in code points)."""
    docs = READERS[fmt](ROUND_TRIP[fmt])
    out = tmp_path / "out"
    assert WRITERS[fmt](docs, out) == len(docs)
    again = READERS[fmt](out)
    assert again == docs
    # and through the dispatcher the link pipeline reads with
    assert _only_documents(read_documents([out], fmt)) == docs
    if fmt == "pubtator":  # byte for byte: the id column verbatim, the empty title line kept
        assert out.read_text(encoding="utf-8") == ROUND_TRIP[fmt].read_text(encoding="utf-8")


def test_round_trip_fixture_exercises_every_case():
    bioc_docs = read_bioc_xml(ROUND_TRIP["bioc-xml"])
    assert bioc_docs == read_bioc_json(ROUND_TRIP["bioc-json"])  # one corpus, two serializations
    first, untitled = bioc_docs
    assert [p.sentence_of for p in first.passages] == [None, 43, 43]
    assert untitled.title == "" and untitled.text.startswith("There is no PPI")
    assert {m.id_field for m in first.mentions} >= {"MESH:D001943|MESH:D010051", "c|SUB|G|Ex2+860|C", "-1"}
    assert all(r.nodes for r in first.relations)
    for doc in bioc_docs + read_pubtator(ROUND_TRIP["pubtator"]):
        for m in doc.mentions:
            assert doc.text[m.start : m.end] == m.text  # code-point offsets, emoji and CJK included


# ---- 1: every writer takes a path or a text stream; write_interchange + read back ----


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_every_writer_takes_a_path_or_a_text_stream(tmp_path, fmt):
    docs = READERS[fmt](ROUND_TRIP[fmt])
    buf = io.StringIO()
    assert WRITERS[fmt](docs, buf) == len(docs)
    WRITERS[fmt](docs, tmp_path / "out")
    assert buf.getvalue() == (tmp_path / "out").read_text(encoding="utf-8") == write_interchange(docs, fmt)


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_write_interchange_reads_back_in_each_output_format(tmp_path, fmt):
    """What `bioel link --output-format FMT` writes (linked mentions: no ann ids, one concept id or NIL)."""
    docs = [
        Document(
            "9000001",
            [Passage("title", 0, "Sjögren syndrome."), Passage("abstract", 18, "β-catenin 🧬 loss.")],
            [
                Mention("Sjögren syndrome", "9000001", 0, 16, "Disease", ("MESH:D012859",)),
                Mention("🧬", "9000001", 28, 29, "Disease", ()),
            ],
        ),
        Document(
            "note-1", [Passage("text", 0, "There is no PPI.")], [Mention("PPI", "note-1", 12, 15, "Chemical", ("D064098",))]
        ),
    ]
    path = tmp_path / "linked"
    path.write_text(write_interchange(docs, fmt), encoding="utf-8")
    back = _only_documents(read_documents([path], fmt))
    assert [(d.doc_id, d.text) for d in back] == [(d.doc_id, d.text) for d in docs]
    assert [[(m.start, m.end, m.text, m.entity_type, m.concept_ids) for m in d.mentions] for d in back] == [
        [(m.start, m.end, m.text, m.entity_type, m.concept_ids) for m in d.mentions] for d in docs
    ]


# ---- 2: no title passage ----


def test_pubtator_writer_keeps_first_char_without_title(tmp_path):
    (doc,) = read_text(str(CORPORA / "plain" / "p1.txt"))
    doc.mentions.append(Mention("PPI", doc.doc_id, 12, 15, "Chemical", ("D064098",)))
    text = format_pubtator(doc)
    assert text.startswith("p1|t|There is no PPI effect")  # the whole text on the title line: offsets unchanged
    (back,) = read_pubtator(_write(tmp_path, "p1.pubtator", text))
    assert back.text.rstrip() == doc.text and back.mentions[0].text == "PPI"
    # a BioC document without a title passage, the same
    untitled = read_bioc_json(ROUND_TRIP["bioc-json"])[1]
    (back,) = read_pubtator(_write(tmp_path, "u.pubtator", format_pubtator(untitled)))
    assert back.text.rstrip() == untitled.text
    assert [(m.start, m.end, m.text) for m in back.mentions] == [(m.start, m.end, m.text) for m in untitled.mentions]


def test_pubtator_writer_keeps_offsets_when_no_space_follows_the_title(tmp_path):
    doc = Document(
        "1", [Passage("title", 0, "Title."), Passage("abstract", 6, "Glued abstract.")], [Mention("Glued", "1", 6, 11, "X")]
    )
    (back,) = read_pubtator(_write(tmp_path, "g.pubtator", format_pubtator(doc)))
    assert back.text.rstrip() == doc.text and back.mentions[0].text == "Glued"


# ---- 3: line breaks and tabs inside a document ----


def test_plain_text_drops_trailing_whitespace_but_moves_no_offset():
    (doc,) = read_text(str(CORPORA / "plain" / "p3.txt"))
    assert doc.text == "Sjögren syndrome with β-catenin loss."
    (doc,) = read_text(str(CORPORA / "plain" / "p2.txt"))
    assert doc.text == "Famotidine and delirium.\nSecond paragraph:\tdelirium resolved."


def test_pubtator_writer_turns_line_breaks_and_tabs_into_spaces_keeping_offsets(tmp_path):
    (doc,) = read_text(str(CORPORA / "plain" / "p2.txt"))
    start = doc.text.index("delirium resolved")
    doc.mentions += [
        Mention("delirium", doc.doc_id, 15, 23, "Disease", ("D003693",)),
        Mention("delirium", doc.doc_id, start, start + 8, "Disease", ("D003693",)),
        Mention(".\nSecond", doc.doc_id, 23, 31, "Span"),
    ]  # a mention across the line break
    (back,) = read_pubtator(_write(tmp_path, "p2.pubtator", format_pubtator(doc)))
    assert back.text.rstrip() == "Famotidine and delirium. Second paragraph: delirium resolved."
    assert [(m.start, m.end) for m in back.mentions] == [(m.start, m.end) for m in doc.mentions]
    assert back.mentions[2].text == ". Second"


def test_three_text_files_with_trailing_newlines_all_write_as_pubtator(tmp_path):
    docs = _only_documents(read_documents(sorted(str(p) for p in (CORPORA / "plain").glob("*.txt")), "text"))
    assert len(docs) == 3 and all(unwritable(d, "pubtator") is None for d in docs)
    back = read_pubtator(_write(tmp_path, "all.pubtator", write_interchange(docs, "pubtator")))
    assert [d.doc_id for d in back] == ["p1", "p2", "p3"]


# ---- 8: BioC sentences, document annotations, producers' JSON layouts ----


def test_bioc_sentence_passages_are_read_with_their_offsets_and_annotations():
    for fmt in ("bioc-xml", "bioc-json"):
        (doc, _) = _only_documents(read_documents([ROUND_TRIP[fmt]], fmt))
        abstract = [p for p in doc.passages if p.kind == "abstract"]
        assert [(p.offset, p.sentence_of) for p in abstract] == [(43, 43), (107, 43)]
        assert doc.abstract.startswith("Patients with Sjögren syndrome")
        assert {m.ann_id for m in doc.mentions} == {"T1", "T2", "T3", "T4", "T5", "T6", "T7"}


def test_bioc_document_level_annotations_are_kept(tmp_path):
    (doc, _) = read_bioc_xml(ROUND_TRIP["bioc-xml"])
    (t7,) = [m for m in doc.mentions if m.ann_id == "T7"]
    assert (t7.text, t7.start, t7.concept_ids) == ("🧬", 104, ())
    # written inside the sentence that holds it; a mention that fits no passage stays at document level
    doc.mentions.append(Mention("signalling. Patients", doc.doc_id, 31, 51, "Span", ann_id="X1"))
    write_bioc_json([doc], tmp_path / "d.json")
    written = json.loads((tmp_path / "d.json").read_text(encoding="utf-8"))["documents"][0]
    assert [a["id"] for a in written["annotations"]] == ["X1"]
    assert "X1" in {m.ann_id for m in read_bioc_json(tmp_path / "d.json")[0].mentions}


@pytest.mark.parametrize("name", ["pubtator3_api.json", "pubtator_central.jsonl", "bare_list.bioc.json", "roundtrip.bioc.json"])
def test_bioc_json_layouts_pubtator3_envelope_collection_bare_list_and_json_lines(name):
    expected = read_bioc_xml(ROUND_TRIP["bioc-xml"])
    assert _only_documents(read_documents([CORPORA / name], "bioc-json")) == expected
    assert read_bioc_json(CORPORA / name) == expected


def test_bioc_json_lines_bad_line_is_one_dead_letter_and_the_rest_is_read(tmp_path):
    lines = (CORPORA / "pubtator_central.jsonl").read_text(encoding="utf-8").splitlines()
    path = _write(tmp_path, "pc.jsonl", "\n".join([lines[0], '{"id": "x", "passages": [', lines[1]]) + "\n")
    items = list(read_documents([path], "bioc-json"))
    assert [type(i).__name__ for i in items] == ["Document", "DeadLetter", "Document"]
    assert items[1].location == "line 2" and "not JSON" in items[1].reason


def test_bioc_json_lines_keep_text_with_unicode_line_separators(tmp_path):
    doc = json.loads((CORPORA / "pubtator_central.jsonl").read_text(encoding="utf-8").splitlines()[1])
    doc["passages"][0]["text"] = doc["passages"][0]["text"].replace("There is", "There\u2028is")
    path = _write(tmp_path, "ls.jsonl", json.dumps(doc, ensure_ascii=False) + "\n" + json.dumps(doc, ensure_ascii=False) + "\n")
    docs = _only_documents(read_documents([path], "bioc-json"))
    assert len(docs) == 2 and docs[0].text.startswith("There\u2028is")


# ---- 9: id fields verbatim; relation nodes and infons ----


def test_pubtator_id_column_is_written_verbatim_tmvar_and_composites(tmp_path):
    docs = read_pubtator(ROUND_TRIP["pubtator"])
    by_text = {m.text: m for m in docs[0].mentions}
    assert by_text["Ex2+860G>C"].id_field == "c|SUB|G|Ex2+860|C"
    assert by_text["Ex2+860G>C"].concept_ids == ("c", "SUB", "G", "Ex2", "860", "C")  # the split, for evaluation
    text = write_interchange(docs, "pubtator")
    assert "\tc|SUB|G|Ex2+860|C\n" in text and "\tD001943+D010051\n" in text and "\tD001943|D010051\n" in text
    # a mention whose ids were changed after reading is written from its ids, not the stale field
    import dataclasses

    relinked = dataclasses.replace(by_text["Ex2+860G>C"], concept_ids=("rs121913529",))
    doc = dataclasses.replace(docs[0], mentions=[relinked])
    assert "\trs121913529\n" in format_pubtator(doc)


@pytest.mark.parametrize("fmt", ["bioc-xml", "bioc-json"])
def test_bioc_relations_keep_nodes_and_infons(tmp_path, fmt):
    docs = READERS[fmt](ROUND_TRIP[fmt])
    WRITERS[fmt](docs, tmp_path / "out")
    rels = {r.rel_id: r for r in READERS[fmt](tmp_path / "out")[0].relations}
    assert (rels["R1"].args, rels["R1"].roles, dict(rels["R1"].infons)) == (
        ("T3", "T2"),
        ("Gene", "Disease"),
        {"type": "Association", "score": "0.91"},
    )
    assert (rels["R2"].kind, dict(rels["R2"].infons)["novel"]) == ("CID", "No")


@pytest.mark.parametrize("fmt", ["bioc-xml", "bioc-json"])
def test_written_bioc_is_read_by_the_bioc_package(tmp_path, fmt):
    """An independent reader (PyPI `bioc`) sees the sentences, annotations, nodes and infons written here."""
    WRITERS[fmt](READERS[fmt](ROUND_TRIP[fmt]), tmp_path / "out")
    with open(tmp_path / "out", encoding="utf-8") as fh:
        collection: bioc.BioCCollection = (biocxml if fmt == "bioc-xml" else biocjson).load(fh)
    doc = collection.documents[0]
    sentences = doc.passages[1].sentences
    assert [s.text for s in sentences][0].startswith("Patients with Sjögren") and sentences[1].offset == 107
    assert [a.infons["identifier"] for a in sentences[1].annotations] == ["MESH:D001943|MESH:D010051", "c|SUB|G|Ex2+860|C"]
    r1 = next(r for r in doc.relations if r.id == "R1")
    assert [(n.refid, n.role) for n in r1.nodes] == [("T3", "Gene"), ("T2", "Disease")] and r1.infons["score"] == "0.91"
    assert doc.passages[0].infons == {"type": "title", "section_type": "TITLE"}
    assert next(a for a in sentences[0].annotations if a.id == "T3").infons == {
        "type": "Gene",
        "identifier": "1499",
        "database": "ncbi_gene",
    }


# ---- 11: what PubTator (or XML) cannot hold is refused, never mis-written ----


@pytest.mark.parametrize("doc_id", ["123|4", "12\t3", "12\n3", " "])
def test_pubtator_writer_refuses_ids_with_bar_tab_or_newline(doc_id):
    doc = Document(doc_id, [Passage("text", 0, "Some text.")])
    with pytest.raises(UnwritableDocument, match="cannot be written as PubTator"):
        format_pubtator(doc)
    assert "the id is empty or holds '|'" in unwritable(doc, "pubtator")
    assert unwritable(doc, "bioc-json") is None  # BioC has no such limit


def test_bioc_xml_writer_refuses_characters_xml_cannot_hold():
    doc = Document("1", [Passage("text", 0, "bad \x01 byte")])
    assert "XML 1.0 cannot represent" in unwritable(doc, "bioc-xml")
    assert unwritable(doc, "bioc-json") is None
    with pytest.raises(UnwritableDocument):
        write_bioc_xml([doc], io.StringIO())


def test_lone_surrogate_is_refused_by_every_writer():
    doc = Document("1", [Passage("text", 0, "bad \ud800 half")])
    assert all(unwritable(doc, fmt) for fmt in WRITERS)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bioc_passage_with_both_text_and_sentences_is_read_when_they_agree(tmp_path):
    doc = json.loads((CORPORA / "pubtator_central.jsonl").read_text(encoding="utf-8").splitlines()[0])
    abstract = doc["passages"][1]
    abstract["text"] = " ".join(s["text"] for s in abstract["sentences"])
    (read,) = read_documents([_write(tmp_path, "both.json", json.dumps(doc, ensure_ascii=False))], "bioc-json")
    assert read == read_bioc_xml(ROUND_TRIP["bioc-xml"])[0]
    abstract["text"] = abstract["text"].replace("Patients", "Patience")
    (dead,) = read_documents([_write(tmp_path, "differ.json", json.dumps(doc, ensure_ascii=False))], "bioc-json")
    assert isinstance(dead, DeadLetter) and "differs from the passage text" in dead.reason


@pytest.mark.parametrize("fmt,per_line", [("jsonl", False), ("pubtator", False), ("text", True)])
def test_a_large_line_format_file_read_in_ranges_gives_the_whole_files_items(tmp_path, monkeypatch, fmt, per_line):
    from bioel_core.corpora import corpus_inputs
    from bioel_core.kb import io as kb_io

    docs = [
        Document(
            f"{i}",
            [Passage("title", 0, f"Title {i:02d} of gout."), Passage("abstract", 19, f"Abstract {i:02d}: gout again.")],
            [Mention("gout", f"{i}", 32, 36, "Disease", ("D006073",))] if i % 2 else [],
        )
        for i in range(60)
    ]
    path = tmp_path / f"corpus.{fmt}"
    if fmt == "jsonl":
        lines = [json.dumps({"pmid": d.doc_id, "title": d.passages[0].text, "abstract": d.passages[1].text}) for d in docs]
        lines[17] = "{not json"
        path.write_text("\n".join(lines) + "\n")
    elif fmt == "pubtator":
        path.write_text("".join(format_pubtator(d) + "\n" for d in docs).replace("30|t|", "30|x|", 1))
    else:
        path.write_bytes(
            b"".join(f"{d.doc_id}\t{d.text}\n".encode() if i != 9 else b"\xff\xfe bad\n" for i, d in enumerate(docs))
        )
    whole = list(read_documents([str(path)], fmt, per_line=per_line))
    assert corpus_inputs([str(path)], fmt, per_line=per_line) == [str(path)]
    monkeypatch.setattr(kb_io, "SPLIT_BYTES", 500)
    pieces = corpus_inputs([str(path)], fmt, per_line=per_line)
    assert len(pieces) >= 4
    ranged = [item for piece in pieces for item in read_documents([piece], fmt, per_line=per_line)]
    assert ranged == whole and sum(isinstance(i, DeadLetter) for i in whole) == 1
    assert corpus_inputs([str(path)], "bioc-xml") == [str(path)]  # BioC is read whole
