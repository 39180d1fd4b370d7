"""A self-contained HTML report of an evaluation run: inline CSS and inline SVG, no scripts, no network."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from .evaluate import QuestionResult, misses, threshold_for

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 2em auto; max-width: 1100px; }
body { padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.meta { color: #666; } .warn { background: #fff4d6; border: 1px solid #e0b84c; padding: .5em 1em; }
.ok { color: #1a7f37; } .bad { color: #b42318; } code { font-size: 90%; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
"""

POS_COLOR = "#1f77b4"  # answerable + typo
NEG_COLOR = "#d62728"  # out of corpus


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _jitter(key: str, spread: float) -> float:
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") / 0xFFFFFFFF
    return (h - 0.5) * 2 * spread


def strip_plot(results: Sequence[QuestionResult], signal: str, threshold: float | None) -> str:
    """SVG strip plot of one gate signal: a row per group, a dot per question, the threshold as a line.

    Filled dots were answered, hollow ones abstained.
    """
    rows = [
        ("answerable + typo", POS_COLOR, [r for r in results if r.answerable and signal in r.signals]),
        ("out of corpus", NEG_COLOR, [r for r in results if not r.answerable and signal in r.signals]),
    ]
    values = [r.signals[signal] for _, _, rs in rows for r in rs]
    if threshold is not None:
        values.append(threshold)
    if not values:
        return f"<p class='meta'>No values of signal <code>{escape(signal)}</code>.</p>"
    lo, hi = min(values), max(values)
    if 0.0 <= lo and hi <= 1.0:
        lo, hi = 0.0, 1.0
    elif hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    else:
        pad = (hi - lo) * 0.05
        lo, hi = lo - pad, hi + pad
    width, left, right, row_h, top = 800, 180, 20, 70, 20
    height = top + row_h * len(rows) + 40
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * plot_w

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(signal)} by question group">'
    ]
    axis_y = top + row_h * len(rows)
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{width - right}" y2="{axis_y}" stroke="#999"/>')
    for i in range(6):
        v = lo + (hi - lo) * i / 5
        parts.append(f'<line x1="{x(v):.1f}" y1="{axis_y}" x2="{x(v):.1f}" y2="{axis_y + 5}" stroke="#999"/>')
        parts.append(f'<text x="{x(v):.1f}" y="{axis_y + 18}" text-anchor="middle">{v:.2f}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{axis_y + 34}" text-anchor="middle">{escape(signal)}</text>'
    )
    for i, (label, color, rs) in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        parts.append(
            f'<text x="{left - 10}" y="{cy + 4:.1f}" text-anchor="end">{escape(label)} ({len(rs)})</text>'
        )
        parts.append(f'<line x1="{left}" y1="{cy:.1f}" x2="{width - right}" y2="{cy:.1f}" stroke="#eee"/>')
        for r in rs:
            v = r.signals[signal]
            fill = color if r.answered else "white"
            tip = f"{r.id}: {signal}={v:.3f}, {r.status}" + (f" ({r.reason})" if r.reason else "")
            parts.append(
                f'<circle cx="{x(v):.1f}" cy="{cy + _jitter(r.id, row_h / 4):.1f}" r="5" fill="{fill}" '
                f'stroke="{color}" stroke-width="1.5" fill-opacity="0.8">'
                f"<title>{escape(tip)}</title></circle>"
            )
    if threshold is not None:
        tx = x(threshold)
        parts.append(
            f'<line x1="{tx:.1f}" y1="{top - 5}" x2="{tx:.1f}" y2="{axis_y}" stroke="#333" '
            f'stroke-width="1.5" stroke-dasharray="5,3"/>'
        )
        parts.append(f'<text x="{tx + 4:.1f}" y="{top + 5}">threshold {threshold:.3f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _totals_table(summary: Mapping[str, Any]) -> str:
    rows = [
        ("questions", summary.get("questions"), ""),
        ("answerable (answerable + typo)", summary.get("answerable"), ""),
        ("unanswerable (out of corpus)", summary.get("unanswerable"), ""),
        ("hit@1 (citations)", _pct(summary.get("hit_at_1")), "first expected source is citation [1]"),
        ("hit@3 (citations)", _pct(summary.get("hit_at_3")), "an expected source among citations [1]..[3]"),
        ("MRR@10 (citations)", _fmt(summary.get("mrr_at_10")), "abstentions count 0"),
        ("retrieval hit@1", _pct(summary.get("retrieval_hit_at_1")), "on evidence.chunks"),
        ("retrieval hit@3", _pct(summary.get("retrieval_hit_at_3")), ""),
        ("retrieval MRR@10", _fmt(summary.get("retrieval_mrr_at_10")), ""),
        (
            "false abstentions",
            f"{summary.get('false_abstain')} ({_pct(summary.get('false_abstain_rate'))})",
            "answerable questions that abstained",
        ),
        (
            "false answers",
            f"{summary.get('false_answer')} ({_pct(summary.get('false_answer_rate'))})",
            "out-of-corpus questions that were answered",
        ),
        (
            "answer contains the fact",
            _pct(summary.get("answer_contains")),
            f"an answer_has string in the answer, of {summary.get('answer_contains_questions')} questions",
        ),
        ("quotes verified", _pct(summary.get("quotes_verified")), f"of {summary.get('citations')} citations"),
        ("errors", summary.get("errors"), ""),
    ]
    sep = summary.get("separation") or {}
    if sep.get("signal"):
        gap = sep.get("gap")
        verdict = (
            ""
            if gap is None
            else ("separated" if sep.get("separated") else f"{sep.get('overlapping')} overlap")
        )
        rows.append((f"separation gap ({sep['signal']})", _fmt(gap), verdict))
    body = "".join(
        f"<tr><th>{escape(str(k))}</th><td class='num'>{escape(_fmt(v))}</td><td>{escape(note)}</td></tr>"
        for k, v, note in rows
    )
    return f"<table>{body}</table>"


def _separation_table(sep: Mapping[str, Any]) -> str:
    head = "<tr><th>group</th><th>n</th><th>min</th><th>mean</th><th>max</th></tr>"
    rows = []
    for group in ("answerable", "unanswerable"):
        s = sep.get(group) or {}
        rows.append(
            f"<tr><td>{group}</td><td class='num'>{_fmt(s.get('n'))}</td>"
            f"<td class='num'>{_fmt(s.get('min'))}</td>"
            f"<td class='num'>{_fmt(s.get('mean'))}</td><td class='num'>{_fmt(s.get('max'))}</td></tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _got(r: QuestionResult) -> str:
    if r.status == "error":
        return f"ERROR: {r.error}"
    if not r.answered:
        return f"ABSTAINED: {r.reason or ''}".strip()
    cited = ", ".join(a or "?" for a in r.cited) or "(no citations)"
    lacks = " (no answer_has string in the answer)" if r.answer_contains is False else ""
    return f"cited {cited}{lacks}"


def _question_rows(results: Sequence[QuestionResult]) -> str:
    head = (
        "<tr><th>id</th><th>kind</th><th>question</th><th>expected</th><th>got</th><th>answer</th>"
        "<th>retrieval rank</th><th>signal</th></tr>"
    )
    rows = []
    for r in results:
        good = r.correct and r.answer_contains is not False
        rows.append(
            f"<tr><td><code>{escape(r.id)}</code></td><td>{escape(r.kind)}</td><td>{escape(r.question)}</td>"
            f"<td>{escape(', '.join(r.expect) or '(none)')}</td>"
            f"<td class='{'ok' if good else 'bad'}'>{escape(_got(r))}</td>"
            f"<td>{escape(r.answer or '')}</td>"
            f"<td class='num'>{_fmt(r.retrieval_rank)}</td><td class='num'>{_fmt(r.top_signal)}</td></tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def render_html(
    summary: Mapping[str, Any],
    results: Sequence[QuestionResult],
    *,
    title: str = "pgcite evaluation",
    meta: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
) -> str:
    """The whole report as one HTML string."""
    sep = summary.get("separation") or {}
    primary = sep.get("signal")
    signals: list[str] = [primary] if primary else []
    for r in results:
        for s in r.signals:
            if s not in signals:
                signals.append(s)
    plots = []
    for s in signals:
        threshold = next((t for r in results if (t := threshold_for(s, r.thresholds)) is not None), None)
        plots.append(f"<h3>{escape(s)}</h3>{strip_plot(results, s, threshold)}")
    meta_html = "".join(
        f"<li>{escape(str(k))}: <code>{escape(_fmt(v))}</code></li>" for k, v in (meta or {}).items()
    )
    warn_html = "".join(f"<p class='warn'>{escape(w)}</p>" for w in warnings)
    missed = misses(results)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title><style>{CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
<ul class="meta">{meta_html}</ul>
{warn_html}
<h2>Totals</h2>
{_totals_table(summary)}
<h2>Gate signals: answerable vs unanswerable</h2>
<p class="meta">One dot per question; filled = answered, hollow = abstained;
dashed line = the gate threshold.</p>
{_separation_table(sep) if primary else ""}
{"".join(plots) or "<p class='meta'>No gate signals in the evidence.</p>"}
<h2>Misses ({len(missed)})</h2>
{_question_rows(missed) if missed else "<p>None.</p>"}
<details><summary>All questions ({len(results)})</summary>{_question_rows(results)}</details>
</body></html>
"""
