"""The machinery under every stage contract. A contract is a dataclass deriving from `Settings` whose fields carry
their help, choices, lower bound and whether they name a path (`setting`). It is validated once, when it is made,
from Python or from a mapping: every error is a `SettingsError` naming the field by its dotted path
(`types.Disease.index.kind: 'ivf' is not one of flat, ivf-flat, ivf-pq, hnsw`).

`from_mapping` makes one from a mapping (a TOML table, a manifest's record), refusing unknown keys with the nearest
known name; `to_mapping` is its inverse; `override` applies one `a.b.c=VALUE` assignment to a mapping. A CLI can make a
flag of each field from `fields_of` (name, type, default, help, choices): the contracts hold no flag strings.

Field types understood: str, int, float, bool, list[str], `X | None` of those, a contract (a nested table) and
dict[str, contract] (a table of named tables). A contract may define `check(self)` for rules across its fields, run
once they are valid (raise `SettingsError` naming the field).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path


class SettingsError(ValueError):
    """A setting that is not valid: `field` is its dotted path, `reason` says why."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field, self.reason = field, reason

    def under(self, prefix: str) -> SettingsError:
        """The same error, named from one table further out."""
        return SettingsError(_join(prefix, self.field) if self.field else prefix, self.reason) if prefix else self


def setting(
    default=MISSING,
    *,
    help: str,
    choices: tuple | None = None,
    minimum: float | None = None,
    path: bool = False,
    names: tuple[re.Pattern, str] | None = None,
):
    """A contract field. `path`: a file or folder, made absolute against the folder the mapping came from (a bundle
    file's) or, given by an assignment (`override`), the working folder; a URL (gs://...) stays as it is. `names`: for a table of named
    tables, (the pattern each name must match, what it is in words)."""
    metadata = {"help": help, "choices": choices, "minimum": minimum, "path": path, "names": names}
    if isinstance(default, (list, dict)) or dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=functools.partial(copy.deepcopy, default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class FieldInfo:
    """What a CLI needs to make a flag of a field, and what validation reads."""

    name: str
    type: object  # the annotation, resolved
    default: object  # MISSING when required
    help: str
    choices: tuple | None
    minimum: float | None
    path: bool
    names: tuple[re.Pattern, str] | None

    @property
    def required(self) -> bool:
        return self.default is MISSING


def fields_of(cls: type) -> list[FieldInfo]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        default = (
            f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING else MISSING)
        )
        out.append(
            FieldInfo(
                f.name,
                hints[f.name],
                default,
                f.metadata.get("help", ""),
                f.metadata.get("choices"),
                f.metadata.get("minimum"),
                f.metadata.get("path", False),
                f.metadata.get("names"),
            )
        )
    return out


@dataclass
class Settings:
    """Base of every contract: validated when made (`validate`)."""

    def __post_init__(self):
        validate(self)


