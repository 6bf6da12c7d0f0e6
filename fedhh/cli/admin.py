"""`fedhh admin`: the operator's client of the coordinator's admin API.

    fedhh admin --coordinator HOST:PORT --ca tls/ca.pem --token-file secrets/admin.token \\
        start --run-id r1 --eps-agg 1 --rounds 4 --target-devices 1000 --min-devices 800
    fedhh admin ... status r1 | results r1 | wait r1 | cancel r1 | list
    fedhh admin ... devices        # how many devices are enrolled; tokens unused/used/expired
    fedhh admin ... mint-tokens --users 0:250 --out devices-a.tokens   # one device process's

The admin token comes from --token-file or $FEDHH_ADMIN_TOKEN. Results print as JSON on stdout
(results' truncated rows, cut prefixes among them, each with its `cause`: `no rounds left`,
`lost in round N`, the codes' limit or a privacy budget that fits no completion round more,
as the dashboard's JSON download says, and its
`completionNote` when the completion rounds lost many prefixes, "" otherwise); wait tells each
round's progress on stderr as it happens, prints the run as it ended, and exits 0 only for a
run that is done: 1 (with the run's error on stderr) for one that failed or was cancelled, so
that `wait r1 && results r1`, or a Kubernetes Job's `set -e` script, stops there instead of
reporting success.
Hand each device process only its own tokens: with --users START:END the file holds
`USER TOKEN` lines for those users only, for `fedhh device --users tokens`; --count N writes N
tokens, line u for dataset user u. An existing --out is replaced only with --force: it may hold
earlier tokens that are still valid.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fedhh.cli import options
from fedhh.config import (
    DEFAULT_COMPLETION_ROUNDS,
    MAX_DEVICES,
    Mode,
    RunConfig,
    eps_agg_for_completions,
)
from fedhh.config.flags import add_run_arguments, config_from_args
from fedhh.integers import read_integer

# The longest --ttl-hours, a year: the coordinator's MAX_TOKEN_TTL_S (fedhh_coordinator.service)
# in hours. Before, --ttl-hours 1e306 was inf seconds, minted as a token that never expired.
MAX_TTL_HOURS = 365 * 24
# The shortest, a second (MIN_TOKEN_TTL_S): a shorter lifetime expires before a device enrolls.
MIN_TTL_S = 1


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("admin", help="operate the coordinator (start, inspect runs)",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    _connection(p, argparse.SUPPRESS)
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    # The connection options are accepted after the action too (`fedhh admin list
    # --coordinator X`): each action's parser has them, without defaults of its own.
    common = argparse.ArgumentParser(add_help=False)
    _connection(common, argparse.SUPPRESS)
    start = actions.add_parser("start", help="start a run (every knob of fedhh.config.RunConfig)",
                               parents=[common])
    start.add_argument("--run-id", default="", help="the run's id (default: a random one, "
                                                    "drawn here and printed if the start is "
                                                    "not answered)")
    start.add_argument("--timeout", type=options.number_in(
                           lambda seconds: 0 < seconds <= 86_400, "more than 0 and at most "
                           "86,400 seconds (a day)"), default=None, metavar="SECONDS",
                       help="how long to wait for the coordinator to plan and store the run "
                            "(default: 300, fedhh.rpc.admin_client's START_TIMEOUT_S; "
                            "planning a long run takes seconds, more on a busy machine)")
    add_run_arguments(start, Mode.NETWORK)
    for action, text in (("status", "a run's state, rounds and privacy spent"),
                         ("results", "a finished run's heavy hitters, rounds and ledger"),
                         ("wait", "wait until a run is done, failed or cancelled (each round's "
                                  "progress on stderr)"),
                         ("cancel", "cancel a pending or running run (a running one stops "
                                    "when its round under way ends, at once while that round "
                                    "is still in its check-in, nothing charged)")):
        sub = actions.add_parser(action, help=text, parents=[common])
        sub.add_argument("run_id", help="the run's id")
    actions.add_parser("list", help="every run, without its rounds, deny list or codebook "
                                    "(status has them)", parents=[common])
    actions.add_parser("devices", help="how many devices are enrolled (and when the latest "
                                       "was), and the enrollment tokens unused, used and "
                                       "expired", parents=[common])
    mint = actions.add_parser("mint-tokens", help="one-time enrollment tokens, one per device",
                              parents=[common])
    how_many = mint.add_mutually_exclusive_group(required=True)
    how_many.add_argument("--count", type=options.integer_in(
                              1, MAX_DEVICES, "tokens (fedhh's most devices)"),
                          help="how many tokens (one enrolls one device, once), line u for "
                               "dataset user u")
    how_many.add_argument("--users", type=user_span, metavar="START:END",
                          help="one token for each dataset user START..END-1, written as "
                               "USER TOKEN lines (one device process's share)")
    mint.add_argument("--ttl-hours", default=None, type=options.number_in(
                          # (the seconds as sent: mint-tokens asks for hours * 3600)
                          lambda hours: hours * 3600 >= MIN_TTL_S and hours <= MAX_TTL_HOURS,
                          f"a second ({MIN_TTL_S / 3600:.6g}) to {MAX_TTL_HOURS:,} (a year; "
                          "leave it out for tokens valid until used)"),
                      help=f"tokens expire after this long, a second ({MIN_TTL_S / 3600:.6g}) "
                           f"to {MAX_TTL_HOURS:,} (a year) (default: valid until used)")
    mint.add_argument("--label", default="", help="a note kept with the tokens")
    mint.add_argument("--request-id", default="", metavar="ID",
                      help="this mint's id (default: a random one, drawn here and printed if "
                           "the mint is not answered); the same command with the same id "
                           "takes out the unused tokens its earlier calls stored, answered "
                           "or not, and mints anew: give each new mint an id of its own")
    mint.add_argument("--out", required=True, metavar="PATH",
                      help="write the tokens here, one per line (mode 0600); not an existing "
                           "file, unless --force")
    mint.add_argument("--force", action="store_true",
                      help="replace an existing --out (the tokens it holds stay valid at the "
                           "coordinator until used or expired)")
    p.set_defaults(handler=run)


def _connection(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--coordinator", metavar="HOST:PORT", default=default,
                        type=options.remote_address,
                        help="the coordinator's address (required)")
    parser.add_argument("--ca", default=default,
                        help="CA certificate (default: plaintext, loopback only)")
    # (the services and devices take --insecure for plaintext; an operator of a plaintext
    # stack wrote it here too and was refused "unrecognized arguments")
    parser.add_argument("--insecure", action="store_true", default=default,
                        help="plaintext, loopback only: what no --ca means, said outright")
    parser.add_argument("--token-file", default=default,
                        help="admin token file (default: $FEDHH_ADMIN_TOKEN)")


def user_span(text: str) -> range:
    """START:END, dataset users START..END-1 (at least one)."""
    start, sep, end = text.partition(":")
    try:
        # (read as every integer option is, fedhh/integers.py: 1e3:2e3 too; before, int())
        span = range(read_integer(start), read_integer(end)) if sep else None
    except ValueError:  # (ConfigError too)
        span = None
    if span is None or span.start < 0 or not span:
        raise argparse.ArgumentTypeError(f"expected START:END with 0 <= START < END, got "
                                         f"{text!r}")
    users = span.stop - span.start  # (len() of a range past 2**63 raised OverflowError)
    if users > MAX_DEVICES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_DEVICES:,} users, one token "
                                         f"each (fedhh's most devices), got {users:,}")
    return span


def unfinished_results(results: Any) -> str:
    """The note on stderr for the results of a run that is not done: its heavy hitters are
    those of its rounds released so far, not the run's (before, nothing said so: the JSON of
    a running or failed run read as a final list, save its ``state``)."""
    released = sum(1 for r in results.rounds if r.state == "released")
    what = {"pending": "has not started", "running": "is still running",
            "failed": "failed", "cancelled": "was cancelled"}.get(results.state,
                                                                  f"is {results.state}")
    return (f"run {results.run_id} {what}: its heavy hitters and cut prefixes are those "
            f"of the {released} round{'' if released == 1 else 's'} released so far, not a "
            "finished run's" + (f" (`fedhh admin ... wait {results.run_id}` waits for it)"
                                if results.state in ("pending", "running") else ""))


def add_causes(shown: dict[str, Any], results: Any, run: Any) -> None:
    """Give each truncated row of ``shown`` (``results``, a ``Results`` reply, as JSON) its
    ``cause``: why it was not completed, in the words of `fedhh simulate --json`, `fedhh up`
    and the dashboard's downloads (``fedhh.server.causes.cut_cause``: ``no rounds left``,
    ``lost in round N``, the codes' limit, or no completion round in the privacy budget),
    read against ``run``, the run (a ``Run`` reply: its stored ``RunConfig``, for the code
    width and completion rounds, and its eps_local), and the last round it released. Before,
    these results alone listed a cut prefix with no word of why, where every other surface
    says it. And its ``prefix_bytes``, how many of its items' first bytes it holds
    (``fedhh.codec.shown.cut_bytes``), as `fedhh simulate --json` gives it."""
    from fedhh.codec.shown import cut_bytes
    from fedhh.rpc.run_config import from_proto
    from fedhh.server.causes import cut_cause, ran_out_cause

    stored = from_proto(run.config)
    width = stored.code_bits(Mode.NETWORK)
    ran_out = ran_out_cause(stored, run.eps_local, planner=True)
    last = max((r.round for r in results.rounds if r.state == "released"), default=0)
    for entry, hitter in _rows(shown, results):
        if hitter.truncated:
            entry["cause"] = cut_cause(hitter.round, hitter.bits, width, last, ran_out)
            # (how much of its items the row is: before, its … alone said it was cut)
            entry["prefix_bytes"] = cut_bytes(hitter.item)


def completion_note(shown: dict[str, Any], results: Any, run: Any) -> str:
    """``fedhh.server.causes.lost_in_completion_note`` of ``results`` (a ``Results`` reply;
    ``shown``, it as JSON, its cut prefixes' causes given by ``add_causes``) read against
    ``run``, the run (a ``Run`` reply: its stored ``RunConfig``, for its main rounds and
    completion weight, and its eps_local; None when no row was truncated: nothing lost), with
    its released rounds' thresholds, then ``completion_budget_note`` when a row's cause is the
    privacy budget; "" when none. The JSON's ``completionNote``: before, `fedhh simulate` and
    `fedhh up` printed it, and a user reading these results' JSON of the same run was told
    nothing of --completion-weight."""
    if run is None:
        return ""
    from fedhh.rpc.run_config import from_proto
    from fedhh.server.causes import completion_budget_note, lost_in_completion_note

    stored = from_proto(run.config)
    causes = [str(row.get("cause", "")) for row in shown.get("cutPrefixes", [])]
    thresholds = {r.round: r.threshold for r in results.rounds if r.state == "released"}
    lost = lost_in_completion_note(causes, [(h.round, h.truncated) for h in results.heavy_hitters],
                                   stored.rounds, stored.completion_weight, thresholds)
    every = causes + [str(row.get("cause", "")) for row in shown.get("heavyHitters", [])]
    return " ".join(filter(None, (lost, completion_budget_note(stored, run.eps_local, every,
                                                                  planner=True))))


def show_codes(shown: dict[str, Any], results: Any) -> None:
    """Give each row of ``shown`` (``results``, a ``Results`` reply, as JSON) its whole code
    as ``code``, the decimal string proto3's JSON writes a fixed64 as, read from its
    ``code_bytes`` (the code's ceil(width / 8) big-endian bytes). The wire's fixed64 ``code``
    holds a code of up to 64 bits and is absent past them (an older coordinator sent 0): before,
    once completion rounds made the codes wider (576 bits with the default run config), every
    row showed ``"code": "0"``. A row without ``code_bytes`` (a coordinator that sent none had
    codes of 64 bits at most) keeps its ``code``."""
    for entry, hitter in _rows(shown, results):
        if hitter.code_bytes:
            entry["code"] = str(int.from_bytes(hitter.code_bytes, "big"))


def _rows(shown: dict[str, Any], results: Any) -> Iterator[tuple[dict[str, Any], Any]]:
    """Each row of ``shown`` (``results`` as JSON) with the row of ``results`` it writes."""
    for key, rows in (("heavyHitters", results.heavy_hitters),
                      ("cutPrefixes", results.cut_prefixes)):
        yield from zip(shown.get(key, []), rows, strict=True)


def run_trim_note(run: Any) -> str | None:
    """``fedhh.server.segment.trim_note`` for a run's released rounds (a ``Run`` reply): the
    prefixes a round kept that the next round's segment left out (each round's ``trimmed``),
    the next round's list and segment read from its own summary. None when none were."""
    from fedhh.rpc.run_config import from_proto
    from fedhh.server.segment import trim_note

    released = {r.round: r for r in run.rounds if r.state == "released"}
    # (the next round's list and segment, from its released attempt: an attempt's summary
    # holds them only once it released, so a running run's open or aborted next attempt read
    # "the next round queried 0 (0-bit segments ...)")
    nexts = {r.round: r for r in run.rounds if r.state == "released"}
    rows = [{"round": r.round, "trimmed": r.trimmed,
             "continuing": nexts[r.round + 1].prefixes,
             "next_segment_bits": nexts[r.round + 1].segment_bits}
            for r in sorted(released.values(), key=lambda r: r.round)
            if r.trimmed and r.round + 1 in nexts]
    if not rows:
        return None
    return trim_note(rows, from_proto(run.config).resolved_dim_limit(Mode.NETWORK))


def dropped_completions(asked: RunConfig, stored: RunConfig, devices_flags: str) -> str:
    """A note when the coordinator stored fewer completion rounds than were asked for (it
    drops the last ones when n_min devices cannot budget them: each round's own local
    epsilon, eps_local + ln(weight), must stay positive); "" otherwise. Before, nothing said
    so, and URLs and e-mail addresses came back cut. ``devices_flags``: the flags of the
    printing command that raise n_min (`fedhh up` has no --min-devices)."""
    if stored.completion() >= asked.completion():
        return ""
    # (the default's rounds are not "asked for": a user who never named them read so)
    which = ("(the default)" if asked.completion_rounds == DEFAULT_COMPLETION_ROUNDS
             else "asked for")
    # (without completion rounds the main rounds' segments are planned to reach max_bits; with
    # any, each takes the adaptive segment, which reaches as far as its list allows: 52 bits of
    # a 60-bit max_bits for 1,200 devices of odd items, 74 for 20,000. Before, the note said
    # "the 60 bits the main rounds cover" either way)
    cut = (f"items longer than the {stored.max_bits} bits the main rounds then cover come back "
           "cut" if not stored.completion() else "items the main rounds leave unended (the "
           "long ones: URLs, e-mail addresses) that these rounds cannot complete come back cut")
    # (the least eps_agg, to 3 significant digits, that budgets one round more, checked by the
    # coordinator's own planner: before, a figure ~2% above it, and before that none)
    from fedhh_coordinator.runs import open_ledger

    needed = eps_agg_for_completions(stored, stored.completion() + 1, open_ledger)
    which_more = "one more" if stored.completion() else "the first"
    raise_to = (f" (--eps-agg {needed:g} budgets {which_more} at {stored.min_devices} devices)"
                if needed is not None else "")
    from fedhh.server.causes import past_max_eps_local

    remedy = past_max_eps_local(stored) or (
        f"more devices ({devices_flags}) or a larger --eps-agg budget more{raise_to}")
    return (f"{stored.completion()} of the {asked.completion()} completion rounds {which} "
            f"can be budgeted with {stored.min_devices} devices at eps_agg "
            f"{stored.eps_agg:g} (each round's local epsilon, eps_local + ln(its weight), must "
            f"stay positive): {cut}; {remedy}")


def unanswered_start(run_id: str, asked: str) -> str:
    """What a StartRun of ``run_id`` that was not answered (its deadline, the connection lost)
    leaves the operator; ``asked``: the --run-id given ("" when drawn here). The coordinator
    goes on storing a run whose caller gave up, so the run may have started: before, the
    bare DEADLINE_EXCEEDED said nothing of it, and the id was drawn at the coordinator, so
    the same command again started a second run charging the same devices."""
    again = "the same command" + ("" if asked else f" with --run-id {run_id}")
    return (f"run {run_id} may have started (the coordinator finishes storing it after the "
            f"call gives up): `fedhh admin ... status {run_id}` shows it; {again} is safe, "
            "answered that run, never a second (a --timeout longer than the default waits "
            "for a busy coordinator)")


def fleet_note(client: Any, config: RunConfig) -> str | None:
    """A note when fewer devices have enrolled than the run's min_devices, or None. (Before,
    such a run was stored as pending and each attempt's check-in aborted short of it, the
    run failing a minute or more later, with nothing said at the start.) Devices may still be
    enrolling, so this is a note, and the run goes on; a coordinator that cannot answer the
    count (an older one) gets no note."""
    import grpc

    try:
        enrolled = client.enrollment().devices_enrolled
    except grpc.RpcError:
        return None
    if enrolled >= config.min_devices:
        return None
    return (f"{enrolled:,} device{'s have' if enrolled != 1 else ' has'} enrolled so "
            f"far, fewer than the run's --min-devices {config.min_devices:,}: each attempt's "
            f"check-in aborts short of it until more enrol, and the run fails after its "
            f"first round's {config.max_attempts} attempts (`fedhh admin ... devices` counts them; "
            "devices enrol as their processes start with their enrollment tokens)")


def run(args: argparse.Namespace) -> int:
    import grpc
    from google.protobuf.json_format import MessageToDict

    from fedhh.cli.main import INTERRUPTED
    from fedhh.cli.narrator import Narrator
    from fedhh.errors import ConfigError
    from fedhh.rpc import serving
    from fedhh.rpc.admin_client import START_TIMEOUT_S, AdminClient, new_run_id
    from fedhh.rpc.credentials import read_secret, write_private
    from fedhh.v1 import coordinator_pb2 as pb

    coordinator = getattr(args, "coordinator", None)
    ca, token_file = getattr(args, "ca", None), getattr(args, "token_file", None)
    if not coordinator:
        raise ConfigError("--coordinator HOST:PORT is required (before or after the action)")
    if ca and getattr(args, "insecure", False):
        raise ConfigError("give --ca (TLS) or --insecure (plaintext on loopback), not both")
    if not ca and not serving.is_loopback(coordinator):
        raise ConfigError(f"--ca is required for a non-loopback coordinator ({coordinator})")
    token = read_secret(token_file, "FEDHH_ADMIN_TOKEN", "admin token", "--token-file")
    stored: Any = None  # results with a truncated row: the run (a Run reply; add_causes)
    # Each line of its own on stderr leads with the command, as its errors do: "fedhh admin
    # start: note: ..." (before, a bare "note:", where every other command said "fedhh X:
    # warning:"). Notes: the run goes on as the coordinator took it.
    said = f"fedhh admin {args.action}"
    if args.action == "mint-tokens":
        # before minting: tokens the store holds that nobody received are lost seats
        options.check_output("--out", args.out)
        if Path(args.out).exists() and not args.force:
            # It may hold tokens minted earlier and not yet handed out, still valid.
            raise ConfigError(f"--out {args.out} already exists (earlier tokens?); choose "
                              "another path, or add --force to replace it")
    with AdminClient(coordinator, token, ca) as client:
        if args.action == "start":
            from fedhh.rpc.run_config import from_proto, to_proto

            config = config_from_args(args, Mode.NETWORK)
            options.warn_deny_items_cut(config, "fedhh admin start")
            run_id = args.run_id or new_run_id()
            try:
                reply: Any = client.start_run(to_proto(config), run_id,
                                                 args.timeout or START_TIMEOUT_S)
            except grpc.RpcError as error:
                if serving.never_sent(error):
                    print(f"{said}: note: the call never reached {coordinator}, so no run "
                          "started", file=sys.stderr)
                elif error.code() in serving.COMMAND_RETRIED:
                    print(f"{said}: note: {unanswered_start(run_id, args.run_id)}",
                          file=sys.stderr)
                raise
            note = dropped_completions(config, from_proto(reply.config), "--min-devices")
            if note:
                print(f"{said}: note: {note}", file=sys.stderr)
            from fedhh.cli.simulate import warn_deadline

            warn_deadline(from_proto(reply.config), "fedhh admin start", Mode.NETWORK)
            few = fleet_note(client, from_proto(reply.config))
            if few:
                print(f"{said}: note: {few}", file=sys.stderr)
        elif args.action == "mint-tokens":
            from fedhh.errors import StateError
            from fedhh.rpc.admin_client import PartlyMinted, new_mint_id

            users = range(args.count) if args.users is None else args.users
            mint_id = args.request_id or new_mint_id()

            def write(tokens: list[str]) -> str | None:
                """None when the minted ``tokens`` are written to --out; when it cannot be
                written after all (its folder gone, the disk full), printed to standard error
                as the file would hold them, and the words that say so: tokens valid at the
                coordinator are not lost with the error (before: the OS's error alone, naming
                the temporary file, and the tokens nowhere)."""
                lines = tokens if args.users is None else [f"{u} {t}" for u, t in zip(
                    users, tokens, strict=False)]
                text = "".join(f"{line}\n" for line in lines)
                try:
                    write_private(args.out, text)
                except OSError as error:
                    sys.stderr.write(text)
                    sys.stderr.flush()
                    return (f"--out {args.out} could not be written ({error.strerror or error}); "
                            f"the {len(tokens):,} tokens minted, valid at the coordinator, are "
                            "printed above on standard error, as the file would hold them: "
                            "save them")
                return None

            try:
                tokens = client.mint_tokens(len(users), (args.ttl_hours or 0) * 3600, args.label,
                                            mint_id)
            except grpc.RpcError as error:
                if error.code() in serving.COMMAND_RETRIED and not serving.never_sent(error):
                    again = "the same command" + (
                        "" if args.request_id else f" with --request-id {mint_id}")
                    print(f"{said}: note: mint {mint_id} was not answered: tokens it stored, "
                          f"if any, count as unused though nobody has them; {again} takes "
                          "them out and mints anew", file=sys.stderr)
                raise
            except PartlyMinted as partly:
                # Those minted are valid at the coordinator: kept, not lost with the error
                where = write(partly.tokens) or f"those are written to {args.out}"
                rest = users[len(partly.tokens):]
                raise StateError(f"{partly}: {where} (users {users.start}..{rest.start - 1}); "
                                 f"mint the rest with --users {rest.start}:{rest.stop} and "
                                 "another --out") from None
            failed = write(tokens)
            if failed is not None:
                raise StateError(failed)
            print(f"{len(tokens)} enrollment tokens written to {args.out}")
            return 0
        elif args.action == "list":
            reply = pb.ListRunsResponse(runs=client.runs())
        elif args.action == "devices":
            # Counts as JSON numbers (proto3's JSON writes 64-bit ones as strings), keys as
            # the other actions' (lowerCamelCase); the latest enrollment's time as UTC too.
            answer = client.enrollment()
            shown: dict[str, Any] = {"devicesEnrolled": answer.devices_enrolled,
                     "lastEnrolledAt": answer.last_enrolled_at,
                     "tokensUnused": answer.tokens_unused, "tokensUsed": answer.tokens_used,
                     "tokensExpired": answer.tokens_expired}
            if answer.last_enrolled_at:
                shown["lastEnrolledUtc"] = datetime.datetime.fromtimestamp(
                    answer.last_enrolled_at, datetime.UTC).isoformat(timespec="seconds")
            print(json.dumps(shown, indent=2))
            return 0
        elif args.action == "status":
            reply = client.run(args.run_id)
        elif args.action == "results":
            reply = client.results(args.run_id)
            if any(h.truncated for h in (*reply.heavy_hitters, *reply.cut_prefixes)):
                # (the results carry no config: the run's, for its code width, and its
                # eps_local, for what its budget left of the completion rounds)
                stored = client.run(args.run_id)
            if reply.state != "done":
                print(f"{said}: note: {unfinished_results(reply)}", file=sys.stderr)
        elif args.action == "wait":
            # Each round's stages and outcome as they happen, on stderr (stdout stays the
            # JSON): the wait was silent for the minutes a run takes, like a hung command.
            narrator = Narrator()

            def progress(run_: Any) -> None:
                with contextlib.redirect_stdout(sys.stderr):
                    narrator(run_)

            try:
                reply = client.wait(args.run_id, 24 * 3600, on_change=progress)
            except KeyboardInterrupt:
                # Ctrl-C stops the waiting, not the run: say so, and how to stop the run
                print(f"fedhh admin {args.action}: interrupted; run {args.run_id} goes on at "
                      f"the coordinator (`fedhh admin ... status {args.run_id}` shows it, `cancel "
                      f"{args.run_id}` stops it)", file=sys.stderr)
                return INTERRUPTED
        else:
            reply = client.cancel(args.run_id)
            if reply.state == "running":
                # (the reply said "running" and nothing else: the coordinator stops the run
                # when the round under way ends, or at once in its check-in, ac88ad6)
                print(f"{said}: note: run {args.run_id} stops when its round under way ends "
                      "(at once if the round is still in its check-in, nothing charged); "
                      f"`fedhh admin ... wait {args.run_id}` returns once it has",
                      file=sys.stderr)
            elif reply.state in ("done", "failed"):
                # (before, the run came back as it was and nothing said the cancel did nothing)
                print(f"{said}: note: run {args.run_id} had already ended ({reply.state}): "
                      "the cancel changed nothing", file=sys.stderr)
    # Every field, zeros too: a round with "kept": 0 left the key out, so a script reading
    # it met a KeyError exactly when a round found nothing.
    shown = MessageToDict(reply, always_print_fields_with_no_presence=True)
    if args.action == "results":
        show_codes(shown, reply)
        # The ledger as the object it is, `fedhh simulate --json`'s "ledger": the wire carries
        # it as JSON text, which printed as one string inside this JSON ("ledgerJson": "{...}")
        # that a script had to parse a second time.
        text = shown.pop("ledgerJson", "")
        shown["ledger"] = json.loads(text) if text else None
    if stored is not None:
        add_causes(shown, reply, stored)
    if args.action == "results":
        # (a field of the JSON, always there: a line printed into it would break its reading)
        shown["completionNote"] = completion_note(shown, reply, stored)
    print(json.dumps(shown, indent=2))
    if args.action in ("wait", "status"):
        # (a round's "trimmed" in the JSON above, said in words: before, nothing did)
        trimmed = run_trim_note(reply)
        if trimmed:
            print(f"{said}: note: {trimmed}", file=sys.stderr)
    if args.action == "wait" and reply.state != "done":
        # (before: 0 whatever the run's end, so `wait r1 && results r1` and the k8s start-run
        # Job went on as if a failed run had found its heavy hitters)
        why = f": {reply.error}" if reply.error else ""
        print(f"fedhh admin {args.action}: run {args.run_id} ended {reply.state}{why}",
              file=sys.stderr)
        return 1
    return 0
