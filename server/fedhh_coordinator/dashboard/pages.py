"""The dashboard's pages as HTML. A page is a frame (navigation, the script and style sheet of
``static/``) around regions; the live stream sends the same regions again when they change, so
a region is rendered by one function whether the page or the stream asks."""

from __future__ import annotations

import time
from collections.abc import Sequence
from urllib.parse import quote

from fedhh.codec.shown import cut_marks_note, prefix_words, printable_rows
from fedhh_coordinator.dashboard.charts import spend_chart
from fedhh_coordinator.dashboard.markup import Html, duration, esc, fmt, join, number, percent
from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.timeline import STAGE_LABELS, STAGES, AttemptView, Step
from fedhh_coordinator.dashboard.views import BudgetView, FleetView, RunDetail, RunLine

FP_NOTE = ("Certain: kept items on the deny list, which devices never select, so false "
           "positives for sure (and never output); the other kept candidates cannot be told "
           "apart from true items without the data.")
TRIM_NOTE = ("Prefixes this round kept that the next round's segment could not fit within the "
             "dimension limit: only the top-estimated go on, and heavy items under the others "
             "are not found (the note above the rounds says what to change).")
ATTEMPT_NOTE = ("Round r.a is attempt a of round r: a round is tried again when an attempt "
                "releases nothing (too few devices checked in, an abort, a lost aggregator).")
NAV = (("runs", "/", "Runs"), ("budgets", "/budgets", "Budgets"), ("fleet", "/fleet", "Fleet"))
# The heavy-hitter filter box's longest value, in UTF-16 code units (what maxlength counts):
# half of what the downloads keep of a filter (server.MAX_FILTER, 200 code points). The page
# matches, and sends to the downloads, the filter lowered (static/app.js), and lowering at most
# doubles a text's code units (U+0130, one unit, lowers to i and U+0307, two; no character
# lowers to more), so every filter the box takes reaches the downloads whole.
# (Before, the box took any length: a filter past 200 characters was cut there, and the
# downloads held rows the page hid.)
FILTER_MAX_LENGTH = 100


def when(unix: float | None) -> str:
    """A time in the coordinator's zone, with the zone: an operator elsewhere reads it right."""
    if unix is None:
        return "–"
    local = time.localtime(unix)
    return time.strftime("%Y-%m-%d %H:%M:%S ", local) + (local.tm_zone or
                                                        time.strftime("%z", local))


def frame(title: str, body: Html, *, nav: str = "", live: str = "") -> Html:
    links = join(fmt('<a href="{href}"{current}>{label}</a>', href=href, label=label,
                     current=Html(' aria-current="page"' if key == nav else ""))
                 for key, href, label in NAV)
    account = Html('<form method="post" action="/logout" class="logout">'
                   '<button type="submit">Log out</button></form>') if nav else Html("")
    return fmt(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>{title} · fedhh</title><link rel="stylesheet" href="/static/app.css">'
        '<link rel="icon" href="/static/icon.svg" type="image/svg+xml">'
        '<script src="/static/app.js" defer></script></head>'
        '<body data-live="{live}"><header><span class="brand">fedhh console</span>'
        '<nav>{links}</nav>{account}</header><main>{body}</main>'
        '<footer>Read-only view of the coordinator · <span id="clock">{now}</span></footer>'
        '</body></html>',
        title=title, live=live, links=links if nav else Html(""), account=account, body=body,
        now=when(time.time()))


def region(name: str, content: Html) -> Html:
    return fmt('<section id="{name}" class="region">{content}</section>', name=name,
               content=content)


def state_badge(state: str) -> Html:
    return fmt('<span class="badge state-{s}">{s}</span>', s=state)


def bars(rows: Sequence[tuple[str, float, str]]) -> Html:
    """Horizontal bars as native meters: (label, share in [0, 1], text after the bar)."""
    return fmt('<div class="bars">{rows}</div>', rows=join(
        fmt('<div class="bar-row"><span class="bar-label">{label}</span>{m}'
            '<span class="bar-value">{text}</span></div>', label=label, m=meter(share, 1.0),
            text=text) for label, share, text in rows))


