"""The report folder: markdown, PNG figures, CSV and JSON of every number, and the commands.

Layout of ``<out>/``::

    README.md            the report: claims summary first, then one section per study
    claims.csv|json      every claim with the paper's number, ours, the verdict and a note
    report.json          how the report was made (command, settings, seeds, dataset, timings)
    <study>/summary.csv  per configuration: mean, sd, min, max over seeds of every metric
    <study>/runs.csv     per run: its metrics, segment lengths and exact `fedhh simulate` command
    <study>/runs.json    per run: command, argv, configuration, privacy calibration, metrics,
                         per-round diagnostics, timings and the top heavy hitters
    <study>/curves.csv   the plotted curves of every configuration (sampled ranks)
    <study>/*.png        the figures

One report at a time per folder: ``write_report`` holds an exclusive lock (flock) on the
folder while it writes, so two suites given the same ``--out`` write one after the other and
the folder is the last one's whole, never files of both. It first removes the previous report's
README.md (written last, it marks a complete report: a write cut short leaves none, not an old
README over new numbers) and the study folders the previous report.json named that this report
does not have (they would read as part of it); report.json, which names the studies, is
written before them. Every file is written to a temporary name and renamed; the temporaries of
report files that a killed writer left (SIGKILL: its clean-up never ran) are removed then too,
in the folder and in the study folders of both reports.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedhh.data.dataset import atomic_file
from fedhh.errors import ConfigError
from fedhh.experiments.analysis import SCALARS, StudyResults, VariantResult
from fedhh.experiments.claims import ClaimResult, evaluate_claims
from fedhh.experiments.plots import draw_figure, draw_summary, figure_specs, study_figures
from fedhh.experiments.store import RunRecord, jsonable
from fedhh.experiments.studies import UTILITY_GROUP, Study

log = logging.getLogger(__name__)

# Columns of a study's markdown table: (scalar, header, decimals); shown when any run has it.
TABLE = (
    ("true_positives", "found", 0),
    ("false_positives", "false pos.", 0),
    ("fp_ratio", "FP ratio", 2),
    ("round_fp_ratio", "round FP ratio", 2),
    ("own_true_positives", "found by the run", 0),
    ("utility_loss_weighted", "loss (w)", 3),
    ("utility_loss_unweighted", "loss (u)", 3),
    ("recall_top1000", "recall@1000", 2),
    ("eps_local", "eps_local", 2),
    ("sampling_rate", "sampling rate", 4),
    ("noise_scale", "noise scale", 1),
    ("wall_s", "s/run", 0),
)
OPTIONAL = {"own_true_positives", "sampling_rate", "noise_scale"}


@dataclass
class WrittenReport:
    path: Path
    claims: list[ClaimResult]


def study_results(study: Study, seeds: Sequence[int], records: dict[str, list[RunRecord]],
                  num_users: int) -> StudyResults:
    variants = {v.label: VariantResult(v, records[v.label]) for v in study.variants}
    return StudyResults(study, list(seeds), variants, num_users)


def write_report(out: str | Path, results: Sequence[StudyResults], meta: dict[str, Any]
                 ) -> WrittenReport:
    """Write the whole folder; ``meta`` describes the invocation (command, settings, timings).
    Under the folder's lock, once the previous report's README and the study folders this one
    lacks are removed (module docstring)."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    with _report_lock(root):
        studies = {res.study.name for res in results}
        check_report_folder(root, studies)  # (again: another program may have written since)
        _remove_stale_temporaries(root, ROOT_FILES)
        for name in studies:
            _remove_stale_temporaries(root / name)
        _remove_previous(root, studies)
        return _write_all(root, results, meta)


# What a study folder of a report holds (``_write_study``): a folder of these files only is
# removed when the next report in the folder lacks its study.
REPORT_SUFFIXES = (".csv", ".json", ".png")
# What the folder itself holds of a report (``_write_all``).
ROOT_FILES = frozenset({"README.md", "report.json", "claims.csv", "claims.json"})
# atomic_file's temporary for ``name``: ``.<name>.<writer's pid>.<8 hex digits>.tmp``.
TEMPORARY = re.compile(r"\.(?P<name>[^/]+)\.(?P<pid>[0-9]+)\.[0-9a-f]{8}\.tmp")


