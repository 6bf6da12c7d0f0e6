"""`fedhh simulate`: a whole discovery over a simulated population, exactly.

Shows the progress of every long step on stderr when it is a terminal (building the dataset on
first use, checking it, its ground truth, the rounds) and prints a summary; ``--json PATH``
writes machine-readable results with the keys ``heavy_hitters`` (list of {"item", "estimate",
"std", "run", "round", "code", "ended", "truncated"}; ``run``, 2 for the second of --two-runs,
else 1; ``std``, the estimate's standard deviation at its round's randomizer and contributors,
null for a mechanism without one; a truncated item, cut at the code's width, with ``bits``,
``prefix_bytes`` (the items' first bytes it holds), ``starting_so`` (the data's items that
begin with them: ``items``, ``bytes_more``, ``most_held``) and ``cause`` as a cut prefix's),
``cut_prefixes`` (the same, for heavy prefixes the rounds
could not complete, each with its ``cause``: ``no rounds left``, ``lost in round N``, ``the
codes' limit, 4,096 bits``, or the privacy budget when it fits no completion round more:
``no completion round in the privacy budget``, ``no rounds left; no more in the privacy
budget``), ``earlier_runs`` (the same, for what the first run of
--two-runs found), ``deny_list`` (as given),
``past_the_codes`` (the dataset's items longer than the run's codes, which the warning before
the first round names: ``codec``, ``bits``, ``items``, ``users``, the share of the users
holding one, and ``heaviest``, the 20 most held, each with ``unweighted`` and ``needs_bits``,
its whole code's, null past 4,096),
``deny_list_cut`` (its items longer than the codes, each with the dataset's items it also
denies: ``also_denies``, each's ``item`` and ``users_holding``; ``needs_bits``, its whole
code's, null past 4,096), ``metrics``,
``rounds`` (per-round diagnostics; ``trimmed``: the prefixes it kept that the next round's
segment left out), ``trimmed_prefixes`` (their total) and ``trimmed_note`` (what the summary
says of them, or null), ``completion_note`` (the note on prefixes lost in the completion
rounds, or ""), ``privacy``, ``config``, ``dataset`` and ``timings``;
``--plot PATH`` draws the paper's marginal discovered-frequency plot.

The heavy hitters are listed by the round that found them, then by estimate: estimates of
different rounds are not comparable. A round's estimate counts the devices that chose the item
that round, and each device chooses among its items on that round's prefix list, which narrows
from round to round, so the same item would count higher in a later round. An item that does
not end within --max-bits is completed by the completion rounds (--completion-rounds); a
prefix still unended after them is shown cut: its readable text, the bytes of a character it
stops inside as \\xNN, the bits it holds of a codeword it stops inside (⟨+3 bits⟩; ⟨+0 bits⟩
where it ends on a whole codeword but a token could have run on across that point), then …
(docs/codecs.md).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from fedhh.cli import options
from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.codec.codec import MAX_SUPPORTED_BITS
from fedhh.codec.shown import (
    columns,
    cut_marks_note,
    fitted_rows,
    isolated,
    message_text,
    printable,
    printable_rows,
    rjust,
)
from fedhh.config import MAX_ROUNDS, Mode, RunConfig
from fedhh.config.flags import add_run_arguments, config_from_args, given_text
from fedhh.data.long_items import past_the_codes, starting_so
from fedhh.errors import ConfigError, PrivacyError
from fedhh.metrics import TOP_K, held_by_some_user
from fedhh.server.causes import (
    completion_thresholds,
    cut_cause,
    first_past_devices,
    lost_in_completion_note,
    rounds_reach,
    unreachable_completion_note,
    weight_one_completes,
    weight_one_reach,
)
from fedhh.server.segment import trim_note
from fedhh.simulation.runner import (
    EPS_LOCAL_FITS,
    SimulationResult,
    check_discoverable,
    eps_local_refusal,
    prepare,
    simulate,
)

DEFAULT_DATASET = "synthetic-reddit"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate", help="run a discovery over a simulated population",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", default=DEFAULT_DATASET, metavar="PATH_OR_NAME",
                   help=f"dataset name or path (default {DEFAULT_DATASET})")
    add_run_arguments(p, Mode.SIMULATION)
    p.add_argument("--json", metavar="PATH",
                   help="write the results as JSON (-: to standard output, without the summary)")
    p.add_argument("--plot", metavar="PATH", help="write the marginal discovered-frequency plot")
    p.add_argument("--top", type=options.non_negative_int, default=20,
                   help="heavy hitters to list on the terminal (default 20; 0: the summary "
                        "without the list)")
    p.add_argument("--quiet", action="store_true", help="no progress meters, no summary")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fedhh.data.truth import ground_truth
    from fedhh.experiments.populations import resolve

    config = config_from_args(args, Mode.SIMULATION)
    inputs = {"--dataset": args.dataset, "--deny-list": args.deny_list,
              "--codec": given_text(args, "codec")}
    options.check_output("--json", args.json, inputs=inputs)
    options.check_output("--plot", args.plot, options.PLOT_SUFFIXES, inputs)
    # Meters on stderr for every long step, only on a terminal and never with --quiet.
    progress = not args.quiet
    # (also the utility studies' populations by name, docs/utility.md)
    dataset = resolve(args.dataset, progress=progress)
    check_discoverable(dataset, f"--dataset {args.dataset}")
    warn_deadline(config, "fedhh simulate")
    # (the run's own codes: prepare drops the completion rounds too few users cannot budget)
    prepared = prepare(config, dataset.num_users)
    planned = prepared.config
    solved = prepared.privacy.get("eps_local")
    solved = float(solved) if isinstance(solved, int | float) else None
    # (every user reports in every round of a simulation)
    reach = (rounds_reach(planned, solved, dataset.num_users, Mode.SIMULATION)
             if planned.completion() and solved is not None else None)
    past = past_the_codes(dataset, Codec.from_spec(planned.codec, reach or planned.code_bits(
        Mode.SIMULATION)), PAST_LISTED, deny=tuple(config.deny_items()))

    def solve(wider: RunConfig) -> float | None:
        return _eps_local(wider, dataset.num_users)

    warn_past_codes(past, planned, Mode.SIMULATION, "fedhh simulate", config, solve, reach)
    if reach is not None and solved is not None:
        warn_unreachable_completions(dataset, planned, dataset.num_users, dataset.num_users,
                                     solved, Mode.SIMULATION, "fedhh simulate", solve)
    truth = None if config.single_item else ground_truth(dataset, progress=progress)
    result = simulate(dataset, config, truth, show_progress=progress, prepared=prepared)
    weight_one = None if solved is None else weight_one_helps(
        dataset, planned, dataset.num_users, dataset.num_users, solved, Mode.SIMULATION, solve)
    payload = result_payload(result, config, dataset.summary(progress), weight_one)
    add_starting_so(payload, result, config, dataset.vocabulary,
                    None if truth is None else truth.unweighted)
    payload["past_the_codes"] = past
    warn_over_target(payload["privacy"])
    warn_cut_deny(payload["deny_list_cut"], blocker=config.completion_blocker())
    warn_deny_twins(config.deny_items(), dataset.vocabulary,
                    None if truth is None else truth.unweighted)
    if args.json:
        # Items as they are (UTF-8, the file's encoding), not as \ud83d\ude02 escapes; standard
        # output keeps the escapes, whatever its encoding.
        text = json.dumps(payload, indent=2, default=_jsonable,
                          ensure_ascii=args.json == options.STDOUT)
        options.write_output("--json", args.json, terminal_safe_json(text) + "\n")
    if args.plot:
        write_plot(result, config, args.plot)
    if not args.quiet and args.json != options.STDOUT:  # (standard output holds the JSON)
        print_summary(payload, args.top, config.completion_blocker())
        # (before, nothing said where --json and --plot went, as `data warm-start` says)
        written = [f"{path} ({option})" for option, path in (("--json", args.json),
                                                             ("--plot", args.plot)) if path]
        if written:
            print(f"wrote {' and '.join(written)}")
    return 0


# What JSON writes raw with ensure_ascii=False, and a terminal acts on: the C1 controls (U+0085,
# CSI U+009B: ESC's 8-bit forms, which xterm and others obey), U+2028 and U+2029, and the bidi
# embeddings, overrides and isolates (U+202E reverses the rest of the line).
_ACTED_ON = re.compile("[\x80-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe_json(text: str) -> str:
    """``text``, JSON written with ensure_ascii=False, with each character a terminal acts on
    (``_ACTED_ON``) as its ``\\uXXXX`` escape: the same JSON values, items exact, but ``cat
    out.json`` sends no control to the terminal (before, an item's U+009B was written raw, as
    ESC, a C0 control, never is: JSON escapes those). They occur in strings only, as the rest
    of the text is JSON's ASCII."""
    return _ACTED_ON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def warn_deadline(config: RunConfig, command: str, mode: Mode = Mode.SIMULATION) -> None:
    """Say on stderr (--quiet or not), before any round, when --rounds and --max-bits force a
    segment so long that a round after the first can query only a few of the prefixes the
    round before kept (``TreeConfig.deadline_warning``); before, the rest were dropped with no
    word (3 rounds over 48 bits at --dim-limit 65536: one prefix a round)."""
    if config.algorithm != "optprefixtree":
        return
    warning = config.tree(mode).deadline_warning(config.max_bits)
    if warning:
        print(f"{command}: warning: {warning}", file=sys.stderr, flush=True)


