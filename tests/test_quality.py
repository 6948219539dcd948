import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bioel_core.quality import format_summary, report
from schemas import CONCEPTS_SCHEMA, DEAD_LETTER_SCHEMA, NAMES_SCHEMA, SCHEMA_VERSION

ID_PATTERN = r"(?:MESH:)?D\d{6}|OMIM:\d{6}"
CONCEPTS = [("D000001", "Calcimycin"), ("D000002", "Temefos"), ("OMIM:123456", "Some syndrome")]
NAMES = [
    (1, "D000001", "Calcimycin", "calcimycin", "preferred"),
    (2, "D000001", "A-23187", "a 23187", "synonym"),
    (3, "D000002", "Temefos", "temefos", "preferred"),
    (4, "D000002", "Abate", "abate", "entry_term"),
    (5, "OMIM:123456", "Some syndrome", "some syndrome", "preferred"),
    (6, "OMIM:123456", "SS", "ss", "abbreviation"),
]


def write_kb(out, concepts=CONCEPTS, names=NAMES, shards=2, dead_letters=0, reason="bad concept id", unread=""):
    """A finished ingest output folder: manifest, sharded names, one concepts and dead-letter file; the manifest
    counts a record read per concept and per dead letter, and lists kb.txt as an input (`unread`: where and why it
    was not read to its end)."""
    for table in ("concepts", "names", "dead_letter"):
        (out / table).mkdir(parents=True)
    ids, preferred = zip(*concepts)
    pq.write_table(
        pa.table(
            {
                "concept_id": ids,
                "vocabulary": ["MESH"] * len(ids),
                "kb": ["medic"] * len(ids),
                "preferred_name": preferred,
                "semantic_types": [[]] * len(ids),
                "definition": [None] * len(ids),
                "alt_ids": [[]] * len(ids),
            },
            schema=CONCEPTS_SCHEMA,
        ),
        out / "concepts" / "part-00000-of-00001.parquet",
    )
    columns = dict(zip(["name_id", "concept_id", "name", "name_norm", "name_type"], map(list, zip(*names))))
    table = pa.table({**columns, "kb": ["medic"] * len(names)}).select(NAMES_SCHEMA.names).cast(NAMES_SCHEMA)
    step = -(-len(names) // shards)
    for s in range(shards):
        pq.write_table(table.slice(s * step, step), out / "names" / f"part-{s:05d}-of-{shards:05d}.parquet")
    pq.write_table(
        pa.table(
            {
                "source": ["kb.txt"] * dead_letters,
                "location": [f"line {i}" for i in range(dead_letters)],
                "raw": ["x||y"] * dead_letters,
                "reason": [reason] * dead_letters,
            },
            schema=DEAD_LETTER_SCHEMA,
        ),
        out / "dead_letter" / "part-00000-of-00001.parquet",
    )
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "complete": True,
                "kb": "medic",
                "id_pattern": ID_PATTERN,
                "counts": {"records_read": len(concepts) + dead_letters},
                "inputs": [{"path": "kb.txt", **({"unread": unread} if unread else {})}],
            }
        )
    )
    return out


def failures(summary):
    return {(c["table"], c["column"], c["expectation"]): c for c in summary["checks"] if not c["success"]}


