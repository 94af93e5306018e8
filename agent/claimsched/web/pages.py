"""Server-rendered HTML with inline SVG: the overview, a schedule, a run, the agents, and the
error pages. Every value from the database goes through `esc`; no page has a script.

A square (and a timeline bar) is coloured by its occurrence's class, carries a dark corner
mark when the occurrence needed more than one attempt, and its tooltip names who ran each
attempt ("r3 → r1"): which replica ran it needs no click."""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from urllib.parse import quote
from zoneinfo import ZoneInfo

from ..db.views import RECENT_RUNS
from ..version import __version__
from . import model
from .model import Agent, Detail, Overview, RunDetail, Summary
from .occurrences import CLASSES, MEANING, RETRIED, Occurrence, Run, classify, counts, retried
from .style import CSS
from .verdict import Health, judge

SQUARE, GAP = 12, 3  # strip squares, px
STRIP_HALF = RECENT_RUNS // 2  # squares in each of a schedule's two strips
UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Zulu", "Etc/Zulu",
                       "GMT", "Etc/GMT"})  # zones that are UTC itself: a time shown once
TIMELINE_WIDTH, TIMELINE_HEIGHT = 960, 64
TABLE_ROWS = 100  # newest occurrences listed under the timeline
_ALIVE, _GONE = '<span class="alive">live</span>', '<span class="dead">gone</span>'
#: How an attempt that a later one superseded ended (job_attempts.outcome), in words.
SUPERSEDED = {"orphaned": "orphaned (its lease expired)",
              "fenced_out": "fenced out (lost its lease, gave the run back)",
              "failed": "failed (retried)"}
#: How the run's own attempt (its current or last) stands or ended: the run's status, in words.
OUTCOMES = {"done": "done", "failed": "failed", "running": "running", "skipped": "skipped",
            "orphaned": "orphaned (lost its lease; waiting for the next attempt)",
            "pending": "waiting for an owner"}
UNKNOWN_OWNER = "?"  # an attempt whose owner nobody recorded


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def schedule_href(job_name: str) -> str:
    return "/schedules/" + quote(job_name, safe="")


def run_href(run_id: int) -> str:
    return f"/runs/{int(run_id)}"


# -- pages -------------------------------------------------------------------------------------


def overview(data: Overview) -> str:
    health = [judge(s) for s in data.schedules]
    rows = "\n".join(_overview_row(s, h, data.now) for s, h in zip(data.schedules, health,
                                                                   strict=True))
    latest = [s.strip[-1].cls for s in data.schedules if s.strip]
    unhealthy = sum(not h.healthy for h in health)
    body = (
        "<h1>Schedules</h1>"
        f'<p class="summary"><span data-count="schedules">{len(data.schedules)} schedules</span>'
        f'<span data-count="unhealthy">{unhealthy} unhealthy</span>'
        f'<span data-count="latest-failed">{latest.count("failed")} whose latest occurrence '
        "failed</span>"
        f'<span data-count="latest-missed">{latest.count("missed")} whose latest occurrence '
        "was missed</span></p>"
        + _legend()
        + _scroll(
            '<table class="overview"><thead><tr><th>job</th><th>state</th><th>health</th>'
            "<th>schedule</th><th>last 30 occurrences (newest right)</th><th>last success</th>"
            '<th>next fire</th><th class="num">live agents</th></tr></thead><tbody>'
            + (rows or '<tr><td colspan="8" class="muted">no schedules yet</td></tr>')
            + "</tbody></table>")
    )
    return _page("Schedules", body, data.now, "/api/schedules")


