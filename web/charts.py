"""Server-rendered SVG bar charts: the geometry and the markup are made here, as plain SVG styled
by class from static/css (no inline style or script, CSP). The markup is joined from strings
rather than rendered by a template: a chart has a few hundred numbers, and the template engine's
per-value lookup and localisation was most of the dashboard's rendering time."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

WIDTH = 360  # viewBox units; the SVG scales to its column (about 360 px wide on a phone)
LABEL_HEIGHT = 20
BAR_HEIGHT = 14
BAR_GAP = 3
ROW_GAP = 10
VALUE_ROOM = 64  # room right of the longest bar for its value
LEGEND_HEIGHT = 26


@dataclass
class Bar:
    x: int
    y: int
    width: float
    height: int
    css_class: str
    text: str
    text_x: float
    text_y: int


@dataclass
class Chart:
    title: str
    description: str
    height: int
    width: int = WIDTH
    labels: list[tuple[str, int]] = field(default_factory=list)  # (text, y)
    bars: list[Bar] = field(default_factory=list)
    legend: list[tuple[str, str, int, int]] = field(default_factory=list)  # (name, css class, x, y)
    chart_id: str = "chart"

    def svg(self) -> SafeString:
        """The chart as an <svg> element, titled and described for assistive technology (the
        table that follows it carries the same numbers, each a link). Every text is escaped."""
        parts = [f'<svg class="chart" viewBox="0 0 {self.width} {self.height}" role="img" '
                 f'aria-labelledby="{self.chart_id}-title {self.chart_id}-desc" focusable="false">',
                 f'<title id="{self.chart_id}-title">{escape(self.title)}</title>',
                 f'<desc id="{self.chart_id}-desc">{escape(self.description)} The numbers are in the table below.</desc>']
        parts += [f'<rect class="{css_class}" x="{x}" y="{y + 4}" width="14" height="14"></rect>'
                  f'<text class="chart-text" x="{x + 18}" y="{y + 16}">{escape(name)}</text>'
                  for name, css_class, x, y in self.legend]
        parts += [f'<text class="chart-label" x="0" y="{y}">{escape(Truncator(text).chars(40))}</text>'
                  for text, y in self.labels]
        parts += [f'<rect class="{bar.css_class}" x="{bar.x}" y="{bar.y}" width="{bar.width}" height="{bar.height}">'
                  f'</rect><text class="chart-text" x="{bar.text_x}" y="{bar.text_y}">{escape(bar.text)}</text>'
                  for bar in self.bars]
        parts.append("</svg>")
        return mark_safe("\n".join(parts))  # noqa: S308 — every text in it was escaped above


def bar_chart(*, title: str, description: str, rows: list[tuple[str, list[float | None]]],
              series: list[tuple[str, str]], unit: str = "", maximum: float | None = None,
              chart_id: str = "chart") -> Chart:
    """Horizontal bars: per row its label on a line, then one bar per series (a None value draws
    no bar and reads "no data"). `series` is [(name, css class)]; `unit` follows each value;
    `chart_id` names the SVG's title and description (unique on the page)."""
    values = [v for _label, row in rows for v in row if v is not None]
    top = maximum if maximum is not None else max(values, default=0) or 1
    chart = Chart(title=title, description=description, height=0, chart_id=chart_id)
    y = 4
    if len(series) > 1:  # the legend, wrapped onto as many lines as it needs
        x, line = 0, 0
        for name, css_class in series:
            width = 18 + 8 * len(name)
            if x and x + width > WIDTH:
                x, line = 0, line + 1
            chart.legend.append((name, css_class, x, line * LEGEND_HEIGHT))
            x += width + 16
        y = (line + 1) * LEGEND_HEIGHT
    span = WIDTH - VALUE_ROOM
    for label, row in rows:
        chart.labels.append((label, y + 15))
        y += LABEL_HEIGHT
        for (_name, css_class), value in zip(series, row, strict=True):
            width = round(span * (value or 0) / top, 1) if value is not None else 0
            text = "no data" if value is None else f"{value:g}{unit}"
            chart.bars.append(Bar(x=0, y=y, width=max(width, 1 if value else 0), height=BAR_HEIGHT,
                                  css_class=css_class, text=text, text_x=width + 4, text_y=y + BAR_HEIGHT - 2))
            y += BAR_HEIGHT + BAR_GAP
        y += ROW_GAP
    chart.height = max(y, 30)
    return chart