def meter(part: float, whole: float) -> Html:
    share = min(max(part / whole, 0.0), 1.0) if whole else 0.0
    return fmt('<meter min="0" max="1" value="{v}">{p}</meter>', v=f"{share:.3f}",
               p=percent(part, whole))


# ---- login -----------------------------------------------------------------------------------
def login(message: str = "", next_path: str = "/") -> Html:
    note = fmt('<p class="error" role="alert">{m}</p>', m=message) if message else Html("")
    body = fmt(
        '<section class="login"><h1>Sign in</h1>'
        '<p>The dashboard shows the coordinator\'s runs to its operators: sign in with the '
        'coordinator\'s admin token.</p>{note}'
        '<form method="post" action="/login"><input type="hidden" name="next" value="{next}">'
        '<label for="token">Admin token</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password" '
        'required autofocus><button type="submit">Sign in</button></form></section>',
        note=note, next=next_path)
    return frame("Sign in", body)


# ---- runs ------------------------------------------------------------------------------------
def runs_table(lines: Sequence[RunLine]) -> Html:
    if not lines:
        return Html('<p class="empty">No runs yet. Start one with <code>fedhh admin start'
                    '</code>.</p>')
    rows = join(fmt(
        '<tr><td><a href="/runs/{q}">{id}</a></td><td>{state}</td>'
        '<td>{released} {meter}<div class="now">{now}</div></td>'
        '<td>{spent} / {target} {spend_meter}</td><td>{started}</td><td>{seconds}</td></tr>',
        q=quote(line.run_id), id=line.run_id, state=state_badge(line.shown_state),
        released=rounds_text(line), meter=meter(line.released, line.rounds),
        now=line.now or line.error, spent=number(line.eps_spent, 3), target=f"{line.eps_agg:g}",
        spend_meter=meter(line.eps_spent, line.eps_agg), started=when(line.started),
        seconds=duration(line.seconds)) for line in lines)
    return fmt('<div class="scroll"><table class="runs"><thead><tr><th>Run</th><th>State</th>'
               '<th>Progress</th><th>eps spent / budget</th><th>Started</th><th>Duration</th>'
               '</tr></thead><tbody>{rows}</tbody></table></div>', rows=rows)


def rounds_text(line: RunLine) -> str:
    """Rounds released of those planned; a finished run that needed fewer says why: every
    prefix it kept reached its end, or its last round kept none (then the prefixes before it
    ended there, listed as cut if they had not reached their end; before, that run too read
    "every item was complete")."""
    text = f"{line.released} of {line.rounds} rounds"
    if line.state == "done" and line.released < line.rounds:
        text += (f" (round {line.emptied} kept no prefix, so none was left to extend: the "
                 "rest were not needed)" if line.emptied
                 else " (every item was complete: the rest were not needed)")
    return text


def demo_note(demo_url: str) -> Html:
    """The link to the browser devices' page (``fedhh up --web-devices``), if one is served."""
    if not demo_url:
        return Html("")
    return fmt('<p class="note demo">Browser devices take part in these runs: '
               '<a href="{url}" target="_blank" rel="noopener">watch them on the demo '
               'page</a>.</p>', url=demo_url)


def runs_page(lines: Sequence[RunLine], demo_url: str = "") -> Html:
    body = fmt('<h1>Runs</h1>{demo}{table}', demo=demo_note(demo_url),
               table=region("runs", runs_table(lines)))
    return frame("Runs", body, nav="runs", live="/live/runs")