def schedule(data: Detail) -> str:
    s = data.summary
    zone = _zone(s.time_zone)
    found = counts(data.timeline)
    tallies = "".join(
        f'<span data-count="{c}">{found[c]} {esc(c)}</span>' for c in CLASSES if found[c])
    again = retried(data.timeline)
    if again:
        tallies += f'<span data-count="retried">{again} needed more than one attempt</span>'
    newest = list(reversed(data.timeline))[:TABLE_ROWS]
    active = s.window.active_since
    start = _timeline_start(data.timeline, data.since, data.now, active)
    suspended = (
        f'<p class="muted">This schedule is {esc(s.state)}: it fires at these times only once '
        "it is enabled again.</p>" if s.state != "enabled" and not s.suspend_until else
        '<p class="muted">This schedule resumes by itself at '
        f"{_both(s.suspend_until, zone)}; what falls before never runs.</p>"
        if s.state == "suspended" and s.suspend_until else "")
    body = (
        f"<h1>{esc(s.job_name)} {_state(s)}</h1>"
        '<dl class="facts">'
        f"<dt>schedule</dt><dd>{esc(s.description)} {_expression(s)} "
        f"in {esc(s.time_zone)}{_problem(s)}</dd>"
        f"<dt>declared by</dt><dd>{esc(s.source)}{' (' + esc(s.owner) + ')' if s.owner else ''}"
        "</dd>"
        f"<dt>active since</dt><dd>{_both(s.window.active_since, zone)}</dd>"
        f"<dt>health</dt>{_health(judge(s), 'dd')}"
        f"<dt>last success</dt><dd>{_ago(s.last_success, data.now, zone)}</dd>"
        f'<dt>live agents</dt><dd data-count="live-agents">{s.live_agents}</dd>'
        "</dl>"
        f"<h2>{_timeline_title(data.timeline, start, data.since, data.now, active)}</h2>"
        f'<p class="summary">{tallies or "no occurrences"}</p>'
        + _legend()
        + _scroll(_timeline(data.timeline, start, data.now, zone), newest_right=True)
        + "<h2>Next fires</h2>" + suspended
        + _next_fires(data, zone)
        + f"<h2>Occurrences, newest first (at most {TABLE_ROWS})</h2>"
        + _occurrence_table(newest, zone)
    )
    return _page(s.job_name, body, data.now, f"/api{schedule_href(s.job_name)}")


def run(data: RunDetail) -> str:
    r = data.run
    duration = data.duration
    attempts = f"{r.attempt}" + (f" of {data.max_attempts}" if data.max_attempts else "")
    job = (f'<a href="{esc(schedule_href(data.job_name))}">{esc(data.job_name)}</a>'
           if data.schedule_known else f"{esc(data.job_name)} (no schedule row)")
    effects = "".join(
        f"<tr><td><code>{esc(e.entity)}</code></td><td class=\"num\">{e.attempt}</td>"
        f"<td>{_utc(e.recorded_at)}</td></tr>" for e in data.effects)
    more = (f'<p class="muted">showing {len(data.effects)} of {data.effect_count}</p>'
            if data.effect_count > len(data.effects) else "")
    tried = "".join(
        f'<tr data-attempt="{a.number}"><td class="num">{a.number}</td>'
        f'<td data-field="owner"><code>{esc(a.claimed_by or UNKNOWN_OWNER)}</code></td>'
        f'<td data-field="outcome">{esc(_outcome(a, data))}</td>'
        f"<td>{_utc(a.started_at)}</td><td>{_utc(a.ended_at)}</td>"
        f'<td class="small">{esc(a.error or "")}</td></tr>' for a in data.attempts)
    body = (
        f"<h1>Run {r.id} of {esc(data.job_name)}</h1>"
        '<dl class="facts">'
        f"<dt>job</dt><dd>{job}</dd>"
        f"<dt>fire time</dt><dd>{_utc(r.fire_time)}</dd>"
        f"<dt>kind</dt><dd>{esc(r.kind)}</dd>"
        f'<dt>status</dt><dd data-field="status">{_square(classify(r), r.retried)} '
        f"{esc(r.status)}{esc(', ' + RETRIED) if r.retried else ''}</dd>"
        f'<dt>attempt</dt><dd data-field="attempt">{esc(attempts)}</dd>'
        f'<dt>orphaned</dt><dd data-field="orphan-count">{r.orphan_count} time'
        f"{'' if r.orphan_count == 1 else 's'} (a lease that ran out or was lost)</dd>"
        f'<dt>ran by</dt><dd data-field="owners">{esc(_ran_by(r) or "nobody yet")}</dd>'
        f"<dt>started</dt><dd>{_utc(r.started_at)}</dd>"
        f"<dt>finished</dt><dd>{_utc(r.finished_at)}</dd>"
        f'<dt>duration</dt><dd data-field="duration">{_duration(duration)}</dd>'
        f"<dt>lease until</dt><dd>{_utc(data.lease_until)}</dd>"
        f"<dt>retry at</dt><dd>{_utc(data.retry_at)}</dd>"
        "</dl>"
        "<h2>Error</h2>"
        + (f'<pre class="error" data-field="error">{esc(r.error)}</pre>' if r.error
           else '<p class="muted">none</p>')
        + f"<h2>Attempts ({len(data.attempts)})</h2>"
        + (_scroll('<table class="attempts"><thead><tr><th class="num">attempt</th>'
                   "<th>owner</th><th>how it ended</th><th>started</th><th>ended</th>"
                   f"<th>why</th></tr></thead><tbody>{tried}</tbody></table>") if tried
           else '<p class="muted">none yet</p>')
        + f"<h2>Effect receipts ({data.effect_count})</h2>"
        + (_scroll("<table><thead><tr><th>entity</th><th class=\"num\">attempt</th>"
                   f"<th>recorded</th></tr></thead><tbody>{effects}</tbody></table>") + more
           if effects else '<p class="muted">none</p>')
    )
    return _page(f"run {r.id}", body, data.now, f"/api{run_href(r.id)}")