def test_clean_tables_pass_and_write_the_report_and_summary(tmp_path):
    summary = report(write_kb(tmp_path / "kb"))

    assert summary["passed"] and summary["critical_failures"] == 0 and summary["warnings"] == 0
    assert failures(summary) == {}
    assert {c["severity"] for c in summary["checks"]} == {"critical", "warning"}
    assert summary["stats"] == {
        "concepts": 3,
        "names": 6,
        "names_per_concept": {"min": 2, "median": 2, "p95": 2, "max": 2},
        "name_length": {"min": 2, "median": 7, "p95": 10, "max": 13},
        "names_per_concept_histogram": {"edges": [1.5, 2.5], "counts": [3]},
        # lengths 2, 5, 7, 7, 10, 13 in bins of one character
        "name_length_histogram": {"edges": [1.5 + i for i in range(13)], "counts": [1, 0, 0, 1, 0, 2, 0, 0, 1, 0, 0, 1]},
        "dead_letters": 0,
        "dead_letter_reasons": [],
        "dead_letter_kinds": [],
        "dead_letter_sample": [],
    }
    quality = tmp_path / "kb" / "quality"
    assert json.loads((quality / "summary.json").read_text()) == summary
    page = quality / "report.html"
    assert summary["html"] == str(page) and page.is_file()
    assert sorted(p.name for p in quality.iterdir()) == ["report.html", "summary.json"]  # no GE data docs
    text = format_summary(summary)
    assert "PASSED" in text and str(page) in text and str(quality / "summary.json") in text


def _replace(rows, i, **changes):
    fields = ["name_id", "concept_id", "name", "name_norm", "name_type"]
    row = dict(zip(fields, rows[i]))
    row.update(changes)
    return rows[:i] + [tuple(row[f] for f in fields)] + rows[i + 1 :]


@pytest.mark.parametrize(
    "concepts, names, failed, count, observed",
    [
        pytest.param(
            CONCEPTS,
            _replace(NAMES, 3, name_id=1),
            ("names", "name_id", "expect_column_values_to_be_unique"),
            2,
            [1, 1],
            id="duplicate-name-id",
        ),
        pytest.param(
            CONCEPTS,
            _replace(NAMES, 3, name_norm=""),
            ("names", "name_norm", "expect_column_value_lengths_to_be_between"),
            1,
            [""],
            id="empty-name-norm",
        ),
        pytest.param(
            CONCEPTS,
            _replace(NAMES, 3, name_type="tradename"),
            ("names", "name_type", "expect_column_values_to_be_in_set"),
            1,
            ["tradename"],
            id="bad-name-type",
        ),
        # the pattern is anchored: a valid id followed by junk does not pass
        pytest.param(
            CONCEPTS,
            _replace(NAMES, 3, concept_id="D000002x"),
            ("names", "concept_id", "expect_column_values_to_match_regex"),
            1,
            ["D000002x"],
            id="id-pattern-names",
        ),
        pytest.param(
            [*CONCEPTS, ("C12345", "Bad id")],
            [*NAMES, (7, "C12345", "Bad id", "bad id", "preferred")],
            ("concepts", "concept_id", "expect_column_values_to_match_regex"),
            1,
            ["C12345"],
            id="id-pattern-concepts",
        ),
        pytest.param(
            CONCEPTS,
            [*NAMES, (7, "D000003", "Lost", "lost", "preferred")],
            ("names", "orphan_concept_id", "expect_column_values_to_be_null"),
            1,
            ["D000003"],
            id="missing-concept",
        ),
        pytest.param(
            [*CONCEPTS, ("D000001", "Again")],
            NAMES,
            ("concepts", "concept_id", "expect_column_values_to_be_unique"),
            2,
            ["D000001", "D000001"],
            id="duplicate-concept",
        ),
    ],
)
def test_each_critical_issue_fails_its_check(tmp_path, concepts, names, failed, count, observed):
    summary = report(write_kb(tmp_path / "kb", concepts, names))

    assert not summary["passed"]
    check = failures(summary)[failed]
    assert check["severity"] == "critical"
    assert check["unexpected_count"] == count
    assert check["observed"] == observed
    assert "FAILED" in format_summary(summary) and failed[2] in format_summary(summary)