# ---- a run -----------------------------------------------------------------------------------
def run_head(run: RunDetail) -> Html:
    line, config = run.line, run.config
    facts = [
        ("State", state_badge(line.shown_state)),
        ("Now", esc(line.now or "–")),
        ("Rounds released", esc(rounds_text(line))),
        ("eps spent", fmt("{s} of {t} (delta {d}) {m}", s=number(line.eps_spent, 3),
                         t=f"{line.eps_agg:g}", d=f"{line.delta:g}",
                         m=meter(line.eps_spent, line.eps_agg))),
        ("eps_local per round", esc(number(run.eps_local, 3))),
        ("Devices per round", esc(f"target {config.target_devices}, n_min "
                                  f"{config.min_devices}")),
        ("Code", esc(f"{config.codec}, {config.max_bits} bits, selection {config.selection}")),
        ("Started", esc(when(line.started))),
        ("Duration", esc(duration(line.seconds))),
    ]
    if line.failure:
        facts.append(("Error", fmt('<span class="error">{e}</span>', e=line.error)))
    elif line.error:  # the operator's cancel: what it is, not an error
        facts.append(("Cancel", esc(line.error)))
    if run.deny:
        # One element an item: an item may hold ", " (items with spaces: docs/datasets.md);
        # dir="auto" isolates each, so right-to-left items keep their order on the line.
        # (read against each other: сосоа, Cyrillic, beside cocoa showed as a second cocoa)
        facts.append(("Deny list", join((fmt('<code class="listed" dir="auto">{i}</code>',
                                             i=shown) for shown in printable_rows(
                                                 [(i, False) for i in run.deny])), " ")))
    items = join(fmt("<div><dt>{k}</dt><dd>{v}</dd></div>", k=k, v=v) for k, v in facts)
    return fmt('<dl class="facts">{items}</dl>', items=items)


def step_chip(step: Step) -> Html:
    details = []
    if step.devices is not None:
        details.append(f"{step.devices} answered" if step.key == "UNMASK"
                       else f"{step.devices} devices")
    if step.dropout:
        details.append(f"−{step.dropout:.1%}")
    if step.seconds is not None:
        details.append(duration(step.seconds))
    return fmt('<li class="step {status}" data-step="{key}" data-status="{status}">'
               '<span class="step-name">{label}</span><span class="step-detail">{detail}</span>'
               '</li>', status=step.status, key=step.key, label=step.label,
               detail=" · ".join(details) or "\u00a0")


def attempt_card(a: AttemptView) -> Html:
    charged = f" (charged at {a.charged})" if a.charged != a.contributors else ""
    figures = [f"{a.contributors} contributors{charged}, n_min {a.n_min}" if a.contributors
               else f"n_min {a.n_min}"]
    if a.kept is not None:
        figures.append(f"kept {a.kept}, finished {a.finished}")
    if a.threshold is not None:
        figures.append(f"threshold {number(a.threshold, 1)}")
    if a.expected_fp is not None:
        figures.append(f"false positives: expected {number(a.expected_fp, 2)}, "
                       f"certain {a.provable_fp}")
    if a.trimmed:
        figures.append(f"{a.trimmed} kept not queried next round")
    figures.append(duration(a.seconds))
    figure_html = join(((fmt('<span title="{t}">{f}</span>', t=FP_NOTE, f=f)
                         if f.startswith("false") else
                         fmt('<span class="trimmed" title="{t}">{f}</span>', t=TRIM_NOTE, f=f)
                         if f.endswith("not queried next round") else esc(f))
                        for f in figures), " · ")
    reason = fmt('<p class="reason">{r}</p>', r=a.reason) if a.reason else Html("")
    return fmt(
        '<article class="attempt {state}" data-round="{round}" data-attempt="{attempt}" '
        'data-state="{state}"><h3 title="round {round}, attempt {attempt}">'
        'Round {round}.{attempt} {badge}</h3>'
        '<ol class="steps">{steps}</ol><p class="figures">{figures}</p>{reason}</article>',
        state=a.state, round=a.round, attempt=a.attempt, badge=state_badge(a.state),
        steps=join(step_chip(s) for s in a.steps), figures=figure_html, reason=reason)


