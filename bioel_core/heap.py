"""A worker's long-lived tables built without the cyclic garbage collector walking them.

A link worker builds its KB's names, dictionary and concept tables once and keeps them for the whole job: at a
UMLS-size KB, tens of millions of strings and tuples, none of them in a reference cycle. CPython's collector starts a
collection every few hundred new container objects and a full one whenever the survivors have grown by a quarter,
each full one walking every tracked object: building those tables then spends most of its time in collections that
free nothing (at 10.3M names, `concept_lookup` took 70 s in a process already holding the names, 7.5 s with the
collector off), and each full collection during the job walks them again. So they are built with the collector
paused and, once built, moved to the permanent generation (`gc.freeze`), which later collections skip; an object
whose reference count drops to zero is freed as before. The price: the collector never looks at the objects alive when
the block ends again, so a reference cycle among them that later becomes garbage stays (an annotator opened four times
over in one process, each dropped: all four freed, the process 3-10 MB larger each time), which suits a worker that
keeps its annotator for the job.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def long_lived() -> Iterator[None]:
    """Runs the block with the collector paused; on success, every object tracked then is frozen (kept out of later
    collections). The collector is on again afterwards if it was on before, whether or not the block raised."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if was_enabled:
            gc.enable()
