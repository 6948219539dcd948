"""CLI flags made from a stage contract's fields (bioel_core.settings): the one place where a field becomes a flag
(name, type, default, help, choices) and where a `SettingsError` naming a field becomes an error naming its flag.

A field `batch_size` is the flag `--batch-size` unless the verb renames it; a nested contract's fields are flags of
their own (IngestSettings.reader.umls_languages -> `--umls-languages`); a table of named tables
(LinkSettings.types: entity type -> LinkTarget) gives one flag per inner field taking `TYPE=VALUE` items
(`--index Disease=idx/medic Chemical=idx/mesh`). Flags hold no defaults of their own: a value not given is left to
the contract (or to the bundle file or mapping the flags override), so each default lives in one place, and the
contract validates every value once, its errors mapped back here to the flag that was typed.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from bioel_core.settings import SettingsError, fields_of, from_mapping
from bioel_core.settings.fields import FieldInfo, _is_settings, _optional

# a typed item's entity type, for errors naming a type's setting: `--index Disease=...`
TYPED_METAVAR = "[TYPE=]{}"
TRUTH = {"true": True, "false": False}  # a typed true/false setting's values, as TOML writes them


@dataclass
class Flag:
    """One flag: the field it sets (dotted path; `*` stands for the entity type of a typed flag), its option string
    and argparse dest."""

    path: str
    option: str
    dest: str
    info: FieldInfo
    typed: bool = False  # takes TYPE=VALUE items (an inner field of a table of named tables)
    untyped_path: str | None = None  # the outer field an item without TYPE= sets (`--model DIR` vs `--model T=DIR`)


@dataclass
class FlagSet:
    """The flags one contract gave a parser, and the way back from parsed arguments (and from errors) to it."""

    cls: type
    flags: list[Flag] = field(default_factory=list)

    def by_path(self) -> dict[str, Flag]:
        out = {f.path: f for f in self.flags}
        out.update({f.untyped_path: f for f in self.flags if f.untyped_path})
        return out

    def given(self, args: argparse.Namespace, untyped: str | None = None) -> dict:
        """The values typed on the command line as a mapping of the contract's shape (flags not given left out).
        `untyped`: the entity type a typed flag's item without `TYPE=` stands for (None: such an item is refused)."""
        data: dict = {}
        for flag in self.flags:
            if not hasattr(args, flag.dest):
                continue
            value = getattr(args, flag.dest)
            if flag.typed:
                table, _, inner = flag.path.partition(".*.")
                for entity_type, item in _typed_items(flag, value, untyped):
                    if entity_type is None and flag.untyped_path:
                        data[flag.untyped_path] = item
                    else:
                        data.setdefault(table, {}).setdefault(entity_type, {})[inner] = item
            else:
                node = data
                *outer, leaf = flag.path.split(".")
                for part in outer:
                    node = node.setdefault(part, {})
                node[leaf] = value
        return data

    def settings(self, args: argparse.Namespace, base: Mapping | None = None, untyped: str | None = None):
        """The contract made from `base` (a bundle's or config file's mapping; default empty) with every flag given
        replacing its setting; an invalid value is refused naming its flag (`FlagError`)."""
        data = _merged(dict(base or {}), self.given(args, untyped))
        try:
            return from_mapping(self.cls, data)
        except SettingsError as err:
            raise FlagError(self.describe(err)) from None

    def flag_for(self, path: str) -> tuple[Flag, str | None] | None:
        """The flag that sets the dotted `path` (and the entity type, for a typed one), or None."""
        flags = self.by_path()
        if path in flags:
            return flags[path], None
        parts = path.split(".")
        for i in range(1, len(parts) - 1):  # types.Disease.index -> types.*.index
            pattern = ".".join(parts[:i] + ["*"] + parts[i + 1 :])
            if pattern in flags:
                return flags[pattern], parts[i]
        return None

    def option_of(self, path: str) -> str:
        """How the command line names the setting `path`: its flag (`--train-corpus`), else the path itself."""
        found = self.flag_for(path)
        return found[0].option if found else path

    def describe(self, err: SettingsError) -> str:
        """A contract's error worded for the command line: `--num-shards: must be at least 1, got 0`."""
        found = self.flag_for(err.field) if err.field else None
        if found is None:
            table, _, name = err.field.rpartition(".")
            if any(f.path.startswith(f"{table}.*.") for f in self.flags if table):  # the name of a typed table
                return f"TYPE={name}: {err.reason}"
            return str(err)
        flag, entity_type = found
        return f"{flag.option} {entity_type}=...: {err.reason}" if entity_type else f"{flag.option}: {err.reason}"