def agents(data: Sequence[Agent], now: datetime) -> str:
    rows = "".join(
        f'<tr data-agent="{esc(a.agent_id)}"><td><code>{esc(a.agent_id)}</code></td>'
        f"<td>{_ALIVE if a.alive else _GONE}</td>"
        f"<td>{esc(a.hostname)}</td><td>{esc(a.pod or '')}</td>"
        f"<td>{esc(a.namespace or '')}</td>"
        f"<td>{', '.join(_job_link(h) for h in a.handlers) or '—'}</td>"
        f"<td>{esc(a.version)}</td><td>{_utc(a.started_at)}</td>"
        f"<td>{_ago(a.last_seen, now, None)}</td></tr>"
        for a in data
    )
    live = sum(a.alive for a in data)
    body = (
        "<h1>Agents</h1>"
        f'<p class="summary"><span data-count="live">{live} live</span>'
        f'<span data-count="agents">{len(data)} seen in the last day</span></p>'
        + _scroll(
            "<table><thead><tr><th>agent</th><th>state</th><th>host</th><th>pod</th>"
            "<th>namespace</th><th>handlers</th><th>version</th><th>started</th>"
            "<th>last seen</th></tr></thead><tbody>"
            + (rows or '<tr><td colspan="9" class="muted">no agents</td></tr>')
            + "</tbody></table>")
    )
    return _page("Agents", body, now, "/api/agents")


def error(status: int, title: str, reason: str) -> str:
    body = f"<h1>{status} {esc(title)}</h1><p data-field=\"reason\">{esc(reason)}</p>"
    return _page(title, body, None)


# -- parts -------------------------------------------------------------------------------------


def _page(title: str, body: str, now: datetime | None, as_json: str = "/api/schedules") -> str:
    """A whole page; its JSON link opens the same data as JSON (`as_json`)."""
    clock = f'<span class="clock">database time {_utc(now)}</span>' if now else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · claimsched</title>"
        '<link rel="icon" href="data:,">'
        f"<style>{CSS}</style></head><body>"
        '<header><a class="brand" href="/">claimsched</a><nav><a href="/">Schedules</a>'
        f'<a href="/agents">Agents</a><a href="{esc(as_json)}" data-field="json">JSON</a></nav>'
        f"{clock}</header><main>{body}</main>"
        f'<footer class="muted small">claimsched {esc(__version__)}, a read-only view</footer>'
        "</body></html>"
    )


