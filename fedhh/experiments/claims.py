"""The paper's claims, each checked against a study's results.

Verdicts and ``ClaimResult``: ``fedhh.experiments.verdicts``.

Each claim carries a note: the numbers behind it and, where ours differ from the paper's, the
likely reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from fedhh.experiments.analysis import Ratio, StudyResults, VariantResult
from fedhh.experiments.lever_claims import LEVER_CLAIMS
from fedhh.experiments.studies import BASELINES, CENTRAL, COMPARISON_ROUNDS, NAMES, ROUNDS_SWEEP
from fedhh.experiments.verdicts import (
    DIFFERS,
    FAILS,
    HOLDS,
    MIXED,
    PARTLY,
    STRONGER,
    WEAKER,
    ClaimResult,
    ratio_verdict,
)


def _pct(factor: float) -> str:
    if not math.isfinite(factor):  # (printed "+nan%" when the reference found nothing)
        return "no ratio"
    return f"{(factor - 1) * 100:+.0f}%"


def _fp_below(r: StudyResults, bound: float | None = None) -> bool:
    """Output false-positive ratio at most the target in every run."""
    return all(np.all(r[v].values("fp_ratio") <= (bound if bound is not None else
                                                  r[v].variant.params.get("fp_ratio", 0.5)))
               for v in r.variants if r[v].variant.spec is not None)


def _fp_verdict(r: StudyResults) -> str:
    """Whether the output false-positive ratio stayed at most the target: inconclusive when no
    run output anything (a ratio of nothing bounds nothing: a population too small for the
    budget, such as Shakespeare's 1,400 users at eps_agg 1, read as "holds")."""
    outputs = [r[v].values("discovered") for v in r.variants if r[v].variant.spec is not None]
    if not any(np.any(np.asarray(o) > 0) for o in outputs):
        return MIXED
    return HOLDS if _fp_below(r) else FAILS


def _fp_text(r: StudyResults) -> str:
    return "; ".join(f"{label} {r[label].stat('fp_ratio').fmt(2)} "
                     f"(rounds {r[label].stat('round_fp_ratio').fmt(2)})"
                     for label in r.variants if r[label].variant.spec is not None)


FP_NOTE = ("Output ratio (false positives / output size), with the ratio over the elements "
           "PruneHH kept in all rounds in parentheses. PruneHH controls the latter, which "
           "lands near the target; most false prefixes die in later rounds (no device extends "
           "them), so the output ratio is far lower. The paper's values are close to the "
           "ratio over the rounds.")


def _segmentation(r: StudyResults) -> list[ClaimResult]:
    ratio = r.ratio("adaptive", "uniform s=15")
    a, u = r["adaptive"].stat("true_positives"), r["uniform s=15"].stat("true_positives")
    segs = r["adaptive"].segments
    return [
        ClaimResult("segmentation", "Adaptive segmentation finds about 40% more heavy hitters "
                    "than uniform 15-bit segments (single item, T = 4, P = 10^7)", "1.40x",
                    ratio.fmt(), ratio_verdict(ratio, 1.40),
                    f"{a.fmt()} against {u.fmt()} heavy hitters ({_pct(ratio.of_means)}; paper "
                    "+40%). With 15-bit segments a round can carry at most 10^7 / 2^15 = 305 "
                    f"prefixes: {r['uniform s=15'].stat('trimmed').fmt()} live prefixes are "
                    f"dropped (adaptive: {r['adaptive'].stat('trimmed').fmt()})."),
        ClaimResult("segmentation", "Adaptive segments are [23, 14, 11, 12]", "[23, 14, 11, 12]",
                    segs, HOLDS if segs.rstrip("*") == "[23, 14, 11, 12]" else DIFFERS,
                    "Segment bits per round ('*': varied over seeds). The first is "
                    "floor(log2 P) = 23 by construction; the others follow the sizes of the "
                    "prefix lists, i.e. the data, and the Huffman code (ours is built from "
                    "English letter frequencies)."),
        ClaimResult("segmentation", "The empirical false-positive ratio stays below gamma = 0.5",
                    "0.35 (adaptive), 0.41 (uniform)", _fp_text(r),
                    _fp_verdict(r), FP_NOTE),
    ]


def _dimension(r: StudyResults) -> list[ClaimResult]:
    drop = r.ratio("P=1M", "P=10M")
    extra = r.ratio("P=1M, T=5", "P=1M")
    wide = r.ratio("P=20M", "P=10M")
    extra_verdict = ratio_verdict(extra, 1.15)
    note = (f"T = 5 at P = 1M: {r['P=1M, T=5'].stat('true_positives').fmt()} against "
            f"{r['P=1M'].stat('true_positives').fmt()} at T = 4 ({_pct(extra.of_means)}; "
            f"paper +15%), at eps_local {r['P=1M, T=5'].stat('eps_local').fmt(2)} instead of "
            f"{r['P=1M'].stat('eps_local').fmt(2)}. At P = 1M and T = 4 the segments are "
            f"{r['P=1M'].segments}: to finish the 60 bits in time the later segments are long, "
            "leaving room for few prefixes (10^6 / 2^14 = 61 in round 3, one in round 4), so "
            f"{r['P=1M'].stat('trimmed').fmt()} live prefixes are dropped; with T = 5, "
            f"{r['P=1M, T=5'].stat('trimmed').fmt()}.")
    if extra_verdict == STRONGER:
        note += (" How much that buys depends on how many heavy hitters are still unfinished "
                 "after round 3, a property of the data and of the Huffman code.")
    return [
        ClaimResult("dimension", "A dimension limit of 1M degrades utility significantly "
                    "against 10M (T = 4)", "large drop (figure)", drop.fmt(),
                    ratio_verdict(drop, greater=False),
                    f"{r['P=1M'].stat('true_positives').fmt()} against "
                    f"{r['P=10M'].stat('true_positives').fmt()} heavy hitters; P = 20M against "
                    f"10M: {wide.fmt()}. The limit does not bind at 10M ("
                    f"{r['P=10M'].stat('trimmed').fmt()} prefixes trimmed); a larger round "
                    "domain only raises PruneHH's threshold (more zero-count elements to guard "
                    f"against: {r['P=20M'].stat('first_threshold').fmt()} against "
                    f"{r['P=10M'].stat('first_threshold').fmt()} reporting devices in round "
                    "1), so slightly fewer prefixes survive."),
        ClaimResult("dimension", "At P = 1M one extra round (T = 5) finds about 15% more heavy "
                    "hitters than T = 4", "1.15x", extra.fmt(), extra_verdict, note),
        ClaimResult("dimension", "Empirical false-positive ratios stay below gamma = 0.5",
                    "0.42, 0.46, 0.33, 0.42", _fp_text(r), _fp_verdict(r),
                    FP_NOTE),
    ]


def _fp_ratio(r: StudyResults) -> list[ClaimResult]:
    tp = r.ratio("gamma=2", "gamma=0.5")
    fp = r.ratio("gamma=2", "gamma=0.5", "false_positives")
    few = bool(tp.per_seed.size) and bool(np.all(tp.per_seed < fp.per_seed))
    tps = ", ".join(r[v].stat("true_positives").fmt() for v in r.variants)
    fps = ", ".join(r[v].stat("false_positives").fmt() for v in r.variants)
    round_fp = ", ".join(r[v].stat("round_fp_ratio").fmt(2) for v in r.variants)
    targets = {v: r[v].variant.params["fp_ratio"] for v in r.variants}
    near = all(np.all(r[v].values("round_fp_ratio") <= targets[v] + 0.05) for v in r.variants)
    # A population too small for the budget keeps nothing: no count to compare and no ratio
    # to track ("does not hold" said the opposite of the paper was seen).
    kept_any = any(np.any(np.isfinite(np.asarray(r[v].values("round_fp_ratio"), dtype=float)))
                   for v in r.variants)
    found_verdict = (MIXED if not math.isfinite(tp.of_means)
                     else HOLDS if few and tp.of_means < 1.25 else FAILS)
    return [
        ClaimResult("fp-ratio", "Raising gamma from 0.5 to 2 finds only slightly more heavy "
                    "hitters", "660, 656, 678, 695 (1.05x)", f"{tps} ({tp.fmt()})",
                    found_verdict,
                    f"Heavy hitters found for gamma = 0.5, 1, 1.5, 2: {_pct(tp.of_means)} from "
                    "0.5 to 2 (paper +5%)."),
        ClaimResult("fp-ratio", "... but many more false positives", "357, 636, 828, 1400 (3.9x)",
                    f"{fps} ({fp.fmt()})", ratio_verdict(fp, 3.9),
                    "False positives in the output for gamma = 0.5, 1, 1.5, 2. Ours are about "
                    "ten times fewer than the paper's at every gamma because most false "
                    "prefixes die in later rounds (next claim); the growth with gamma matches."),
        ClaimResult("fp-ratio", "The empirical false-positive ratio tracks the target: "
                    "gamma / (1 + gamma) = 0.33, 0.5, 0.6, 0.67", "0.35, 0.49, 0.55, 0.67",
                    f"output {', '.join(r[v].stat('fp_ratio').fmt(2) for v in r.variants)}; "
                    f"kept elements over the rounds {round_fp}",
                    MIXED if not kept_any else HOLDS if near else FAILS,
                    "The paper's values are close to gamma / (1 + gamma), the reading of gamma "
                    "we run (see the study). The ratio PruneHH controls (false positives among "
                    "the elements kept, over all rounds) stays at or below the target; the "
                    "output ratio is far lower because false prefixes rarely reach a complete "
                    "item."),
    ]


def _sampling(r: StudyResults) -> list[ClaimResult]:
    from scipy.stats import spearmanr

    labels = list(r.variants)
    qs = np.array([r[v].variant.params["q"] for v in labels])
    tp = np.array([r[v].stat("true_positives").mean for v in labels])
    eps = np.array([r[v].stat("eps_local").mean for v in labels])
    rho = float(spearmanr(qs, tp).statistic) if tp.size > 2 else float("nan")
    best_is_full = bool(tp.size) and int(np.argmax(tp)) == int(np.argmax(qs))
    eps_text = ", ".join(f"{q:.1f}: {e:.2f}" for q, e in zip(qs, eps, strict=True))
    u_shape = bool(eps.size) and eps[0] > eps.min() and eps[-1] > eps.min()
    return [
        ClaimResult("sampling", "Sampling devices lowers utility; use no sampling when the "
                    "dimension limit allows", "q = 1 best (figure)",
                    f"Spearman(q, found) = {rho:.2f}; found at q = 0.1 / 1.0: "
                    f"{r[labels[0]].stat('true_positives').fmt()} / "
                    f"{r[labels[-1]].stat('true_positives').fmt()}",
                    HOLDS if best_is_full and rho > 0.8 else FAILS,
                    "Heavy hitters found grow steadily with q: fewer participants mean fewer "
                    "reports of each item, which outweighs the larger local epsilon a "
                    "sampled round allows (next claim)."),
        ClaimResult("sampling", "Small sampling rates allow a larger local epsilon than "
                    "moderate ones, and no sampling a larger one still (Table samp)",
                    "U-shaped eps_local(q)", f"eps_local by q: {eps_text}",
                    HOLDS if u_shape else FAILS,
                    "We account a sampled round exactly, given its number of participants (a "
                    "data-independent count; docs/privacy.md): the amplification by sampling "
                    "then only helps, and the local epsilon falls steadily as q rises. Small "
                    "rates do allow a larger local epsilon than moderate ones, as the paper "
                    "says, but no sampling does not allow a larger one still. The paper's "
                    "table is omitted from our copy, so we cannot tell where its U shape comes "
                    "from; its accounting (shuffling among the expected participants, then "
                    "Zhu & Wang's Theorem 5) loses more at small rates than ours."
                    if not u_shape else "The local epsilon is U-shaped in q, as in the paper."),
    ]


def _selection(r: StudyResults) -> list[ClaimResult]:
    out = []
    for cond, (u, w) in (("with prefix-list conditioning", ("uniform + prefix list",
                                                           "weighted + prefix list")),
                         ("without conditioning", ("uniform", "weighted"))):
        ratio = r.ratio(u, w)
        losses = [r.ratio(u, w, f"utility_loss_{m}") for m in ("weighted", "unweighted")]
        lower_loss = all(x.per_seed.size and np.all(x.per_seed < 1) for x in losses)
        verdict = ratio_verdict(ratio)
        note = (f"{r[u].stat('true_positives').fmt()} against "
                f"{r[w].stat('true_positives').fmt()} heavy hitters; utility loss uniform / "
                f"weighted: {losses[0].fmt()} (weighted metric), {losses[1].fmt()} "
                "(unweighted).")
        if verdict != HOLDS and lower_loss:
            verdict = PARTLY
            note += (" Both rules find as many heavy hitters, but uniform selection finds "
                     "heavier ones (lower utility loss in both metrics, every seed). Once the "
                     "prefix list conditions the choice, a device's eligible items are few and "
                     "the rule matters little; without conditioning uniform selection wins "
                     "clearly, as in the paper.")
        out.append(ClaimResult("selection", f"Uniform selection beats weighted selection, "
                               f"{cond}", "uniform better (figure)", ratio.fmt(), verdict, note))
    for rule in ("uniform", "weighted"):
        ratio = r.ratio(f"{rule} + prefix list", rule)
        out.append(ClaimResult(
            "selection", f"Prefix-list conditioning helps {rule} selection",
            "significant gain (figure)", ratio.fmt(), ratio_verdict(ratio),
            f"{r[f'{rule} + prefix list'].stat('true_positives').fmt()} against "
            f"{r[rule].stat('true_positives').fmt()} heavy hitters: without conditioning a "
            "device whose drawn item is off the list reports nothing."))
    out.append(ClaimResult("selection", "Empirical false-positive ratios stay below gamma = 0.5",
                           "0.30, 0.35, 0.35, 0.38", _fp_text(r),
                           _fp_verdict(r), FP_NOTE))
    return out


def _deny_list(r: StudyResults) -> list[ClaimResult]:
    warm = r.ratio("1 run + warm start", "1 run")
    two = r.ratio("2 runs", "1 run")
    listed = r["warm start list"]
    items = max(int(listed.records[0].data.get("items", 1)), 1)
    in_data = listed.stat("true_positives").mean / items
    own = r["1 run + warm start"].stat("own_true_positives")
    one = r["1 run"].stat("true_positives")
    warm_note = (f"1 run: {one.fmt()}; with the warm start: "
                 f"{r['1 run + warm start'].stat('true_positives').fmt()}, of which the run "
                 f"itself found {own.fmt()} beyond the list ({_pct(warm.of_means)}; paper "
                 f"+110%). The run finds about as many items beyond the list as it finds "
                 f"without one, so the gain is the list: (list + N) / N. A 2.1x gain means "
                 f"N ~ {items / 1.1:.0f} on the paper's data; our single run finds "
                 f"{one.mean:.0f}, so the same list adds proportionally less.")
    two_verdict = ratio_verdict(two, 1.22)
    two_note = (f"2 runs: {r['2 runs'].stat('true_positives').fmt()} "
                f"({_pct(two.of_means)}; paper +22%) at eps_local "
                f"{r['2 runs'].stat('eps_local').fmt(2)} per round instead of "
                f"{r['1 run'].stat('eps_local').fmt(2)}.")
    if two_verdict == STRONGER:
        two_note += (" The second run's deny list is the population's own top items (the "
                     "first run's output), so every device moves on to its next items, of "
                     "which it holds many; the slightly smaller local epsilon costs little.")
    return [
        ClaimResult("deny-list", "A public warm-start deny list finds about 2.1x more heavy "
                    "hitters", "2.1x", warm.fmt(), ratio_verdict(warm, 2.1), warm_note),
        ClaimResult("deny-list", "Two runs (the first run's output deny-listed in the second, "
                    "budget split) find about 1.22x more", "1.22x", two.fmt(), two_verdict,
                    two_note),
        ClaimResult("deny-list", "Nearly all of the warm start list occurs in the population",
                    "99.4% (Sentiment140 in Reddit)", f"{in_data:.1%}",
                    HOLDS if in_data > 0.9 else FAILS,
                    f"The warm start list alone: {listed.stat('true_positives').fmt()} heavy "
                    "hitters, weighted utility loss "
                    f"{listed.stat('utility_loss_weighted').fmt(3)}."),
    ]


def _codebooks(r: StudyResults) -> list[ClaimResult]:
    """Codebooks compare by whole items found (truncated codes can stand for many items, which
    flatters a code that truncates more) and by utility loss."""

    def found(label: str) -> str:
        return (f"{r[label].stat('whole_items_found').fmt()} whole items found, utility loss "
                f"{r[label].stat('utility_loss_weighted').fmt(3)}")

    out = []
    trained, letters = "default: trained (english)", "default: English letters"
    loss = r.ratio(trained, letters, "utility_loss_weighted")
    close = loss.per_seed.size > 0 and bool(np.all(loss.per_seed <= 1.1))
    out.append(ClaimResult(
        "codebooks", "On the default dataset the trained byte codebook does about as well as "
        "the English letter code (utility loss at most 10% higher)", "-", loss.fmt(),
        HOLDS if close else FAILS, f"trained: {found(trained)}; letters: {found(letters)}."))
    for population, book in (("default", "english"), ("german", "german")):
        a, b = f"{population}: trained ({book})", f"{population}: bytes"
        ratio = r.ratio(a, b, "whole_items_found")
        out.append(ClaimResult(
            "codebooks", f"A trained codebook finds more whole items than plain bytes "
            f"({population} population)", "-", ratio.fmt(), ratio_verdict(ratio),
            f"trained: {found(a)}; bytes: {found(b)} (9 bits per byte truncate most items "
            "at 60 bits)."))
    a, b = "german: trained (german)", "german: English letters"
    ratio = r.ratio(a, b, "whole_items_found")
    out.append(ClaimResult(
        "codebooks", "On German words the German codebook finds more whole items than the "
        "English letter code", "-", ratio.fmt(), ratio_verdict(ratio),
        f"German: {found(a)}; letters: {found(b)} (the letter code spends 16 bits on each byte "
        "of an umlaut)."))
    out.append(ClaimResult("codebooks", "Empirical false-positive ratios stay below gamma = 0.5",
                           "-", _fp_text(r), _fp_verdict(r), FP_NOTE))
    return out


def best_rounds(r: StudyResults, algorithm: str, prefix: str = "") -> str:
    """Label of the algorithm's configuration with the most heavy hitters (mean over seeds)."""
    labels = [v for v in r.variants if r[v].variant.params.get("algorithm") == algorithm
              and v.startswith(prefix) and (prefix or not v.startswith("single"))]
    return max(labels, key=lambda v: r[v].stat("true_positives").mean)


def _population_note(r: StudyResults) -> str:
    triehh, opt = r["TrieHH, T=12"].stat("true_positives"), r["OptPrefixTree, T=12"]
    return (f"TrieHH at T = 12 finds {triehh.fmt()} here, close to the paper's 816, but "
            f"OptPrefixTree finds {opt.stat('true_positives').fmt()} where 3.2x would be about "
            f"{3.2 * 816:.0f}: the gap depends on how many items lie between the two detection "
            f"floors (an element needs about {opt.stat('threshold').mean:.0f} reporting devices "
            f"at eps_local {opt.stat('eps_local').fmt(2)}, and theta / q = "
            f"{10 / r['TrieHH, T=12'].stat('sampling_rate').mean:.0f} devices for TrieHH), "
            "and our synthetic population has more of them than LEAF Reddit.")


def _comparison(r: StudyResults) -> list[ClaimResult]:
    out = []
    opt = {t: f"OptPrefixTree, T={t}" for t in COMPARISON_ROUNDS}
    best_opt = best_rounds(r, "optprefixtree")
    for base in BASELINES:
        name = NAMES[base]
        at12 = r.ratio(opt[12], f"{name}, T=12")
        per_t = ", ".join(f"T={t}: {r.ratio(opt[t], f'{name}, T={t}').fmt()}"
                          for t in COMPARISON_ROUNDS)
        best = best_rounds(r, base)
        verdict = ratio_verdict(at12, 3.2)
        note = (f"At every T: {per_t}. Each at its best ({best_opt} against {best}, "
                f"{r[best].stat('true_positives').fmt()}): {r.ratio(best_opt, best).fmt()}; "
                f"the paper found {name} best at T = 12 with unweighted selection.")
        if verdict == STRONGER:
            note += " " + _population_note(r)
        out.append(ClaimResult(
            "comparison", f"OptPrefixTree finds several times more heavy hitters than {name} "
            "at the same rounds and dimension limit (multiple items, 5-bit, T = 12)",
            "3.2x", at12.fmt(), verdict, note))
    opt_single = "single: OptPrefixTree, T=4 adaptive, gamma=2"
    for base, paper_single in zip(BASELINES, (1.85, 2.1), strict=True):
        name = NAMES[base]
        ratio = r.ratio(opt_single, f"single: {name}, T=4")
        best = best_rounds(r, base, "single")
        verdict = ratio_verdict(ratio, paper_single)
        note = (f"{r[opt_single].stat('true_positives').fmt()} against "
                f"{r[f'single: {name}, T=4'].stat('true_positives').fmt()} "
                f"(paper {'355' if base == 'triehh' else '314'} for {name}). {name}'s best "
                f"T here: {best.removeprefix('single: ')} (paper: T = 4).")
        if verdict == STRONGER:
            note += (" Same reason as in the multiple-item comparison: the baselines find about "
                     "what they find in the paper, OptPrefixTree more.")
        out.append(ClaimResult(
            "comparison", f"Single item, T = 4: OptPrefixTree finds more heavy hitters than "
            f"{name}", f"{paper_single}x", ratio.fmt(), verdict, note))
    local_sd = local_count_sd(r[opt[12]].stat("eps_local").mean, r.num_users)
    for central in CENTRAL:
        name = NAMES[central]
        at_t = {t: r.ratio(f"{name}, T={t}", opt[t]) for t in (4, 12)}
        verdicts = {ratio_verdict(x) for x in at_t.values()}
        verdict = verdicts.pop() if len(verdicts) == 1 else MIXED
        scale = r[f"{name}, T=12"].stat("noise_scale").mean
        central_sd = scale * math.sqrt(2.0) if central == "central-laplace" else scale
        out.append(ClaimResult(
            "comparison", f"{name[0].upper()}{name[1:]} does better still than OptPrefixTree "
            "(same rounds)", "better (figure)",
            f"T=4: {at_t[4].fmt()}; T=12: {at_t[12].fmt()}", verdict,
            f"{r[f'{name}, T=12'].stat('true_positives').fmt()} at T = 12 with noise scale "
            f"{r[f'{name}, T=12'].stat('noise_scale').fmt(1)} per coordinate and round (one "
            "trusted curator, calibrated to eps_agg over T rounds), against OptPrefixTree's "
            f"{r[opt[12]].stat('true_positives').fmt()}. Noise on a count at T = 12 (standard "
            f"deviation): {central_sd:.1f} here, {local_sd:.1f} for OptPrefixTree's estimate "
            f"(sqrt(n a0 (1 - a0)) / (a1 - a0) at eps_local "
            f"{r[opt[12]].stat('eps_local').mean:.2f}, n = {r.num_users:,}). Accounted for what "
            "is released (the sums), randomized response over n devices is a binomial "
            "mechanism whose noise is no larger than a central one's at the same (eps_agg, "
            "delta), so the paper's ordering need not hold."))
    return out


def local_count_sd(eps_local: float, num_devices: int) -> float:
    """Standard deviation of the unbiased count estimate of an item no device holds, from the
    sum of ``num_devices`` randomized responses at ``eps_local`` (the devices' exact rates)."""
    from fedhh.device.randomizer import RandomizedResponse
    from fedhh.server.estimate import rr_null_std

    return rr_null_std(num_devices, RandomizedResponse(eps_local))


def _rounds(r: StudyResults) -> list[ClaimResult]:
    from scipy.stats import spearmanr

    labels = [f"T={t}" for t in ROUNDS_SWEEP]
    tp = np.array([r[v].stat("true_positives").mean for v in labels])
    rho = float(spearmanr(np.array(ROUNDS_SWEEP), tp).statistic)
    aligned = [f"T={t}" for t in COMPARISON_ROUNDS]  # 4, 3, 2 and 1 characters per round
    per_seed = np.stack([r[v].values("true_positives") for v in aligned])
    monotone = bool(np.all(np.diff(per_seed, axis=0) > 0))
    best = labels[int(np.argmax(tp))]
    ratio = r.ratio("T=12", "T=3")
    trend = ", ".join(f"{t}: {v:.0f}" for t, v in zip(ROUNDS_SWEEP, tp, strict=True))
    if monotone and best == "T=12":
        verdict = HOLDS
    elif monotone or best == "T=12":
        verdict = PARTLY
    else:
        verdict = FAILS
    rise = "rise in every seed" if monotone else "do not rise in every seed"
    note = (f"Heavy hitters found by T: {trend} (Spearman {rho:.2f}). T = 3, 4, 6, 12 (whole "
            f"characters per round) {rise}, and the best T is {best.removeprefix('T=')}.")
    if rho < 0.95:
        note += (" The gain is not monotone in between: runs whose segments end inside a "
                 "5-bit character (T = 5, 7-11, ceil(60/T) bits) find fewer than the "
                 "character-aligned T = 6 although they spend more rounds; we have not "
                 "isolated why. T = 11's 6-bit segments cover the 60 bits in 10 rounds, so "
                 "that run pays for a round it does not use.")
    adaptive = r.ratio("T=12", "T=4 adaptive")
    return [
        ClaimResult("rounds", "Increasing the rounds from 3 to 12 (one character per round) "
                    "improves utility (multiple items, 5-bit)", "gain (figure)",
                    f"T=12 / T=3: {ratio.fmt()}", verdict, note),
        ClaimResult("rounds", "With multiple items, one character per round beats fewer, "
                    "longer adaptive rounds", "T = 12 best", adaptive.fmt(),
                    ratio_verdict(adaptive),
                    f"T = 12: {r['T=12'].stat('true_positives').fmt()}, T = 4 adaptive: "
                    f"{r['T=4 adaptive'].stat('true_positives').fmt()}: with several items "
                    "per device, more rounds let the prefix list steer each device's choice "
                    "more often, which outweighs the smaller per-round budget (the paper's "
                    "single-item argument for few rounds does not carry over)."),
    ]


EQUAL = 0.05  # "as many": within 5% in every seed


def _equal_verdict(ratio: Ratio) -> str:
    per = ratio.per_seed
    if per.size == 0:
        return MIXED
    if np.all(np.abs(per - 1) <= EQUAL):
        return HOLDS
    if np.all(per < 1 - EQUAL) or np.all(per > 1 + EQUAL):
        return FAILS
    return MIXED


def _per_round(result: VariantResult, value: Callable[[dict[str, Any]], float]) -> np.ndarray:
    """A per-round value over every run of a configuration."""
    return np.array([value(rnd) for record in result.records
                     for rnd in record.data.get("rounds", ())], dtype=np.float64)


def decode_speedups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per measured domain: each decoder's time (scaled to the dataset's devices), the
    speed-ups of the prefix trick, and the cost rule's choice against the fastest."""
    out = []
    for key in dict.fromkeys((r["series"], r["domain"]) for r in rows):
        at = {r["decoder"]: r for r in rows if (r["series"], r["domain"]) == key}
        fastest = min(at.values(), key=lambda r: r["scaled_s"])
        auto = next(r for r in at.values() if r["auto"])
        out.append({
            "series": key[0], "domain": key[1],
            "direct": at["direct"]["scaled_s"] / at["direct+prefix"]["scaled_s"],
            "histogram": at["histogram"]["scaled_s"] / at["histogram+prefix"]["scaled_s"],
            "auto": auto["decoder"], "fastest": fastest["decoder"],
            "auto_over_fastest": auto["scaled_s"] / fastest["scaled_s"],
        })
    return out