@pytest.mark.parametrize("batch_rows", [1, 2, 4])
def test_checks_a_batch_of_rows_at_a_time_find_what_one_pass_over_the_tables_finds(tmp_path, monkeypatch, batch_rows):
    """The tables are validated a batch at a time (a UMLS-size KB does not fit in memory) and the results merged: the
    same failures, counts, values listed, maxima and figures as one frame per table, duplicates in two batches
    (and two files) included."""
    from bioel_core.quality import frames

    names = [
        *_replace(NAMES, 3, name_id=1),
        (7, "D000003", "Lost", "lost", "preferred"),
        (8, "D000002", "x" * 40, "x", "synonym"),
    ]
    concepts = [*CONCEPTS, ("D000001", "Again"), ("D000009", "Nameless"), ("C12345", "Bad id")]
    kb = write_kb(tmp_path / "kb", concepts, names, shards=3)
    whole = report(kb, tmp_path / "whole", max_name_length=30, max_names_per_concept=2)
    monkeypatch.setattr(frames, "BATCH_ROWS", batch_rows)
    batched = report(kb, tmp_path / "batched", max_name_length=30, max_names_per_concept=2)

    assert set(failures(whole)) == {
        ("names", "name_id", "expect_column_values_to_be_unique"),
        ("names", "orphan_concept_id", "expect_column_values_to_be_null"),
        ("names", "name", "expect_column_value_lengths_to_be_between"),
        ("concepts", "concept_id", "expect_column_values_to_be_unique"),
        ("concepts", "concept_id", "expect_column_values_to_match_regex"),
        ("concepts", "unnamed_concept_id", "expect_column_values_to_be_null"),
        ("concepts", "name_count", "expect_column_max_to_be_between"),
    }
    assert batched["checks"] == whole["checks"] and batched["stats"] == whole["stats"]
    assert failures(batched)[("names", "name_id", "expect_column_values_to_be_unique")]["observed"] == [1, 1]
    assert failures(batched)[("concepts", "name_count", "expect_column_max_to_be_between")]["observed"] == 3


def test_id_pattern_failure_is_reported_in_both_tables(tmp_path):
    concepts = [("D000001", "Calcimycin"), ("D1", "Short id")]
    names = [(1, "D000001", "Calcimycin", "calcimycin", "preferred"), (2, "D1", "Short id", "short id", "preferred")]
    summary = report(write_kb(tmp_path / "kb", concepts, names))

    regex = {k[0] for k in failures(summary) if k[2] == "expect_column_values_to_match_regex"}
    assert regex == {"concepts", "names"} and summary["critical_failures"] == 2


def test_warnings_fail_only_when_asked(tmp_path):
    # a concept without names and an over-long name are suspicious, not fatal
    concepts = [*CONCEPTS, ("D000009", "Nameless")]
    names = [*NAMES, (7, "D000002", "x" * 40, "x" * 40, "synonym")]
    kb = write_kb(tmp_path / "kb", concepts, names)

    summary = report(kb, max_name_length=30, max_names_per_concept=2)
    assert summary["passed"] and summary["critical_failures"] == 0 and summary["warnings"] == 3
    warned = failures(summary)
    assert warned[("concepts", "unnamed_concept_id", "expect_column_values_to_be_null")]["observed"] == ["D000009"]
    assert warned[("concepts", "name_count", "expect_column_max_to_be_between")]["observed"] == 3
    long_name = warned[("names", "name", "expect_column_value_lengths_to_be_between")]
    assert long_name["unexpected_count"] == 1 and long_name["severity"] == "warning"
    assert summary["stats"]["names_per_concept"]["min"] == 0

    assert not report(kb, fail_on="warning", max_name_length=30)["passed"]
    assert report(kb, fail_on="none", max_name_length=30)["passed"]


