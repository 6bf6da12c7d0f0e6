"""Figures in the style of the paper's: marginal discovered frequencies and counts (sliding
window W = 50, with the true-histogram line) and total utility loss, one row of panels per
figure, plus a bar chart of heavy hitters found and false positives per configuration.

Curves show the first seed's run of each configuration (runs of one seed and setting share
their ground truth, so one true-histogram line serves them all); legends give the mean and
standard deviation of heavy hitters found over all seeds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.config import RunConfig
from fedhh.data.dataset import atomic_file
from fedhh.experiments.analysis import StudyResults
from fedhh.experiments.store import RunRecord
from fedhh.experiments.studies import BASELINES, CENTRAL, COMPARISON_ROUNDS, NAMES
from fedhh.metrics import WINDOW, Truth, marginal_curve

DPI = 90


@dataclass(frozen=True)
class FigureSpec:
    name: str                 # file stem
    title: str
    labels: tuple[str, ...]   # configurations drawn, in legend order


def figure_specs(results: StudyResults) -> list[FigureSpec]:
    """The figures of a study: one per setting, and the comparison's paper-style views."""
    study = results.study
    if study.name == "comparison":
        return _comparison_figures(results)
    if study.name == "pi-rappor":
        return [FigureSpec("pi-rappor", f"{study.number}. {study.title}",
                           tuple(v.label for v in study.variants if v.spec is not None))]
    by_setting: dict[str, list[str]] = {}
    for v in study.variants:
        by_setting.setdefault(v.setting, []).append(v.label)
    multiple = len(by_setting) > 1
    return [FigureSpec(study.name + ("-" + s.replace(", ", "-").replace(" ", "-")
                                     if multiple else ""),
                       f"{study.number}. {study.title} ({s})", tuple(labels))
            for s, labels in by_setting.items()]


def _comparison_figures(r: StudyResults) -> list[FigureSpec]:
    from fedhh.experiments.claims import best_rounds

    algorithms = ("optprefixtree", *BASELINES, *CENTRAL)
    best = tuple(best_rounds(r, a) for a in algorithms)
    figs = [FigureSpec("comparison-best", "7. Each algorithm at its best T (multiple items, "
                       "5-bit)", best)]
    for t in (4, 12):
        figs.append(FigureSpec(f"comparison-T{t}", f"7. All algorithms at T = {t} (multiple "
                               "items, 5-bit)", tuple(f"{NAMES[a]}, T={t}" for a in algorithms)))
    for base in BASELINES:
        figs.append(FigureSpec(f"comparison-{base.replace('+', 'p')}-rounds",
                               f"7. {NAMES[base]} by rounds (multiple items, 5-bit)",
                               tuple(f"{NAMES[base]}, T={t}" for t in COMPARISON_ROUNDS)))
    single = tuple(v for v in r.variants if v.startswith("single"))
    figs.append(FigureSpec("comparison-single", "7. Single item, 5-bit: OptPrefixTree (T = 4, "
                           "gamma = 2) and the baselines by rounds", single))
    return figs


def merged_truth(records: Sequence[RunRecord]) -> Truth:
    """One truth from the slices stored with runs that share it."""
    codes = np.concatenate([r.arrays["truth_codes"] for r in records])
    weighted = np.concatenate([r.arrays["truth_weighted"] for r in records])
    unweighted = np.concatenate([r.arrays["truth_unweighted"] for r in records])
    codes, first = np.unique(codes, return_index=True)
    return Truth(codes, weighted[first], unweighted[first])


def loss_curve(output_codes: np.ndarray, truth: Truth, which: str) -> np.ndarray:
    """1 - WR over the top i of the output (by true frequency), for i = 1..|H|."""
    found = np.sort(truth.lookup(np.unique(output_codes), which))[::-1]
    top = truth.ranking(which)[: found.size]
    top = np.concatenate([top, np.zeros(found.size - top.size)])
    best = np.cumsum(top)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(best > 0, 1.0 - np.cumsum(found) / np.where(best > 0, best, 1), 0.0)