def _stale_temporary(path: Path, names: frozenset[str] | None = None) -> bool:
    """Whether ``path`` is the temporary of a report file (one of ``names``, or any name with
    a report suffix when None) whose writer is gone. Called under the folder's lock, so no
    other report writer is alive; that its pid names no process keeps what another program
    that writes this way (a result store put inside --out) is writing."""
    match = TEMPORARY.fullmatch(path.name)
    if match is None or path.is_symlink() or not path.is_file():
        return False
    name = match["name"]
    if not (name in names if names is not None else Path(name).suffix in REPORT_SUFFIXES):
        return False
    try:
        os.kill(int(match["pid"]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False  # (alive under another user; a pid no process can have is not ours)
    return False


def _remove_stale_temporaries(folder: Path, names: frozenset[str] | None = None) -> None:
    """Remove what a writer of this folder's report killed mid-write left (``_stale_temporary``):
    before, it stayed for good, and in a study folder the next report dropped kept the folder,
    with a warning that it held files other than the report's."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for path in folder.iterdir():
        if _stale_temporary(path, names):
            path.unlink(missing_ok=True)
            log.info("removed %s: a temporary file of a report whose writer was killed", path)


@contextlib.contextmanager
def _report_lock(root: Path) -> Iterator[None]:
    """The folder's report lock, held until the report is written (waits for another suite
    writing the same folder)."""
    descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # (releases the lock)


def _previous_studies(root: Path) -> list[str] | None:
    """The studies the report.json in ``root`` names, or None when it holds no report's."""
    # (RecursionError: a report.json nested thousands deep; before, a traceback out of the run)
    with contextlib.suppress(OSError, ValueError, RecursionError):
        meta = json.loads((root / "report.json").read_text(encoding="utf-8"))
        if isinstance(meta, dict) and isinstance(meta.get("studies"), list):
            return [s for s in meta["studies"] if isinstance(s, str)]
    return None


def check_report_folder(out: str | Path, studies: Iterable[str]) -> None:
    """Refuse a folder that is not a report's (no report.json of one) but holds a file or
    folder the report of ``studies`` writes, which the report would replace: before, `--out .`
    in a project replaced its README.md, unasked and for good."""
    root = Path(out)
    if not root.is_dir() or _previous_studies(root) is not None:
        return
    taken = sorted(name for name in (*ROOT_FILES, *studies)
                   if os.path.lexists(root / name))
    if taken:
        raise ConfigError(
            f"--out {out} holds {', '.join(taken)} but no report of fedhh experiments (its "
            "report.json names the studies), and the report would replace them: give a new "
            "or empty folder, or one a report was written to")


def _remove_previous(root: Path, studies: set[str]) -> None:
    """Remove the previous report's README (its completion mark) and the study folders its
    report.json named that the new report lacks (before, `segmentation` written where `all`
    had been left the other studies' folders of another invocation, maybe of another dataset,
    beside its README). A folder holding anything but report files is left, with a warning."""
    previous = _previous_studies(root) or []
    (root / "README.md").unlink(missing_ok=True)
    for name in previous:
        folder = root / name
        if name in studies or not name or "/" in name or name.startswith(".") \
                or not folder.is_dir() or folder.is_symlink():
            continue
        _remove_stale_temporaries(folder)
        files = list(folder.iterdir())
        if all(f.is_file() and f.suffix in REPORT_SUFFIXES for f in files):
            shutil.rmtree(folder)
            log.info("removed %s: the previous report's study, not in this one", folder)
        else:
            log.warning("%s is a study of the previous report in %s, not of this one, and "
                        "holds files other than the report's: left as it is", folder, root)


def _write_all(root: Path, results: Sequence[StudyResults], meta: dict[str, Any]
               ) -> WrittenReport:
    _write_json(root / "report.json", meta)  # (first: it names the studies being written)
    all_claims: list[ClaimResult] = []
    sections: list[str] = []
    for res in results:
        claims = evaluate_claims(res)
        all_claims.extend(claims)
        sections.append(_write_study(root, res, claims))
    _write_csv(root / "claims.csv", [c.to_dict() for c in all_claims])
    _write_json(root / "claims.json", [c.to_dict() for c in all_claims])
    utility = bool(results) and all(r.study.group == UTILITY_GROUP for r in results)
    _write_text(root / "README.md", _header(meta, all_claims, utility) + "\n".join(sections))
    log.info("report written to %s", root)
    return WrittenReport(root / "README.md", all_claims)


def _write_study(root: Path, res: StudyResults, claims: list[ClaimResult]) -> str:
    study = res.study
    folder = root / study.name
    folder.mkdir(parents=True, exist_ok=True)
    summary_rows, run_rows, run_json = [], [], []
    for label, vr in res.variants.items():
        row: dict[str, Any] = {"configuration": label, **vr.variant.params,
                               "segments": vr.segments, "seeds": len(vr.records)}
        for name in SCALARS:
            s = vr.stat(name)
            row.update({f"{name}_mean": s.mean, f"{name}_sd": s.sd, f"{name}_min": s.min,
                        f"{name}_max": s.max})
        summary_rows.append(row)
        for record in vr.records:
            run_row: dict[str, Any] = {"configuration": label, "seed": record.seed,
                                       "key": record.key}
            run_row.update({name: getter(record) for name, (_, getter) in SCALARS.items()})
            run_row["segments"] = " ".join(str(s) for s in record.data.get("segments", ()))
            run_row["command"] = record.command
            run_rows.append(run_row)
            run_json.append({"configuration": label, **record.to_json()})
    _write_csv(folder / "summary.csv", summary_rows)
    _write_csv(folder / "runs.csv", run_rows)
    _write_json_lines(folder / "runs.json", run_json)
    _write_json(folder / "claims.json", [c.to_dict() for c in claims])
    curve_rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    images = []
    for spec in figure_specs(res):
        for row in draw_figure(spec, res, folder / f"{spec.name}.png"):
            series = (row["configuration"], row["seed"])
            if series not in curve_rows or curve_rows[series][0]["figure"] == spec.name:
                curve_rows.setdefault(series, []).append(row)
        images.append((spec.title, f"{study.name}/{spec.name}.png"))
    draw_summary(res, folder / "found.png")
    images.append((f"{study.title}: heavy hitters found and false positives",
                   f"{study.name}/found.png"))
    images += [(title, f"{study.name}/{name}") for title, name in study_figures(res, folder)]
    _write_csv(folder / "curves.csv", [row for rows in curve_rows.values() for row in rows])
    return _section(res, claims, images)


def _section(res: StudyResults, claims: list[ClaimResult], images: list[tuple[str, str]]) -> str:
    study = res.study
    lines = [f"## {study.number}. {study.title}", "", study.description, "",
             f"*Paper:* {study.paper}. *Data:* [`{study.name}/`]({study.name}/) (summary.csv, "
             "runs.csv, runs.json, curves.csv).", ""]
    columns = [(n, h, d) for n, h, d in TABLE if n not in OPTIONAL or _informative(res, n)]
    header = ["configuration", *[h for _, h, _ in columns], "segments"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + " --- |" * len(header))
    for label, vr in res.variants.items():
        cells = [label, *[vr.stat(n).fmt(d) for n, _, d in columns], vr.segments]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Mean ± sample standard deviation over {len(res.seeds)} seeds. 'found': "
              "heavy hitters found (output items held by at least one device); FP ratio: false "
              "positives / output size; round FP ratio: false positives among the elements "
              "PruneHH kept over all rounds / elements kept (the ratio gamma controls); loss: "
              "1 - weight ratio (weighted and unweighted metric); segments: segment bits per "
              "round ('*': varied over seeds).", ""]
    lines += ["| claim | paper | ours | verdict | note |", "| --- | --- | --- | --- | --- |"]
    for c in claims:
        lines.append(f"| {c.claim} | {c.paper} | {c.ours} | **{c.verdict}** | {c.note} |")
    lines.append("")
    for title, path in images:
        lines += [f"![{title}]({path})", ""]
    lines += ["<details><summary>Commands (first seed; the other seeds differ only in "
              "<code>--seed</code>)</summary>", ""]
    for label, vr in res.variants.items():
        lines.append(f"- {label}: {code_span(vr.records[0].command)}")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def _informative(res: StudyResults, metric: str) -> bool:
    """An optional column is shown when it tells configurations apart."""
    if metric == "own_true_positives":
        return any("run_metrics" in r.data for v in res.variants.values() for r in v.records)
    means = {round(v.stat(metric).mean, 9) for v in res.variants.values()
             if v.stat(metric).n}
    return len(means) > 1


