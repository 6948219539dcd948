"""The typed manifest every verb writes: what ran, on which inputs, what it counted, whether the counts
reconcile, and where its tables are. Serialized as one flat JSON object (`manifest.json`, see
schemas/manifest.md): the common fields below plus the verb's own `details` (its model, KB, index...),
which later stages read by key.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass, field, fields

import bioel_core
from bioel_core.outputs.names import VERBS
from schemas import SCHEMA_VERSION

# how a run went, not what its output holds: a re-run of the same inputs writes a new generation at another time,
# perhaps on other workers, and its tables are the same bytes, so its version (content_sha256) must be too
RUN_FIELDS = ("generation", "created_utc", "runner", "options")
# the same in an index's "index" section: the FAISS threads it was built with (one per worker process, or
# faiss_threads); its shards' sha256 say what they hold
INDEX_RUN_FIELDS = ("faiss_threads",)
# where an input lies (a "path" key at any depth), not what it holds: each is recorded beside its content's identity (a
# file's sha256, a folder's manifest_sha256, a model's fingerprint), and the same inputs in other folders (another
# machine, a KB file named by a relative path) must make the same version, which the linked tables carry
LOCATION = "path"


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Manifest:
    pipeline: str  # the verb that wrote the folder: one of VERBS
    inputs: list  # files read ({path, sha256, bytes, ...}) or folders ({path, manifest_sha256})
    counts: dict
    reconciliation: dict  # name -> bool: rows in = rows out + dead letters, per table
    outputs: dict  # table -> {"files": [paths relative to the generation folder], "rows": n}
    runner: str
    options: dict = field(default_factory=dict)  # the Beam options the job ran with
    details: dict = field(default_factory=dict)  # the verb's own fields, written at the top level
    generation: str = ""  # the folder (inside the output folder) holding the tables; set by publishing
    schema_version: str = SCHEMA_VERSION
    package_version: str = bioel_core.__version__
    created_utc: str = field(default_factory=utc_now)
    complete: bool = True

    def __post_init__(self):
        if self.pipeline not in VERBS:
            raise ValueError(f"unknown pipeline {self.pipeline!r}; one of {VERBS}")
        clash = self.details.keys() & {f.name for f in fields(self)}
        if clash:
            raise ValueError(f"manifest details may not redefine {sorted(clash)}")

    @property
    def reconciled(self) -> bool:
        return all(self.reconciliation.values())

    def to_dict(self) -> dict:
        out = asdict(self)
        return {**out.pop("details"), **out}

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True).encode()

    @classmethod
    def from_dict(cls, d: dict) -> Manifest:
        names = {f.name for f in fields(cls)} - {"details"}
        return cls(**{k: v for k, v in d.items() if k in names}, details={k: v for k, v in d.items() if k not in names})


def content_sha256(manifest: dict, with_locations: bool = False) -> str:
    """The version of an output folder: sha256 of its manifest less the run fields and every LOCATION. What a later
    stage records of the folder it read (embed of its names, build-index of its embeddings, link's kb_version) and
    checks again later. `with_locations`: the version as recorded before locations were left out (is_version_of)."""
    kept = _without_run_fields(manifest)
    return hashlib.sha256(
        json.dumps(kept if with_locations else _without_locations(kept), indent=2, sort_keys=True).encode()
    ).hexdigest()


def _without_run_fields(manifest: dict) -> dict:
    kept = {k: v for k, v in manifest.items() if k not in RUN_FIELDS}
    if isinstance(kept.get("index"), dict):
        kept["index"] = {k: v for k, v in kept["index"].items() if k not in INDEX_RUN_FIELDS}
    return kept


def _without_locations(value):
    if isinstance(value, dict):
        return {k: _without_locations(v) for k, v in value.items() if k != LOCATION}
    if isinstance(value, list):
        return [_without_locations(v) for v in value]
    return value
