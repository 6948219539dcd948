"""Corpus readers and writers: PubTator, BioC XML/JSON, JSONL abstracts, BioSyn query folders."""

from bioel_core.corpora.bioc import iter_bioc_xml, read_bioc_json, read_bioc_xml, write_bioc_json, write_bioc_xml
from bioel_core.corpora.biosyn import DictionaryEntry, iter_dictionary, read_query_file, read_query_folder, read_typo_map
from bioel_core.corpora.jsonl import read_jsonl, write_jsonl
from bioel_core.corpora.pubtator import read_pubtator, split_ids, write_pubtator
from bioel_core.corpora.records import Candidate, Document, FormatError, Mention, Passage, Relation

__all__ = [
    "Candidate", "DictionaryEntry", "Document", "FormatError", "Mention", "Passage", "Relation",
    "iter_bioc_xml", "iter_dictionary", "read_bioc_json", "read_bioc_xml", "read_jsonl", "read_pubtator",
    "read_query_file", "read_query_folder", "read_typo_map", "split_ids", "write_bioc_json", "write_bioc_xml",
    "write_jsonl", "write_pubtator",
]
