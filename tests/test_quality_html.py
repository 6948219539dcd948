"""The quality report page (report.html) of KB and link outputs: one offline page with the verdict, the stage's
figures, one inline SVG per plot, sample dead letters and every check; the same bytes on a re-run.
(The embed and build-index pages are checked where their outputs are built: test_embed_pipeline, test_index.)"""

import re

import pyarrow as pa
import pyarrow.parquet as pq

from bioel_core.quality import report
from bioel_core.tables import data_root
from conftest import report_figures, report_page
from schemas import DEAD_LETTER_SCHEMA
from test_quality import CONCEPTS, NAMES, write_kb
from test_quality_link import good_rows, index_dir, write_link  # noqa: F401 (index_dir: a fixture)

LINK_PLOTS = [
    "Link scores per entity type",
    "NIL share per entity type",
    "Exact-name vs model links per entity type",
    "Mentions per annotated document",
    "Most linked concepts",
]
DEAD_LETTERS = [
    ("in.jsonl", "line 3", '{"id": 7', "malformed JSON: Expecting ',' delimiter"),
    ("in.jsonl", "line 9", "{}", "no document id"),
    ("in.jsonl", "line 12", "[]", "no document id"),
]


def plot_titles(page: str) -> list[str]:
    """The caption of each plot, in page order; each caption follows its one inline <svg>."""
    return re.findall(r"<figure><svg .*?</svg>\s*<figcaption>(.*?)</figcaption></figure>", page, re.S)


def check_rows(page: str) -> list[list[str]]:
    table = page[page.index('<div id="checks">') :]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr class=[^>]*>(.*?)</tr>", table)]


def with_dead_letters(out):
    pq.write_table(
        pa.Table.from_pylist([dict(zip(DEAD_LETTER_SCHEMA.names, row)) for row in DEAD_LETTERS], schema=DEAD_LETTER_SCHEMA),
        data_root(out) / "dead_letter" / "part-00000-of-00001.parquet",
    )
    return out


def test_a_link_page_shows_its_figures_plots_and_every_check(index_dir, tmp_path):  # noqa: F811
    index, kb_version = index_dir
    summary = report(write_link(tmp_path / "link", index, kb_version, *good_rows(kb_version)))
    page = report_page(summary)

    assert '<div id="verdict" class="banner passed"><b>PASSED</b>' in page
    figures = report_figures(page)
    assert figures["mentions"] == "5" and figures["documents"] == "3" and figures["tombstones"] == "1"
    assert figures["nil share"] == "0.2" and figures["mentions per document"] == "min 2; median 2; p95 2; max 3"
    assert plot_titles(page) == LINK_PLOTS and page.count("<svg") == len(LINK_PLOTS)
    assert "D001260 Ataxia Telangiectasia (Disease)" in page  # a bar label of the top concepts
    rows = check_rows(page)
    assert len(rows) == len(summary["checks"]) and {r[0] for r in rows} == {"PASS"}
    assert "Sample dead letters (first 0 of 0)" in page


def test_dead_letters_show_by_reason_and_as_a_sample(index_dir, tmp_path):  # noqa: F811
    index, kb_version = index_dir
    summary = report(with_dead_letters(write_link(tmp_path / "link", index, kb_version, *good_rows(kb_version))))

    assert summary["stats"]["dead_letters"] == 3
    assert summary["stats"]["dead_letter_reasons"] == [  # most frequent first
        {"reason": "no document id", "dead_letters": 2},
        {"reason": "malformed JSON: Expecting ',' delimiter", "dead_letters": 1},
    ]
    page = report_page(summary)
    assert plot_titles(page) == [*LINK_PLOTS, "Dead letters by reason kind (3 in all)"]
    assert report_figures(page)["dead letters"] == "3"
    sample = page[page.index("Sample dead letters (first 3 of 3)") : page.index('<div id="checks">')]
    assert re.findall(r"<tr><td[^>]*>(.*?)</td><td[^>]*>(.*?)</td>", sample) == [
        ("in.jsonl", "line 3"),
        ("in.jsonl", "line 9"),
        ("in.jsonl", "line 12"),
    ]
    assert "{&quot;id&quot;: 7" in sample  # the raw input, escaped


def test_a_failed_check_shows_failed_first(index_dir, tmp_path):  # noqa: F811
    index, kb_version = index_dir
    annotations, documents = good_rows(kb_version)
    annotations[3]["concept_id"] = "D999999"
    summary = report(write_link(tmp_path / "link", index, kb_version, annotations, documents))
    page = report_page(summary)

    assert '<div id="verdict" class="banner failed"><b>FAILED</b>' in page and "PASSED" not in page
    assert "1 critical failures, 0 warnings" in page
    first, *rest = check_rows(page)
    assert first[:5] == ["FAIL", "critical", "annotations", "unknown_concept_id", "expect_column_values_to_be_null"]
    assert first[5:] == [
        'every value null<span class="description">Every concept_id is a concept of the KB of its entity '
        "type (listed: ids missing from it).</span>",
        "1",
        "1 of 5 not null (20%); e.g. &quot;D999999&quot;",
    ] and {r[0] for r in rest} == {"PASS"}


def test_a_kb_page_and_its_rerun(tmp_path):
    kb = with_dead_letters(write_kb(tmp_path / "kb"))
    summary = report(kb)
    page = report_page(summary)

    figures = report_figures(page)
    assert (figures["concepts"], figures["names"], figures["dead letters"]) == (str(len(CONCEPTS)), str(len(NAMES)), "3")
    assert plot_titles(page) == ["Names per concept", "Name length", "Dead letters by reason kind (3 in all)"]
    assert page.count("<svg") == 3
    # the ids the inline SVGs refer to (clip paths, tick markers) are unique on the page: no plot clips another
    referenced = set(re.findall(r"""(?:href="#|url\(#)([^")]+)""", page))
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert referenced and all(ids.count(i) == 1 for i in referenced)

    before = (kb / "quality/report.html").read_bytes()
    report(kb)
    assert (kb / "quality/report.html").read_bytes() == before


def test_cli_report_prints_where_the_page_is(tmp_path, capsys):
    from pipelines import cli

    kb = write_kb(tmp_path / "kb")
    assert cli.main(["report", "--input", str(kb)]) == 0
    printed = capsys.readouterr().out
    assert f"report:       {kb / 'quality' / 'report.html'}\n" in printed and "data_docs" not in printed
    assert (kb / "quality" / "report.html").is_file()