def _overview_row(s: Summary, health: Health, now: datetime) -> str:
    zone = _zone(s.time_zone)
    if s.next_fire is not None:
        nxt = _both(s.next_fire.at, zone, between="<br>")
    else:
        nxt = f'<span class="muted">{"—" if s.problem else esc(s.state)}</span>'
    return (
        f'<tr data-job="{esc(s.job_name)}">'
        f'<td><a href="{esc(schedule_href(s.job_name))}">{esc(s.job_name)}</a></td>'
        f"<td>{_state(s)}</td>"
        f"{_health(health, 'td')}"
        f"<td>{esc(s.description)}<br><span class=\"muted small\">{_expression(s)} "
        f"{esc(s.time_zone)}</span>{_problem(s)}</td>"
        f"<td>{_strip(s.strip)}</td>"
        f'<td data-label="last success">{_ago(s.last_success, now, zone)}</td>'
        f'<td data-label="next fire">{nxt}</td>'
        f'<td class="num" data-label="live agents">{s.live_agents}</td></tr>'
    )


def _health(health: Health, tag: str) -> str:
    """A `tag` cell that says whether the job is healthy, and if not, why in a few words (late
    by how long, no live agent, its verdict), with the whole status line as its tooltip."""
    words = []
    late = health.lateness
    for reason in health.reasons:
        if reason in ("late", "missed") and late is not None:
            words.append(f"{reason} {_duration(late.age, rough=True)}")
        else:
            words.append("no live agent" if reason == "no_live_agent" else reason)
    kind = "healthy" if health.healthy else "unhealthy"
    return (f'<{tag} class="health {kind}" data-field="health" title="{esc(health.line())}">'
            f"{esc(' · '.join(words) or 'healthy')}</{tag}>")


def _expression(s: Summary) -> str:
    """The expression as written, and as it runs when hashed fields (H) were written out."""
    written = f"<code>{esc(s.expression)}</code>"
    if s.resolved == s.expression:
        return written
    return f'{written} = <code data-resolved="{esc(s.resolved)}">{esc(s.resolved)}</code>'


def _strip(items: Sequence[Occurrence]) -> str:
    """The newest occurrences in two strips of at most STRIP_HALF squares, each as wide as its
    squares: side by side and flush right on a wide screen (the newest square is always at
    the column's right edge), the newer under the older when a narrow one has no room."""
    older, newer = items[:-STRIP_HALF], items[-STRIP_HALF:]
    return ('<div class="strips">' + _strip_half(older, "older")
            + _strip_half(newer, "newer") + "</div>")


def _strip_half(items: Sequence[Occurrence], which: str) -> str:
    if not items:
        return ""
    step = SQUARE + GAP
    width = len(items) * step
    squares = []
    for i, o in enumerate(items):
        x = i * step
        square = (f'<g class="occ{" retried" if o.retried else ""}"><title>{esc(_label(o))}'
                  f"</title>{_square_shapes(x, o.cls, o.retried)}</g>")
        squares.append(f'<a href="{run_href(o.run.id)}">{square}</a>' if o.run else square)
    return (f'<svg class="strip" width="{width}" height="{SQUARE}" '
            f'viewBox="0 0 {width} {SQUARE}" role="img" '
            f'aria-label="recent occurrences, {which}">' + "".join(squares) + "</svg>")


def _square_shapes(x: float, cls: str, retried: bool) -> str:
    """A square at `x`: its class's colour, and the corner mark of an occurrence that needed
    more than one attempt."""
    rect = (f'<rect x="{x + 1}" y="1" width="{SQUARE - 2}" height="{SQUARE - 2}" rx="2" '
            f'class="sq {esc(cls)}"/>')
    if not retried:
        return rect
    return rect + f'<path class="mark" d="M{x + SQUARE - 7} 0H{x + SQUARE}V7Z"/>'