def timeline(run: RunDetail) -> Html:
    if not run.attempts:
        return Html('<p class="empty">No round has started yet.</p>')
    # (a round's "kept not queried" in words, what to change included: before, the dashboard
    # showed no trimmed count, which the API and fedhh admin status carry)
    trimmed = (fmt('<p class="note trimmed">Note: {n}.</p>', n=run.trim_note) if run.trim_note
               else Html(""))
    return fmt('<p class="legend">{note}</p>{trimmed}{cards}', note=ATTEMPT_NOTE,
               trimmed=trimmed, cards=join(attempt_card(a) for a in reversed(run.attempts)))


def spend_section(run: RunDetail) -> Html:
    s = run.spend
    rows = join(fmt('<tr><td>{label}</td><td>{n}</td><td>{eps}</td><td>{total}</td></tr>',
                    label=c.label, n=c.contributors, eps=number(c.epsilon, 3),
                    total=number(c.cumulative, 3)) for c in s.charges)
    return fmt(
        '{chart}<p class="legend"><span class="key bar"></span> this round alone '
        '<span class="key total"></span> composed total <span class="key target"></span> '
        'target eps_agg {target} at delta {delta}</p>'
        '<p class="method">Accountant: <strong>{method}</strong> ({description}); '
        'eps_local {local} per round, charged for at least n_min = {n_min} contributors.</p>'
        '<details><summary>Charges</summary><div class="scroll"><table><thead><tr>'
        '<th>Round</th><th>Contributors</th><th>eps alone</th><th>eps total</th></tr></thead>'
        '<tbody>{rows}</tbody></table></div></details>',
        chart=spend_chart(s), target=f"{s.eps_agg:g}", delta=f"{s.delta:g}", method=s.method,
        description=s.description, local=number(s.eps_local, 3), n_min=s.n_min, rows=rows)


def hits_table(run_id: str, hits: Sequence[Hit], cut: Sequence[Hit] = (),
               state: str = "done", released: int = 0, completion_note: str = "") -> Html:
    """The heavy hitters, then the heavy prefixes the completion rounds could not complete
    (listed apart, as GetResults and the console list them). An item is shown with what
    could reorder or hide text escaped (``fedhh.codec.shown.printable``: ``\u202eevil`` read
    "live"); ``data-item``, which the filter matches, keeps it exact (``filter_copy``), and a
    cut prefix's the characters it stands for (``Hit.text``).
    A run not ``done`` (``state``) lists what its ``released`` rounds found so far, which a
    line above the list says, as the consoles, the CSV's run_state and the JSON's state do
    (before, a failed or cancelled run's list read as a finished run's on the page).
    ``completion_note`` (``RunDetail.completion_note``) follows the cut prefixes, as the
    consoles print it after theirs (before, the page did not say it)."""
    what = {"pending": "has not started", "running": "is still running", "failed": "failed",
            "cancelled": "was cancelled"}.get(state, f"is {state}")
    rounds = f"{released} released round{'' if released == 1 else 's'}"
    if not hits and not cut:
        # (a failed or cancelled run finds nothing more: "yet" is for one that may)
        return Html('<p class="empty">No heavy hitter found yet.</p>') if state in (
            "pending", "running") else fmt('<p class="empty">No heavy hitter{end}.</p>',
                                           end="" if state == "done"
                                           else f": the run {what} after {rounds}")
    so_far = Html("") if state == "done" else fmt(
        '<p class="note so-far">The run {what}: these are what its {rounds} found so far, '
        'not a finished run\'s list.</p>', what=what, rounds=rounds)
    lost = (fmt('<p class="note completion">Note: {n}</p>', n=completion_note)
            if completion_note else Html(""))
    return fmt("{so_far}{table}{lost}", so_far=so_far, table=_hits_and_cut(hits, cut),
               lost=lost)


