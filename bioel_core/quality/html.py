"""The quality report as one self-contained HTML page a person opens offline: the run it checks (verb, when it
finished, generation, inputs, bundle), a PASSED/FAILED banner, the stage's figures, its plots (inline SVG) and every
check with its status, severity, what it expects and what it found.

Nothing on the page is fetched: the style is inline, the plots are inline SVG, there is no script, no font,
no image file. The page's only date is the run's, from its manifest: the same summary gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from bioel_core.quality.plots import Bars, Histogram

SHOWN_INPUTS = 10  # input files listed on the page (summary.json lists every one)

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 84em; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.where { color: #555; font-size: 0.9em; word-break: break-all; }
.banner { padding: 0.7em 1em; border-radius: 4px; font-size: 1.2em; color: #fff; margin: 1em 0; }
.banner b { font-size: 1.3em; margin-right: 0.6em; }
.passed { background: #2e7d32; } .failed { background: #c62828; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.found, td.expects { min-width: 16em; max-width: 32em; }
td.expects .description { color: #555; display: block; margin-top: 0.2em; }
#run th { text-align: right; } #run td.version, #run td.path { font-family: monospace; word-break: break-all; }
tr.fail-critical td.status { background: #ffcdd2; font-weight: bold; }
tr.fail-warning td.status { background: #ffe0b2; font-weight: bold; }
tr.pass td.status { color: #2e7d32; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; border: 1px solid #ddd; padding: 0.5em; }
figure svg { display: block; max-width: 100%; height: auto; }
"""


@dataclass(frozen=True)
class Table:
    """A table of rows (dicts) to show as is, e.g. sample dead letters."""

    title: str
    columns: list[str]
    rows: list[dict]