def _pi_rappor(r: StudyResults) -> list[ClaimResult]:
    ohe, pi = r["OHE+RR"], r["PI-RAPPOR"]
    found = r.ratio("PI-RAPPOR", "OHE+RR")
    fp = r.ratio("PI-RAPPOR", "OHE+RR", "false_positives")
    eps = pi.stat("eps_local")
    found_note = (
        f"Heavy hitters found: PI-RAPPOR {pi.stat('true_positives').fmt()} against OHE+RR "
        f"{ohe.stat('true_positives').fmt()} ({_pct(found.of_means)}), both at eps_local "
        f"{eps.fmt(2)}; false positives {pi.stat('false_positives').fmt()} against "
        f"{ohe.stat('false_positives').fmt()} ({fp.fmt()}). Each decoded count has exactly "
        "the law of the one-hot sum with PI-RAPPOR's rates (Lemma 4.2; "
        "tests/statistical/test_pirappor.py), whose variance is at most 3.1% larger at "
        "eps >= 4. Two things can still move PruneHH (docs/pi-rappor.md): its exact "
        "binomial thresholds sit on the lattice of counts, coarse when n a0 is small, where "
        "the rates' small difference (a0 = |S|/q against 1/(e^eps + 1)) can move a round's "
        "threshold by one count; and the counts of one prefix's completions are correlated "
        "(affine functions are only pairwise independent), by about f alpha_1 / |S| for a "
        "prefix held by a share f of the devices.")
    ohe_bytes = _per_round(ohe, lambda rnd: math.ceil(rnd["domain_size"] / 8))
    pi_bytes = _per_round(pi, lambda rnd: rnd["extra"]["report_bytes"])
    pi_decode = _per_round(pi, lambda rnd: rnd["extra"]["decode_s"])
    small = bool(pi_bytes.size) and pi_bytes.max() <= 16 and ohe_bytes.mean() >= 100 * \
        pi_bytes.mean()
    claims = [
        ClaimResult("pi-rappor", "PI-RAPPOR finds as many heavy hitters as OHE+RR at the same "
                    "eps (its utility guarantees are very similar)", "equal (no figure)",
                    found.fmt(), _equal_verdict(found), found_note),
        ClaimResult("pi-rappor", "A PI-RAPPOR report is a few field elements, not a D-bit "
                    "vector", "O(log q) bits against D bits",
                    f"{pi_bytes.mean():.1f} B against {ohe_bytes.mean():,.0f} B per device and "
                    "round" if pi_bytes.size else "-",
                    HOLDS if small else FAILS,
                    f"Bytes per device per round: PI-RAPPOR {pi_bytes.min():.0f}-"
                    f"{pi_bytes.max():.0f} (d + 1 field elements of GF(q), q just above "
                    f"max(e^eps + 1, 2^segment)); OHE+RR {ohe_bytes.min():,.0f}-"
                    f"{ohe_bytes.max():,.0f} (one bit per domain element; secure aggregation "
                    "uploads a 16- or 32-bit word per element on top). Server decoding of the "
                    f"PI-RAPPOR rounds: {pi_decode.mean():.1f} s per round on average, at most "
                    f"{pi_decode.max():.1f} s, with the decoder the cost rule picked."
                    if pi_bytes.size else "no PI-RAPPOR rounds"),
    ]
    timing = r["decode timing"].records[0].data if r["decode timing"].records else {}
    rows = timing.get("rows", [])
    if rows:
        speedups = decode_speedups(rows)
        predicted = float(timing["predicted_speedup"])
        largest = {s["series"]: s for s in speedups}  # the last (largest) domain per series
        measured = np.array([s["direct"] for s in largest.values()])
        size = float(np.exp(np.mean(np.log(measured / predicted))))
        verdict = (FAILS if np.any(measured <= 1) else WEAKER if size < 0.5
                   else STRONGER if size > 2 else HOLDS)
        text = "; ".join(f"{name} ({s['domain']:,} elements): {s['direct']:.0f}x "
                         f"(histogram: {s['histogram']:.0f}x)" for name, s in largest.items())
        claims.append(ClaimResult(
            "pi-rappor", "The prefix speed-up cuts decoding time by about (e^eps + 1) / eps",
            f"{predicted:.0f}x at eps {timing['eps_local']:.2f}", text, verdict,
            "Decoding time of all reports (scaled to the dataset's "
            f"{timing['population']:,} devices from samples; docs/benchmarks/pirappor.md "
            "measures 1.6M reports directly), direct (Algorithm 4) over direct+prefix. The "
            "appendix counts |P| q scanning steps against c |P| log q for the speed-up; we scan "
            "only the 2^s completions and compute each report's inverse once, so the measured "
            "factor is 2^s / |S| times the ratio of a scan step to a hit, which grows with the "
            "segment (first-round series) and is about e^eps + 1 once 2^s > e^eps."))
        misses = [s for s in speedups if s["auto_over_fastest"] > 1.5]
        worst = max(speedups, key=lambda s: s["auto_over_fastest"])
        claims.append(ClaimResult(
            "pi-rappor", "The cost rule picks the fastest decoder", "(guideline, no figure)",
            f"{len(speedups) - len(misses)} of {len(speedups)} domains within 1.5x of the "
            "fastest", HOLDS if not misses else PARTLY if len(misses) <= len(speedups) // 2
            else FAILS,
            f"Worst: {worst['series']} at {worst['domain']:,} elements, {worst['auto']} "
            f"{worst['auto_over_fastest']:.2f}x the time of {worst['fastest']}. The rule "
            "weighs the appendix's operation counts by measured per-operation costs "
            "(fedhh/pirappor/decoders.py)."))
    claims.append(ClaimResult("pi-rappor", "The empirical false-positive ratio stays below "
                              "gamma = 0.5 with either randomizer", "below gamma", _fp_text(r),
                              _fp_verdict(r), FP_NOTE))
    return claims