def _hits_and_cut(hits: Sequence[Hit], cut: Sequence[Hit]) -> Html:
    html = fmt('<p class="note">By the round that found them, then by estimate: estimates of '
               'different rounds are not comparable (a round counts the devices that chose the '
               'item among their items on its narrowing prefix list).</p>{rows}',
               rows=_hit_rows(hits, "heavy hitters", cut)) if hits else Html(
        '<p class="empty">No heavy hitter.</p>')
    if cut:
        html = fmt('{hits}<h3>Cut prefixes</h3><p class="note">Heavy prefixes the completion '
                   'rounds could not complete: each stands for every item starting so, and is '
                   'not counted as a heavy hitter.</p>{cut}', hits=html,
                   cut=_hit_rows(cut, "cut prefixes", hits))
    # (what a cut row's ⟨+N bits⟩ and \xNN are, in the consoles' words: before, the page
    # explained neither, and a row's \xe2 read as an escape of the item's own)
    marks = cut_marks_note(h.item for h in [*hits, *cut] if h.truncated)
    if marks:
        html = fmt('{html}<p class="note marks">In a cut row: {marks}.</p>', html=html,
                   marks=marks.removeprefix(", "))
    return html


def filter_copy(item: str) -> str:
    """``item`` as a heavy-hitter row's ``data-item`` carries it for the filter (static/app.js):
    the body of a JSON string, in which each character that is not printable
    (``str.isprintable``: the controls, NUL, ESC, DEL and C1 among them; the format characters,
    U+202E and the other bidirectional controls, the joiners; U+2028 and U+2029; surrogates,
    private-use and unassigned code points; every space but U+0020) is a ``\\uXXXX`` escape
    (a pair of them past U+FFFF) and the quote and the backslash are ``\\"`` and ``\\\\``.
    The script reads it back with ``JSON.parse``, so the filter matches the exact item; the
    page holds no raw control or bidirectional character. (Before, the attribute held the
    item raw: ``curl`` of the page printed ESC to the terminal, and the HTML parser read a NUL
    there as U+FFFD and a CR as LF, so that a filter for such an item did not match it.)"""
    if item.isprintable() and '"' not in item and "\\" not in item:
        return item
    return "".join(_JSON_ESCAPES.get(c, c) if c.isprintable() else _json_escape(c)
                   for c in item)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\"}


def _json_escape(c: str) -> str:
    code = ord(c)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # (JSON writes a character past the BMP as its UTF-16 surrogate pair)
    return f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}"


def _hit_rows(hits: Sequence[Hit], what: str, beside: Sequence[Hit] = ()) -> Html:
    """The rows of ``hits``, read against those of ``beside``, the other list on the page
    (``printable_rows``: a cut prefix сос… beside cocoa). The item is isolated (``<bdi>``)
    from the note after it in its cell: before, a right-to-left cut prefix's ``⟨+N bits⟩…``
    took the cell's direction and stood right of its letters, at their start, where it read
    as the item's beginning cut off."""
    rows = join(fmt(
        '<tr data-item="{item}"><td>{rank}</td><td class="item"><bdi>{shown}</bdi>{cut}{note}'
        '</td>'
        '<td>{estimate} ± {std}</td><td>{round}</td></tr>',
        rank=h.rank, item=filter_copy(h.text), shown=shown,
        estimate=number(h.estimate, 1),
        std=number(h.std, 1), round=h.round,
        # (and why it was not completed, as the consoles and the JSON download say)
        cut=fmt(' <span class="note">({what}{cause})</span>',
                what=prefix_words(h.bits, h.prefix_bytes),
                cause=f"; {h.cause}" if h.cause else "")
        if h.truncated else Html(""),
        # (a row standing for several cut prefixes of one text: its estimate is their sum)
        note=fmt(' <span class="note">({note})</span>', note=h.note) if h.note else Html(""))
        for h, shown in zip(hits, printable_rows([(h.item, h.truncated) for h in hits],
                                                 [(h.item, h.truncated) for h in beside]),
                            strict=True))
    return fmt('<div class="scroll"><table class="hits"><thead><tr><th>#</th><th>Item</th>'
               '<th>Estimate ± std</th><th>Round found</th></tr></thead><tbody>{rows}</tbody>'
               '</table></div><p class="count">{n} {what}</p>', rows=rows, n=len(hits),
               what=what)


