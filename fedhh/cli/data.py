"""`fedhh data`: generate, import, inspect and describe datasets; write the warm-start list.

    fedhh data describe [NAME]
    fedhh data generate NAME [--users N] [--seed S] [--out DIR] [--workers W] [--force]
    fedhh data import PATH [--format {text,jsonl,leaf}] --out DIR [--lowercase] [--name NAME]
    fedhh data inspect PATH_OR_NAME [--top K] [--json]
    fedhh data warm-start --out FILE [--size 2000]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedhh.cli import options
from fedhh.cli.main import usage_error
from fedhh.codec.shown import columns, fitted_rows, ljust, message_text, printable_rows
from fedhh.errors import ConfigError, DatasetError
from fedhh.input_files import missing_reason

if TYPE_CHECKING:
    from fedhh.data.dataset import FederatedDataset

INSPECT_COLUMNS_MAX = 160  # `fedhh data inspect`'s item column at most


def _import_format(text: str) -> str:
    """--format's value, in any case (``JSONL``); a tabular one (``csv``) is told what to write
    instead (before: "invalid choice: 'csv'", with no word of how to give such data)."""
    value = text.strip().lower()
    if value in ("csv", "tsv", "tab", "columns", "table", "xlsx", "parquet"):
        raise argparse.ArgumentTypeError(
            f"no format reads columns ({text!r}): write each user's items as one JSON array a "
            "line, a .jsonl file, and give --format jsonl (docs/datasets.md, 'JSON lines')")
    return value


def register(subparsers: Any) -> None:
    """Add the ``data`` command and its actions to the top-level subparsers."""
    from fedhh.data.registry import BUILTINS

    parser = subparsers.add_parser(
        "data", help="generate, import, inspect and describe datasets",
        description="Generate, import, inspect and describe datasets; write the warm-start list.",
    )
    actions = parser.add_subparsers(dest="action", required=True,
                                    parser_class=type(parser))

    describe = actions.add_parser("describe", help="list the built-in datasets and provenance")
    describe.add_argument("name", nargs="?", default=None,
                          help="describe only this built-in dataset (a folder or file: "
                               "fedhh data inspect PATH)")
    describe.add_argument("--cache-dir", type=Path, default=None,
                          help="cache folder (default: $FEDHH_CACHE or ./cache)")
    describe.set_defaults(handler=_describe)

    generate = actions.add_parser("generate", help="build a built-in dataset into the cache")
    generate.add_argument("name", choices=sorted(BUILTINS), help="built-in dataset")
    generate.add_argument("--users", type=options.positive_int, default=None,
                          help="population size (synthetic datasets; default: the dataset's)")
    generate.add_argument("--seed", type=options.non_negative_int, default=0,
                          help="seed (synthetic datasets)")
    generate.add_argument("--out", type=options.output_path, default=None,
                          help="write the dataset directory here instead of the cache (a new "
                               "or empty folder, or an earlier dataset with --force)")
    generate.add_argument("--workers", type=options.positive_int, default=None,
                          help="worker processes (default: min(2, cores))")
    generate.add_argument("--force", action="store_true",
                          help="rebuild even if cached, or replace the dataset at --out")
    generate.add_argument("--cache-dir", type=Path, default=None, help="cache folder")
    generate.set_defaults(handler=_generate)

    imp = actions.add_parser("import",
                             help="convert a text, JSON-lines or LEAF file into a dataset")
    imp.add_argument("path", type=Path, help="text file, JSON-lines file, LEAF .json file or LEAF "
                     "directory")
    imp.add_argument("--format", choices=("text", "jsonl", "leaf"), default=None, dest="fmt",
                     type=_import_format,
                     help="input format (jsonl: one JSON array or object of counts a user, for "
                          "items with spaces; docs/datasets.md); default: by the path, as "
                          "--dataset reads it: .txt text, .jsonl or .ndjson jsonl, .json or a "
                          "folder of them leaf")
    imp.add_argument("--out", type=options.output_path, required=True,
                     help="dataset directory to write (a new or empty folder, or an earlier "
                          "dataset with --force)")
    imp.add_argument("--force", action="store_true", help="replace the dataset at --out")
    imp.add_argument("--lowercase", action="store_true", help="lower-case every item")
    imp.add_argument("--name", default=None, help="dataset name (default: the file's stem)")
    imp.set_defaults(handler=_import)

    inspect = actions.add_parser("inspect", help="summary statistics and top items")
    inspect.add_argument("dataset", help="built-in name or path (dataset dir, .txt, .jsonl, "
                         ".ndjson, LEAF)")
    inspect.add_argument("--top", type=options.positive_int, default=20,
                         help="top items to list (default 20)")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")
    inspect.add_argument("--cache-dir", type=Path, default=None, help="cache folder")
    inspect.set_defaults(handler=_inspect)

    warm = actions.add_parser("warm-start", help="write the public warm-start deny list")
    warm.add_argument("--out", type=options.output_path, required=True,
                      help="file to write, one item a line")
    warm.add_argument("--size", type=options.positive_int, default=2000,
                      help="number of items (default 2000)")
    warm.set_defaults(handler=_warm_start)


def _describe(args: argparse.Namespace) -> int:
    from fedhh.data.registry import DEFAULT_DATASET, describe_datasets
    from fedhh.data.wordlists import WARM_START_SOURCE

    try:
        rows = describe_datasets(args.cache_dir, args.name)
    except DatasetError as error:
        # (a path or an imported dataset's name is what inspect reads, not describe)
        raise DatasetError(f"{error} (fedhh data inspect {shlex.quote(args.name)} describes a "
                           "dataset folder or file)") from None
    for row in rows:
        default = " (default)" if row["name"] == DEFAULT_DATASET else ""
        state = "cached" if row["cached"] else "not built yet"
        print(f"{row['name']}{default}: {row['summary']}")
        print(f"    cache: {row['cache']} ({state})")
        print(f"    provenance: {row['provenance']}")
    if args.name is None:
        print(f"warm-start list (fedhh data warm-start): {WARM_START_SOURCE}")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from fedhh.data import synthetic
    from fedhh.data.dataset import load_dataset, save_dataset
    from fedhh.data.registry import BUILTINS, builtin_path

    spec = BUILTINS[args.name]
    if not spec.synthetic and (args.users is not None or args.seed != 0):
        usage_error("fedhh data generate",
                    f"--users and --seed apply only to synthetic datasets, not {args.name}")
    started = time.perf_counter()
    if args.out is not None:
        try:
            options.check_dataset_out(args.out, args.force)
        except ConfigError as error:
            usage_error("fedhh data generate", str(error))
        if spec.synthetic:
            path = synthetic.generate_synthetic(
                args.out, num_users=args.users or spec.default_users or 1, seed=args.seed,
                workers=args.workers, name=args.name, progress=True,
            )
        else:
            from fedhh.data.shakespeare import build_shakespeare

            path = save_dataset(build_shakespeare(progress=True), args.out)
    else:
        path = builtin_path(args.name, args.cache_dir, num_users=args.users, seed=args.seed,
                            progress=True, force=args.force)
    summary = load_dataset(path, progress=True).summary()
    print(f"{args.name}: {path} ({time.perf_counter() - started:.1f} s)")
    _print_summary(summary)
    return 0


def _import(args: argparse.Namespace) -> int:
    from fedhh.data.dataset import load_dataset
    from fedhh.data.jsonl import import_jsonl
    from fedhh.data.leaf import import_leaf
    from fedhh.data.text import import_text

    if not args.path.exists():
        usage_error("fedhh data import", f"PATH {args.path} {missing_reason(args.path)}")
    try:
        options.check_dataset_out(args.out, args.force, (args.path,))
    except ConfigError as error:
        usage_error("fedhh data import", str(error))
    if args.fmt is None:
        # (before, --format was required: `fedhh data import comments.txt --out mine` was
        # refused "the following arguments are required: --format", though `--dataset
        # comments.txt` reads the same file by its extension)
        from fedhh.data.registry import source_format

        try:
            args.fmt = source_format(args.path)
        except DatasetError as error:
            usage_error("fedhh data import", str(error))
        if args.fmt == "dataset":
            usage_error("fedhh data import", f"PATH {args.path} is a dataset already (it holds "
                        "meta.json): give it as --dataset as it is")
    convert = {"leaf": import_leaf, "jsonl": import_jsonl}.get(args.fmt, import_text)
    path = convert(args.path, args.out, lowercase=args.lowercase, name=args.name, progress=True,
                   require_items=True)
    print(f"imported {args.path} -> {path}")
    _print_summary(load_dataset(path, progress=True).summary())
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from fedhh.data.registry import resolve_dataset
    from fedhh.data.truth import exact_top, ground_truth

    dataset = resolve_dataset(args.dataset, args.cache_dir, progress=True)
    summary = dataset.summary()
    tokens = dataset.tokens_per_user()
    distinct = dataset.distinct_per_user()
    truth = ground_truth(dataset, progress=True)
    top_ids, tied = exact_top(dataset, truth.weighted, args.top)
    quantiles = [0.1, 0.5, 0.9, 0.99]
    report: dict[str, Any] = {
        **summary,
        "path": str(dataset.root) if dataset.root else None,
        "provenance": dataset.provenance,
        "words_per_user_quantiles": _quantiles(tokens, quantiles),
        "distinct_words_per_user_quantiles": _quantiles(distinct, quantiles),
        "top_weighted": [
            {"item": dataset.vocabulary[i], "weighted": float(truth.weighted[i]),
             "unweighted": float(truth.unweighted[i])}
            for i in top_ids.tolist()
        ],
        "top_unweighted": [
            {"item": dataset.vocabulary[i], "unweighted": float(truth.unweighted[i])}
            for i in truth.top(args.top, weighted=False).tolist()
        ],
        "stats": dataset.stats,
        "past_the_codes": _past_the_codes(dataset, args.top),
    }
    if args.json:
        json.dump(report, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    # (a dataset folder's meta.json names it, a file's stem when imported: a stranger's words,
    # shown as a message's are, an escape sequence in them as \x1b, not sent to the terminal)
    print(f"{message_text(summary['name'])}: {message_text(str(report['path']))}")
    if dataset.provenance:
        print(f"  provenance: {message_text(dataset.provenance)}")
    _print_summary(summary)
    # (grouped as the counts above them are: a user's weighted list of page views holds
    # millions; before, "1000001 / 4294967295" under "tokens: 4,295,967,296")
    print("  words per user (10/50/90/99%): "
          + " / ".join(f"{v:,}" for v in report["words_per_user_quantiles"].values()))
    print("  distinct words per user (10/50/90/99%): "
          + " / ".join(f"{v:,}" for v in report["distinct_words_per_user_quantiles"].values()))
    share = dataset.stats.get("tail_token_share")
    # (the synthetic generator's figure; a folder's meta.json may hold anything there: before,
    # a string or null in it was a traceback)
    if isinstance(share, int | float) and not isinstance(share, bool):
        print(f"  share of tokens from the rare tail: {share:.4f}")
    # (the column fits the longest, a long URL too, up to 160 columns; a longer item, a blob of
    # 5,000 characters, is cut to them, a cut item's … at its end: before, it pushed its own
    # row's figures thousands of columns on, and widened every other row to the 160)
    # (between grapheme clusters: not half a flag)
    rows = fitted_rows([(row["item"], False) for row in report["top_weighted"]],
                       INSPECT_COLUMNS_MAX)
    shown = printable_rows(rows)
    width = min(INSPECT_COLUMNS_MAX, max([24, *map(columns, shown)]))
    # (both figures are shares, which the headers say: before, "weighted" and "users holding"
    # over 0.44444 and 0.6667 read as counts, or as nothing)
    print("  weighted share: the item's share of a user's words, averaged over the users with "
          "items\n  share of users: the share of all users holding it (docs/datasets.md, "
          "\"Ground truth\")")
    print(f"  {'rank':>4}  {ljust('item', width)} {'weighted share':>14}  "
          f"{'share of users':>14}")
    for rank, (row, item) in enumerate(zip(report["top_weighted"], shown, strict=True),
                                       start=1):
        print(f"  {rank:>4}  {ljust(item, width)} {row['weighted']:>14.5f}  "
              f"{row['unweighted']:>14.4f}")
    # (the note `fedhh simulate` and `fedhh up` print under their lists: before, this one was
    # worded apart, "an item ending in … is cut to 160 columns")
    if any(cut for _, cut in rows):
        from fedhh.cli.simulate import column_cut_note

        print(f"  {column_cut_note(report['top_weighted'], rows, INSPECT_COLUMNS_MAX)}")
    if tied:
        # (exactly equal shares: before, shares equal to 5 digits, 0.123454 beside 0.123446)
        last, listed = report["top_weighted"][-1]["weighted"], len(report["top_weighted"])
        print(f"  ({tied:,} more {'item holds' if tied == 1 else 'items hold'} exactly the "
              f"weighted share of the last row listed, {last:.5f}: the cut falls inside that "
              f"tie, its rows listed in the vocabulary's order; --top {listed + tied:,} lists "
              "them)")
    past = report["past_the_codes"]
    if past["items"]:
        # (an item of 1,023 small letters and one of 1,024 were listed alike, and nothing said
        # that no run can give the second whole)
        named = past["heaviest"][:PAST_NAMED]
        fitted = fitted_rows([(row["item"], False) for row in named], PAST_COLUMNS_MAX)
        heaviest = printable_rows(fitted)
        from fedhh.cli.simulate import shown_alike

        alike = shown_alike([row["item"] for row in named], fitted)
        print(f"  {past['items']:,} item{' is' if past['items'] == 1 else 's are'} longer than "
              f"the codes can be with the {past['codec']} codebook ({past['bits']:,} bits): "
              "a run shows each cut there, as the prefix of every item starting so, never "
              "whole (docs/codecs.md, \"How long an item can be\"); the most held: "
              + ", ".join(f"{item} ({row['unweighted']:.2%} of the users)"
                          for item, row in zip(heaviest, named, strict=True))
              + (f" ({alike} of them cut alike to {PAST_COLUMNS_MAX} columns here, different "
                 "items)" if alike else "")
              + ("" if past["items"] <= PAST_NAMED else
                 f" (--json's past_the_codes lists {len(past['heaviest']):,})"))
    return 0


PAST_COLUMNS_MAX = 40  # (each of the heaviest items past the codes' limit, in the note)
PAST_NAMED = 3  # (the note names so many of them)


def _past_the_codes(dataset: FederatedDataset, top: int) -> dict[str, Any]:
    """The items longer than the codes can be at the default codebook (``MAX_SUPPORTED_BITS``):
    ``fedhh.data.long_items.past_the_codes``, the one `fedhh simulate --json` gives at a run's
    own codes (before, this one had its own shape, without ``users`` and ``needs_bits``)."""
    from fedhh.codec import MAX_SUPPORTED_BITS, Codec
    from fedhh.config import RunConfig
    from fedhh.data.long_items import past_the_codes

    return past_the_codes(dataset, Codec.from_spec(RunConfig().codec, MAX_SUPPORTED_BITS), top)


def _quantiles(values: np.ndarray, qs: list[float]) -> dict[str, int]:
    """Nearest-rank percentiles of per-user counts: each a count some user has (the least
    whose share of users at or below it reaches q), a whole number. Before, numpy's linear
    interpolation between neighbours: "2460.1 / 8141.03 words per user"."""
    if values.size == 0:
        return {f"{q:g}": 0 for q in qs}
    return {f"{q:g}": int(v) for q, v in zip(
        qs, np.quantile(values, qs, method="inverted_cdf"), strict=True)}


def _print_summary(summary: dict[str, Any]) -> None:
    print(f"  users: {summary['users']:,}   vocabulary: {summary['vocabulary']:,}   "
          f"entries: {summary['entries']:,}   tokens: {summary['tokens']:,}")
    print(f"  mean words per user: {summary['mean_words_per_user']:,.1f}   "
          f"mean distinct words per user: {summary['mean_distinct_words_per_user']:,.1f}   "
          f"users without items: {summary['users_without_items']:,}")


def _warm_start(args: argparse.Namespace) -> int:
    from fedhh.data.wordlists import (
        WARM_START_SOURCE,
        warm_start_counts,
        warm_start_list,
        write_item_list,
    )

    available = len(warm_start_counts())
    if args.size > available:
        usage_error("fedhh data warm-start",
                    f"--size must be at most {available} (the source's size), got {args.size}")
    options.check_output("--out", str(args.out))
    path = write_item_list(warm_start_list(args.size), args.out)
    print(f"wrote {args.size} items to {path}")
    print(f"source: {WARM_START_SOURCE}")
    return 0