def _square(cls: str, retried: bool = False) -> str:
    return (f'<svg width="{SQUARE}" height="{SQUARE}" aria-hidden="true">'
            f"{_square_shapes(0, cls, retried)}</svg>")


def _label(o: Occurrence) -> str:
    """A square's tooltip: when, what became of it, who ran each attempt, which run."""
    label = f"{_when(o.fire_time)}: {MEANING[o.cls]}"
    r = o.run
    if r is None:
        return label
    ran_by = _ran_by(r)
    if ran_by:
        label += f"; {'skipped' if r.status == 'skipped' else 'ran'} by {ran_by}"
    tries = _tries(r)
    return label + (f" ({tries})" if tries else "") + f"; run {r.id}, {r.kind}"


def _ran_by(r: Run) -> str:
    """Who held each attempt, first to last: "r3 → r1" ("" before any attempt began)."""
    return " → ".join(owner or UNKNOWN_OWNER for owner in r.owners)


def _tries(r: Run) -> str:
    """How many attempts a run took and how often it lost its lease; "" for neither."""
    parts = [f"{r.attempt} attempts"] if r.attempt > 1 else []
    if r.orphan_count:
        parts.append(f"orphaned {r.orphan_count} time{'' if r.orphan_count == 1 else 's'}")
    return ", ".join(parts)


def _outcome(attempt: model.Attempt, data: RunDetail) -> str:
    """How an attempt ended (or stands), in words."""
    if attempt.superseded:
        return SUPERSEDED.get(attempt.outcome, attempt.outcome)
    words = OUTCOMES.get(attempt.outcome, attempt.outcome)
    if attempt.outcome == "failed" and data.retry_at is not None:
        words += f"; to be retried at {_when(data.retry_at)}"
    return words


def _legend() -> str:
    return ('<div class="legend">' + "".join(
        f"<span>{_square(c)}{esc(MEANING[c])}</span>" for c in CLASSES)
        + f'<span>{_square("any", retried=True)}{esc(RETRIED)}: the colour is how it ended; '
        "hover a square for who ran each attempt</span></div>")


def _scroll(content: str, *, newest_right: bool = False) -> str:
    """Content as wide as it needs, scrolled sideways on a narrow screen, not the page; one
    whose newest part is at its right shows that part first (its box is right-to-left)."""
    return f'<div class="scroll{" newest" if newest_right else ""}">{content}</div>'


def _timeline_start(items: Sequence[Occurrence], since: datetime, now: datetime,
                    active_since: datetime) -> datetime:
    """Where the timeline begins, never before `since`: when its occurrences are the newest
    TIMELINE_LIMIT only (a frequent schedule), the oldest of them; else when the schedule
    became active, or its oldest occurrence shown if that is older (a run from before a
    change); `since` when that is in the future (a suspension that ends later). Else a
    schedule active for minutes would crowd the last pixels of the days."""
    oldest = min((o.fire_time for o in items), default=None)
    if len(items) >= model.TIMELINE_LIMIT and oldest is not None:
        return max(since, oldest)
    begins = active_since if oldest is None else min(active_since, oldest)
    return max(since, begins) if begins < now else since


def _timeline_title(items: Sequence[Occurrence], start: datetime, since: datetime,
                    now: datetime, active_since: datetime) -> str:
    span = _duration(now - start, rough=True)
    if start == since:
        return f"The last {(now - since).days} days"
    if len(items) >= model.TIMELINE_LIMIT:
        return f"The last {len(items)} occurrences ({span})"
    return f"The last {span}" + (", since it became active" if start == active_since else "")