def run_page(run: RunDetail) -> Html:
    q = quote(run.line.run_id)
    body = fmt(
        '<p class="crumbs"><a href="/">Runs</a> › {id}</p><h1>Run {id}</h1>{head}'
        '<h2>Rounds</h2>{timeline}<h2>Privacy spent</h2>{spend}'
        '<h2>Heavy hitters</h2><div class="tools"><label for="hh-filter">Filter</label>'
        '<input id="hh-filter" type="search" placeholder="item contains…" autocomplete="off"'
        ' maxlength="{longest}">'
        '<a id="hh-csv" href="/runs/{q}/heavy-hitters.csv" download>CSV</a>'
        '<a id="hh-json" href="/runs/{q}/heavy-hitters.json" download>JSON</a></div>{hits}',
        id=run.line.run_id, q=q, longest=FILTER_MAX_LENGTH,
        head=region("run-head", run_head(run)),
        timeline=region("timeline", timeline(run)), spend=region("spend", spend_section(run)),
        hits=region("hits", hits_table(run.line.run_id, run.hits, run.cut,
                                            run.line.state, run.line.released,
                                            run.completion_note)))
    return frame(f"Run {run.line.run_id}", body, nav="runs", live=f"/live/runs/{q}")


# ---- budgets ---------------------------------------------------------------------------------
def budgets_page(b: BudgetView) -> Html:
    labels = ("under 25%", "25–50%", "50–75%", "75–100%", "all of it")
    total = max(sum(b.shares), 1)
    chart = bars([(label, n / total, f"{n} devices") for label, n in zip(labels, b.shares,
                                                                          strict=True)])
    rows = join(fmt(
        '<tr><td>{id}</td><td class="label">{label}</td><td>{eps} {m}</td><td>{delta}</td>'
        '<td>{runs}</td><td>{last}</td></tr>',
        id=c.device_id, label=c.label, eps=number(c.eps, 3), m=meter(c.eps, b.eps),
        delta=f"{c.delta:.2e}", runs=c.runs, last=when(c.last_charged)) for c in b.top)
    more = (f"The {len(b.top)} most charged of {b.charged} devices."
            if b.charged > len(b.top) else "")
    table = fmt('<p class="legend">{more}</p><div class="scroll"><table class="devices">'
                '<thead><tr><th>Device</th>'
                '<th>Label</th><th>eps spent</th><th>delta spent</th><th>Runs</th>'
                '<th>Last charged</th></tr></thead><tbody>{rows}</tbody></table></div>',
                more=more, rows=rows) if b.top else \
        Html('<p class="empty">No device has been charged in this period.</p>')
    body = fmt(
        '<h1>Lifetime budgets</h1><p>Each device may spend at most eps {eps} and delta '
        '{delta} over any {days} days; a device is charged each run\'s target once when it '
        'joins one of its cohorts (basic composition), or what the run spent where it ended '
        'above its target, and a device that cannot pay is not admitted. The charges are '
        'added exactly, as the binary numbers they are stored as: 0.1 is '
        '0.1000000000000000055…, so ten runs of 0.1 are above a budget of 1 and the tenth '
        'is refused.</p><dl class="facts"><div><dt>Enrolled devices</dt><dd>{enrolled}</dd></div>'
        '<div><dt>Charged in the period</dt><dd>{charged}</dd></div>'
        '<div><dt>Budget used up</dt><dd>{exhausted}</dd></div></dl>'
        '<h2>Share of the budget used</h2>{chart}<p class="legend">The larger of the shares '
        'of eps and of delta.</p><h2>Most charged devices</h2>{table}',
        eps=f"{b.eps:g}", delta=f"{b.delta:g}", days=f"{b.period_days:g}",
        enrolled=b.enrolled, charged=b.charged,
        exhausted=b.exhausted, chart=chart, table=table)
    return frame("Budgets", body, nav="budgets")


