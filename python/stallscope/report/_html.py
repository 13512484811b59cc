"""The HTML writer: one self-contained page (styles, script and SVG plots inline; nothing is
fetched), its sections in order, each either rendered or saying why it has no data."""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from stallscope.exceptions import ReportError
from stallscope.report._data import ReportData


@dataclass(frozen=True)
class NoData:
    """A section's answer when its frames are missing: why, and how to get them."""

    reason: str


@dataclass(frozen=True)
class Section:
    """A part of the page: `render` gives its HTML body, or NoData."""

    id: str
    title: str
    render: Callable[[ReportData], str | NoData]


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def table(
    frame: pl.DataFrame,
    formats: Mapping[str, Callable[[Any], str]] | None = None,
    labels: Mapping[str, str] | None = None,
    max_rows: int = 200,
) -> str:
    """`frame` as a sortable HTML table (click a header); `formats` per column; numbers are
    right-aligned and sort by value (data-v)."""
    formats = formats or {}
    labels = labels or {}
    head = "".join(f"<th>{esc(labels.get(c, c))}</th>" for c in frame.columns)
    rows = []
    for row in frame.head(max_rows).iter_rows():
        cells = []
        for col, v in zip(frame.columns, row, strict=True):
            shown = "" if v is None else formats[col](v) if col in formats else str(v)
            num = isinstance(v, (int, float)) and not isinstance(v, bool)
            attr = f' class="n" data-v="{v}"' if num else ""
            cells.append(f"<td{attr}>{esc(shown)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    more = (
        f'<p class="more">{frame.height - max_rows:,} more rows not shown</p>'
        if frame.height > max_rows
        else ""
    )
    return (
        f'<table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>{more}"
    )


def figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure class="plot">{svg}{cap}</figure>'


_CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --bg: #ffffff; --band: #f5f7fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); margin: 0; }
header { padding: 20px 32px 8px; border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .path { color: var(--muted); font-family: ui-monospace, monospace; font-size: 12px; }
.summary { font-size: 16px; max-width: 980px; margin: 10px 0; }
nav { padding: 8px 32px; background: var(--band); border-bottom: 1px solid var(--line);
  position: sticky; top: 0; z-index: 1; font-size: 13px; }
nav a { margin-right: 14px; color: #1a56b0; text-decoration: none; }
nav a.empty { color: var(--muted); }
main { padding: 8px 32px 40px; max-width: 1200px; }
section { border-bottom: 1px solid var(--line); padding: 10px 0 18px; }
section h2 { font-size: 18px; margin: 10px 0 6px; }
section.empty .nodata { color: var(--muted); font-style: italic; }
p.lead { color: var(--muted); margin: 2px 0 10px; max-width: 980px; }
figure.plot { margin: 8px 0; overflow-x: auto; }
figure.plot svg { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 12px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: left; }
th { background: var(--band); cursor: pointer; user-select: none; white-space: nowrap; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.more { color: var(--muted); font-size: 12px; }
code, .cmd { font-family: ui-monospace, monospace; font-size: 12.5px; background: var(--band);
  padding: 1px 4px; border-radius: 3px; }
.legend { list-style: none; padding: 0; margin: 6px 0; }
.legend li { margin: 3px 0; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  vertical-align: -1px; margin-right: 6px; }
.notes { color: #8a5a00; font-size: 13px; }
footer { color: var(--muted); font-size: 12px; padding: 12px 32px 24px; }
"""

# Click a header to sort its table (numbers by value); nothing else runs.
_JS = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var i = th.cellIndex;
    var body = th.closest("table").tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var up = th.dataset.dir !== "up";
    th.dataset.dir = up ? "up" : "down";
    rows.sort(function (a, b) {
      var x = a.cells[i], y = b.cells[i];
      var p = x.dataset.v !== undefined ? parseFloat(x.dataset.v) : x.textContent;
      var q = y.dataset.v !== undefined ? parseFloat(y.dataset.v) : y.textContent;
      return (p < q ? -1 : p > q ? 1 : 0) * (up ? 1 : -1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


_EMPTY = ' class="empty"'


def render_page(data: ReportData, sections: tuple[Section, ...], summary: str) -> str:
    """The whole page."""
    from stallscope import __version__

    bodies: list[tuple[Section, str | NoData]] = [(s, s.render(data)) for s in sections]
    nav = " ".join(
        f'<a href="#{s.id}"{_EMPTY if isinstance(b, NoData) else ""}>{esc(s.title)}</a>'
        for s, b in bodies
    )
    empty = [s.title for s, b in bodies if isinstance(b, NoData)]
    parts = []
    for s, b in bodies:
        if isinstance(b, NoData):
            parts.append(
                f'<section id="{s.id}" class="empty" data-section="{s.id}" data-empty="1">'
                f'<h2>{esc(s.title)}</h2><p class="nodata">No data: {esc(b.reason)}</p></section>'
            )
        else:
            parts.append(
                f'<section id="{s.id}" data-section="{s.id}"><h2>{esc(s.title)}</h2>{b}</section>'
            )
    notes = "".join(f"<li>{esc(n)}</li>" for n in data.run.notes)
    notes_html = f'<ul class="notes">{notes}</ul>' if notes else ""
    without = (
        f'<p class="lead">Sections without data: {esc(", ".join(empty))}.</p>' if empty else ""
    )
    title = f"stallscope report: {Path(data.run.path).name or 'run'}"
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_CSS}</style></head><body>"
        f'<header><h1>{esc(title)}</h1><div class="path">{esc(data.run.path)}</div>'
        f'<p class="summary" id="summary">{esc(summary)}</p>{without}{notes_html}</header>'
        f"<nav>{nav}</nav><main>{''.join(parts)}</main>"
        f"<footer>Written by stallscope {esc(__version__)}; one file, nothing loaded from "
        f"elsewhere.</footer><script>{_JS}</script></body></html>\n"
    )


def write_page(page: str, path: str | os.PathLike[str]) -> Path:
    """Write the page (its folder created); ReportError naming the path when it cannot be."""
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        raise ReportError(f"cannot write the report {out}: {e.strerror or e}") from None
    return out