def _eps_local(config: RunConfig, users: int) -> float | None:
    """The main rounds' eps_local of ``config`` among ``users`` devices, None where not every
    round of it can be budgeted (or it solves none)."""
    try:
        prepared = prepare(config, users)
    except (ConfigError, PrivacyError):
        return None
    eps = prepared.privacy.get("eps_local")
    if prepared.config.completion() < config.completion() or not isinstance(eps, int | float):
        return None
    return float(eps)


PAST_LISTED = 20  # (the most held items past the run's codes --json lists)
PAST_NAMED = 3  # (the warning names so many of them)
PAST_COLUMNS_MAX = 40  # (each of them, in the warning)


def warn_past_codes(past: dict[str, Any], run: RunConfig, mode: Mode, program: str,
                    asked: RunConfig | None = None,
                    eps_local: Callable[[RunConfig], float | None] | None = None,
                    reach: int | None = None) -> None:
    """Say on stderr (--quiet or not), before any round, how many of the dataset's items are
    longer than the run's codes (``past``: ``fedhh.data.long_items.past_the_codes`` at
    ``run``'s ``code_bits``), held by what share of the users, and the most held, which the run
    can find only cut; then what reaches the named ones whole and at what cost
    (``_past_reach``). ``run`` is the configuration run, ``asked`` the one given (the completion
    rounds the budget could not fit dropped from ``run``); ``eps_local``, the main rounds'
    eps_local of a configuration (None: it cannot be budgeted whole), for the cost. ``reach``:
    where a completion round's threshold is above the devices, the bits the rounds before it
    reach (``rounds_reach``), which ``past`` counts past (before, it counted past the codes'
    whole width: 112 bits where the 300 devices' rounds reach 80, the note beside it said).
    Before, a user learned only from the run's output that the URLs and e-mail addresses of a
    dataset came back cut, "the codes' limit", their privacy budget spent."""
    if not past["items"]:
        return
    named = past["heaviest"][:PAST_NAMED]
    fitted = fitted_rows([(row["item"], False) for row in named], PAST_COLUMNS_MAX)
    shown = printable_rows(fitted)
    alike = shown_alike([row["item"] for row in named], fitted)
    items = past["items"]
    codes = (f"this run's codes ({past['bits']:,} bits)" if reach is None else
             f"the {past['bits']:,} bits of code this run's rounds complete (of its codes' "
             f"{run.code_bits(mode):,}; the note below says why)")
    print(f"{program}: warning: {items:,} {_plural(items, 'item')} held by "
          f"{past['users']:.1%} of the users {'is' if items == 1 else 'are'} longer than "
          f"{codes}: the run can find "
          f"{'it' if items == 1 else 'them'} only cut, as the prefix of every item starting "
          "so; the most held: "
          + ", ".join(f"{isolated(item)} ({row['unweighted']:.1%} of the users, "
                      + (f"{row['needs_bits']:,} bits" if row["needs_bits"] else
                         f"past {MAX_SUPPORTED_BITS:,} bits, the codes' limit") + ")"
                      for item, row in zip(shown, named, strict=True))
          + (f" ({alike} of them cut alike to {PAST_COLUMNS_MAX} columns here, different items)"
             if alike else "")
          + ("" if items <= len(named) or program != "fedhh simulate" else
             f" (--json's past_the_codes lists the {len(past['heaviest']):,} most held)")
          + ". " + (_past_reach(named, run, mode, asked, eps_local) if reach is None else
                    "More completion rounds complete nothing more here (the note below)")
          , file=sys.stderr, flush=True)


def warn_unreachable_completions(dataset: Any, planned: RunConfig, devices: int,
                                 cohort: int, eps_local: float, mode: Mode, program: str,
                                 eps_local_of: Callable[[RunConfig], float | None] | None = None
                                 ) -> None:
    """Say on stderr, before any round, that the completion rounds from some one on have
    thresholds above the ``cohort`` a round counts (``unreachable_completion_note``), where
    the dataset's first ``devices`` users hold items longer than the rounds before it reach.
    Before, the warning on items past the codes counted those rounds in the codes' width: 300
    devices of URLs and e-mail addresses were told of 112-bit codes, and their items of 80 to
    112 bits came back cut at rounds whose threshold (~490 devices) no count reaches.
    ``eps_local_of``: the main rounds' eps_local of a configuration, to tell whether
    --completion-weight 1 would complete more of the items (``weight_one_reach``)."""
    thresholds = completion_thresholds(planned, eps_local, cohort, mode)
    first = first_past_devices(thresholds, cohort)
    if first is None:
        return
    deny = tuple(planned.deny_items())

    def past(bits: int) -> int:
        """How many of the dataset's items are longer than ``bits`` of code."""
        codec = Codec.from_spec(planned.codec, bits)
        return int(past_the_codes(dataset, codec, PAST_NAMED, devices, deny)["items"])

    reach = planned.code_bits(mode, completions=first - 1)
    cut = past(reach)
    if not cut:
        return
    heavier = (None if eps_local_of is None else
               weight_one_reach(planned, eps_local_of, cohort, mode))
    # (suggested only where it completes some item more: 300 devices reach 112 bits at
    # weight 1, which no URL of theirs fits)
    helped = cut - past(heavier) if heavier is not None and heavier > reach else 0
    note = unreachable_completion_note(planned, thresholds, cohort, mode,
                                       (heavier, helped) if helped and heavier else None)
    print(f"{program}: note: {note}.", file=sys.stderr, flush=True)