def _timeline(items: Sequence[Occurrence], since: datetime, now: datetime,
              zone: ZoneInfo) -> str:
    span = (now - since).total_seconds() or 1.0
    left, right, top = 4, TIMELINE_WIDTH - 4, 18

    def x_of(t: datetime) -> float:
        return left + (right - left) * (t - since).total_seconds() / span

    parts = []
    for tick, text in _ticks(since, now, zone):
        x = x_of(tick)
        parts.append(f'<line class="axis" x1="{x:.1f}" y1="12" x2="{x:.1f}" '
                     f'y2="{TIMELINE_HEIGHT}"/><text x="{x + 3:.1f}" y="11">{esc(text)}</text>')
    for o in items:
        x = x_of(o.fire_time)
        bar = (f'<g class="occ{" retried" if o.retried else ""}"><title>{esc(_label(o))}</title>'
               f'<rect x="{x - 2:.1f}" y="{top}" width="4" height="{TIMELINE_HEIGHT - top - 4}" '
               f'class="sq {o.cls}"/>'
               + (f'<rect class="mark" x="{x - 2:.1f}" y="{top}" width="4" height="6"/>'
                  if o.retried else "") + "</g>")
        parts.append(f'<a href="{run_href(o.run.id)}">{bar}</a>' if o.run else bar)
    return (f'<svg class="timeline" width="{TIMELINE_WIDTH}" height="{TIMELINE_HEIGHT}" '
            f'viewBox="0 0 {TIMELINE_WIDTH} {TIMELINE_HEIGHT}" role="img" '
            'aria-label="occurrences over time">' + "".join(parts) + "</svg>")


TICKS = (  # a timeline's tick steps, the shortest that gives at most 12 ticks
    (timedelta(minutes=1), "%H:%M"), (timedelta(minutes=5), "%H:%M"),
    (timedelta(minutes=15), "%H:%M"), (timedelta(hours=1), "%H:%M"),
    (timedelta(hours=6), "%a %H:%M"), (timedelta(days=1), "%a %d %b"),
)


