"""The quality report's plots: a histogram and a bar chart, drawn by matplotlib as SVG text to inline in the page.

The numbers come precomputed from the stats (summary.json holds them too); these only draw. The SVG is the same
bytes for the same numbers: no date in its metadata, text kept as text (no glyph paths, whose ids vary), and
element ids hashed from a salt of the plot's own title, so ids stay unique among the plots of one page.
"""

from __future__ import annotations

import io
from dataclasses import dataclass


WIDTH, HEIGHT = 6.4, 3.2  # inches
BAR_HEIGHT = 0.28  # inches per bar of a horizontal bar chart
COLORS = ["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb"]
LABEL_CHARS = 48


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _svg(figure, salt: str) -> str:
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        buffer = io.StringIO()
        figure.savefig(
            buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None, "Format": None, "Type": None}
        )
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # inline in HTML: no XML declaration or DOCTYPE


def _axes(title: str, height: float = HEIGHT):
    # imported here, as great-expectations is: only a report being made pays for it. No pyplot: no GUI
    # backend, no global figure state
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH, height))
    axes = figure.add_subplot()
    axes.yaxis.get_major_locator().set_params(integer=True)  # counts: no tick at 0.5 of a name
    axes.set_title(title, fontsize=10)
    axes.spines[["top", "right"]].set_visible(False)
    return figure, axes


def _legend(axes) -> None:
    axes.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside, not over, the data


@dataclass(frozen=True)
class Histogram:
    """Counts in bins; several series (e.g. one per entity type) share the bins and are drawn over each other.
    `series`: name -> {"edges": [...], "counts": [...]} (frames.histogram). `whole_x`: the values are whole
    numbers (frames.count_histogram), so are the ticks."""

    title: str
    series: dict[str, dict]
    xlabel: str
    ylabel: str = "count"
    whole_x: bool = False

    def svg(self) -> str:
        figure, axes = _axes(self.title)
        drawn = {name: h for name, h in self.series.items() if h["counts"]}
        for color, (name, h) in zip(COLORS * len(drawn), drawn.items()):
            axes.stairs(h["counts"], h["edges"], fill=len(drawn) == 1, color=color, label=name or "(any type)", linewidth=1.5)
        if len(drawn) > 1:
            _legend(axes)
        if not drawn:
            axes.text(0.5, 0.5, "no values", ha="center", va="center", transform=axes.transAxes)
        if self.whole_x:
            axes.xaxis.get_major_locator().set_params(integer=True)
        axes.set_xlabel(self.xlabel)
        axes.set_ylabel(self.ylabel)
        return _svg(figure, self.title)


@dataclass(frozen=True)
class Bars:
    """One bar per label; several series are stacked. Horizontal suits long labels (concept names, reasons)."""

    title: str
    labels: list[str]
    series: dict[str, list[float]]
    value_label: str = "count"
    horizontal: bool = False
    percent: bool = False

    def svg(self) -> str:
        height = max(HEIGHT, 0.8 + BAR_HEIGHT * len(self.labels)) if self.horizontal else HEIGHT
        figure, axes = _axes(self.title, height)
        positions = list(range(len(self.labels)))
        base = [0.0] * len(self.labels)
        draw = axes.barh if self.horizontal else axes.bar
        for color, (name, values) in zip(COLORS * len(self.series), self.series.items()):
            values = [v * 100 for v in values] if self.percent else values
            offset = {"left": base} if self.horizontal else {"bottom": base}
            draw(positions, values, 0.7, color=color, label=name, **offset)
            base = [b + v for b, v in zip(base, values)]
        labels = [_short(str(label) or "(any type)") for label in self.labels]
        value_label = f"{self.value_label} (%)" if self.percent else self.value_label
        # bars start at 0; all-zero bars (no NIL at all) get a 0-1 axis, not matplotlib's -0.05-0.05
        limits = (0, 100) if self.percent else (0, None if any(base) else 1)
        (axes.set_xlim if self.horizontal else axes.set_ylim)(*limits)
        if self.horizontal:
            axes.xaxis.get_major_locator().set_params(integer=True)
            axes.set_yticks(positions, labels, fontsize=8)
            axes.invert_yaxis()  # the first label on top
            axes.set_xlabel(value_label)
        else:
            crowded = len(self.labels) > 6
            axes.set_xticks(positions, labels, fontsize=8, rotation=30 if crowded else 0, ha="right" if crowded else "center")
            axes.set_ylabel(value_label)
        if not self.labels:
            axes.text(0.5, 0.5, "no values", ha="center", va="center", transform=axes.transAxes)
        if len(self.series) > 1:
            _legend(axes)
        return _svg(figure, self.title)