@dataclass(frozen=True)
class Contract:
    """One contract a verb makes flags of, and how (the arguments of `add_flags`): the verb's table in
    pipelines/cli_verbs.py. `skip` lists the fields the verb deliberately does not expose."""

    cls: type
    rename: Mapping[str, str] = field(default_factory=dict)
    skip: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()

    def add_to(self, parser) -> FlagSet:
        return add_flags(parser, self.cls, rename=self.rename, skip=self.skip, required=self.required, optional=self.optional)


@dataclass
class VerbFlags:
    """The flag sets of one verb's contracts: each contract made from the parsed arguments, and any contract's error
    worded with the flag that sets the field at fault."""

    flagsets: list[FlagSet]

    def of(self, cls: type) -> FlagSet:
        return next(f for f in self.flagsets if f.cls is cls)

    def settings(self, args: argparse.Namespace, cls: type, base: Mapping | None = None, untyped: str | None = None):
        return self.of(cls).settings(args, base, untyped)

    def options(self) -> dict[str, str]:
        """Each setting's flag by the setting's name (a type's setting by its own: `index` -> `--index`): the CLI's
        words for the settings a bioel_core refusal names (its `labels`)."""
        return {path.rpartition(".")[2]: flag.option for flagset in self.flagsets for path, flag in flagset.by_path().items()}

    def describe(self, err: SettingsError) -> str:
        """The first of the verb's contracts with a flag for the field names it; an error of no flag's field is
        worded as the contract worded it."""
        for flagset in self.flagsets:
            if err.field and flagset.flag_for(err.field) is not None:
                return flagset.describe(err)
        return str(err)


def add_contracts(parser, contracts) -> VerbFlags:
    """Every contract's flags on `parser`; the VerbFlags is the parser's default `contracts` (args.contracts)."""
    flags = VerbFlags([contract.add_to(parser) for contract in contracts])
    parser.set_defaults(contracts=flags)
    return flags


class FlagError(ValueError):
    """A flag's value the contract refused, worded with the flag (the CLI prints it as its one-line error, exit 2)."""


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_flags(
    parser,
    cls: type,
    *,
    rename: Mapping[str, str] | None = None,
    skip: Collection[str] = (),
    required: Collection[str] = (),
    optional: Collection[str] = (),
    prefix: str = "",
) -> FlagSet:
    """Add one flag per field of the contract `cls` to `parser` and return them as a FlagSet. `rename`: dotted field
    -> option string, where the verb's vocabulary differs from the field's name (`kind` -> `--index-kind`); `skip`:
    dotted fields (or tables) the verb does not expose; `required`/`optional`: fields whose flag must / need not be
    given whatever the contract says (a required field a bundle or config file can set is optional on the line)."""
    flags = FlagSet(cls)
    _add(parser, cls, flags, dict(rename or {}), set(skip), set(required), set(optional), prefix)
    return flags


def _add(parser, cls, flags: FlagSet, rename, skip, required, optional, prefix, typed=False) -> None:
    for info in fields_of(cls):
        path = f"{prefix}.{info.name}" if prefix else info.name
        if path in skip:
            continue
        kind, _ = _optional(info.type)
        if _is_settings(kind):
            _add(parser, kind, flags, rename, skip, required, optional, path, typed)
            continue
        if typing.get_origin(kind) is dict:
            _add(parser, typing.get_args(kind)[1], flags, rename, skip, required, optional, f"{path}.*", typed=True)
            continue
        option = rename.get(path) or flag_name(info.name)
        dest = option.lstrip("-").replace("-", "_")
        outer = next((f for f in flags.flags if f.option == option and not f.typed), None)
        if typed and outer is not None:  # one flag for both: `--model DIR` (the outer field), `--model T=DIR`
            _merge_typed(parser, flags, outer, Flag(path, option, dest, info, True, untyped_path=outer.path))
            continue
        must = path in required or (info.required and path not in optional and not typed)
        kwargs = _argparse_kwargs(info, kind, typed, option)
        parser.add_argument(option, dest=dest, required=must, default=argparse.SUPPRESS, **kwargs)
        flags.flags.append(Flag(path, option, dest, info, typed))


