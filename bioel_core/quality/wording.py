"""Each check of the report in words a data engineer reads: what it expects (`expects`: the column's bounds, value
set, pattern or row count, and the share of rows that must hold when `mostly` is below 1) and what it found
(`found`: the observed value, range or row count, how many rows broke it and a few of them).

One entry per great-expectations type the suites use (bioel_core/quality/*_tables.py), read from GE 1.24's
expectation kwargs and SUMMARY result (as validation.py merges it over batches). A type without an entry is still
shown: its kwargs and the scalar fields of its result, never an empty cell.
"""

from __future__ import annotations

import json
import math

from bioel_core.quality.validation import OBSERVED_MAX, OBSERVED_MIN

SHOWN_VALUES = 5  # unexpected values (or set members) quoted in a sentence
VALUE_CHARS = 40
# GE's own bookkeeping in an expectation's kwargs, not what it checks
BOOKKEEPING = frozenset({"batch_id", "result_format", "include_config", "catch_exceptions", "meta"})


def number(value) -> str:
    """A bound or an observed figure: whole numbers with thousands separators, others to 6 significant digits."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:,.0f}" if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return str(value)


def _value(value) -> str:
    """One value quoted as JSON (a string in quotes, so an empty or blank one shows), cut to VALUE_CHARS."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."


def _values(values: list) -> str:
    shown = ", ".join(_value(list(v) if isinstance(v, tuple) else v) for v in values[:SHOWN_VALUES])
    return shown + (", ..." if len(values) > SHOWN_VALUES else "")


def _range(kwargs: dict, what: str) -> str:
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if low is not None and high is not None:
        return f"{what} = {number(low)}" if low == high else f"{what} between {number(low)} and {number(high)}"
    if low is not None:
        return f"{what} at least {number(low)}"
    if high is not None:
        return f"{what} at most {number(high)}"
    return f"{what} of any size"


def _share(percent: float) -> str:
    return f"{percent:.3g}%"


def _mostly(kwargs: dict) -> str:
    mostly = kwargs.get("mostly", 1.0)
    return "" if mostly >= 1.0 else f", in at least {_share(100 * mostly)} of rows"


def _generic_kwargs(kwargs: dict) -> str:
    shown = {k: v for k, v in kwargs.items() if k not in BOOKKEEPING | {"column", "mostly"} and v is not None}
    return "; ".join(f"{k} {_value(v)}" for k, v in sorted(shown.items())) or "no arguments"


EXPECTS = {
    "expect_column_values_to_be_between": lambda k: _range(k, "every value"),
    "expect_column_value_lengths_to_be_between": lambda k: _range(k, "every length"),
    "expect_column_values_to_be_null": lambda k: "every value null",
    "expect_column_values_to_not_be_null": lambda k: "no value null",
    "expect_column_values_to_be_unique": lambda k: "no value twice",
    "expect_column_values_to_match_regex": lambda k: f"every value matches the regex {k['regex']}",
    "expect_column_values_to_be_in_set": lambda k: f"every value one of {{{_values(list(k['value_set']))}}}",
    "expect_column_max_to_be_between": lambda k: _range(k, "the column's maximum"),
    "expect_table_row_count_to_be_between": lambda k: _range(k, "rows"),
    "expect_table_row_count_to_equal": lambda k: f"rows = {number(k['value'])}",
    "expect_column_pair_values_to_be_equal": lambda k: f"{k['column_A']} = {k['column_B']} in every row",
}

# row-wise checks: what a row at fault is, said of the unexpected count
AT_FAULT = {
    "expect_column_values_to_be_between": "outside the bounds",
    "expect_column_value_lengths_to_be_between": "of a length outside the bounds",
    "expect_column_values_to_be_null": "not null",
    "expect_column_values_to_not_be_null": "null",
    "expect_column_values_to_be_unique": "repeated",
    "expect_column_values_to_match_regex": "not matching",
    "expect_column_values_to_be_in_set": "not in the set",
    "expect_column_pair_values_to_be_equal": "differing (pairs A, B)",
}
# checks of one observed figure: what it is
OBSERVED = {
    "expect_column_max_to_be_between": "maximum",
    "expect_table_row_count_to_be_between": "rows",
    "expect_table_row_count_to_equal": "rows",
}


def expects(kind: str, kwargs: dict) -> str:
    """What a check of GE type `kind` with `kwargs` expects, in words."""
    words = EXPECTS.get(kind)
    return (words(kwargs) if words else _generic_kwargs(kwargs)) + _mostly(kwargs)


def _row_wise(kind: str, result: dict) -> str:
    counted = result.get("element_count", 0) - result.get("missing_count", 0)
    unexpected, percent = result.get("unexpected_count", 0), result.get("unexpected_percent")
    share = "" if percent is None else f" ({_share(percent)})"
    parts = []
    if result.get(OBSERVED_MIN) is not None:
        parts.append(f"min {number(result[OBSERVED_MIN])}, max {number(result[OBSERVED_MAX])}")
    parts.append(f"{number(unexpected)} of {number(counted)} {AT_FAULT[kind]}{share}")
    if result.get("missing_count"):
        parts.append(f"{number(result['missing_count'])} null, not checked")
    if unexpected and result.get("partial_unexpected_list"):
        parts.append(f"e.g. {_values(result['partial_unexpected_list'])}")
    return "; ".join(parts)


def _generic_result(result: dict) -> str:
    if "observed_value" in result:
        return f"observed {_value(result['observed_value'])}"
    shown = []
    for key, value in result.items():
        if isinstance(value, (list, tuple)):
            shown.append(f"{key.replace('_', ' ')} [{_values(list(value))}]")
        elif not isinstance(value, dict):
            shown.append(f"{key.replace('_', ' ')} {number(value)}")
    return "; ".join(shown) or "no result recorded"


def found(kind: str, result: dict, error: str | None = None) -> str:
    """What a check of GE type `kind` found, in words, from its (merged) result; `error`: the exception a check
    raised instead."""
    if error is not None:
        return f"error: {error}"
    if kind in OBSERVED:
        value = result.get("observed_value")
        return f"{OBSERVED[kind]}: {'none (no rows)' if value is None else number(value)}"
    if kind in AT_FAULT and "unexpected_count" in result:
        return _row_wise(kind, result)
    return _generic_result(result)
