"""Where writers write: a path (opened here, UTF-8) or an already open text stream (left open)."""

from __future__ import annotations

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
