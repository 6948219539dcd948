"""pipelines.cli_flags: a contract's fields become flags, parsed flags become the contract, and its errors name the
flag that was typed."""

from __future__ import annotations

import argparse

import pytest

from bioel_core.settings import IndexSettings, IngestSettings, LinkSettings, fields_of
from pipelines import cli
from pipelines.cli import verb_parsers
from pipelines.cli_flags import FlagError, add_flags
from pipelines.cli_verbs import CLI_ONLY, FLAGS


def parser_for(cls, **kwargs):
    parser = argparse.ArgumentParser(exit_on_error=False)
    return parser, add_flags(parser, cls, **kwargs)


def test_one_flag_per_field_defaults_left_to_the_contract():
    parser, flags = parser_for(IndexSettings, rename={"kind": "--index-kind"})
    assert [f.option for f in flags.flags] == [
        "--index-kind" if f.name == "kind" else "--" + f.name.replace("_", "-") for f in fields_of(IndexSettings)
    ]
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
    assert {"--input-format", "--input", "--umls-languages", "--tree-include", "--tree-exclude", "--keep-case"} <= options
    with pytest.raises(SystemExit):  # argparse exits on a missing required flag whatever exit_on_error says
        parser.parse_args(["--input", "x.tsv"])  # --input-format is required: the contract has no default for it
    settings = flags.settings(
        parser.parse_args(["--input-format", "mesh-tsv", "--input", "a.tsv", "b.tsv", "--tree-include", "D", "--keep-case"])
    )
    assert settings.dumps == ["a.tsv", "b.tsv"] and settings.scope.tree_include == ["D"] and settings.keep_case
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


def test_a_typed_true_false_setting_takes_true_or_false():
    parser, flags = parser_for(LinkSettings)
    args = ["--index", "Disease=d", "Chemical=c", "--inner-names", "Disease=true", "Chemical=FALSE"]
    settings = flags.settings(parser.parse_args(args))
    assert settings.types["Disease"].inner_names is True and settings.types["Chemical"].inner_names is False
    with pytest.raises(FlagError, match=r"^--inner-names Disease=yes: 'yes' is not true or false$"):
        flags.settings(parser.parse_args(["--index", "Disease=d", "--inner-names", "Disease=yes"]))


def test_flags_override_single_settings_of_a_base_mapping():
    parser, flags = parser_for(LinkSettings)
    base = {"detector": "both", "types": {"Disease": {"index": "a", "stop_list": "s.json"}}}
    settings = flags.settings(parser.parse_args(["--index", "Disease=b"]), base)
    assert settings.detector == "both" and settings.types["Disease"].index == "b"
    assert settings.types["Disease"].stop_list == "s.json"  # the rest of the type's table is the base's


def _options(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings} | {a.metavar for a in parser._actions if not a.option_strings}


@pytest.mark.parametrize("verb", sorted(FLAGS))
def test_each_verbs_flags_are_its_contracts_fields(verb):
    """Every field of the verb's contracts is one of its flags unless the verb's table hides it (`skip`); every flag
    is a contract's field or one of the documented CLI-only flags."""
    parser = verb_parsers(cli.build_parser())[verb]
    expected = argparse.ArgumentParser(add_help=False)
    generated = [contract.add_to(expected) for contract in FLAGS[verb]]
    made = {option for action in expected._actions for option in action.option_strings}  # --x and its --no-x
    for contract, flagset in zip(FLAGS[verb], generated):
        paths = {f.path for f in flagset.flags} | {f.untyped_path for f in flagset.flags if f.untyped_path}
        for path in _field_paths(contract.cls):
            assert path in paths or path in contract.skip or _under(path, contract.skip), (verb, path)
    shown = _options(parser)
    assert made <= shown
    assert shown - made <= set(CLI_ONLY), (verb, shown - made - set(CLI_ONLY))
    for action in parser._actions:  # the verb's flag is the generated one: type, choices, nargs, required, help
        twin = next((a for a in expected._actions if a.option_strings == action.option_strings), None)
        if twin is not None:
            assert (action.choices, action.nargs, action.required, action.help, action.default) == (
                twin.choices,
                twin.nargs,
                twin.required,
                twin.help,
                twin.default,
            ), (verb, action.option_strings)