def test_most_records_dead_lettered_is_critical_and_a_few_a_warning(tmp_path):
    # every check of the tables written passed when 997 of 1,000 records were dead-lettered (a wrong id pattern)
    dead_letter_checks = [c for c in report(write_kb(tmp_path / "clean"))["checks"] if c["table"] == "dead_letter"]
    assert [c["success"] for c in dead_letter_checks] == [True, True]  # a file not read to its end: the inputs check
    summary = report(write_kb(tmp_path / "most", dead_letters=997))
    assert not summary["passed"] and summary["critical_failures"] == 1 and summary["warnings"] == 1
    assert {c["severity"]: c["observed"] for c in summary["checks"] if not c["success"]} == {"warning": 997, "critical": 997}
    summary = report(write_kb(tmp_path / "few", dead_letters=1))  # 1 of 4 records: above 1%, not above half
    assert summary["passed"] and summary["warnings"] == 1 and summary["critical_failures"] == 0


def test_a_files_unread_rest_is_critical_whatever_the_dead_letter_share(tmp_path):
    # a MeSH XML file cut inside a record lost every record after it as one dead letter: 1 of 4 records dead-lettered
    # was a warning, and the run passed
    from bioel_core.records import unread_rest_reason

    reason = unread_rest_reason("the file ends inside the record", 90, 1234, 40)
    summary = report(write_kb(tmp_path / "kb", dead_letters=1, reason=reason, unread=f"record 4, line 90: {reason}"))
    assert not summary["passed"] and summary["critical_failures"] == 1 and summary["warnings"] == 1
    unread = failures(summary)[("inputs", "unread", "expect_column_values_to_be_null")]
    assert unread["severity"] == "critical" and unread["unexpected_count"] == 1


def test_report_to_another_folder_is_the_same_bytes_on_a_rerun(tmp_path):
    kb = write_kb(tmp_path / "kb")
    out = tmp_path / "report"
    report(kb, output_dir=out)
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    report(kb, output_dir=out)

    assert sorted(first) == ["report.html", "summary.json"] and not (kb / "quality").exists()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


def test_bad_fail_on_is_refused(tmp_path):
    with pytest.raises(ValueError, match="fail_on"):
        report(write_kb(tmp_path / "kb"), fail_on="sometimes")


@pytest.mark.parametrize("seed", range(5))
def test_a_tally_gives_the_distribution_and_histogram_of_the_values_it_counted(seed):
    """Counts per document and name lengths are tallied (value -> how many times), not held one per row: checked
    against pandas' "lower" quantiles and numpy's histogram of the values themselves, tallied in batches."""
    import math

    import numpy as np
    import pandas as pd

    from bioel_core.quality.frames import HISTOGRAM_BINS, STAT_QUANTILES, Tally, count_histogram, distribution

    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.integers(0, 7, rng.integers(1, 60)), rng.integers(0, 400, rng.integers(0, 90))])
    tally = Tally()
    for batch in np.array_split(values, 3):
        tally.add(batch)
    tally.add(pd.Series([np.nan]))  # a missing value (a null name's length) is left out

    found = pd.Series(values).quantile(list(STAT_QUANTILES.values()), interpolation="lower")
    assert distribution(tally) == {k: int(v) for k, v in zip(STAT_QUANTILES, found)} and len(tally) == len(values)
    histogram = count_histogram(tally)
    width = max(1, math.ceil((values.max() - values.min() + 1) / HISTOGRAM_BINS))
    edges = np.arange(values.min(), values.max() + width + 1, width) - 0.5
    assert histogram == {"edges": edges.tolist(), "counts": np.histogram(values, bins=edges)[0].tolist()}
    assert distribution(Tally()) == dict.fromkeys(STAT_QUANTILES) and count_histogram(Tally()) == {"edges": [], "counts": []}