# ---- fleet -----------------------------------------------------------------------------------
def fleet_counts(f: FleetView) -> Html:
    c = f.counts
    facts = [("Enrolled devices", str(c.devices)),
             ("Checked in now", str(f.checked_in)),
             ("Activity", f.activity),
             ("Enrollment tokens", f"{c.tokens_used} of {c.tokens} used, "
                                   f"{c.tokens_expired} expired unused"),
             ("First enrolled", when(c.first_enrolled)),
             ("Last enrolled", when(c.last_enrolled))]
    return fmt('<dl class="facts">{items}</dl>',
               items=join(fmt("<div><dt>{k}</dt><dd>{v}</dd></div>", k=k, v=v)
                          for k, v in facts))


def fleet_dropout(f: FleetView) -> Html:
    if not any(d.of for d in f.dropout):
        return Html('<p class="empty">No secure-aggregation stage has closed yet.</p>')
    chart = bars([(STAGE_LABELS[d.stage], d.rate if d.of else 0.0,
                   f"{d.rate:.1%} ({d.missing} of {d.of} devices, over {d.attempts} attempt"
                   f"{'s' if d.attempts != 1 else ''})" if d.of else "–")
                  for d in f.dropout])
    head = join(fmt("<th>{s}</th>", s=STAGE_LABELS[stage]) for stage in STAGES)
    rows = join(fmt('<tr><td><a href="/runs/{q}">{run}</a> {round}.{attempt}</td>'
                    '<td>{state}</td><td>{cohort}</td>{cells}</tr>',
                    q=quote(a.run_id), run=a.run_id, round=a.round, attempt=a.attempt,
                    state=state_badge(a.state), cohort=a.cohort if a.cohort is not None else "–",
                    cells=join(_stage_cell(s) for s in a.steps if s.key in STAGES))
                for a in f.attempts)
    return fmt('{chart}<p class="legend">Share of the previous step\'s devices lost at each '
               'stage, pooled over the finished attempts among the {n} latest (each device '
               'counted once per attempt it was in; the attempt under way joins when it ends). '
               'The aggregator closes the unmask stage once every mask can be removed, so its '
               'count is the answers it needed, not a dropout.</p><div class="scroll">'
               '<table class="dropout"><thead><tr><th>Attempt</th><th>State</th><th>Cohort</th>'
               '{head}</tr></thead><tbody>{rows}</tbody></table></div>',
               chart=chart, n=len(f.attempts), head=head, rows=rows)


def _stage_cell(step: Step) -> Html:
    if step.devices is None:
        return Html("<td>–</td>")
    lost = f" (−{step.dropout:.1%})" if step.dropout else ""
    return fmt("<td>{n}{lost}</td>", n=step.devices, lost=lost)


def fleet_enrollments(f: FleetView) -> Html:
    if not f.enrollments:
        return Html('<p class="empty">No device has enrolled yet.</p>')
    rows = join(fmt('<tr><td>{id}</td><td class="label">{label}</td><td>{at}</td></tr>',
                    id=e.device_id, label=e.label, at=when(e.enrolled_at))
                for e in f.enrollments)
    return fmt('<div class="scroll"><table class="enrollments"><thead><tr><th>Device</th>'
               '<th>Label</th><th>Enrolled</th></tr></thead><tbody>{rows}</tbody></table>'
               '</div>', rows=rows)


def fleet_page(f: FleetView) -> Html:
    body = fmt('<h1>Fleet</h1>{counts}<h2>Dropout by stage</h2>{dropout}'
               '<h2>Latest enrollments</h2>{enrollments}',
               counts=region("fleet-counts", fleet_counts(f)),
               dropout=region("dropout", fleet_dropout(f)),
               enrollments=region("enrollments", fleet_enrollments(f)))
    return frame("Fleet", body, nav="fleet", live="/live/fleet")


def not_found(what: str, title: str = "Not found") -> Html:
    return frame(title, fmt('<h1>{t}</h1><p>{w}</p><p><a href="/">All runs</a></p>',
                            t=title, w=what), nav="runs")