def _field_paths(cls, prefix: str = "") -> list[str]:
    import typing

    from bioel_core.settings.fields import _is_settings, _optional

    out = []
    for info in fields_of(cls):
        path = f"{prefix}{info.name}"
        kind, _ = _optional(info.type)
        if _is_settings(kind):
            out += _field_paths(kind, path + ".")
        elif typing.get_origin(kind) is dict:
            out += _field_paths(typing.get_args(kind)[1], path + ".*.")
        else:
            out.append(path)
    return out


def _under(path: str, skip) -> bool:
    return any(path.startswith(s + ".") for s in skip)


def test_the_cli_only_flags_are_few_and_documented():
    assert len(CLI_ONLY) <= 8 and all(CLI_ONLY.values())


def test_a_contract_error_raised_past_the_cli_is_worded_with_its_flag():
    from bioel_core.settings import SettingsError

    contracts = cli.build_parser()
    link = verb_parsers(contracts)["link"].get_default("contracts")
    assert link.describe(SettingsError("types.Chemical.index", "required")) == "--index Chemical=...: required"
    assert link.describe(SettingsError("batch_size", "must be at least 1, got 0")) == "--batch-size: must be at least 1, got 0"
    assert link.describe(SettingsError("rerank_depth", "too deep")) == "--rerank-depth: too deep"
    assert link.describe(SettingsError("somewhere.else", "no flag")) == "somewhere.else: no flag"


def test_the_cli_reference_is_current():
    """docs/cli.md is what benchmarks/cli_flags.py makes of the parsers now (run it after changing a flag)."""
    import subprocess
    import sys

    from conftest import REPO

    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "cli_flags.py"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# flag strings still in bioel_core, per file, until each refusal there names its setting (SettingsError, or the
# caller's `labels`) and the CLI words it with the flag; a count may only go down. outputs/rules.py: the default
# labels of `train`'s output checks (pipelines/cli_train.py passes none); models/cards.py renders commands.
FLAG_STRINGS_LEFT = {"outputs/rules.py": 11}


def test_bioel_core_holds_no_new_cli_flag_strings():
    import re

    from conftest import REPO

    core = REPO / "bioel_core"
    found = {}
    for path in sorted(core.rglob("*.py")):
        name = path.relative_to(core).as_posix()
        if name == "models/cards.py":
            continue
        # Beam's own options (--setup_file, --sdk_container_image) are spelt with '_' and may be named
        flags = [f for f in re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", path.read_text()) if "_" not in f]
        if flags:
            found[name] = len(flags)
    assert {name: n for name, n in found.items() if n > FLAG_STRINGS_LEFT.get(name, 0)} == {}


def test_an_item_without_a_type_is_for_mentions_of_any_type_when_the_verb_says_so():
    # `bioel link --index DIR` (no bundle): the index of mentions of any type, as before the contracts
    parser, flags = parser_for(LinkSettings)
    settings = flags.settings(parser.parse_args(["--index", "idx", "--nil-threshold", "0.5", "--model", "m"]), untyped="")
    assert settings.types[""].index == "idx" and settings.types[""].nil_threshold == 0.5
    assert settings.model == "m" and settings.types[""].model is None  # the outer field keeps its untyped value


def test_the_reference_walks_nested_subcommands():
    """`train KIND` subcommands (to come) get their own section, after their parent's."""
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("cli_flags_doc", REPO / "benchmarks" / "cli_flags.py")
    doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doc)
    parser = argparse.ArgumentParser(prog="bioel")
    train = parser.add_subparsers().add_parser("train", help="train a model")
    kind = train.add_subparsers().add_parser("rescnn", help="a ResCNN name encoder")
    kind.add_argument("--epochs", type=int, default=3, help="epochs")
    found = doc.subcommands(parser)
    assert [(name, help_text) for name, help_text, _ in found] == [
        ("train", "train a model"),
        ("train rescnn", "a ResCNN name encoder"),
    ]
    assert [a.option_strings for a in doc.visible_flags(found[1][2])] == [["--epochs"]]
