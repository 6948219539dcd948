"""Progress of long local work and the one-line summary every `bioel` verb ends with.

Bars are tqdm bars on stderr, shown only when stderr is a terminal: a scheduled job's log gets no bar
characters, only the summary line. A Beam pipeline run in this process (the local FnApiRunner in memory)
has its DoFns move the bar of the verb that started it through `advance`; in a worker process or on another
machine there is no bar to move and `advance` does nothing.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager

from tqdm import tqdm

_shared: tqdm | None = None  # the bar DoFns running in this process move (see `shared_bar`)


def terminal() -> bool:
    return sys.stderr.isatty()


def bar(iterable=None, *, show: bool = True, **kwargs) -> tqdm:
    """A tqdm bar (throughput, and ETA when the total is known) on stderr, drawn only on a terminal."""
    if kwargs.get("unit"):
        kwargs["unit"] = f" {kwargs['unit']}"  # "40 documents", "3.2 documents/s"
    return tqdm(iterable, disable=not (show and terminal()), file=sys.stderr, dynamic_ncols=True, **kwargs)


def silence_library_bars() -> None:
    """The bars libraries draw on their own (transformers' "Loading weights", Hugging Face hub transfers) off too,
    for a run whose stderr is not a terminal: in this process and in worker processes it starts."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub and transformers are imported
    if "transformers" in sys.modules:  # imported already: switch its own flag
        sys.modules["transformers"].utils.logging.disable_progress_bar()


@contextmanager
def shared_bar(unit: str, total: int | None = None, desc: str | None = None, show: bool = True):
    """A bar that code running in this process moves with `advance` while the block runs (a Beam pipeline on
    the in-process runner: pass show=False for any other runner, whose DoFns run elsewhere)."""
    global _shared
    b = bar(total=total, unit=unit, desc=desc, show=show)
    _shared = None if b.disable else b
    try:
        yield b
    finally:
        _shared = None
        b.close()


def advance(n: int = 1) -> None:
    """Move the shared bar by n units (no-op when there is none in this process)."""
    if _shared is not None:
        _shared.update(n)


class Summary:
    """Elapsed time and the counts a verb reports: `link: 40 documents, 812 mentions in 12.3 s (3.3 documents/s)`.
    The first count sets the rate."""

    def __init__(self, verb: str):
        self.verb, self.began, self.counts = verb, time.perf_counter(), {}

    def line(self) -> str:
        seconds = time.perf_counter() - self.began
        if not self.counts:
            return f"{self.verb}: done in {seconds:.1f} s"
        what = ", ".join(f"{n:,} {unit}" for unit, n in self.counts.items())
        unit, n = next(iter(self.counts.items()))
        return f"{self.verb}: {what} in {seconds:.1f} s ({n / max(seconds, 1e-9):,.1f} {unit}/s)"


_summary: Summary | None = None


def start(verb: str) -> Summary:
    """Begin timing a verb; `count` then records what it did, and `Summary.line` says it at the end."""
    global _summary
    _summary = Summary(verb)
    return _summary


def count(**counts: int) -> None:
    """Record what the running verb did, in the order to report it (`documents=40, mentions=812`; an underscore
    in a name is printed as a space). No-op outside a verb (library use)."""
    if _summary is not None:
        _summary.counts.update({unit.replace("_", " "): int(n) for unit, n in counts.items()})
