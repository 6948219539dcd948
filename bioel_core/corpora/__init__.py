"""Corpus readers and writers: PubMed XML, PubTator, BioC XML/JSON, JSONL abstracts, plain text, BioSyn query
folders; `read_documents` reads any of them with one error contract, `read_annotated` one that carries annotations
whole, its first bad record an error."""

from bioel_core.corpora.annotated import corpus_files, pubtator_files, read_annotated, read_pubtator
from bioel_core.corpora.bioc import iter_bioc_xml, read_bioc_json, read_bioc_xml, write_bioc_json, write_bioc_xml
from bioel_core.corpora.biosyn import DictionaryEntry, iter_dictionary, read_query_file, read_query_folder, read_typo_map
from bioel_core.corpora.jsonl import read_jsonl, write_jsonl
from bioel_core.corpora.pubmed_xml import iter_pubmed_xml, read_pubmed_xml
from bioel_core.corpora.pubtator import split_ids, write_pubtator
from bioel_core.corpora.read import FORMATS, FORMATS_WITH_MENTIONS, CorpusItem, corpus_inputs, read_documents
from bioel_core.corpora.records import (
    Candidate,
    DeletedDocument,
    Document,
    FormatError,
    Mention,
    Passage,
    Relation,
    UnwritableDocument,
)
from bioel_core.corpora.text import iter_text, read_text

__all__ = [
    "FORMATS",
    "FORMATS_WITH_MENTIONS",
    "Candidate",
    "CorpusItem",
    "DeletedDocument",
    "DictionaryEntry",
    "Document",
    "FormatError",
    "Mention",
    "Passage",
    "Relation",
    "corpus_files",
    "corpus_inputs",
    "iter_bioc_xml",
    "iter_dictionary",
    "iter_pubmed_xml",
    "iter_text",
    "read_annotated",
    "read_bioc_json",
    "read_bioc_xml",
    "read_documents",
    "read_jsonl",
    "read_pubmed_xml",
    "read_pubtator",
    "read_query_file",
    "pubtator_files",
    "read_query_folder",
    "read_text",
    "read_typo_map",
    "split_ids",
    "UnwritableDocument",
    "write_bioc_json",
    "write_bioc_xml",
    "write_jsonl",
    "write_pubtator",
]
