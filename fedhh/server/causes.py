"""Why a cut prefix (or an item truncated at the code's width) was not completed, in the words
every list uses: `fedhh simulate`'s ``why`` column and JSON ``cause``, `fedhh up`'s row and the
dashboard's JSON download; and the one note on many prefixes lost in the completion rounds, which
the consoles print and the JSON outputs carry as a field (a service reads it here: it may not
import the CLI)."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from fedhh.codec.codec import MAX_SUPPORTED_BITS
from fedhh.errors import PrivacyError

__all__ = ["NO_COMPLETION", "NO_MORE_COMPLETION", "RAN_OUT", "completion_budget_note",
           "completion_threshold", "completion_thresholds", "cut_cause",
           "first_past_devices", "lost_in_completion_note", "past_max_eps_local",
           "ran_out_cause", "rounds_reach", "unreachable_completion_note",
           "weight_one_completes", "weight_one_reach"]

RAN_OUT = "no rounds left"
NO_COMPLETION = "no completion round in the privacy budget"
NO_MORE_COMPLETION = f"{RAN_OUT}; no more in the privacy budget"


def _next_refused(config: Any, eps_local: float | None,
                  planner: bool = False) -> tuple[float, bool] | None:
    """The weight of one completion round more than ``config`` (a ``RunConfig``, as run: with
    the completion rounds its budget kept) has, when the privacy budget cannot fund it, with
    whether that is only the solver's to say; None when it can, or none can run. At
    ``eps_local`` the round would get no positive local epsilon (``RunConfig.next_completion``:
    eps_local + ln(its weight) <= 0, the accountant's test): False. Adding a round also lowers
    eps_local, so that test is sufficient, not necessary; the planner's drops mostly fall where
    the weights step down (the 2nd, 4th, 8th... round), where it holds: eps_agg 1 at n_min
    100, 1,000 and 5,000 budgets 0, 3 and 7 completion rounds, eps_agg 2, 4, 8 at 100 budget
    1, 3 and 15, and each next one fails it. Where it passes, with ``planner`` (a networked
    run, whose eps_local the coordinator solved at n_min) the coordinator's planner is asked
    (``_solver_refuses``): True where it refuses. Before, "no rounds left" there: eps_agg
    2.7705 to 2.7735 at n_min 100 keeps 1 completion round at eps_local 2.9958 to 2.9977,
    which the 2nd (ln 0.05 = -2.9957) passes, but with it the eps_local that meets eps_agg
    lies within the solver's resolution (``TOLERANCE``) of 2.9957, where that round's epsilon
    is 0. One solve takes 0.1 to 0.7 s (1.7 s at 1.6 million devices): the CLI can spend it,
    the coordinator's event loop (the dashboard) cannot, and without ``planner`` the test
    alone decides. An ``eps_local`` of None or 0 (a reply's unset field: a run's is
    positive) is unknown: None."""
    if not eps_local or eps_local < 0:
        return None
    next_completion = config.next_completion(eps_local)
    if next_completion is None:
        return None
    weight, positive = next_completion
    if not positive:
        return weight, False
    if not planner or config.eps_local is not None:
        return None
    from fedhh.privacy.accountant import allocation_offsets

    grown = replace(config, completion_rounds=config.completion() + 1)
    offsets = tuple(float(o) for o in allocation_offsets(grown.round_weights() or ()))
    if _solver_refuses(config.eps_agg, config.delta, offsets, config.min_devices):
        return weight, True
    return None


@functools.lru_cache(maxsize=64)
def _solver_refuses(eps_agg: float, delta: float, offsets: tuple[float, ...],
                    n_min: int) -> bool:
    """Whether the coordinator's planner (``open_ledger``: ``PrivacyLedger.open_allocated`` at
    n_min devices) finds no eps_local for these rounds; cached, as `fedhh admin results` asks
    for the cause and then the note."""
    from fedhh.privacy.ledger import PrivacyLedger

    try:
        PrivacyLedger.open_allocated(eps_agg, delta, offsets, n_min, 1.0)
    except PrivacyError:
        return True
    return False


def ran_out_cause(config: Any, eps_local: float | None, planner: bool = False) -> str:
    """The cause of a prefix the rounds ran out on in a run of ``config`` at ``eps_local``:
    ``RAN_OUT``, which more --completion-rounds extend, unless the privacy budget fits no
    completion round more (``_next_refused``; ``planner`` as there): then more rounds add
    none, and the cause says the budget (``NO_COMPLETION``, or ``NO_MORE_COMPLETION`` where
    some ran; ``completion_budget_note`` gives the figures once, below the list, where a row's
    width allows no more). Before, the networked defaults (eps_agg 1, n_min 100: eps_local
    1.524, the first completion round at 1.524 + ln 0.2 < 0) budgeted none, cut every long
    item, and each read "no rounds left": a user raised --completion-rounds, which changed
    nothing."""
    if _next_refused(config, eps_local, planner) is None:
        return RAN_OUT
    return NO_MORE_COMPLETION if config.completion() else NO_COMPLETION


def past_max_eps_local(config: Any) -> str | None:
    """Why neither a larger --eps-agg nor more devices budget one completion round more than
    ``config`` (a networked ``RunConfig``, as run) has: even at ``max_eps_local``, where the
    coordinator caps eps_local (``open_ledger``: the devices refuse more), that round's own
    epsilon, eps_local + ln(its weight), would not be positive (``RunConfig.next_completion``,
    the accountant's test); None where the cap is not what ends them. Before, the notes
    advised --eps-agg and devices there: --max-eps-local 4 at n_min 1,000 budgets 3
    completion rounds at eps_agg 8 and at 16 (the 4th's weight is 0.0125, 4 + ln 0.0125 < 0)."""
    next_completion = config.next_completion(config.max_eps_local)
    if next_completion is None or next_completion[1]:
        return None
    cap = config.max_eps_local
    return (f"one completion round more gets no positive epsilon even at --max-eps-local "
            f"{cap:g}, the most eps_local the run may take ({cap:g} + ln "
            f"{next_completion[0]:.4g} <= 0), so a larger --eps-agg or more devices budget no "
            "more until --max-eps-local is raised, where the devices' own (fedhh device "
            "--max-eps-local) allows it")


def completion_budget_note(config: Any, eps_local: float | None, causes: Sequence[str], *,
                           networked: bool = True, planner: bool = False) -> str | None:
    """The note, after a list some of whose ``causes`` are ``ran_out_cause``'s budget, that
    names the figures: the next completion round's eps_local + ln(weight) and what raises it;
    None when no cause is. A ``networked`` run's eps_local is held to ``config.max_eps_local``
    (``past_max_eps_local``) and solved at n_min devices; a simulation's is solved uncapped at
    the dataset's users (before, it was told of n_min, which `fedhh simulate` has no flag for).
    ``planner``: as ``ran_out_cause``'s, for a ``networked`` run."""
    refused = _next_refused(config, eps_local, planner and networked)
    if refused is None or not {NO_COMPLETION, NO_MORE_COMPLETION} & set(causes):
        return None
    weight, solver = refused
    ran = config.completion()
    fit = (f"No more than {ran} completion round{'s fit' if ran > 1 else ' fits'} the privacy "
           "budget: the next" if ran else "No completion round fits the privacy budget: the first")
    cap = past_max_eps_local(config) if networked else None
    remedy = (cap[0].upper() + cap[1:] if cap else "A larger --eps-agg or more devices "
              f"({'a larger n_min' if networked else 'users in the dataset'}) budget more")
    if not cap and config.eps_local is not None:
        # (given, eps_local is not solved: neither the budget nor the devices move it)
        remedy = "--eps-local sets eps_local: a larger one, or --completion-weight, fits more"
    if solver:
        from fedhh.privacy.solver import TOLERANCE

        # (its epsilon at this run's eps_local, eps_local + ln w, is positive: the round itself
        # lowers eps_local, there to where the planner cannot tell it from 0)
        why = (f"would lower eps_local to within {TOLERANCE:g} (the planner's resolution) of "
               f"-ln {weight:.4g} = {-math.log(weight):.4g}, where its own local epsilon is 0")
    else:
        why = f"would run at eps_local {eps_local:.4g} + ln {weight:.4g} <= 0"
    return (f"{fit} {why} (a round's local epsilon must be positive), so more "
            "--completion-rounds add none and long items (URLs, e-mail addresses) come back "
            f"cut. {remedy}; docs/codecs.md.")


def cut_cause(round_: int, bits: int, width: int, last: int, ran_out: str = RAN_OUT) -> str:
    """Why a cut prefix was not completed, as its row says: the rounds (or the code's width)
    ran out while it was still heavy, which more --completion-rounds extend, or the round after
    the one that kept it lost every extension (its count fell below that cheaper round's
    threshold, which more devices or a larger --eps-agg lower); or it reached the codes' limit
    (``MAX_SUPPORTED_BITS``), which nothing extends: before, that read "no rounds left" with
    rounds left. ``width``: the code's width; ``last``: the last round the run ran;
    ``ran_out``: the words for rounds (or width) run out (``ran_out_cause``)."""
    if width >= MAX_SUPPORTED_BITS and bits >= width:
        # (more --completion-rounds add nothing: codes end there, rounds were left or not)
        return f"the codes' limit, {MAX_SUPPORTED_BITS:,} bits"
    if round_ >= last or (width and bits >= width):
        return ran_out
    return f"lost in round {round_ + 1}"


def lost_in_completion_note(causes: list[str], found: Sequence[tuple[int, bool]], main: int,
                            weight: float, thresholds: dict[int, Any],
                            weight_one: Callable[[], bool] | None = None) -> str | None:
    """A note when the completion rounds (those after the ``main`` ones) lost many prefixes
    (``causes``, the cut prefixes' ``lost in round N``: at least 20, and a quarter of the
    ``found`` items, each its round and whether it is truncated), or more than they completed
    (found whole in a completion round): the first runs at ``weight`` of a main
    round's budget, the later ones at less (``RunConfig.completion_weights``), and their
    threshold (``thresholds``, by round) is several times the main rounds'. Before, nothing said
    so: synthetic-urls at the weights before 2026-12-05 found 320 URLs whole and lost 353
    prefixes in its first completion round (threshold 429 against 50); at the defaults since,
    494 whole and ~180 lost (README.md).
    A run of few long items lost most of them unnoted below 20: 2,000 users, 7 long items held
    by 200 each, at eps_agg 1 found 3 words and lost 5 long prefixes in the completion rounds,
    completing none (`fedhh simulate`); over the network at n_min 1,800, lost 5 and completed
    one short word. Losing more than they completed is most of their yield lost, however few;
    a few lost beside more completed are the usual noise at a cheaper round's threshold.
    ``weight_one``: whether --completion-weight 1 completes some of the dataset's items more
    (``weight_one_completes``; asked only for the note, where the caller knows its items),
    None where unknown; a larger weight is suggested where it does, said to help only so where
    None. Before, it was suggested whatever: 300 devices of URLs (152 bits) and e-mail
    addresses (118) reach 112 bits at weight 1, which none of them fits."""
    completed = sum(round_ > main and not truncated for round_, truncated in found)
    lost_by_round: Counter[int] = Counter()
    for cause in causes:
        where = cause.removeprefix("lost in round ")
        if where.isdigit() and int(where) > main:
            lost_by_round[int(where)] += 1
    lost = lost_by_round.total()
    if not lost or (lost <= completed and lost < max(20, len(found) / 4)):
        return None
    # (the round that lost most, and its threshold: before, the note named the first
    # completion round's, 80 against 70 for 3,000 users at weight 1, where all 10 URLs were
    # lost in the 4th completion round, at a sixteenth of the weight, above 415)
    most = min(lost_by_round, key=lambda r: (-lost_by_round[r], r))
    last, there = thresholds.get(main), thresholds.get(most)
    against = (f", at threshold {there:,.0f} against the last main round's {last:,.0f}"
               if isinstance(last, int | float) and isinstance(there, int | float) else "")
    # (a larger weight is no remedy at 1, its most: before, the note advised "(0.5, 1)" to a
    # run at 1. More devices do not lower a threshold, which grows with the root of the
    # reports: 800 users set 70.8 where 400 set 68.2; the note said they lowered every one)
    others = ("a larger --eps-agg lowers every round's threshold, and more devices holding the "
              "items raise their counts faster than the thresholds")
    remedy = others[0].upper() + others[1:]
    helps = None if weight >= 1 or weight_one is None else weight_one()
    if weight < 1 and helps is False:
        remedy += "; a larger --completion-weight completes none of the dataset's items more here"
    elif weight < 1:
        remedy = ("A larger weight (up to 1) raises each completion round's budget at the main "
                  "rounds' cost (synthetic-urls: 494 URLs whole at 0.2, 686 at 1)"
                  # (no figure of another run's: the bits "300 devices' URLs" reached at
                  # weight 1, 112, read as this run's, whose plan may reach 115 or 80)
                  + ("" if helps else
                     ", which helps only where the rounds it brings within the devices complete "
                     "items the run's do not (`fedhh up` and `fedhh simulate`, which know the "
                     "items, say whether it does)") + f"; {others}")
    # (one lost beside none completed is noted too: it read "1 prefixes were lost in the
    # completion rounds (most in round 5"; and all lost in one round read "most in" it)
    return (f"{lost:,} prefix{'es were' if lost > 1 else ' was'} lost in the completion rounds "
            f"({'most in' if len(lost_by_round) > 1 else 'in'} round {most}"
            f"{against}): the first runs at --completion-weight {weight:g} of a main round's "
            "budget, the 2nd and 3rd at a quarter of that, the 4th to 7th at a sixteenth, "
            f"the later ones at less. {remedy}; docs/codecs.md.")


def completion_threshold(config: Any, eps_local: float, index: int, devices: int,
                         mode: Any) -> float:
    """The least threshold, in devices, of the ``index``-th completion round (1-based) of
    ``config`` among ``devices`` reports when it keeps one element over a full segment: that
    round's local epsilon is eps_local + ln(w / the largest weight) (``allocation_offsets``, the
    accountant's own), its target gamma_i (``completion_fp_ratios``). PruneHH (the paper's
    Adaptive Thresholding) keeps an element over t only once E(t) D <= gamma k, E the null
    law's tail; adaptive segmentation (the paper's server algorithm: s the largest with
    prefixes 2^s <= P) makes the grid more than P / 2, so with k = 1 and every element of the
    grid possible the threshold is at least E^-1(2 gamma_i / P), and never below tau0 sigma,
    where PruneHH starts. An estimate, not a bound: the tree prunes the elements the codec can
    hold only (``states != DEAD``), and under the unicode codec a prefix's 12 to 16 bits of
    extension are about half possible, some far fewer: at D = P / 32 the 300-device plan's 2nd
    completion round keeps an element from 440 devices, not 487."""
    from fedhh.privacy.accountant import allocation_offsets
    from fedhh.server.mechanisms import LocalRandomizer, TailKind

    offset = allocation_offsets(config.round_weights() or ())[config.rounds + index - 1]
    tail = LocalRandomizer(eps_local + offset, TailKind(config.tail)).null_tail(devices)
    gamma = config.completion_fp_ratios()[index - 1]
    share = gamma / (config.resolved_dim_limit(mode) / 2)  # (E at the domain's least)
    # (a share past the median, a large gamma over a tiny P: tau0 sigma bounds it alone)
    return max(config.tau0 * tail.sigma, tail.isf(share) if share < 0.5 else 0.0)


def completion_thresholds(config: Any, eps_local: float, devices: int,
                          mode: Any) -> list[float]:
    """``completion_threshold`` of each completion round of ``config``, the first first."""
    return [completion_threshold(config, eps_local, i, devices, mode)
            for i in range(1, config.completion() + 1)]


def first_past_devices(thresholds: Sequence[float], devices: int) -> int | None:
    """The first completion round (1-based) whose threshold is above ``devices``, or None."""
    return next((i for i, t in enumerate(thresholds, start=1) if t > devices), None)


def unreachable_completion_note(config: Any, thresholds: Sequence[float], devices: int,
                                mode: Any, heavier: tuple[int, int] | None = None
                                ) -> str | None:
    """The note, before a run, where some of the completion rounds ``config`` budgets have a
    threshold above its ``devices`` (``thresholds``, ``completion_thresholds``): no item's
    true count reaches it, so those rounds complete nothing but by noise, and an item whose
    code needs them comes back cut however many hold it; None where every round's threshold
    is within the devices.
    Before, the warning on items past the codes counted them in the codes' reach: 300 devices
    at eps_agg 2 budget 3 of the 32 completion rounds and were told of 112-bit codes, where
    the 2nd and 3rd (local epsilon 0.35) need ~450 devices and the items reached whole end
    within 80 bits (docs/codecs.md). ``heavier``: the bits the rounds within the devices reach
    at --completion-weight 1 (``weight_one_reach``) and how many of the dataset's items that
    completes beside those the run does, given only where some; before, the note offered a
    larger --completion-weight also where it completed no item more."""
    first = first_past_devices(thresholds, devices)
    if first is None:
        return None
    main, last = config.rounds, config.rounds + config.completion()
    rounds = (f"rounds {main + first} to {last} (completion rounds)" if main + first < last
              else f"round {last} (a completion round)")
    reach = config.code_bits(mode, completions=first - 1)
    before = (f"the main rounds and rounds {main + 1} to {main + first - 1} (the last at about "
              f"{thresholds[first - 2]:,.0f} devices)" if first > 2 else
              f"the main rounds and round {main + 1} (at about {thresholds[0]:,.0f} devices)"
              if first == 2 else "the main rounds")
    remedy = ("A larger --eps-agg lowers every round's threshold"
              + (f"; --completion-weight 1 brings the rounds within the devices to "
                 f"{heavier[0]:,} bits, which {heavier[1]:,} more of the items fit, at the "
                 "main rounds' cost" if heavier else ""))
    return (f"{rounds} need an estimate of about {thresholds[first - 1]:,.0f} devices, above the "
            f"{devices:,} devices here (their local epsilon, eps_local + ln of their weight, is "
            "small; the figure holds where the codes leave half the grid's extensions open, a "
            "little fewer devices where they leave fewer): no item's true count reaches that, "
            "so items come back whole "
            f"only where {before} finish them, within {reach:,} bits of code, and longer ones "
            f"cut whatever their count. {remedy}; docs/codecs.md")


def rounds_reach(config: Any, eps_local: float, devices: int, mode: Any) -> int | None:
    """The bits of code that the rounds of ``config`` (its main rounds at ``eps_local``) before
    the first whose threshold is above ``devices`` reach, where one is (``first_past_devices``:
    fewer than its codes'); None where every round's is within the devices."""
    first = first_past_devices(completion_thresholds(config, eps_local, devices, mode), devices)
    return None if first is None else config.code_bits(mode, completions=first - 1)


def weight_one_reach(config: Any, eps_local_of: Any, devices: int, mode: Any) -> int | None:
    """``rounds_reach`` of ``config`` at --completion-weight 1 (as many completion rounds, the
    main rounds' eps_local solved again by ``eps_local_of``: None where it budgets them not);
    its codes' whole width where every round is within the devices there; None where the
    weight is 1 already or nothing solves."""
    solved = _at_weight_one(config, eps_local_of)
    if solved is None:
        return None
    heavier, eps_local = solved
    reach = rounds_reach(heavier, eps_local, devices, mode)
    return heavier.code_bits(mode) if reach is None else reach


def _at_weight_one(config: Any, eps_local_of: Any) -> tuple[Any, float] | None:
    """``config`` at --completion-weight 1 and its main rounds' eps_local (``eps_local_of``);
    None where its weight is 1 already, it has no completion round, or that is not solved."""
    if config.completion_weight >= 1 or not config.completion():
        return None
    heavier = replace(config, completion_weight=1.0)
    eps_local = eps_local_of(heavier)
    return None if eps_local is None else (heavier, float(eps_local))


def weight_one_completes(config: Any, eps_local: float, eps_local_of: Any, devices: int,
                         mode: Any, items: Sequence[tuple[int | None, int]]) -> bool:
    """Whether --completion-weight 1 (``config`` at weight 1, its main rounds' eps_local solved
    again by ``eps_local_of``) completes some of ``items`` (each the bits its whole code needs,
    None past every code, and how many of the ``devices`` hold it) that ``config`` (its main
    rounds at ``eps_local``) cannot: the rounds before the first whose threshold
    (``completion_thresholds``) is above an item's count reach its bits there, not here.
    ``weight_one_reach`` asks it of an item every device holds; an item held by fewer meets a
    lower round's threshold first, which weight 1 lowers: of 300 devices, 150 holding a 100-bit
    item and 150 a URL, `fedhh simulate` found the item whole at weight 1 (round 5's threshold
    ~86), never at 0.2 (~270). The main rounds are taken to keep every item, as
    ``weight_one_reach`` takes them, though at weight 1 their thresholds rise a little
    (eps_local 2.12 against 2.32 there)."""
    heavier = _at_weight_one(config, eps_local_of)
    if heavier is None:
        return False
    plans = [(plan, completion_thresholds(plan, eps, devices, mode))
             for plan, eps in ((config, eps_local), heavier)]

    def reach(at: int, held: int) -> int:
        plan, thresholds = plans[at]
        first = first_past_devices(thresholds, held)
        return plan.code_bits(mode, completions=None if first is None else first - 1)

    return any(bits is not None and reach(0, held) < bits <= reach(1, held)
               for bits, held in items)