def draw_figure(spec: FigureSpec, results: StudyResults, path: str | os.PathLike[str]
                ) -> list[dict[str, Any]]:
    """Write the figure's PNG; returns the plotted numbers as CSV rows (sampled ranks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [results[label].records[0] for label in spec.labels]
    truth = merged_truth(records)
    single = all(_single(results[label].variant.spec) for label in spec.labels)
    panels = [("weighted", "frequency"), ("unweighted", "count"), ("weighted", "loss")]
    if not single:
        panels.append(("unweighted", "loss"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.0), dpi=DPI)
    colors = _colors(results.study.name, len(records))
    rows: list[dict[str, Any]] = []
    users = results.num_users
    longest = 0
    for i, (label, record) in enumerate(zip(spec.labels, records, strict=True)):
        stat = results[label].stat("true_positives")
        legend = f"{label}: {stat.fmt()}"
        color = colors[i]
        style = "--" if results.study.name == "rounds" and "adaptive" in label else "-"
        codes = record.output_codes
        curves = {}
        for which in ("weighted", "unweighted"):
            # Over the true positives only: false positives have frequency 0 (they sit at the
            # end of H ordered by true frequency and cannot be drawn on a log scale).
            window = marginal_curve(codes, truth, which)[0]
            positives = int(np.count_nonzero(truth.lookup(np.unique(codes), which) > 0))
            curves[f"window_{which}"] = window[:positives]
            curves[f"loss_{which}"] = loss_curve(codes, truth, which)
        longest = max(longest, curves["loss_weighted"].size)
        for ax, (which, kind) in zip(axes, panels, strict=True):
            x = np.arange(1, curves[f"window_{which}"].size + 1)
            if kind == "frequency":
                ax.plot(x, curves[f"window_{which}"], style, color=color, lw=1.2, label=legend)
            elif kind == "count":
                # A configuration may run on its own dataset (study 9): its own population size.
                size = record.data.get("dataset", {}).get("users", users)
                ax.plot(x, curves[f"window_{which}"] * size, style, color=color, lw=1.2)
            else:
                x = np.arange(1, curves[f"loss_{which}"].size + 1)
                ax.plot(x, curves[f"loss_{which}"], style, color=color, lw=1.2)
        rows.extend(_sampled_rows(spec.name, label, record.seed, curves, users))
    top = {w: _truhist(truth, w, longest) for w in ("weighted", "unweighted")}
    for ax, (which, kind) in zip(axes, panels, strict=True):
        x = np.arange(1, top[which].size + 1)
        if kind == "frequency":
            ax.plot(x, top[which], "k--", lw=1, label="TruHist")
            ax.set_yscale("log")
            ax.set_title(f"Marginal discovered frequencies ({which})", fontsize=9)
            ax.set_ylabel(f"sum of frequencies over a window of {WINDOW}")
        elif kind == "count":
            ax.plot(x, top[which] * users, "k--", lw=1)
            ax.set_yscale("log")
            ax.set_title(f"Marginal discovered counts ({'devices' if single else 'holders'})",
                         fontsize=9)
            ax.set_ylabel(f"sum of counts over a window of {WINDOW}")
        else:
            ax.set_title(f"Total weight-ratio loss ({which})", fontsize=9)
            ax.set_ylabel("1 - WR(top i of H)")
        ax.set_xlabel("heavy hitters, by true frequency")
        ax.grid(True, which="both", alpha=0.3)
    rows.extend(_sampled_rows(spec.name, "TruHist", records[0].seed,
                              {"window_weighted": top["weighted"],
                               "window_unweighted": top["unweighted"]}, users))
    fig.suptitle(spec.title, fontsize=11)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center",
               ncol=min(4, len(records) + 1), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 + 0.035 * ((len(records) + 1) // 4), 1, 0.95))
    save_png(fig, path)
    plt.close(fig)
    return rows


def save_png(fig: Any, path: str | os.PathLike[str]) -> None:
    """Write ``fig`` as a PNG whole or not at all, as the report's CSV and JSON: savefig writes
    in place, so a write cut short (a full disk, a kill) left part of a PNG under the name the
    README links, which a viewer shows as a broken or cropped figure."""
    with atomic_file(Path(path)) as out:
        fig.savefig(out, format="png")


SEQUENTIAL = ("dimension", "fp-ratio", "sampling", "rounds")


def _colors(study: str, n: int) -> list[Any]:
    """Ordered sweeps get a sequential colormap, other studies a qualitative one."""
    import matplotlib.pyplot as plt

    if study in SEQUENTIAL and n > 1:
        cmap = plt.get_cmap("viridis")
        return [cmap(0.9 * i / (n - 1)) for i in range(n)]
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def _single(spec: RunConfig | None) -> bool:
    return spec is not None and spec.single_item


def _truhist(truth: Truth, which: str, length: int) -> np.ndarray:
    top = truth.ranking(which)[:length]
    cum = np.concatenate(([0.0], np.cumsum(top)))
    idx = np.arange(top.size)
    return cum[idx + 1] - cum[np.maximum(idx - WINDOW, 0)]


def sampled_ranks(n: int) -> list[int]:
    """0-based ranks kept in the CSV: every rank up to 100, every 10th up to 1000, then every
    50th, and the last."""
    return [i for i in range(n) if i < 100 or (i < 1000 and (i + 1) % 10 == 0)
            or (i + 1) % 50 == 0 or i == n - 1]


def _sampled_rows(figure: str, label: str, seed: int, curves: dict[str, np.ndarray],
                  users: int) -> list[dict[str, Any]]:
    n = max(c.size for c in curves.values())
    ranks = sampled_ranks(n)
    rows = []
    for i in ranks:
        row: dict[str, Any] = {"figure": figure, "configuration": label, "seed": seed,
                               "rank": i + 1}
        for name, curve in curves.items():
            row[name] = float(curve[i]) if i < curve.size else ""
        row["window_count_unweighted"] = (row["window_unweighted"] * users
                                          if row.get("window_unweighted", "") != "" else "")
        rows.append(row)
    return rows


def draw_summary(results: StudyResults, path: str | os.PathLike[str]) -> None:
    """Heavy hitters found and false positives per configuration, mean ± sd over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [v for v in results.variants if results[v].stat("true_positives").n]
    tp = [results[v].stat("true_positives") for v in labels]
    fp = [results[v].stat("false_positives") for v in labels]
    y = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.32 * len(labels)), dpi=DPI)
    ax.barh(y - 0.2, [s.mean for s in tp], 0.4, xerr=[s.sd for s in tp], label="heavy hitters "
            "found", color="tab:blue", capsize=2)
    ax.barh(y + 0.2, [s.mean for s in fp], 0.4, xerr=[s.sd for s in fp],
            label="false positives", color="tab:orange", capsize=2)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"mean ± sd over {len(results.seeds)} seeds")
    ax.set_title(f"{results.study.number}. {results.study.title}", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)