def test_every_check_says_what_it_expects_and_what_it_found(tmp_path):
    """The checks table showed a passing `expect_column_..._to_be_between` as observed [] with no bounds: every check
    now says its bounds (or set, pattern, row count) and what it saw (range, rows at fault and their share, a few of
    them), in the summary and on the page."""
    from html import escape

    from conftest import report_page

    names = [*NAMES, (7, "D000002", "x" * 40, "x" * 40, "synonym")]
    summary = report(write_kb(tmp_path / "kb", CONCEPTS, names), max_name_length=30, max_names_per_concept=2)
    lengths = {
        c["severity"]: c
        for c in summary["checks"]
        if (c["table"], c["column"], c["expectation"]) == ("names", "name", "expect_column_value_lengths_to_be_between")
    }
    assert lengths["critical"]["success"] and lengths["critical"]["expects"] == "every length at least 1"
    assert lengths["critical"]["found"] == "min 2, max 40; 0 of 7 of a length outside the bounds (0%)"
    assert lengths["warning"]["kwargs"] == {"column": "name", "max_value": 30}
    assert (
        lengths["warning"]["found"] == 'min 2, max 40; 1 of 7 of a length outside the bounds (14.3%); e.g. "' + "x" * 36 + "..."
    )
    by_key = {(c["table"], c["column"], c["expectation"]): c for c in summary["checks"]}
    assert [
        by_key[k][w] for k in [("concepts", "name_count", "expect_column_max_to_be_between")] for w in ("expects", "found")
    ] == ["the column's maximum at most 2", "maximum: 3"]
    assert (
        by_key[("names", None, "expect_table_row_count_to_be_between")]["expects"],
        by_key[("names", None, "expect_table_row_count_to_be_between")]["found"],
    ) == ("rows at least 1", "rows: 7")
    assert (
        by_key[("names", "name_type", "expect_column_values_to_be_in_set")]["expects"]
        == 'every value one of {"preferred", "synonym", "abbreviation", "entry_term", "fsn", ...}'  # and "extra"
    )
    assert by_key[("concepts", "concept_id", "expect_column_values_to_match_regex")]["found"] == "0 of 3 not matching (0%)"
    assert by_key[("concepts", "concept_id", "expect_column_values_to_be_unique")]["found"] == "0 of 3 repeated (0%)"

    page = report_page(summary)
    for check in summary["checks"]:
        assert check["expects"] and check["found"] and check["found"] != "[]"
        assert escape(check["expects"]) in page and escape(check["found"]) in page


def test_a_check_of_another_type_still_says_its_arguments_and_result():
    """A great-expectations type the wording has no entry for is shown by its kwargs and result, never blank."""
    from bioel_core.quality import wording

    kind = "expect_column_mean_to_be_between"
    assert (
        wording.expects(kind, {"column": "score", "min_value": 0.5, "batch_id": "b", "mostly": 0.9})
        == "min_value 0.5, in at least 90% of rows"
    )
    assert wording.found(kind, {"observed_value": 0.25}) == "observed 0.25"
    assert (
        wording.found(
            "expect_column_values_to_be_increasing", {"element_count": 3, "unexpected_count": 1, "partial_unexpected_list": ["b"]}
        )
        == 'element count 3; unexpected count 1; partial unexpected list ["b"]'
    )
    assert wording.found(kind, {}) == "no result recorded"
    assert wording.found(kind, {}, "KeyError: 'score'") == "error: KeyError: 'score'"


