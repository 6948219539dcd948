"""The quality report as one self-contained HTML page a person opens offline: a PASSED/FAILED banner, the
stage's figures, its plots (inline SVG) and every check with its status, severity and observed value.

Nothing on the page is fetched: the style is inline, the plots are inline SVG, there is no script, no font,
no image file. The page holds no date and the same summary gives the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape

from bioel_core.quality.plots import Bars, Histogram

OBSERVED_CHARS = 200

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
td.observed { font-family: monospace; max-width: 40em; word-break: break-all; }
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


def _table(columns: list[str], rows: list[list[str]], row_classes: list[str] | None = None,
           numeric: frozenset[str] = frozenset()) -> str:
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


def _checks(checks: list[dict]) -> str:
    rank = {"critical": 0, "warning": 1}
    ordered = sorted(checks, key=lambda c: (c["success"], rank.get(c["severity"], 2)))  # failures first
    rows, classes = [], []
    for c in ordered:
        observed = json.dumps(c["observed"], ensure_ascii=False)
        if len(observed) > OBSERVED_CHARS:
            observed = observed[:OBSERVED_CHARS - 3] + "..."
        rows.append(["PASS" if c["success"] else "FAIL", escape(c["severity"]), escape(c["table"]),
                     escape(c["column"] or "(table)"), escape(c["expectation"]),
                     "" if c["unexpected_count"] is None else f"{c['unexpected_count']:,}", escape(observed)])
        classes.append("pass" if c["success"] else f"fail-{c['severity']}")
    return _table(["status", "severity", "table", "column", "expectation", "unexpected rows", "observed"], rows,
                  classes, numeric=frozenset({"unexpected rows"}))


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
<h1>Quality report: <code>bioel {escape(summary['pipeline'])}</code> output</h1>
<div class="where">{escape(summary['table_dir'])}{' (KB ' + escape(summary['kb']) + ')' if summary.get('kb') else ''}</div>
<div id="verdict" class="banner {verdict.lower()}"><b>{verdict}</b>
{summary['critical_failures']:,} critical failures, {summary['warnings']:,} warnings, {done}/{len(summary['checks'])}
checks passed (fails on: {escape(summary['fail_on'])})</div>
<h2>Figures</h2>
<div id="figures">{_figures(summary['stats'])}</div>
<h2>Plots</h2>
<div id="plots" class="plots">{plots}</div>
{tables}
<h2>Checks</h2>
<div id="checks">{_checks(summary['checks'])}</div>
<p class="where">Machine-readable: {escape(summary['summary_json'])}</p>
</body>
</html>
"""