def study_figures(results: StudyResults, folder: str | os.PathLike[str]
                  ) -> list[tuple[str, str]]:
    """A study's figures beyond the curves and the summary: (title, file name) of each."""
    if results.study.name != "pi-rappor":
        return []
    return _pi_rappor_figures(results, folder)


def _pi_rappor_figures(results: StudyResults, folder: str | os.PathLike[str]
                       ) -> list[tuple[str, str]]:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedhh.experiments.claims import decode_speedups

    number = results.study.number
    out = []
    # Bytes per device per round (first seed's runs).
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=DPI)
    for label, color in (("OHE+RR", "tab:blue"), ("PI-RAPPOR", "tab:orange")):
        records = results[label].records
        if not records:
            continue
        rounds = records[0].data.get("rounds", [])
        size = [(r["domain_size"] + 7) // 8 if label == "OHE+RR" else r["extra"]["report_bytes"]
                for r in rounds]
        ax.plot(range(1, len(size) + 1), size, "o-", color=color, label=label)
        for i, b in enumerate(size, start=1):
            ax.annotate(f"{b:,}", (i, b), textcoords="offset points", xytext=(4, 4),
                        fontsize=7)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("round")
    ax.set_ylabel("bytes per device")
    ax.set_title(f"{number}. Report size per device and round", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, Path(folder) / "pi-rappor-bytes.png")
    plt.close(fig)
    out.append(("Bytes per device per round", "pi-rappor-bytes.png"))
    timing = results["decode timing"].records
    rows = timing[0].data.get("rows", []) if timing else []
    if rows:
        series = list(dict.fromkeys(r["series"] for r in rows))
        fig, axes = plt.subplots(1, len(series), figsize=(5.2 * len(series), 4.2), dpi=DPI)
        styles = {"direct": ("tab:blue", "-"), "histogram": ("tab:green", "-"),
                  "direct+prefix": ("tab:blue", "--"), "histogram+prefix": ("tab:green", "--")}
        for ax, name in zip(np.atleast_1d(axes), series, strict=True):
            mine = [r for r in rows if r["series"] == name]
            for decoder, (color, style) in styles.items():
                points = [r for r in mine if r["decoder"] == decoder]
                ax.plot([r["domain"] for r in points], [r["scaled_s"] for r in points],
                        style, marker="o", color=color, label=decoder)
            chosen = [r for r in mine if r["auto"]]
            ax.scatter([r["domain"] for r in chosen], [r["scaled_s"] for r in chosen], s=120,
                       facecolors="none", edgecolors="black", label="cost rule's choice")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("domain size |P| 2^s")
            ax.set_ylabel(f"seconds for {mine[0]['population']:,} reports")
            shape = ("one prefix, 10- to 22-bit segments" if name == "first round"
                     else "12-bit segments, 1 to 2441 prefixes")
            ax.set_title(f"{name} ({shape})", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
        speed = decode_speedups(rows)
        eps = timing[0].data["eps_local"]
        fig.suptitle(f"{number}. PI-RAPPOR decoding time at eps {eps:.2f} (prefix speed-up "
                     f"{min(s['direct'] for s in speed):.0f}-{max(s['direct'] for s in speed):.0f}"
                     f"x; appendix: ~{timing[0].data['predicted_speedup']:.0f}x)", fontsize=10)
        np.atleast_1d(axes)[0].legend(fontsize=7)
        fig.tight_layout()
        save_png(fig, Path(folder) / "pi-rappor-decode.png")
        plt.close(fig)
        out.append(("Server decoding time against the domain size",
                    "pi-rappor-decode.png"))
    return out
