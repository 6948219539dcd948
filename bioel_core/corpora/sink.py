"""Where writers write: a path (opened here, UTF-8) or an already open text stream (left open)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

Output = str | Path | TextIO


@contextmanager
def text_output(out: Output) -> Iterator[TextIO]:
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8", newline="\n") as fh:
            yield fh
    else:
        yield out


# a lone surrogate (a JSON input may escape one) has no UTF-8 form: no output can hold it
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def strings(value: object) -> Iterator[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)