def _accounting(r: StudyResults) -> list[ClaimResult]:
    out = []
    for setting in ("multiple items", "single item"):
        exact, shuffled = f"{setting}: released sums (exact PLD)", \
            f"{setting}: shuffling (clones bound)"
        eps = r.ratio(exact, shuffled, "eps_local")
        out.append(ClaimResult(
            "accounting", f"Accounting for the released sums allows a larger eps_local than "
            f"the shuffle bound at the same (eps_agg, delta) ({setting})", "-",
            f"{r[exact].stat('eps_local').fmt(2)} against {r[shuffled].stat('eps_local').fmt(2)}",
            ratio_verdict(eps), "Both solved for the same T and number of devices; the sum "
            "accountant charges the contributors each round really had."))
        found = r.ratio(exact, shuffled, "true_positives")
        out.append(ClaimResult(
            "accounting", f"... and so finds more true heavy hitters ({setting})", "-",
            found.fmt(), ratio_verdict(found),
            f"released sums: {r[exact].stat('true_positives').fmt()}; shuffling: "
            f"{r[shuffled].stat('true_positives').fmt()} true heavy hitters."))
    out.append(ClaimResult("accounting", "Empirical false-positive ratios stay below gamma = 0.5",
                           "-", _fp_text(r), _fp_verdict(r), FP_NOTE))
    return out


CLAIMS: dict[str, Callable[[StudyResults], list[ClaimResult]]] = {
    "segmentation": _segmentation,
    "dimension": _dimension,
    "fp-ratio": _fp_ratio,
    "sampling": _sampling,
    "selection": _selection,
    "deny-list": _deny_list,
    "comparison": _comparison,
    "rounds": _rounds,
    "codebooks": _codebooks,
    "pi-rappor": _pi_rappor,
    "accounting": _accounting,
}


def evaluate_claims(results: StudyResults) -> list[ClaimResult]:
    if results.study.name in CLAIMS:
        return CLAIMS[results.study.name](results)
    return LEVER_CLAIMS[results.study.name](results)