def _value(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return "; ".join(f"{k or '(any type)'} {_value(v)}" for k, v in value.items()) or "none"
    return str(value)


def _is_figure(value) -> bool:
    """A stat shown in the figures table: a number or text, or a flat mapping of them (a distribution, counts
    per type). Nested or list-valued stats are what the plots and tables show."""
    plain = lambda v: v is None or isinstance(v, (bool, int, float, str))  # noqa: E731
    return plain(value) or isinstance(value, dict) and all(plain(v) for v in value.values())


def _table(
    columns: list[str], rows: list[list[str]], row_classes: list[str] | None = None, numeric: frozenset[str] = frozenset()
) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes else ""
        cells = "".join(f'<td class="{"num" if c in numeric else escape(c)}">{cell}</td>' for c, cell in zip(columns, row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _figures(stats: dict) -> str:
    rows = [[escape(k.replace("_", " ")), escape(_value(v))] for k, v in stats.items() if _is_figure(v)]
    return _table(["figure", "value"], rows, numeric=frozenset({"value"}))


def _columns(check: dict) -> str:
    """The column a check reads; a pair check's two; "(table)" for a table-level one."""
    pair = [check["kwargs"].get(k) for k in ("column_A", "column_B") if check["kwargs"].get(k)]
    return check["column"] or ", ".join(pair) or "(table)"


def _checks(checks: list[dict]) -> str:
    rank = {"critical": 0, "warning": 1}
    ordered = sorted(checks, key=lambda c: (c["success"], rank.get(c["severity"], 2)))  # failures first
    rows, classes = [], []
    for c in ordered:
        described = f'<span class="description">{escape(c["description"])}</span>' if c["description"] else ""
        rows.append(
            [
                "PASS" if c["success"] else "FAIL",
                escape(c["severity"]),
                escape(c["table"]),
                escape(_columns(c)),
                escape(c["expectation"]),
                escape(c["expects"]) + described,
                "" if c["unexpected_count"] is None else f"{c['unexpected_count']:,}",
                escape(c["found"]),
            ]
        )
        classes.append("pass" if c["success"] else f"fail-{c['severity']}")
    return _table(
        ["status", "severity", "table", "column", "expectation", "expects", "unexpected rows", "found"],
        rows,
        classes,
        numeric=frozenset({"unexpected rows"}),
    )


def _or_none(value) -> str:
    return escape(str(value)) if value else "not recorded"


def _bundle(bundle: dict) -> str:
    if bundle["name"] is None and bundle["file"] is None:
        return f"{escape(bundle['folder'])} (its first build is running: no manifest yet)"
    file = f"file {escape(bundle['file'])} (sha256 {_or_none(bundle['file_sha256'])})" if bundle["file"] else "no file recorded"
    return (
        f"<b>{_or_none(bundle['name'])}</b>: {file}; folder {escape(bundle['folder'])}, built "
        f"{_or_none(bundle['published_utc'])} ({_or_none(bundle['generation'])})"
    )


def _run(summary: dict) -> str:
    """Which run wrote the tables: verb, when it finished, generation, bioel and runner, bundle, inputs."""
    inputs = summary["inputs"]
    shown = "".join(
        f'<tr><th>{escape(i["role"])}</th><td class="path">{escape(i["path"] or "")}</td>'
        f'<td class="version">{_or_none(i["version"])}</td></tr>'
        for i in inputs[:SHOWN_INPUTS]
    )
    if len(inputs) > SHOWN_INPUTS:
        shown += f'<tr><th></th><td colspan="2">and {len(inputs) - SHOWN_INPUTS:,} more (summary.json lists all)</td></tr>'
    facts = [
        ("verb", f"bioel {escape(summary['pipeline'])}"),
        ("finished", f"{_or_none(summary['run_finished_utc'])} (UTC)"),
        ("generation", _or_none(summary["generation"])),
        ("bioel", f"{_or_none(summary['package_version'])} on {_or_none(summary['runner'])}"),
        ("bundle", "; ".join(_bundle(b) for b in summary["bundles"]) or "none (not built or linked with a bundle)"),
    ]
    rows = "".join(f'<tr><th>{name}</th><td colspan="2">{value}</td></tr>' for name, value in facts)
    head = (
        "<tr><th>inputs</th><th>path</th><th>version</th></tr>"
        if inputs
        else '<tr><th>inputs</th><td colspan="2">none recorded</td></tr>'
    )
    return f'<table id="run"><tbody>{rows}{head}{shown}</tbody></table>'


def _section(section: Histogram | Bars | Table) -> str:
    if isinstance(section, Table):
        rows = [[escape(_value(row.get(c))) for c in section.columns] for row in section.rows]
        body = _table(section.columns, rows) if rows else "<p>none</p>"
        return f"<h2>{escape(section.title)}</h2>{body}"
    return f"<figure>{section.svg()}<figcaption>{escape(section.title)}</figcaption></figure>"


def page(summary: dict, sections: list[Histogram | Bars | Table]) -> str:
    """The report page of a summary (report.report's), with the stage's plots and tables."""
    passed = summary["passed"]
    verdict = "PASSED" if passed else "FAILED"
    done = sum(c["success"] for c in summary["checks"])
    title = f"bioel quality {verdict}: {summary['pipeline']} {summary['table_dir']}"
    plots = "".join(_section(s) for s in sections if not isinstance(s, Table))
    tables = "".join(_section(s) for s in sections if isinstance(s, Table))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>Quality report: <code>bioel {escape(summary["pipeline"])}</code> output</h1>
<div class="where">{escape(summary["table_dir"])}{" (KB " + escape(summary["kb"]) + ")" if summary.get("kb") else ""}</div>
{_run(summary)}
<div id="verdict" class="banner {verdict.lower()}"><b>{verdict}</b>
{summary["critical_failures"]:,} critical failures, {summary["warnings"]:,} warnings, {done}/{len(summary["checks"])}
checks passed (fails on: {escape(summary["fail_on"])})</div>
<h2>Figures</h2>
<div id="figures">{_figures(summary["stats"])}</div>
<h2>Plots</h2>
<div id="plots" class="plots">{plots}</div>
{tables}
<h2>Checks</h2>
<div id="checks">{_checks(summary["checks"])}</div>
<p class="where">Machine-readable: {escape(summary["summary_json"])}</p>
</body>
</html>
"""