def validate(settings: Settings) -> None:
    """Each field of its type, choices and lower bound (a nested contract validated itself when made), then the
    contract's own `check`."""
    for info in fields_of(type(settings)):
        _check_value(info, info.type, getattr(settings, info.name), info.name)
    check = getattr(settings, "check", None)
    if check is not None:
        check()


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _optional(kind) -> tuple[object, bool]:
    """(the type inside `X | None`, True) or (kind, False)."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        inner = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(inner) == 1:
            return inner[0], True
    return kind, False


def _is_settings(kind) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _describe(value) -> str:
    return repr(value) if isinstance(value, str) else f"{value!r} ({type(value).__name__})"


def _check_value(info: FieldInfo, kind, value, where: str) -> None:
    kind, optional = _optional(kind)
    if value is None:
        if not optional:
            raise SettingsError(where, "may not be empty")
        return
    origin = typing.get_origin(kind)
    if _is_settings(kind):
        if not isinstance(value, kind):
            raise SettingsError(where, f"expected {kind.__name__} settings, got {_describe(value)}")
    elif origin is dict:
        _, item = typing.get_args(kind)
        if not isinstance(value, dict):
            raise SettingsError(where, f"expected a table of named tables, got {_describe(value)}")
        _check_names(info, value, where)
        for name, v in value.items():
            _check_value(info, item, v, _join(where, name))
    elif origin is list:
        (item,) = typing.get_args(kind)
        if not isinstance(value, (list, tuple)):
            raise SettingsError(where, f"expected a list, got {_describe(value)}")
        for i, v in enumerate(value):
            _check_value(info, item, v, f"{where}[{i}]")
    else:
        _check_scalar(info, kind, value, where)


def _check_names(info: FieldInfo, table: Mapping, where: str) -> None:
    if info.names is not None:
        pattern, what = info.names
        for name in table:
            if not pattern.fullmatch(str(name)):
                raise SettingsError(_join(where, str(name)), f"not a valid name: {what}")


def _check_scalar(info: FieldInfo, kind, value, where: str) -> None:
    if kind is bool:
        ok, expected = isinstance(value, bool), "true or false"
    elif kind is int:
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "a whole number"
    elif kind is float:
        ok, expected = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    elif kind is str:
        ok, expected = isinstance(value, str), "a string"
    else:
        raise TypeError(f"{where}: settings fields of type {kind} are not supported")
    if not ok:
        raise SettingsError(where, f"expected {expected}, got {_describe(value)}")
    if info.path and not value.strip():
        raise SettingsError(where, "expected a path, got an empty string")
    if info.choices is not None and value not in info.choices:
        raise SettingsError(where, f"{value!r} is not one of {', '.join(map(str, info.choices))}")
    if info.minimum is not None and value < info.minimum:
        raise SettingsError(where, f"must be at least {info.minimum:g}, got {value}")


def _resolve(value, base: Path | None):
    """A path value made absolute against `base` (a URL, or no base: as it is)."""
    if not isinstance(value, str) or "://" in value or base is None or not value.strip():
        return value
    return os.path.normpath(base / os.path.expanduser(value))


def _converted(info: FieldInfo, kind, value, where: str, base: Path | None):
    """A mapping's value as the field holds it: nested tables made into contracts, paths made absolute, a TOML
    integer given to a float field made a float. Type errors are left to validation, which names the field."""
    kind, _ = _optional(kind)
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if _is_settings(kind):
        if not isinstance(value, Mapping):
            raise SettingsError(where, f"expected a table of settings, got {_describe(value)}")
        return from_mapping(kind, value, where, base)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise SettingsError(where, f"expected a table of named tables, got {_describe(value)}")
        _check_names(info, value, where)
        _, item = typing.get_args(kind)
        return {name: _converted(info, item, v, _join(where, name), base) for name, v in value.items()}
    if origin is list:
        (item,) = typing.get_args(kind)
        return (
            [_converted(info, item, v, f"{where}[{i}]", base) for i, v in enumerate(value)] if isinstance(value, list) else value
        )
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return _resolve(value, base) if info.path else value


def _unknown(where: str, key: str, known: list[str], what: str = "unknown setting") -> SettingsError:
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else f" (settings here: {', '.join(known)})"
    return SettingsError(where, what + hint)


def from_mapping(cls: type, data: Mapping, prefix: str = "", base: str | Path | None = None):
    """The contract `cls` made from `data`: every key a field (an unknown one is refused with the nearest known name),
    every required field given, then validated. `prefix`: the dotted path of `data` in the whole (for errors);
    `base`: the folder relative paths are taken from (None: kept as given)."""
    base = Path(base) if base is not None else None
    infos = {f.name: f for f in fields_of(cls)}
    for key in data:
        if key not in infos:
            raise _unknown(_join(prefix, str(key)), str(key), list(infos))
    values = {}
    for name, info in infos.items():
        if name in data:
            values[name] = _converted(info, info.type, data[name], _join(prefix, name), base)
        elif info.required:
            raise SettingsError(_join(prefix, name), f"required: {info.help}")
    try:
        return cls(**values)
    except SettingsError as err:
        raise err.under(prefix) from None


def to_mapping(settings) -> dict:
    """`settings` as plain values (what `from_mapping` reads back), None left out: what a manifest records."""
    out = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if value is None:
            continue
        if dataclasses.is_dataclass(value):
            value = to_mapping(value)
        elif isinstance(value, dict):
            value = {k: to_mapping(v) if dataclasses.is_dataclass(v) else v for k, v in value.items()}
        elif isinstance(value, (list, tuple)):
            value = list(value)
        out[f.name] = value
    return out


def override(cls: type, data: dict, assignment: str, cwd: str | Path | None = None) -> None:
    """Apply one `a.b.c=VALUE` to `data` (the mapping `cls` will be made from), spaCy style. VALUE is read as a TOML
    value when it is one (`4`, `true`, `["a", "b"]`, `"x"`), else as a bare string; a bare string given to a list
    setting is split on commas. Path values are taken from `cwd` (the working folder, where they were typed). The
    dotted name must lead to a setting; `types.NAME` opens a named table (or adds one)."""
    name, sep, raw = assignment.partition("=")
    name = name.strip()
    if not sep or not name:
        raise SettingsError("", f"{assignment!r}: expected NAME=VALUE, e.g. types.Disease.index.kind=flat")
    parts = name.split(".")
    node: type | tuple[str, type] = cls
    table, leaf = data, None  # node: a contract, or ("named", contract) for a table of named tables
    for i, part in enumerate(parts):
        where = ".".join(parts[: i + 1])
        if leaf is not None:
            raise SettingsError(where, f"{leaf.name} is a single setting, not a table")
        if isinstance(node, tuple):
            node = node[1]
        else:
            infos = {f.name: f for f in fields_of(node)}
            if part not in infos:
                raise _unknown(where, part, list(infos))
            inner, _ = _optional(infos[part].type)
            if _is_settings(inner):
                node = typing.cast(type, inner)
            elif typing.get_origin(inner) is dict:
                node = ("named", typing.get_args(inner)[1])
            else:
                leaf = infos[part]
        if i < len(parts) - 1:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise SettingsError(where, f"{where} is not a table here")
    if leaf is None:
        raise SettingsError(name, "a table; name one of its settings (NAME.SETTING=VALUE)")
    table[parts[-1]] = _parsed(leaf, raw.strip(), Path(cwd) if cwd is not None else Path.cwd())


def _parsed(info: FieldInfo, raw: str, cwd: Path):
    try:
        value = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw
    kind, _ = _optional(info.type)
    if str in (kind, *typing.get_args(kind)) and not isinstance(value, (str, list)):
        value = raw  # `name=2024` names the string 2024
    if typing.get_origin(kind) is list and isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if info.path:  # typed on the command line: relative to where it was typed, not to the bundle file
        value = [_resolve(v, cwd) for v in value] if isinstance(value, list) else _resolve(value, cwd)
    return value
