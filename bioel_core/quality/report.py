"""The quality report of a pipeline output folder: report.html, one self-contained page a person opens
offline (figures, plots, every check), plus a summary.json a program can gate on.

great-expectations runs the checks; its own HTML data docs are not written: every page of them loads its
style and scripts from CDNs, so offline, where these jobs run, they render blank.
The tables are read and the report written through a FileSystem (bioel_core.outputs; the pipelines pass Beam's for
gs:// and s3:// outputs), so a remote output is checked as a local one.
Which suites run and what the page plots is decided by the manifest's "pipeline" field (`CHECKS`); a new
kind of output adds one entry.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from itertools import chain
from dataclasses import dataclass
from pathlib import Path

from bioel_core.guards import FAIL_ON, QualityGateError
from bioel_core.outputs.fs import LOCAL, FileSystem, as_path
from bioel_core.outputs.layout import MANIFEST, QUALITY, REJECTED, REPORT_HTML, REPORT_SUMMARY
from bioel_core.quality.html import Table, page
from bioel_core.quality.plots import Bars, Histogram
from bioel_core.tables import read_manifest

OBSERVED_ITEMS = 5
OBSERVED_CHARS = 80
TERMINAL_OBSERVED_CHARS = 100


def _short(value):
    """A JSON-safe, bounded rendering of a GE observed value (numpy scalars, long names, long lists)."""
    if isinstance(value, dict):
        return {str(k): _short(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_short(v) for v in value[:OBSERVED_ITEMS]]
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str) and len(value) > OBSERVED_CHARS:
        return value[: OBSERVED_CHARS - 3] + "..."
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _check(table: str, result) -> dict:
    """One check of the summary: what it checks and found, as values (`kwargs`, `result`, `observed`,
    `unexpected_count`) and in words (`expects`, `found`: wording.py)."""
    from bioel_core.quality import wording

    config = result.expectation_config
    info = result.exception_info or {}
    found = result.result or {}
    error = _short(info.get("exception_message") or "") if info.get("raised_exception") else None
    if error is not None:
        observed = "error: " + error
    elif "observed_value" in found:
        observed = _short(found["observed_value"])
    else:
        observed = _short(found.get("partial_unexpected_list", []))
    return {
        "table": table,
        "expectation": config.type,
        "column": config.kwargs.get("column"),
        "severity": config.meta["severity"],
        "success": bool(result.success),
        "observed": observed,
        "unexpected_count": found.get("unexpected_count"),
        "description": config.description,
        "expects": wording.expects(config.type, config.kwargs),
        "found": wording.found(config.type, found, error),
        "kwargs": _short({k: v for k, v in config.kwargs.items() if k not in wording.BOOKKEEPING}),
        "result": _short(found),
    }


@dataclass(frozen=True)
class Checks:
    """How to check one kind of output folder. `build(table_dir, manifest, fs=LOCAL, **limits)` returns ({table: suite},
    (table, frame) pairs, stats), the stats complete once the frames have been read (`validation.validate`);
    `describe(stats)` is the summary's terminal line about the tables; `sections(stats)` the plots and tables of the
    HTML page."""

    build: Callable[..., tuple[dict, dict]]
    describe: Callable[[dict], str]
    sections: Callable[[dict], list]


def _dead_letter_sections(stats: dict) -> list:
    """A bar per reason kind and a table of the kinds with an example each (none when there are no dead letters),
    and a table of the first few dead letters."""
    kinds, total = stats["dead_letter_kinds"], stats["dead_letters"]
    examples = [
        {
            "kind": k["kind"],
            "dead letters": k["dead_letters"],
            **{f"example {key}": (k["example"] or {}).get(key) for key in ("reason", "source", "location", "raw")},
        }
        for k in kinds
    ]
    by_kind = (
        [
            Bars(
                f"Dead letters by reason kind ({total:,} in all)",
                [k["kind"] for k in kinds],
                {"dead letters": [k["dead_letters"] for k in kinds]},
                "dead letters",
                horizontal=True,
            ),
            Table(f"Dead letters by reason kind ({len(kinds):,} kinds, {total:,} dead letters)", list(examples[0]), examples),
        ]
        if kinds
        else []
    )
    return by_kind + [
        Table(
            f"Sample dead letters (first {len(stats['dead_letter_sample'])} of {total:,})",
            ["source", "location", "reason", "raw"],
            stats["dead_letter_sample"],
        )
    ]


def _kb_checks(
    table_dir: Path | str,
    manifest: dict,
    fs: FileSystem = LOCAL,
    *,
    max_names_per_concept: int = 1000,
    max_name_length: int = 500,
):
    """The two maxima are warning thresholds: beyond them a KB is suspicious (a parsing slip, merged dumps) but
    still usable."""
    # great-expectations takes seconds to import: only pay for it when a report is actually made
    from bioel_core.quality.frames import KBTables, dead_letter_stats, read_dead_letters, table_stats
    from bioel_core.quality.kb_tables import concepts_suite, dead_letter_suite, names_suite, unread_files, unread_files_suite

    if not manifest.get("id_pattern"):
        raise ValueError(f"{table_dir}: the manifest has no id_pattern; re-run the ingest with this bioel version")
    tables, dead = KBTables(table_dir, fs), read_dead_letters(table_dir, fs)
    records_in = manifest.get("counts", {}).get("records_read", 0)
    suites = {
        "concepts": concepts_suite(manifest["id_pattern"], max_names_per_concept, records_in),
        "names": names_suite(manifest["id_pattern"], max_name_length, records_in),
        "dead_letter": dead_letter_suite(records_in),
        "inputs": unread_files_suite(),
    }
    stats: dict = {}  # filled once the names have been read (their lengths)

    def frames():
        yield from chain((("concepts", f) for f in tables.concept_frames()), (("names", f) for f in tables.name_frames()))
        stats.update(table_stats(tables), **dead_letter_stats(dead))
        yield "dead_letter", dead
        yield "inputs", unread_files(manifest)

    return suites, frames(), stats


def _kb_line(stats: dict) -> str:
    return (
        f"{stats['concepts']:,} concepts, {stats['names']:,} names; "
        f"names/concept: {_dist(stats['names_per_concept'])}; name length: {_dist(stats['name_length'])}"
    )


def _kb_sections(stats: dict) -> list:
    return [
        Histogram("Names per concept", {"concepts": stats["names_per_concept_histogram"]}, "names", "concepts", whole_x=True),
        Histogram("Name length", {"names": stats["name_length_histogram"]}, "characters", "names", whole_x=True),
        *_dead_letter_sections(stats),
    ]


def _embedding_checks(table_dir: Path | str, manifest: dict, fs: FileSystem = LOCAL):
    from bioel_core.quality.embedding_tables import checks

    return checks(table_dir, fs)


def _embedding_line(stats: dict) -> str:
    return (
        f"{stats['embeddings']:,} vectors of dim {stats['dim']}, {stats['dead_letters']:,} dead letters, "
        f"{stats['names']:,} names in {stats['names_dir']}; norm min {stats['norm']['min']} max {stats['norm']['max']}"
    )


def _embedding_sections(stats: dict) -> list:
    return [Histogram("Vector L2 norms", {"vectors": stats["norm_histogram"]}, "norm", "vectors")]


def _link_checks(table_dir: Path | str, manifest: dict, fs: FileSystem = LOCAL, **limits):
    from bioel_core.quality.annotation_tables import checks

    return checks(table_dir, manifest, fs, **limits)


def _link_line(stats: dict) -> str:
    nil = "n/a" if stats["nil_share"] is None else f"{stats['nil_share']:.1%}"
    types = ", ".join(f"{t or '(any)'} {n:,}" for t, n in stats["mentions_per_entity_type"].items()) or "none"
    return (
        f"{stats['documents']:,} documents ({stats['annotated']:,} annotated, {stats['tombstones']:,} tombstones), "
        f"{stats['mentions']:,} mentions, {nil} NIL; by type: {types}; "
        f"mentions/document: {_dist(stats['mentions_per_document'])}"
    )


def _link_sections(stats: dict) -> list:
    nil_share, kinds = stats["nil_share_per_entity_type"], stats["mentions_by_link_kind"]
    top = [
        " ".join(filter(None, [c["concept_id"], c["name"], f"({c['entity_type'] or 'any type'})"])) for c in stats["top_concepts"]
    ]
    return [
        Histogram("Link scores per entity type", stats["score_histogram_per_entity_type"], "score", "mentions"),
        Bars("NIL share per entity type", list(nil_share), {"NIL": list(nil_share.values())}, "NIL mentions", percent=True),
        Bars(
            "Exact-name vs model links per entity type",
            list(nil_share),
            {kind: list(per_type.values()) for kind, per_type in kinds.items()},
            "mentions",
        ),
        Histogram(
            "Mentions per annotated document",
            {"documents": stats["mentions_per_document_histogram"]},
            "mentions",
            "documents",
            whole_x=True,
        ),
        Bars(
            "Most linked concepts", top, {"mentions": [c["mentions"] for c in stats["top_concepts"]]}, "mentions", horizontal=True
        ),
        *_dead_letter_sections(stats),
    ]


def _index_checks(table_dir: Path | str, manifest: dict, fs: FileSystem = LOCAL):
    from bioel_core.quality.index_tables import checks

    return checks(table_dir, fs)


def _index_line(stats: dict) -> str:
    return (
        f"{stats['vectors']:,} vectors ({stats['kind']}, dim {stats['dimension']}) in {stats['num_shards']} shards "
        f"of {stats['index_bytes']:,} bytes, from {stats['embeddings_rows']:,} embeddings rows; "
        f"vectors/shard: {_dist(stats['vectors_per_shard'])}; names in {stats['names_dir']}"
    )


def _index_sections(stats: dict) -> list:
    return [
        Bars("Vectors per shard", list(stats["shard_vectors"]), {"vectors": list(stats["shard_vectors"].values())}, "vectors")
    ]


CHECKS = {
    "ingest-kb": Checks(_kb_checks, _kb_line, _kb_sections),
    "embed": Checks(_embedding_checks, _embedding_line, _embedding_sections),
    "link": Checks(_link_checks, _link_line, _link_sections),
    "build-index": Checks(_index_checks, _index_line, _index_sections),
}
# a manifest without the field is a KB folder: the first pipeline (and hand-made test folders) wrote none
DEFAULT_PIPELINE = "ingest-kb"


def report(
    table_dir: str | Path, output_dir: str | Path | None = None, fail_on: str = "critical", fs: FileSystem = LOCAL, **limits
) -> dict:
    """Check the tables of `table_dir` with the suites of its pipeline; write report.html and summary.json into
    `output_dir` (default TABLE_DIR/quality); return the summary. Both are read and written through `fs`.

    `passed` is False when a check of severity `fail_on` or above failed ("none": never). `limits` are the
    thresholds of that pipeline's checks (KB tables: max_names_per_concept, max_name_length;
    link: max_nil_share).
    """
    summary = check(table_dir, fail_on, fs, **limits)
    return _write(summary, output_dir if output_dir is not None else fs.join(summary["table_dir"], QUALITY), fs)


def _require_fail_on(fail_on: str) -> None:
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {FAIL_ON}, not {fail_on!r}")


def check(table_dir: str | Path, fail_on: str = "critical", fs: FileSystem = LOCAL, **limits) -> dict:
    """The summary of `report`, without writing it."""
    _require_fail_on(fail_on)
    from bioel_core.quality.validation import validate

    from bioel_core.quality.provenance import run_facts

    table_dir = as_path(table_dir)
    manifest = read_manifest(table_dir, fs)
    pipeline = manifest.get("pipeline", DEFAULT_PIPELINE)
    if pipeline not in CHECKS:
        raise ValueError(f"{table_dir}: no quality checks for outputs of pipeline {pipeline!r}; known: {sorted(CHECKS)}")

    suites, frames, stats = CHECKS[pipeline].build(table_dir, manifest, fs=fs, **limits)
    results = validate(suites, frames)

    checks = [_check(table, r) for table, table_results in results.items() for r in table_results]
    failed = [c["severity"] for c in checks if not c["success"]]
    critical, warnings = failed.count("critical"), failed.count("warning")
    return {
        "table_dir": str(table_dir),
        "generation": manifest.get("generation"),  # which published tables these checks read
        "pipeline": pipeline,
        "kb": manifest.get("kb"),
        **run_facts(manifest, str(table_dir), fs),  # when it ran, on what, in which bundle
        "fail_on": fail_on,
        "passed": fail_on == "none" or (critical == 0 and (fail_on == "critical" or warnings == 0)),
        "critical_failures": critical,
        "warnings": warnings,
        "checks": checks,
        "stats": stats,
    }


def _write(summary: dict, output_dir: str | Path, fs: FileSystem) -> dict:
    output_dir = str(as_path(output_dir))  # a local one as pathlib spells it
    summary = {**summary, "html": fs.join(output_dir, REPORT_HTML), "summary_json": fs.join(output_dir, REPORT_SUMMARY)}
    fs.mkdirs(output_dir)
    fs.write(summary["summary_json"], (json.dumps(summary, indent=2) + "\n").encode())
    fs.write(summary["html"], page(summary, CHECKS[summary["pipeline"]].sections(summary["stats"])).encode("utf-8"))
    return summary


class QualityGate:
    """Write, audit, publish: the quality checks of a run's new generation, before its pointer moves
    (`OutputFolder.publish`). A run that fails them (`fail_on`) publishes nothing: the folder keeps its previous
    tables and report, and this run's report goes to OUTPUT/rejected/. A run that passes publishes its report as
    OUTPUT/quality/ once its tables are the folder's state. `summary`: the last audit's."""

    def __init__(self, fail_on: str = "critical", **limits):
        _require_fail_on(fail_on)  # when the job is set up, not once it has run
        self.fail_on, self.limits, self.summary = fail_on, limits, None

    def audit(self, fs: FileSystem, output_dir: str, root: str, manifest: dict) -> None:
        """Checks the generation at `root` as the tables `manifest` will publish, reading through `fs` (the output
        folder's); raises QualityGateError to refuse."""
        from bioel_core.quality.provenance import run_facts

        view = fs.join(root, MANIFEST)  # the generation read as a folder of its own: its tables, named by no generation
        fs.write(view, json.dumps({k: v for k, v in manifest.items() if k != "generation"}).encode())
        try:
            summary = check(root, self.fail_on, fs, **self.limits)
        finally:
            fs.delete(view)
        # the facts of the folder the tables are published in (a bundle's stage output), not of the generation's
        self.summary = {
            **summary,
            "table_dir": output_dir,
            "generation": manifest.get("generation"),
            **run_facts(manifest, output_dir, fs),
        }
        if not summary["passed"]:
            self.summary = _write(self.summary, fs.join(output_dir, REJECTED), fs)
            raise QualityGateError(
                f"quality checks failed (fail on {self.fail_on}): nothing published, {output_dir} "
                f"keeps its previous state; report: {self.summary['html']}",
                self.summary,
            )

    def publish(self, fs: FileSystem, output_dir: str) -> None:
        """Writes the audited report beside the generation just published."""
        self.summary = _write(self.summary, fs.join(output_dir, QUALITY), fs)


def _dist(d: dict) -> str:
    return " ".join(f"{k} {v}" for k, v in d.items())


def format_summary(summary: dict) -> str:
    """A few lines for the terminal: verdict, table sizes, the failed checks, where the full report is."""
    verdict = "PASSED" if summary["passed"] else "FAILED"
    lines = [
        f"quality {verdict} (fail on {summary['fail_on']}): {summary['table_dir']}",
        "  " + CHECKS[summary["pipeline"]].describe(summary["stats"]),
        f"  {summary['critical_failures']} critical failures, {summary['warnings']} warnings, "
        f"{sum(c['success'] for c in summary['checks'])}/{len(summary['checks'])} checks passed",
    ]
    for c in summary["checks"]:
        if not c["success"]:
            where = c["table"] if c["column"] is None else f"{c['table']}.{c['column']}"  # None: a table-level check
            count = "" if c["unexpected_count"] is None else f" ({c['unexpected_count']:,} rows)"
            observed = json.dumps(c["observed"])
            if len(observed) > TERMINAL_OBSERVED_CHARS:
                observed = observed[: TERMINAL_OBSERVED_CHARS - 3] + "..."
            lines.append(f"  {c['severity'].upper():8} {where:28} {c['expectation']}{count}: {observed}")
    lines += [f"  report:       {summary['html']}", f"  summary.json: {summary['summary_json']}"]
    return "\n".join(lines)