def weight_one_helps(dataset: Any, planned: RunConfig, devices: int, cohort: int,
                     eps_local: float, mode: Mode,
                     eps_local_of: Callable[[RunConfig], float | None]) -> Callable[[], bool]:
    """``lost_in_completion_note``'s ``weight_one``: whether --completion-weight 1 completes
    some of the ``PAST_LISTED`` items the dataset's first ``devices`` users hold most that are
    longer than ``planned``'s main rounds reach (``weight_one_completes``, over ``cohort``
    reports), asked after the run, only where the note is said (a solve: 0.5-2 s)."""
    def helps() -> bool:
        main = Codec.from_spec(planned.codec, planned.code_bits(mode, completions=0))
        past = past_the_codes(dataset, main, PAST_LISTED, devices, tuple(planned.deny_items()))
        held = min(devices, dataset.num_users)
        return weight_one_completes(planned, eps_local, eps_local_of, cohort, mode, [
            (row["needs_bits"], round(row["unweighted"] * held)) for row in past["heaviest"]])

    return helps


def _past_reach(named: list[dict[str, Any]], run: RunConfig, mode: Mode,
                asked: RunConfig | None,
                eps_local: Callable[[RunConfig], float | None] | None) -> str:
    """What widens the codes to the longest of the ``named`` items that fit the codes' limit,
    with the options of ``run``'s command and their cost in privacy: more completion rounds
    (each adds a round's floor(log2 P) bits, ``RunConfig.code_bits``, and lowers every round's
    eps_local a little), or where a setting rules them out, --max-bits with as many more
    --rounds (a round covers at most that many bits); the cost is the main rounds' eps_local
    there against the run's (``eps_local``). The run is never changed here."""
    per_round = run.resolved_dim_limit(mode).bit_length() - 1
    wanted = max((row["needs_bits"] for row in named if row["needs_bits"]), default=None)
    if wanted is None:
        return "No setting reaches them whole: docs/codecs.md"
    blocker = run.completion_blocker()
    if blocker is not None:
        step = run.segment_bits or per_round
        rounds = max(run.rounds, -(-wanted // step))
        if rounds > MAX_ROUNDS:
            # (--rounds past it is refused: only more bits a round help)
            return (f"That takes {rounds:,} rounds of {step} {_plural(step, 'bit')} (" + (
                "--segment-bits" if run.segment_bits else "log2(--dim-limit)") + f"), more "
                f"than the {MAX_ROUNDS:,} a run can have: a larger --dim-limit "
                + ("with longer --segment-bits " if run.segment_bits else "")
                + "covers more bits a round. docs/codecs.md")
        return (f"--max-bits {wanted:,} with --rounds {rounds:,} reach the items named whole "
                "(a round covers " + (f"{step} bits, --segment-bits" if run.segment_bits else
                                   f"at most log2(--dim-limit) = {step} bits") + "; completion "
                f"rounds do not run with {blocker}); the cost: "
                + _cost(run, replace(run, max_bits=wanted, rounds=rounds), eps_local,
                        "the budget split among more rounds") + ". docs/codecs.md")
    if asked is not None and run.completion() < asked.completion():
        # (at a given eps_local, a round is dropped as eps_local + ln(its weight) <= 0: devices
        # and --eps-agg do not move that)
        fits = EPS_LOCAL_FITS if run.eps_local is not None else "more devices or a larger --eps-agg"
        return (f"Only {run.completion():,} of the {asked.completion():,} completion rounds "
                f"asked fit the privacy budget here: {fits} fits more (each adds "
                f"{per_round} bits). docs/codecs.md")
    more = run.completion() + -(-(wanted - run.code_bits(mode)) // per_round)
    if more > MAX_ROUNDS:
        return (f"That takes {more:,} completion rounds at log2(--dim-limit) = {per_round} bits "
                f"each, more than the {MAX_ROUNDS:,} a run can have: a larger --dim-limit "
                "adds more bits a round. docs/codecs.md")
    return (f"--completion-rounds {more:,} reach the items named whole (each adds "
            f"log2(--dim-limit) = {per_round} bits, a larger --dim-limit more a round); the cost: "
            + _cost(run, replace(run, completion_rounds=more), eps_local,
                    "each planned round lowers every round's eps_local a little")
            + ". docs/codecs.md")


def _cost(run: RunConfig, wider: RunConfig, eps_local: Callable[[RunConfig], float | None]
          | None, otherwise: str) -> str:
    """The main rounds' eps_local at ``wider`` against ``run``'s, or ``otherwise`` when it
    cannot be figured (a fixed --eps-local: none is solved)."""
    if eps_local is None or run.eps_local is not None:
        return otherwise
    now, then = eps_local(run), eps_local(wider)
    if now is None:
        return otherwise
    if then is None:
        return "more than the privacy budget can fit among these devices"
    return f"the main rounds' eps_local {now:.3f} falls to {then:.3f}"


def warn_over_target(privacy: dict[str, Any]) -> None:
    """Say on stderr (--quiet or not) when an explicit --eps-local spends more than --eps-agg:
    the simulation runs it, for experiments that set eps_local themselves, and reports what it
    spends, where the coordinator refuses such a run ("plan exceeds the budget")."""
    target = privacy.get("eps_agg_target")
    if target is not None and privacy["eps_agg"] > target * (1 + 1e-9):
        print(f"fedhh simulate: warning: --eps-local {_fmt(privacy['eps_local'])} spends "
              f"eps_agg {_fmt(privacy['eps_agg'])} over the run, above the --eps-agg target "
              f"{_fmt(target)} (a coordinator would refuse it); the figures are for the "
              f"eps_agg spent", file=sys.stderr)


def warn_cut_deny(cut: list[dict[str, Any]], shown: int = 5, lines: int = 10,
                  blocker: str | None = None) -> None:
    """Say on stderr (--quiet or not) which deny-list items are longer than the codes: a
    device compares codes, so each denies every item starting with the same bits, and the
    dataset's items it so denies besides itself are named (their weight went unsaid: denying
    one long URL dropped another held by 35% of the users). At most ``lines`` of them, those
    that deny the most held other items first; a last line counts the rest. ``blocker``: the
    setting that rules completion rounds out (`RunConfig.completion_blocker`), named as the
    truncation note names it; then only --max-bits widens the codes (before, a baseline's
    warning offered more --completion-rounds or a larger --dim-limit, which change nothing)."""
    if blocker is not None:
        reach = (f"--max-bits, with as many more --rounds (completion rounds do not run with "
                 f"{blocker}): docs/codecs.md")
    else:
        reach = ("more --completion-rounds or a larger --dim-limit; without completion rounds, "
                 "--max-bits: docs/codecs.md")
    def weight(entry: dict[str, Any]) -> float:
        return sum(other["users_holding"] or 1e-9 for other in entry["also_denies"])

    ordered = sorted(cut, key=weight, reverse=True)
    if len(ordered) > lines:
        rest = ordered[lines:]
        ordered = ordered[:lines]
    else:
        rest = []
    for entry in ordered:
        also = entry["also_denies"]
        # (each name isolated: a right-to-left one took the share after it into its direction,
        # "(40.0%" shown before the item's letters, and two side by side swapped)
        names = ", ".join(
            isolated(printable(other["item"]))
            + ("" if other["users_holding"] is None
               else f" ({other['users_holding']:.1%} of the users)")
            for other in also[:shown]) + (f" and {len(also) - shown:,} more" if len(also) > shown
                                          else "")
        print(f"fedhh simulate: warning: deny-list item {printable(entry['item'])} is longer "
              f"than the codes ({entry['bits']} bits), so it denies every item whose code "
              f"starts with the same {entry['bits']} bits"
              + (f", here also {names}" if also else " (no other item of the dataset)")
              + (f"; its code is {entry['needs_bits']} bits, which wider codes reach ({reach})"
                 if entry["needs_bits"] else
                 f"; its code is longer than {MAX_SUPPORTED_BITS:,} bits, the codes' limit"),
              file=sys.stderr)
    if rest:
        print(f"fedhh simulate: warning: {len(rest):,} more deny-list items are longer than "
              f"the codes, {sum(bool(e['also_denies']) for e in rest):,} of them denying other "
              "items of the dataset too (--json's deny_list_cut lists them all)",
              file=sys.stderr)


BOM = "\ufeff"  # (a byte-order mark: U+FEFF, the zero-width no-break space)


_CASE = "case"  # (warn_deny_twins: a twin the same but for case, width or invisibles)
# Default-ignorable characters that are not format characters (Unicode's
# DerivedCoreProperties.txt): the combining grapheme joiner, the Hangul fillers, the Khmer
# inherent vowels, the variation selectors.
_IGNORABLE_MARKS = frozenset(map(chr, (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0,
                                       *range(0x180B, 0x1810), *range(0xFE00, 0xFE10),
                                       *range(0xE0100, 0xE01F0))))
_TAGS = range(0xE0000, 0xE0080)  # (format characters, but they draw a subdivision flag)


def _loose(text: str) -> str:
    """``text`` as Unicode's NFKC_Casefold maps it, near enough (UAX #44; the Unicode Standard,
    section 3.13, D145's compatibility caseless match, less the default-ignorable characters):
    case folded, compatibility forms replaced (fullwidth ``ａ``, ligature ``ﬁ``, the no-break
    and ideographic spaces), and the invisible characters dropped (U+200B, U+2060, U+FEFF,
    the joiners and the variation selectors; not the tags of a flag), and whitespace at either
    end dropped, as a cell exported from a spreadsheet or a form carries it (``Paris `` and
    ``Paris``: before, told apart in silence; an item of whitespace alone keeps it). Two items
    with one ``_loose`` form read alike, or nearly."""
    if text.isascii():
        folded = text.lower()
    else:
        folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
        if not folded.isprintable() or not _IGNORABLE_MARKS.isdisjoint(folded):
            # (every format character is unprintable: else nothing to drop)
            folded = "".join(c for c in folded if not (
                (unicodedata.category(c) == "Cf" and ord(c) not in _TAGS)
                or c in _IGNORABLE_MARKS))
    return folded.strip() or folded


def warn_deny_twins(items: list[str], vocabulary: Sequence[str], holding: Any = None,
                    lines: int = 10, program: str = "fedhh simulate") -> None:
    """Say on stderr which deny-list items have another Unicode normalization form (NFC or
    NFD: ``café`` with é, or with e and U+0301) that is an item of the dataset and not denied,
    whether or not a user holds the listed form: a deny list matches items exactly
    (docs/datasets.md), so that form is not denied (before, nothing said so: a deny list
    written NFC let the data's NFD item through, and said nothing where the data held both).
    Likewise a deny-list item that begins with U+FEFF, as a list joined after another with
    ``cat`` has its mark at the start of a line (the readers keep it, an item's own), while
    the rest of it is an item (before, ``\\ufeffa`` denied nothing and ``a`` was found).
    And one whose only differences from items of the dataset are of case, compatibility forms
    or invisible characters (``_loose``: ``Paris`` and ``paris``, ``STRASSE`` and ``straße``,
    ``ΟΔΟΣ`` and ``οδος``, ``İstanbul`` and what ``--lowercase`` makes of it; ``new\\xa0york``
    and ``new york``, ``x\\u200b`` and ``x``, as a list copied from a web page holds them):
    before, a deny list written in the data's original case let the items of a
    ``--lowercase`` import through, unsaid.
    ``holding``: the share of the users holding each vocabulary item, or None. At most
    ``lines`` lines, then one counting the rest; ``program`` names the command (`fedhh up`
    warns so too)."""
    if not items:
        return
    twins: dict[str, list[tuple[str, str]]] = {}
    for item in items:
        for form in ("NFC", "NFD"):
            other = unicodedata.normalize(form, item)
            if other != item:
                twins.setdefault(other, []).append((item, form))
        if item.startswith(BOM) and item.lstrip(BOM):
            # (a list joined after another with cat: its line holds the file's mark)
            twins.setdefault(item.lstrip(BOM), []).append((item, BOM))
    folded: dict[str, list[str]] = {}
    for item in items:
        folded.setdefault(_loose(item), []).append(item)
    denied = set(items)
    twins_folded = {_loose(other) for other in twins}
    held: dict[str, int] = {}
    cased: list[tuple[str, str]] = []  # (a deny-list item, an entry the same but for case)
    # (the entries to look at picked first, in one pass that does no more than test each)
    for index in [i for i, fold in enumerate(map(_loose, vocabulary)) if fold in folded
                  or fold in twins_folded]:
        entry = vocabulary[index]
        if entry in denied:
            held[entry] = index
        elif (same := folded.get(_loose(entry))) is not None:
            held[entry] = index
            cased += [(item, entry) for item in same]
        elif entry in twins:
            held[entry] = index
    # (an item's other normalization form is named whether or not the item is held: where the
    # data holds both, as devices of two systems write them, the list denied the one and let
    # the other through unsaid)
    found = [(item, form, other) for other, of in twins.items() if other in held
             and other not in denied for item, form in of if item not in held or form != BOM]
    paired = {(item, other) for item, _, other in found}
    found += [(item, _CASE, entry) for item, entry in cased
              if item not in held and (item, entry) not in paired]
    for item, form, other in found[:lines]:
        share = ("" if holding is None
                 else f", held by {float(holding[held[other]]):.1%} of the users")
        if form == _CASE:
            inner, held_inner = item.strip(), other.strip()
            what = ("" if inner == held_inner else "case" if inner.casefold() ==
                    held_inner.casefold() and all(unicodedata.is_normalized("NFKC", text)
                                                  for text in (inner, held_inner)) else
                    "case, compatibility forms (width, ligatures, spaces) or invisible "
                    "characters")
            if (inner, held_inner) != (item, other):
                what += (", and " if "," in what else " and " if what else ""
                         ) + "whitespace at either end"
            print(f"{program}: warning: deny-list item {printable(item)} is no user's "
                  f"item, but {printable(other)}, the same but for {what}, is an item of "
                  f"the dataset{share}, and is not denied: a deny list matches items exactly "
                  "(docs/datasets.md); list that form too", file=sys.stderr)
            continue
        if form == BOM:
            print(f"{program}: warning: deny-list item {printable(item)} is no user's "
                  f"item, but {printable(other)}, the same without the byte-order mark "
                  f"(U+FEFF) it begins with, is an item of the dataset{share}, and is not "
                  "denied: a deny list matches items exactly (docs/datasets.md); delete the "
                  "mark (a file joined after another, with cat, brings its own there)",
                  file=sys.stderr)
            continue
        told = ("denies that form alone: its " if item in held
                else "is no user's item, but its ")
        print(f"{program}: warning: deny-list item {printable(item)} {told}{form} form "
              f"{printable(other)} is an item of the dataset{share}, and is not denied: a deny "
              "list matches items exactly (docs/datasets.md); list that form too",
              file=sys.stderr)
    if len(found) > lines:
        print(f"{program}: warning: {len(found) - lines:,} more deny-list items leave an "
              "item of the dataset undenied: their other normalization form (or, where no user "
              "holds them, the same but for case, width, invisible characters or whitespace at "
              "either end, or without a leading byte-order mark)",
              file=sys.stderr)


def write_plot(result: SimulationResult, config: RunConfig, path: str) -> None:
    from fedhh.plot import plot_marginal

    if result.truth is None:
        raise ConfigError("--plot needs the dataset's ground truth")
    plot_marginal([(config_label(config), result.output_codes)], result.truth, path)


def config_label(config: RunConfig) -> str:
    return {"optprefixtree": "OptPrefixTree", "triehh": "TrieHH", "triehh++": "TrieHH++",
            "central-laplace": "central DP", "central-gaussian": "central DP",
            }[config.algorithm]


def result_payload(result: SimulationResult, config: RunConfig, dataset_summary: dict,
                   weight_one: Callable[[], bool] | None = None) -> dict[str, Any]:
    """``result`` as JSON, each cut row with its cause, and the notes after the lists
    (``weight_one``: ``completion_weight_note``'s)."""
    payload = result.to_dict()
    last = last_round(payload["rounds"])
    for entry, hitter in zip(payload["cut_prefixes"], result.cut_prefixes, strict=True):
        entry["cause"] = cut_cause(hitter.round, hitter.bits, hitter.max_bits, last,
                                   result.ran_out)
    # (an item truncated at the code's width, as the baselines and runs without completion
    # rounds list among the heavy hitters, says why as a cut prefix does: before, only
    # OptPrefixTree's cut prefixes carried a cause)
    first = last_round(payload["rounds"], run=1)
    for key, hitters, end in (("heavy_hitters", result.heavy_hitters, last),
                              ("earlier_runs", result.earlier_runs, first)):
        for entry, hitter in zip(payload[key], hitters, strict=True):
            if hitter.truncated:
                entry["cause"] = cut_cause(hitter.round, hitter.bits, hitter.max_bits, end,
                                           result.ran_out)
    # (a listed item no user holds says so, in the summary's words: the simulation knows the
    # true counts; before, a noise-made item such as "duriauaty" was listed as any other)
    if result.truth is not None:
        for key, hitters in (("heavy_hitters", result.heavy_hitters),
                             ("earlier_runs", result.earlier_runs)):
            if not hitters:
                continue
            held = held_by_some_user(cw.from_ints([h.code for h in hitters],
                                                  hitters[0].max_bits), result.truth)
            for entry, one in zip(payload[key], held, strict=True):
                entry["false_positive"] = not bool(one)
    # (each row names its run, as it names its round, which counts from 1 in each run of
    # --two-runs: before, a row taken out of its list, or the lists joined, no longer said
    # which run found it)
    for key, run in (("heavy_hitters", config.runs), ("cut_prefixes", config.runs),
                     ("earlier_runs", 1)):
        for entry in payload[key]:
            entry["run"] = run
    payload["config"] = config.to_dict()
    payload["dataset"] = dataset_summary
    # (kept prefixes a round's segment left out: before, only each round's "trimmed" said so)
    payload["trimmed_prefixes"] = sum(int(r.get("trimmed", 0)) for r in payload["rounds"])
    payload["trimmed_note"] = trim_note(payload["rounds"],
                                        config.resolved_dim_limit(Mode.SIMULATION))
    # (the note the console prints after the lists, a field of the JSON: before, --json alone
    # said nothing of --completion-weight)
    # (and, when the budget fitted no completion round more and a row says so, its figures)
    budgeted = any(entry.get("cause") == result.ran_out for key in
                   ("heavy_hitters", "cut_prefixes", "earlier_runs") for entry in payload[key])
    payload["completion_note"] = " ".join(filter(None, (
        completion_weight_note(payload, weight_one), result.budget_note if budgeted else "")))
    return payload


def last_round(rounds: list[dict[str, Any]], run: int | None = None) -> int:
    """The last round ``run`` ran, by default the last run (its cut prefixes are the ones
    listed)."""
    if run is None:
        run = max((r["extra"].get("run", 1) for r in rounds), default=1)
    return max((r["round"] for r in rounds if r["extra"].get("run", 1) == run), default=0)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "value"):
        return value.value
    return str(value)


def print_summary(payload: dict[str, Any], top: int, blocker: str | None = None) -> None:
    """The console summary of ``payload``; ``blocker``: the setting that ruled the completion
    rounds out (`RunConfig.completion_blocker`), named where an item came back truncated, as
    is a budget that fitted none of them (the privacy figures' ``completion_rounds``)."""
    hint = _truncation_hint(payload, blocker)
    ds = payload["dataset"]
    users, items = ds["users"], ds["vocabulary"]
    # (a dataset folder's meta.json names it: a stranger's words, escaped as a message's are)
    print(f"dataset {message_text(ds['name'])}: {users:,} user{'' if users == 1 else 's'}, "
          f"{items:,} distinct item{'' if items == 1 else 's'}")
    print(privacy_line(payload["privacy"]))
    print()
    two_runs = any(r["extra"].get("run", 1) > 1 for r in payload["rounds"])
    passes = any(r["extra"].get("pass", 1) > 1 for r in payload["rounds"])
    cuts = any(r.get("cut") for r in payload["rounds"])
    trims = any(r.get("trimmed") for r in payload["rounds"])
    # (threshold: the estimate an element had to clear, in devices, as `fedhh up`'s table
    # gives it; a completion round's is many times a main round's, which is where long items
    # are lost. Before, the table showed tau alone, the multiplier, while the cut prefixes'
    # heading sent the reader to "the rounds table" for each round's threshold.)
    header = (*(("run",) if two_runs else ()), *(("pass",) if passes else ()), "round", "s",
              "prefixes", "domain", "n", "tau", "threshold", "kept", "found",
              *(("cut",) if cuts else ()),
              *(("not queried",) if trims else ()), "next s", "E[FP]", "FP")
    rows = [header]
    for r in payload["rounds"]:
        rows.append((
            *((r["extra"].get("run", 1),) if two_runs else ()),
            *((r["extra"].get("pass", 1),) if passes else ()), r["round"], r["segment_bits"],
            r["prefixes"],
            r["domain_size"], r["participants"], _fmt(r["tau"]), _count(r.get("threshold")),
            r["kept"], r["finished"],
            *((r.get("cut", 0),) if cuts else ()),
            *((r.get("trimmed", 0),) if trims else ()),
            r["next_segment_bits"] if r["next_segment_bits"] is not None else "-",
            _fmt(r["expected_false_positives"]),
            r["actual_false_positives"] if r["actual_false_positives"] is not None else "-",
        ))
    _table(rows)
    print(options.round_columns_legend(header))
    unused = unused_baseline_rounds(payload)
    if unused:
        print(f"\n{unused}")
    if payload.get("trimmed_note"):
        print(f"\n{payload['trimmed_note']}.")
    hitters = payload["heavy_hitters"]
    earlier = payload.get("earlier_runs", [])
    cut = payload.get("cut_prefixes", [])
    # (every list's rows, each read against the others': a cut prefix сос… beside cocoa; each
    # cut to the item column, ``column_cut_note``, as shown among the others)
    lists = [[(h["item"], h["truncated"]) for h in rows[:top]]
             for rows in (earlier, hitters, [{**h, "truncated": True} for h in cut])]
    every = iter(fitted_rows([row for rows in lists for row in rows], ITEM_COLUMNS_MAX))
    listed = [[next(every) for _ in rows] for rows in lists]
    if earlier:
        # (--two-runs: the first run's items, the second run's deny list, are the run's output
        # too; each run's rounds count from 1, so each run is its own list)
        print(f"\n{_hitters(len(earlier))} found by the first run (the second run's deny "
              "list)")
        _hitters_table(earlier, top, hint, listed[1] + listed[2], listed[0])
    print(f"\n{_hitters(len(hitters))} discovered"
          + (" by the second run" if earlier else "")
          + (f" (+{len(payload['deny_list'])} from the deny list)" if payload["deny_list"] else ""))
    _hitters_table(hitters, top, hint, listed[0] + listed[2], listed[1])
    why = nothing_found(payload)
    if why:
        print(why)
    if cut:
        print("\n" + cut_heading(len(cut)))
        if top:
            _table([("item", "estimate", "std", "round", "why")] + [
                # (a row that stands for several cut prefixes says so, as the heavy hitters'
                # list does: its estimate is their sum; after its cause, last, where it
                # pushes no column of its own row)
                (item, f"{h['estimate']:,.0f}", _std(h), h["round"],
                 "; ".join(filter(None, (prefix_note(h), h.get("cause", ""),
                                         h.get("note", "")))))
                for h, item in zip(cut[:top], printable_rows(listed[2],
                                                             listed[0] + listed[1]),
                                   strict=True)], item=0, tail=True)
            note = column_cut_note(cut[:top], listed[2])
            if note:
                print(note)
            if len(cut) > top:
                print(f"({len(cut) - top} more with --top {len(cut)} or in --json)")
            note = cut_marks_note([text for text, _ in listed[2]])  # (as shown: cut to the column)
            if note:
                print(f"({note.removeprefix(', ')})")
        else:
            print(TOP_ZERO)
    weight_note = payload.get("completion_note", completion_weight_note(payload))
    if weight_note:
        print(f"\n{weight_note}")
    metrics = payload["metrics"]
    if metrics:
        w, u = metrics["weighted"], metrics["unweighted"]
        print("\n" + found_counts(metrics))
        denied = metrics.get("denied_in_output", 0)
        # (the paper's figures, kept as it counts them: its Algorithm 1 outputs the deny list,
        # so a denied item counts found there though no round found it; before, this line
        # alone said 'true positives 16' of a run whose every item was denied)
        print("the paper's output (what the rounds found"
              + (f", and the deny list's {denied:,} {_plural(denied, 'item')}" if denied else "")
              + f"): true positives {metrics['true_positives']:,}, false positives "
              f"{metrics['false_positives']:,} (ratio {metrics['false_positive_ratio']:.3f})")
        print(f"its utility loss: weighted {w['utility_loss']:.4f}, unweighted "
              f"{u['utility_loss']:.4f}")
        print(f"its recall (weighted ranking): {recall_line(metrics, items)}")
    t = payload["timings"]
    print(f"\ntime: {t['total_s']:.1f} s ({t['rounds_s']:.1f} s in rounds)")


def recall_line(metrics: dict[str, Any], distinct: int | None = None) -> str:
    """The recall at each top k whose top is not a smaller k's again (``reached_ranks``), and,
    where the dataset's items are fewer than the largest k, which k there is no top of: over
    10 items, the line read "top-10 1.00, top-100 1.00, top-1000 1.00, top-10000 1.00", the
    top 10's figure four times. ``distinct``: the dataset's distinct items, more than the
    ranking's where items longer than the codes are one code (three URLs alike for 60 bits)."""
    recall = {k: v for k, v in metrics["weighted"]["recall_at"].items() if v is not None}
    held = metrics.get("held_items")
    shown = ", ".join(f"top-{k} {v:.2f}" for k, v in recall.items())
    if not isinstance(held, int) or held >= max(TOP_K):
        return shown
    if not held:
        return "none (no user holds an item)"
    missing = [f"{k:,}" for k in TOP_K if k > held and str(k) not in recall]
    every = max(map(int, recall))
    apart = ("" if distinct is None or distinct == held else
             f" as the codes tell them apart, of the data's {distinct:,}")
    said = [f"the users hold {held:,} {_plural(held, 'item')}{apart}"
            + ("" if every == held else f", every one in the top {every:,}")]
    if missing:
        said.append("there is no top " + (missing[0] if len(missing) == 1 else
                                          f"{', '.join(missing[:-1])} or {missing[-1]}"))
    return f"{shown} ({': '.join(said)})"


def privacy_line(privacy: dict[str, Any]) -> str:
    """The summary's privacy line, each figure once: before, a key=value dump said eps_agg=1
    and eps_agg_target=1, rounds=11 and charged_rounds=11. The target is said where an
    explicit --eps-local made eps_agg differ from it, the solver's rounds where they differ
    from the charged rounds; a figure of some other algorithm follows, named."""
    shown = {k: v for k, v in privacy.items() if isinstance(v, int | float | str)}
    take = shown.pop
    eps, target = take("eps_agg", None), take("eps_agg_target", None)
    achieved, charged = take("eps_agg_achieved", None), take("charged_rounds", None)
    rounds = take("rounds", None)
    parts = []
    if eps is not None:
        asked = ("" if target is None or target == eps else
                 f" (what --eps-local spends; --eps-agg asked {_fmt(target)})")
        got = "" if achieved is None else f", {_fmt(achieved)} achieved"
        parts.append(f"eps_agg {_fmt(eps)}{got}{asked}")
    if "delta" in shown:
        parts.append(f"delta {_fmt(take('delta'))}")
    if charged is not None:
        composed = ("" if rounds is None or rounds == charged else
                    f" ({_fmt(rounds)} composed)")
        parts.append(f"over {_fmt(charged)} charged rounds{composed}")
    elif rounds is not None:
        parts.append(f"over {_fmt(rounds)} rounds")
    sentence = [", ".join(parts)]
    if "eps_agg_spent" in shown:
        spent, ran = take("eps_agg_spent"), take("rounds_spent", None)
        sentence.append(f"spent {_fmt(spent)}"
                        + ("" if ran is None else f" in the {_fmt(ran)} rounds run"))
    if "eps_local" in shown:
        devices, q = take("num_devices", None), take("sampling_rate", None)
        on = "" if devices is None else f" on {_fmt(devices)} devices"
        sentence.append(f"eps_local {_fmt(take('eps_local'))}{on}"
                        + ("" if q is None else f", sampling rate {_fmt(q)}"))
    if "method" in shown:
        verified = take("conditions_verified", None)
        sentence.append(", ".join(filter(None, (
            f"accounting {take('method')}",
            f"tolerance {_fmt(take('tolerance'))}" if "tolerance" in shown else "",
            f"{_fmt(take('evaluations'))} evaluations" if "evaluations" in shown else "",
            "" if verified is None else
            "conditions verified" if verified else "conditions NOT verified"))))
    if "completion_rounds" in shown:
        sentence.append(f"completion rounds {_fmt(take('completion_rounds'))}")
    sentence += [f"{key.replace('_', ' ')} {_fmt(value)}" for key, value in shown.items()]
    return "privacy: " + "; ".join(filter(None, sentence))


def found_counts(metrics: dict[str, Any]) -> str:
    """What the rounds found, in three counts that add up to the heavy hitters listed: whole
    items some user holds, codes truncated at max_bits some user holds, and false positives,
    held by no user; and the cut prefixes, listed apart, neither found nor false: each stands
    for the items that begin so (before, a reader could take them for either)."""
    whole, false = metrics["whole_items_found"], metrics["found_false_positives"]
    truncated, cut = metrics["truncated_held"], metrics["cut_prefixes"]
    return ("found by the rounds: "
            f"{whole:,} whole {_plural(whole, 'item')} held by some user, "
            + (f"{truncated:,} truncated at the codes' max_bits held by some user, "
               if truncated else "")
            + (f"{false:,} {FALSE_POSITIVE}" if false == 1 else
               f"{false:,} {FALSE_POSITIVE.replace('positive', 'positives')}")
            + (f"; {cut:,} cut {_plural(cut, 'prefix', 'prefixes')}, neither found nor false "
               "(listed apart)" if cut else ""))


def _plural(count: int, one: str, many: str | None = None) -> str:
    return one if count == 1 else many or one + "s"


def completion_weight_note(payload: dict[str, Any],
                           weight_one: Callable[[], bool] | None = None) -> str | None:
    """``lost_in_completion_note`` of a simulation's ``payload`` (its first run's rounds;
    ``weight_one`` as there)."""
    config = payload.get("config", {})
    main, weight = config.get("rounds"), config.get("completion_weight")
    if not isinstance(main, int) or not isinstance(weight, int | float):
        return None
    thresholds = {r["round"]: r.get("threshold") for r in payload["rounds"]
                  if r["extra"].get("run", 1) == 1}
    return lost_in_completion_note([str(c.get("cause", "")) for c in
                                    payload.get("cut_prefixes", [])],
                                   [(int(h.get("round", 0)), bool(h.get("truncated")))
                                    for h in payload["heavy_hitters"]], main, weight, thresholds,
                                   weight_one)


def unused_baseline_rounds(payload: dict[str, Any]) -> str | None:
    """A baseline's tree that ended before its rounds did: its sampling rate or noise was set
    for all of them, so the budget of those not run was lost (OptPrefixTree charges only the
    rounds it runs). Before, nothing said so: the README's TrieHH++ line, adaptive segments
    at --rounds 12, ran 4 rounds and found 240 items; with --segment-bits 5 (a letter a
    round, the paper's) it ran 12 and found 573."""
    config = payload.get("config", {})  # (a payload made by hand may hold no config)
    algorithm = config.get("algorithm", "optprefixtree")
    charged, ran = payload["privacy"].get("charged_rounds"), len(payload["rounds"])
    if algorithm == "optprefixtree" or charged is None or ran >= charged:
        return None
    segments = ("" if config.get("segment_bits") is not None else
                " Fixed segments take every round: --segment-bits 5, a letter a round of the "
                "5bit code as in the paper." if config.get("codec") == "5bit" else
                " Fixed segments (--segment-bits B) take every round.")
    return (f"The tree finished after {ran} of {charged} rounds, and {algorithm}'s "
            f"privacy was set for all {charged}: the budget of the {charged - ran} not run "
            f"went unused.{segments}")


def nothing_found(payload: dict[str, Any]) -> str | None:
    """Why a discovery whose rounds kept nothing found nothing: round 1's threshold against its
    devices (`fedhh up` says the same of its runs). Before, "0 heavy hitters discovered" was
    all a new user's 4-user file, or an eps_agg of 0.001 over Shakespeare, was told."""
    rounds = payload["rounds"]
    if (payload["heavy_hitters"] or payload.get("earlier_runs") or payload.get("cut_prefixes")
            or not rounds or any(r["kept"] for r in rounds)
            or rounds[0].get("threshold") is None):
        return None
    first = rounds[0]
    n, threshold = first["participants"], first["threshold"]
    share = (f"more than its {n:,} devices: no item's count can reach it" if threshold > n
             else f"{threshold / n:.1%} of its {n:,} devices" if n else f"with {n} devices")
    eps = payload["privacy"].get("eps_local")
    at = f" at eps_local {eps:.3g}" if isinstance(eps, int | float) else ""
    return (f"Nothing cleared round {first['round']}'s threshold, an estimated count of "
            f"{threshold:,.1f} ({share}){at}: more devices, or a larger --eps-agg, lower it.")


def _truncation_hint(payload: dict[str, Any], blocker: str | None) -> str:
    """What widens the codes for an item truncated at them: completion rounds, unless
    ``blocker`` (a setting) rules them out or the budget fitted none of them (the privacy
    figures' ``completion_rounds``); then --completion-rounds, which the note named, is
    refused or changes nothing."""
    if blocker is not None:
        return (f"completion rounds, which complete long items, do not run with {blocker}: "
                "--max-bits widens the codes, with as many more --rounds (a round covers at "
                "most log2(--dim-limit) bits), or run without it; docs/codecs.md")
    if str(payload["privacy"].get("completion_rounds", "")).startswith("0 of "):
        eps_local = payload.get("config", {}).get("eps_local")
        if eps_local is not None:  # (given, not solved: devices and --eps-agg do not move it)
            return (f"completion rounds, which complete long items, "
                    f"{eps_local_refusal(eps_local)} (the privacy line): {EPS_LOCAL_FITS} fits "
                    "them; --max-bits widens the codes")
        return ("completion rounds, which complete long items, could not be budgeted among so "
                "few devices (the privacy line): more devices, a larger --eps-agg or "
                "--completion-weight fit them; --max-bits widens the codes")
    return "see --max-bits and --completion-rounds"


def _hitters_table(hitters: list[dict[str, Any]], top: int, hint: str,
                   context: list[tuple[str, bool]] | None = None,
                   rows: list[tuple[str, bool]] | None = None) -> None:
    """A list of heavy hitters, by round then estimate, cut at ``top``, with its notes; a
    truncated item's note ends with ``hint`` (`_truncation_hint`); ``context``, the rows of
    the lists shown beside it (``printable_rows``); ``rows``, the hitters' rows as
    ``fitted_rows`` fitted them with the context's (else fitted here)."""
    if not hitters:
        return
    if not top:
        print(TOP_ZERO)
        return
    # (a row's note, if any row has one, in a last column: in the item's cell it pushed the
    # row's counts out of line with the other rows')
    notes = any(_note(h) for h in hitters[:top])
    if rows is None:
        own = [(h["item"], h["truncated"]) for h in hitters[:top]]
        rows = fitted_rows([*own, *(context or [])], ITEM_COLUMNS_MAX)[:len(own)]
    shown = printable_rows(rows, context or [])
    _table([("#", "item", "estimate", "std", "round", *(("note",) if notes else ()))] + [
        (i + 1, item, f"{h['estimate']:,.0f}", _std(h),
         h["round"], *((_note(h),) if notes else ()))
        for i, (h, item) in enumerate(zip(hitters[:top], shown, strict=True))
    ], item=1, tail=notes)
    print("(by round, then estimate: a round's estimate counts the devices that chose the "
          "item that round, among their items on the round's narrowing prefix list, so "
          "estimates of different rounds are not comparable)")
    note = column_cut_note(hitters[:top], rows)
    if note:
        print(note)
    if len(hitters) > top:
        print(more_hitters(hitters, top))
    # (every truncated item's width and the hint, those below --top too: a list whose truncated
    # items all fell below the cut, as the last rounds' do, said nothing of them before)
    widths = sorted({h["bits"] for h in hitters if h["truncated"]})
    if widths:
        # (the truncated items' marks alone: a whole item cut to the column, its own text
        # holding \xc3 or ⟨+, has none)
        marks = cut_marks_note(text for (text, _), h in zip(rows, hitters[:top], strict=True)
                               if h["truncated"])
        print(f"(an item ending in … was truncated at {'/'.join(map(str, widths))} bits, "
              f"the code's width: it stands for every item starting with those bits{marks}; "
              f"{hint})")


FALSE_POSITIVE = "false positive (held by no user)"  # (as `found_counts` counts them)


def _note(hitter: dict[str, Any]) -> str:
    """A heavy hitter's note column: a false positive says so, a truncated one how much of its
    items it holds (``prefix_note``), then its own note if any."""
    return "; ".join(filter(None, (FALSE_POSITIVE if hitter.get("false_positive") else "",
                                   prefix_note(hitter), hitter.get("note", ""))))


def prefix_note(hitter: dict[str, Any]) -> str:
    """How much of its items a truncated row is: ``the first 201 bytes of 3 items of the data,
    each 15 to 19 bytes more`` (``prefix_bytes``; ``starting_so``, where the simulation knows
    the data). A cut item shows its beginning alone: two URLs that differ at their end are one
    row, and before, nothing but its ``…`` said that the rest, its end too, was never found.
    Empty for a whole item."""
    if not hitter.get("truncated") or "prefix_bytes" not in hitter:
        return ""  # (a whole item; or a payload written before rows said their bytes)
    known = int(hitter["prefix_bytes"])
    held = f"the first {known:,} byte{'' if known == 1 else 's'}" if known else "no whole byte"
    starting = hitter.get("starting_so")
    if not isinstance(starting, dict) or not starting.get("items"):
        return held + " of every item starting so, the rest never found"
    items, (least, most) = starting["items"], starting["bytes_more"]
    more = (f"{least:,}" if least == most else f"{least:,} to {most:,}")
    return (f"{held} of {items:,} {_plural(items, 'item')} of the data, "
            f"{'each ' if items > 1 else ''}{more} {_plural(most, 'byte')} longer: "
            + ("their ends were" if items > 1 else "its end was") + " never found")


def add_starting_so(payload: dict[str, Any], result: SimulationResult, config: RunConfig,
                    vocabulary: tuple[str, ...], held: Any) -> None:
    """Each truncated row's ``starting_so`` (`fedhh.data.long_items.starting_so`): the items
    of the data its known bytes begin, with the most held of them whole."""
    rows = [(entry, hitter) for key, hitters in (
        ("heavy_hitters", result.heavy_hitters), ("cut_prefixes", result.cut_prefixes),
        ("earlier_runs", result.earlier_runs))
        for entry, hitter in zip(payload[key], hitters, strict=True) if hitter.truncated]
    if not rows:
        return
    codec = Codec.from_spec(config.codec, rows[0][1].max_bits)
    known = []
    for _, hitter in rows:
        decoded = codec.decode(hitter.code >> (hitter.max_bits - hitter.bits), hitter.bits)
        known.append(decoded.text.encode("utf-8", "surrogatepass") + decoded.partial)
    for (entry, _), found in zip(rows, starting_so(vocabulary, held, known), strict=True):
        if found is not None:
            entry["starting_so"] = found


# (under a list's heading at --top 0: before, a heading such as "10 heavy prefixes ... (the
# rounds table shows each round's):" ended the summary's section with nothing after it)
TOP_ZERO = "(none listed at --top 0: --top N or --json lists them)"


def more_hitters(hitters: list[dict[str, Any]], top: int) -> str:
    """The line under a heavy-hitter list cut at --top: how many more, and the rounds that
    found them (the list is by round, so a later round's heaviest items can all be below the
    cut, unseen: at the default --top a dataset's most held item, found in round 6, was), and
    how many of them came back truncated (the last rounds find those, so all can be below the
    cut: before, a --two-runs first run's 16 truncated items of 43 went unmentioned), and
    how many of them show the last listed row's estimate in its round: a cut inside such a tie
    kept one row of it and hid the next for an order the reader cannot see (a smaller
    unrounded estimate, or the item's code where they are equal)."""
    rest = hitters[top:]
    first, last = min(h["round"] for h in rest), max(h["round"] for h in rest)
    rounds = f"round {first}" if first == last else f"rounds {first} to {last}"
    truncated = sum(1 for h in rest if h["truncated"])
    of_them = f", {truncated:,} of them truncated" if truncated else ""
    shown = hitters[top - 1]
    tied = sum(1 for h in rest if h["round"] == shown["round"]
               and f"{h['estimate']:,.0f}" == f"{shown['estimate']:,.0f}")
    verb = "shows" if tied == 1 else "show"
    tie = (f"; {tied:,} of them also {verb} {shown['estimate']:,.0f} in round {shown['round']}, "
           "as the last row listed: the cut falls inside that tie" if tied else "")
    return (f"({len(rest):,} more, found in {rounds}{of_them}{tie}: --top {len(hitters)} or "
            "--json lists them)")


def _hitters(count: int) -> str:
    # (a data set of one item finds one: before, "1 heavy hitters discovered")
    return f"{count} heavy hitter{'' if count == 1 else 's'}"


def cut_heading(count: int) -> str:
    """The heading of the cut prefixes' list, with what cut them and what reaches further."""
    prefixes = "heavy prefix" if count == 1 else "heavy prefixes"
    return (f"{count} {prefixes} the completion rounds could not complete (not counted as "
            "heavy hitters; each stands for every item starting so: the rounds ran out of bits, "
            "which more --completion-rounds extend, each by up to log2(--dim-limit) bits, or "
            "the item's count fell below a later, cheaper round's threshold, which more devices "
            "or a larger --eps-agg lower; the rounds table shows each round's):")


def _std(hitter: dict[str, Any]) -> str:
    """An estimate's standard deviation as the table shows it; - where there is none (vote
    thresholds, central noise)."""
    std = hitter.get("std")
    return "-" if std is None else f"{std:,.0f}"


def _count(value: Any) -> str:
    """A threshold as the rounds table shows it: a count of devices, to the unit (- where a
    round has none)."""
    if not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return f"{value:,.0f}"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        # (nan: no such figure for the round, as tau for TrieHH's noiseless votes)
        return "-" if math.isnan(value) else f"{value:.4g}"
    return str(value)


ITEM_COLUMNS_MAX = 48  # the lists' item column, as `fedhh up`'s


def shown_alike(items: Sequence[str], rows: Sequence[tuple[str, bool]]) -> int:
    """How many of ``items``, shown as ``rows`` (``fitted_rows``), are cut to a text another
    of them is cut to too: URLs or queries that share the column's width of beginning,
    ``...?page=1`` and ``...?page=2``, read as one item listed again (before, nothing said
    they were as many items, told apart only in --json)."""
    shown: dict[str, set[str]] = {}
    for item, row in zip(items, rows, strict=True):
        if row[0] != item:
            shown.setdefault(row[0], set()).add(item)
    return sum(len(held) for held in shown.values() if len(held) > 1)


def column_cut_note(hitters: Sequence[Any], rows: Sequence[tuple[str, bool]],
                    width: int = ITEM_COLUMNS_MAX, whole: str = "--json") -> str:
    """The line under a list whose ``rows`` (``fitted_rows`` of the ``hitters``, dicts or
    messages) cut an item or prefix wider than the item column: which of its ``…`` are the
    column's, and where the item is whole. Else nothing."""
    items = [h["item"] if isinstance(h, dict) else h.item for h in hitters]
    cut = [row for item, row in zip(items, rows, strict=True) if row[0] != item]
    if not cut:
        return ""
    alike = shown_alike(items, rows)
    return (f"({len(cut):,} listed here {'is' if len(cut) == 1 else 'are'} wider than the item "
            f"column's {width} columns, cut to them ending in …: each stands for "
            f"its item, which begins so"
            + (f"; {alike:,} of them show alike, different items whose difference lies past "
               "the column" if alike else "")
            + f"; {whole} gives {'it' if len(cut) == 1 else 'them'} whole)")


def _table(rows: list[tuple], item: int | None = None, tail: bool = False) -> None:
    """``rows`` (the first the heading) right-justified in columns; the ``item`` column is no
    wider than ITEM_COLUMNS_MAX (or its heading): a longer item pushes only its own row on.
    Before, one 150-column item widened every row of the list to it, so that on a terminal
    every row wrapped. ``tail``: the last column is text (a cause, a note), left-justified and
    not padded, so that a long one pushes nothing (a cut prefix's note in its item's cell
    pushed its row's counts out of line)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(columns(r[i]) for r in cells) for i in range(len(cells[0]))]
    if item is not None:
        widths[item] = min(widths[item], max(ITEM_COLUMNS_MAX, columns(cells[0][item])))
    for row in cells:
        aligned = [rjust(c, w) for c, w in zip(row, widths, strict=True)]
        if tail:
            aligned[-1] = isolated(row[-1])
        print("  ".join(aligned).rstrip(" "))