def _merge_typed(parser, flags: FlagSet, outer: Flag, typed: Flag) -> None:
    """Make the outer field's flag take `[TYPE=]VALUE` items: those without a type set the outer field."""
    action = next(a for a in parser._actions if outer.option in a.option_strings)  # noqa: SLF001 - our own flag
    action.nargs, action.metavar = "+", TYPED_METAVAR.format(_metavar(outer.option))
    action.help = f"{outer.info.help}; TYPE=VALUE: {typed.info.help}{_default_note(outer.info)}"
    flags.flags[flags.flags.index(outer)] = typed


def _argparse_kwargs(info: FieldInfo, kind, typed: bool, option: str) -> dict:
    help_text = info.help + _default_note(info)
    if typed:  # every value arrives as TYPE=VALUE text, converted per item (_typed_items)
        return {"nargs": "+", "metavar": TYPED_METAVAR.format(_metavar(option)), "help": help_text}
    if kind is bool:  # one not off by default can be turned off: --name / --no-name
        return {"action": "store_true" if info.default is False else argparse.BooleanOptionalAction, "help": help_text}
    kwargs: dict = {"help": help_text}
    item = typing.get_args(kind)[0] if typing.get_origin(kind) is list else kind
    if typing.get_origin(kind) is list:
        kwargs["nargs"] = "+"
    if item in (int, float):
        kwargs["type"] = _number(item)
    if info.choices:
        kwargs["choices"] = info.choices
    return kwargs


def _metavar(option: str) -> str:
    return option.lstrip("-").replace("-", "_").upper()


def _default_note(info: FieldInfo) -> str:
    if info.required or info.default in (None, False, [], {}, "") or _is_settings(type(info.default)):
        return ""
    shown = " ".join(map(str, info.default)) if isinstance(info.default, list) else info.default
    return f" (default {shown})"


def _number(kind: type):
    def convert(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole number' if kind is int else 'a number'}") from None

    convert.__name__ = kind.__name__
    return convert


def _typed_items(flag: Flag, values: list[str], untyped: str | None) -> list[tuple[str | None, object]]:
    """`TYPE=VALUE` items -> (type, value converted to the field's type), one-line errors naming the flag."""
    kind, _ = _optional(flag.info.type)
    out: dict[str | None, object] = {}
    for text in values:
        entity_type: str | None
        entity_type, sep, value = text.partition("=")
        if not sep:  # the outer field's value (`--model DIR`), else the `untyped` type's
            entity_type, value = (None if flag.untyped_path else untyped), text
            if entity_type is None and flag.untyped_path is None:
                raise FlagError(f"{flag.option} {text}: name the entity type ({flag.option} TYPE=VALUE)")
        if not value.strip():
            raise FlagError(f"{flag.option} {text!r}: expected TYPE=VALUE, VALUE not empty")
        if entity_type in out:
            raise FlagError(
                f"{flag.option}: entity type {entity_type} given twice"
                if entity_type
                else f"{flag.option}: given twice without a type"
            )
        if kind is bool:
            if value.lower() not in TRUTH:
                raise FlagError(f"{flag.option} {text}: {value!r} is not true or false")
            out[entity_type] = TRUTH[value.lower()]
        else:
            try:
                out[entity_type] = kind(value) if kind in (int, float) else value  # type: ignore[operator]
            except ValueError:
                raise FlagError(f"{flag.option} {text}: {value!r} is not a number") from None
    return list(out.items())


def _merged(base: dict, given: Mapping) -> dict:
    """`given` laid over `base`, table by table (a flag replaces one setting, not its whole table)."""
    for key, value in given.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), Mapping):
            base[key] = _merged(dict(base[key]), value)
        else:
            base[key] = value
    return base