def test_dead_letters_are_grouped_by_the_kind_of_their_reason(tmp_path):
    """Each reason names its record ("concept id 'X3' does not match ..."): by reason, a KB with a bad id per line
    showed ten bars of 1 and "(other reasons)". Grouped by kind, one bar per kind with its count and an example."""
    from bioel_core.kb import get_reader
    from bioel_core.records import DeadLetter
    from conftest import report_page

    dump = tmp_path / "medic.txt"
    dump.write_text(
        "".join(
            [f"X{i}||bad id {i}\n" for i in range(12)]
            + ["D000001||Calcimycin\n", "D000002||Temefos||Abate\n", "D000003||Lost||x||y\n"]
        )
    )
    dead = [item for item in get_reader("medic-biosyn").read([str(dump)]) if isinstance(item, DeadLetter)]
    assert len({d.reason for d in dead}) == 14  # each names its id, or how many '||' its line has
    kb = write_kb(tmp_path / "kb", dead_letters=len(dead))
    pq.write_table(
        pa.Table.from_pylist(
            [{"source": d.source, "location": d.location, "raw": d.raw, "reason": d.reason} for d in dead],
            schema=DEAD_LETTER_SCHEMA,
        ),
        kb / "dead_letter" / "part-00000-of-00001.parquet",
    )
    summary = report(kb)

    bad_id, no_bars = dead[0], dead[12]
    assert [(k["kind"], k["dead_letters"], k["example"]) for k in summary["stats"]["dead_letter_kinds"]] == [
        (
            bad_id.reason.replace("'X0'", "'...'"),
            12,
            {"source": str(dump), "location": "line 1", "reason": bad_id.reason, "raw": "X0||bad id 0"},
        ),
        (
            "expected one '||' between the ids and the names, found #",
            2,
            {"source": str(dump), "location": "line 14", "reason": no_bars.reason, "raw": "D000002||Temefos||Abate"},
        ),
    ]
    page = report_page(summary)
    assert "Dead letters by reason kind (14 in all)" in page and "Dead letters by reason kind (2 kinds, 14 dead letters)" in page
    assert "(other" not in page


def test_the_report_names_the_run_its_inputs_and_its_bundle(tmp_path):
    """The page named no run date, inputs or bundle: it now says when the run finished, its generation, bioel and
    runner, its inputs with their versions, and the bundle it is a stage of (BUNDLE/kb/TYPE), all from manifests."""
    from bioel_core.outputs import Manifest
    from conftest import report_page

    bundle = tmp_path / "bundle"
    kb = write_kb(bundle / "kb" / "Disease")
    manifest = json.loads((kb / "manifest.json").read_text())
    manifest["inputs"][0]["sha256"] = "ab" * 32
    (kb / "manifest.json").write_text(
        json.dumps(
            {
                **manifest,
                "pipeline": "ingest-kb",
                "created_utc": "2026-11-21T23:59:00Z",
                "package_version": "0.2.0",
                "runner": "FnApiRunner",
            }
        )
    )
    (bundle / "manifest.json").write_bytes(
        Manifest(
            pipeline="build",
            inputs=[],
            counts={},
            reconciliation={},
            outputs={},
            runner="FnApiRunner",
            generation="gen-20261122T000000Z-0123456789ab",
            created_utc="2026-11-22T00:00:00Z",
            details={
                "bundle": {
                    "name": "demo",
                    "description": "the MEDIC sample",
                    "file": {"path": "/srv/bundles/demo.toml", "sha256": "cd" * 32},
                }
            },
        ).to_json()
    )
    summary = report(kb)

    assert (summary["run_finished_utc"], summary["package_version"], summary["runner"]) == (
        "2026-11-21T23:59:00Z",
        "0.2.0",
        "FnApiRunner",
    )
    assert summary["inputs"] == [{"role": "input", "path": "kb.txt", "version": "ab" * 32}]
    assert summary["bundles"] == [
        {
            "folder": str(bundle),
            "name": "demo",
            "description": "the MEDIC sample",
            "file": "/srv/bundles/demo.toml",
            "file_sha256": "cd" * 32,
            "published_utc": "2026-11-22T00:00:00Z",
            "generation": "gen-20261122T000000Z-0123456789ab",
        }
    ]
    assert json.loads((kb / "quality" / "summary.json").read_text())["bundles"] == summary["bundles"]
    page = report_page(summary)
    run = page[page.index('<table id="run">') : page.index('<div id="verdict"')]
    for shown in (
        "bioel ingest-kb",
        "2026-11-21T23:59:00Z (UTC)",
        "0.2.0 on FnApiRunner",
        "<b>demo</b>",
        "/srv/bundles/demo.toml",
        "kb.txt",
        "ab" * 32,
    ):
        assert shown in run, shown
    assert "none (not built or linked with a bundle)" in report_page(report(write_kb(tmp_path / "alone")))
