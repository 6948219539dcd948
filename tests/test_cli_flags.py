"""pipelines.cli_flags: a contract's fields become flags, parsed flags become the contract, and its errors name the
flag that was typed."""

from __future__ import annotations

import argparse

import pytest

from bioel_core.settings import IndexSettings, IngestSettings, LinkSettings, fields_of
from pipelines.cli_flags import FlagError, add_flags


def parser_for(cls, **kwargs):
    parser = argparse.ArgumentParser(exit_on_error=False)
    return parser, add_flags(parser, cls, **kwargs)


def test_one_flag_per_field_defaults_left_to_the_contract():
    parser, flags = parser_for(IndexSettings, rename={"kind": "--index-kind"})
    assert [f.option for f in flags.flags] == ["--index-kind" if f.name == "kind" else "--" + f.name.replace("_", "-")
                                               for f in fields_of(IndexSettings)]
    settings = flags.settings(parser.parse_args(["--index-kind", "hnsw", "--nlist", "64"]))
    assert settings == IndexSettings(kind="hnsw", nlist=64)  # every other value is the contract's default
    assert "(default 32)" in parser.format_help()  # hnsw_m's default, read from the contract


def test_a_value_the_contract_refuses_is_named_by_its_flag():
    parser, flags = parser_for(IndexSettings, rename={"kind": "--index-kind"})
    with pytest.raises(FlagError, match=r"^--num-shards: must be at least 1, got 0$"):
        flags.settings(parser.parse_args(["--num-shards", "0"]))
    with pytest.raises(FlagError, match=r"^--pq-nbits: must be at most 16, got 20$"):
        flags.settings(parser.parse_args(["--pq-nbits", "20"]))
    with pytest.raises(argparse.ArgumentError, match="'two' is not a whole number"):
        parser.parse_args(["--nlist", "two"])


def test_nested_contract_fields_are_flags_and_required_ones_are_required():
    parser, flags = parser_for(IngestSettings, rename={"format": "--input-format", "dumps": "--input"})
    options = {f.option for f in flags.flags}
    assert {"--input-format", "--input", "--umls-languages", "--mesh-tree-prefix", "--keep-case"} <= options
    with pytest.raises(SystemExit):  # argparse exits on a missing required flag whatever exit_on_error says
        parser.parse_args(["--input", "x.tsv"])  # --input-format is required: the contract has no default for it
    settings = flags.settings(parser.parse_args(["--input-format", "mesh-tsv", "--input", "a.tsv", "b.tsv",
                                                 "--mesh-tree-prefix", "D", "--keep-case"]))
    assert settings.dumps == ["a.tsv", "b.tsv"] and settings.reader.mesh_tree_prefix == ["D"] and settings.keep_case
    with pytest.raises(FlagError, match=r"^--umls-languages: format mesh-tsv does not read this option"):
        flags.settings(parser.parse_args(["--input-format", "mesh-tsv", "--input", "a", "--umls-languages", "FRE"]))


def test_a_table_of_named_tables_takes_type_value_items():
    parser, flags = parser_for(LinkSettings)
    args = parser.parse_args(["--index", "Disease=idx/medic", "Chemical=idx/mesh", "--nil-threshold", "Disease=0.6"])
    settings = flags.settings(args)
    assert settings.types["Disease"].index == "idx/medic" and settings.types["Chemical"].index == "idx/mesh"
    assert settings.types["Disease"].nil_threshold == 0.6 and settings.types["Chemical"].nil_threshold is None
    with pytest.raises(FlagError, match=r"^--index idx: name the entity type"):
        flags.settings(parser.parse_args(["--index", "idx"]))
    settings = flags.settings(parser.parse_args(["--model", "m", "Chemical=c", "--index", "Chemical=i"]))
    assert settings.model == "m" and settings.types["Chemical"].model == "c"  # one flag, the outer field untyped
    with pytest.raises(FlagError, match=r"^--nil-threshold Disease=high: 'high' is not a number$"):
        flags.settings(parser.parse_args(["--nil-threshold", "Disease=high"]))
    with pytest.raises(FlagError, match=r"^TYPE=1x: not a valid name: an entity type is a letter"):
        flags.settings(parser.parse_args(["--index", "1x=idx"]))


def test_flags_override_single_settings_of_a_base_mapping():
    parser, flags = parser_for(LinkSettings)
    base = {"detector": "both", "types": {"Disease": {"index": "a", "stop_list": "s.json"}}}
    settings = flags.settings(parser.parse_args(["--index", "Disease=b"]), base)
    assert settings.detector == "both" and settings.types["Disease"].index == "b"
    assert settings.types["Disease"].stop_list == "s.json"  # the rest of the type's table is the base's