def _code_text(code: Any) -> str:
    """The fedhh code of the report and of its runs, in words ('' when the meta has none):
    the digest covers the versions of the libraries results depend on, which are named."""
    if not isinstance(code, dict) or not code.get("digest"):
        return ""
    mine = str(code["digest"])
    runs = {str(k): int(v) for k, v in (code.get("runs") or {}).items()}
    libraries = code.get("libraries")
    with_ = (" with " + ", ".join(f"{k} {v}" for k, v in libraries.items())
             if isinstance(libraries, dict) and libraries else "")
    text = f" Code: fedhh {code.get('fedhh', '?')}{with_}, digest `{mine[:12]}`"
    others = {d: n for d, n in runs.items() if d != mine}
    if not others:
        return text + " (every run)."
    told = ", ".join(f"{n} unrecorded (stored before runs named their code)"
                     if d == "unrecorded" else f"{n} by digest `{d[:12]}`"
                     for d, n in others.items())
    return (text + f" ({runs.get(mine, 0)} runs); runs reused from the store were computed "
            f"by other code: {told}. Recompute them with another --store.")


def _header(meta: dict[str, Any], claims: list[ClaimResult], utility: bool = False) -> str:
    ds = meta.get("dataset", {})
    settings = meta.get("settings", {})
    seeds = meta.get("seeds", [])
    timing = meta.get("timings", {})
    title = ("# Experiments: utility levers beyond the paper's algorithm" if utility
             else f"# Experiments: the OptPrefixTree paper's studies on {ds.get('name', '?')}")
    where = ("Each study names the populations it runs on (docs/utility.md); the suite's "
             "dataset" if utility else "Dataset")
    lines = [
        title,
        "",
        f"Generated by {code_span(str(meta.get('command', '?')))} on {meta.get('date', '?')}. "
        f"{where} {code_span(str(settings.get('dataset', '?')))}: {ds.get('users', 0):,} users, "
        f"{ds.get('vocabulary', 0):,} distinct items, {ds.get('entries', 0):,} user-item "
        f"entries. eps_agg = {settings.get('eps_agg')}, delta = {settings.get('delta')}; every "
        f"configuration is run with seeds {_seed_text(seeds)} and reported as mean ± sample "
        "standard deviation.",
        "",
        f"Runs: {timing.get('runs', 0)} ({timing.get('computed', 0)} computed by this "
        f"invocation, {timing.get('reused', 0)} reused from the result store). Wall time of "
        f"this invocation: {timing.get('invocation_s', 0) / 60:.1f} min; compute time of all "
        f"runs (sum of their wall times): {timing.get('runs_s', 0) / 60:.1f} min. How the "
        "studies are set up, and how to rerun them: `docs/experiments.md` in the repository."
        + _code_text(meta.get("code")),
        "",
        "## Claims",
        "",
        "| # | study | claim | paper | ours | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for i, c in enumerate(claims, start=1):
        lines.append(f"| {i} | {c.study} | {c.claim} | {c.paper} | {c.ours} | **{c.verdict}** |")
    lines += ["", "Verdicts: *holds* when the effect has the paper's direction in every seed and "
              "at least half its size; *weaker*/*stronger* when the direction holds with less "
              "than half / more than twice the size; *does not hold* when the direction is "
              "reversed (or there is no effect) in every seed; *inconclusive* when seeds "
              "disagree. The notes under each study give the numbers and the likely reasons.",
              "", ""]
    return "\n".join(lines)


def code_span(text: str) -> str:
    """``text`` as one markdown code span, whatever it holds: a path or command with a backtick
    in it ended a one-backtick span early and the rest read as markdown; the fence is one
    backtick longer than the longest run inside, padded with a space where the text starts or
    ends with one (CommonMark 6.1). A line break, which a span cannot hold, is shown as
    ``\\n``."""
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _seed_text(seeds: Sequence[int]) -> str:
    seeds = list(seeds)
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    fields: dict[str, None] = {}
    for row in rows:
        fields.update(dict.fromkeys(row))
    with atomic_file(path, "w") as out:
        writer = csv.DictWriter(out, fieldnames=list(fields))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(v) for k, v in row.items()})


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.5g}"
    return "" if value is None else value


def _write_json_lines(path: Path, items: list[Any]) -> None:
    """A JSON array with one compact item per line (small and diff-friendly)."""
    body = ",\n".join(json.dumps(item, default=jsonable, separators=(",", ":")) for item in items)
    _write_text(path, f"[\n{body}\n]\n")


def _write_json(path: Path, payload: Any) -> None:
    _write_text(path, json.dumps(payload, indent=1, default=jsonable) + "\n")


def _write_text(path: Path, text: str) -> None:
    """Whole or not at all: README.md is the mark of a complete report, so a write cut short
    (a full disk, a kill) must not leave part of one under that name (nor half a CSV or JSON
    another tool reads as whole)."""
    with atomic_file(path, "w") as out:
        out.write(text)