def _ticks(since: datetime, now: datetime, zone: ZoneInfo) -> list[tuple[datetime, str]]:
    """The timeline's ticks: local midnights over days; minutes or hours over a shorter span."""
    step, shown = next(((s, f) for s, f in TICKS if (now - since) / s <= 12), TICKS[-1])
    if step >= timedelta(days=1):
        day = since.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0)
        found = []
        while day <= now:
            if day.astimezone(UTC) >= since:
                found.append((day.astimezone(UTC), day.strftime(shown)))
            day += timedelta(days=1)  # wall-clock arithmetic: the next local midnight
        return found
    seconds = step.total_seconds()
    first = datetime.fromtimestamp(-(-since.timestamp() // seconds) * seconds, UTC)
    count = int((now - first) / step) + 1
    return [(t, t.astimezone(zone).strftime(shown)) for t in (first + i * step
                                                               for i in range(count))]


def _next_fires(data: Detail, zone: ZoneInfo) -> str:
    """The next fires in the schedule's zone and in UTC, and the clock changes on their days;
    for a schedule in UTC, one column of times and none of clock changes."""
    if not data.next_fires:
        return f'<p class="muted">{"—" if data.summary.problem else "no further fire times"}</p>'
    if zone.key in UTC_NAMES:
        rows = "".join(f"<tr><td>{_utc(f.at)}</td></tr>" for f in data.next_fires)
        return _scroll(f'<table class="next"><thead><tr><th>UTC</th></tr></thead><tbody>{rows}'
                       "</tbody></table>")
    rows = "".join(
        f"<tr><td>{esc(_local(f.local))}</td><td>{_utc(f.at)}</td><td>"
        + (f'<span class="clockchange" data-field="clock-change">{esc(f.clock_change)}</span>'
           if f.clock_change else "")
        + "</td></tr>"
        for f in data.next_fires
    )
    return _scroll("<table class=\"next\"><thead><tr><th>local time</th><th>UTC</th>"
                   f"<th>clock change that day</th></tr></thead><tbody>{rows}</tbody></table>")


def _occurrence_table(items: Sequence[Occurrence], zone: ZoneInfo) -> str:
    rows = []
    for o in items:
        r = o.run
        what = f'<td class="what">{_square(o.cls, o.retried)} {esc(MEANING[o.cls])}</td>'
        when = esc(_local(o.fire_time.astimezone(zone)))
        if r is None:
            rows.append(f"<tr><td>{when}</td>{what}<td></td><td></td><td></td><td></td></tr>")
            continue
        tries = _tries(r)
        duration = r.finished_at - r.started_at if r.finished_at and r.started_at else None
        error = (r.error or "")[:200]
        rows.append(
            f'<tr data-run="{r.id}"><td>{when}</td>{what}'
            f'<td data-field="ran-by">{esc(_ran_by(r))}'
            + (f'<br><span class="muted small">{esc(tries)}</span>' if tries else "")
            + f'</td><td><a href="{run_href(r.id)}">run {r.id}</a> {esc(r.kind)}, '
            f"attempt {r.attempt}</td><td>{_duration(duration)}</td>"
            f'<td class="small">{esc(error)}</td></tr>')
    return _scroll(
        "<table><thead><tr><th>fire time (local)</th><th>what became of it</th>"
        "<th>ran by (each attempt)</th><th>run</th><th>duration</th><th>error</th></tr>"
        "</thead><tbody>"
        + ("".join(rows) or '<tr><td colspan="6" class="muted">none</td></tr>')
        + "</tbody></table>")


def _state(s: Summary) -> str:
    if s.problem:
        return '<span class="state invalid">invalid</span>'
    badge = f'<span class="state {esc(s.state)}" data-field="state">{esc(s.state)}</span>'
    if s.state != "suspended" or not (s.suspend_until or s.suspend_reason):
        return badge
    until = f" until {_utc(s.suspend_until)}" if s.suspend_until else ""
    reason = f": {esc(s.suspend_reason)}" if s.suspend_reason else ""
    return f'{badge}<br><span class="muted small" data-field="suspension">{until}{reason}</span>'


def _problem(s: Summary) -> str:
    return f'<br><span class="problem small">{esc(s.problem)}</span>' if s.problem else ""


def _job_link(job: str) -> str:
    return f'<a href="{esc(schedule_href(job))}">{esc(job)}</a>'


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, OSError):  # an unknown zone: the summary says so; show UTC
        return ZoneInfo("UTC")


def _utc(value: datetime | None) -> str:
    if value is None:
        return '<span class="muted">—</span>'
    return esc(_when(value))


def _when(value: datetime) -> str:
    """A time in UTC, as text (escape it)."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _local(value: datetime) -> str:
    return value.strftime("%a %Y-%m-%d %H:%M:%S %Z")


def _both(value: datetime, zone: ZoneInfo, between: str = " ") -> str:
    """Local time and UTC; once only when the schedule's zone is UTC."""
    if value.astimezone(zone).utcoffset() == timedelta(0) and zone.key in UTC_NAMES:
        return _utc(value)
    local = esc(_local(value.astimezone(zone)))
    return f"{local}{between}<span class=\"muted small\">{_utc(value)}</span>"


def _ago(value: datetime | None, now: datetime, zone: ZoneInfo | None) -> str:
    if value is None:
        return '<span class="muted">never</span>'
    shown = _both(value, zone) if zone else _utc(value)
    if value > now:
        return f"just now<br><span class=\"small\">{shown}</span>"
    return f"{esc(_duration(now - value, rough=True))} ago<br><span class=\"small\">{shown}</span>"


def _duration(value: timedelta | None, *, rough: bool = False) -> str:
    if value is None:
        return "—"
    seconds = value.total_seconds()
    if seconds < 0:
        return "—"
    if seconds < 60:
        return f"{seconds:.0f} s" if rough else f"{seconds:.3f} s"
    minutes, hours, days = seconds / 60, seconds / 3600, seconds / 86400
    if days >= 2:
        return f"{days:.0f} days"
    if hours >= 1:
        return f"{hours:.1f} h"
    return f"{minutes:.0f} min"
