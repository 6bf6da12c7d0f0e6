"""Entry point of the `fedhh` console script.

Each subcommand lives in its own module with a `register(subparsers)` function that adds its
parser and sets `handler`. Invalid option values end with one line naming the option and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from fedhh.errors import FedhhError

# Subcommand modules. `fedhh NAME ...` imports only fedhh.cli.NAME (`fedhh privacy` need not
# pay for matplotlib, grpc or the simulator); `fedhh --help` imports them all to list them.
SUBCOMMANDS = (
    "simulate", "data", "privacy", "up", "loadtest", "admin",
    "coordinator", "selector", "aggregator", "combiner", "device", "certs", "deploy", "health",
    "experiments",
)
# Commands that compute in this process: Ctrl-C stops them at once. (asyncio.run, which the
# simulator's round driver runs under, would otherwise only cancel its task, which notices at
# the end of the round it is computing: 13 to 25 s after the key.) The services and the
# commands that start them handle SIGINT themselves, to stop what they started.
# Commands that Ctrl-C ends with "interrupted", exit 130, after their own cleanup (a
# half-written dataset's scratch folder, the services up and loadtest started): the work they
# do is theirs to stop. SIGTERM too: TERMINABLE here, up and loadtest by their own handler.
COMPUTING = ("simulate", "data", "privacy", "experiments", "up", "loadtest")
# SIGTERM means Ctrl-C too. experiments as well: serially it builds datasets (gigabytes of
# scratch to remove) as data generate does; on Dask, Ctrl-C's path cancels the runs and closes
# the LocalCluster it started (its workers ignore SIGINT, and a SIGTERM that reaches them as
# well, from `timeout` or `kill` of the process group, ends them; the closing nannies do not
# restart them).
TERMINABLE = ("simulate", "data", "privacy", "experiments")
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of the output went away (`| head`)
# A word shaped as a negative number: -7, -0.5, -.5, -1e25, -1.5E-3, -inf, -Infinity, -nan, and
# -1_000, which reaches the option's type (fedhh/integers.py) to be refused there by name (an
# underscore is Python's syntax, not an operator's number), not taken for an unknown option.
NEGATIVE_NUMBER = re.compile(r"^-(?:(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d[\d_]*)?"
                             r"|inf|infinity|nan)$", re.IGNORECASE)


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse parser whose usage errors are a single line and exit code 2, and whose options
    are spelled out: argparse would take any unique prefix (``--dev`` for ``--devices``), hidden
    aliases that a new option would silently change the meaning of."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # A word that is a negative number is a value, not an option, in every notation the
        # option types read: argparse's own pattern knows only -5 and -0.5, so `--rounds
        # -1e25` and `--eps-agg -inf` were "expected one argument", naming no number. (The
        # pattern is argparse's, private; no fedhh option is spelled like a negative number.)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        self._words = list(sys.argv[1:] if args is None else args)  # (for _suggestion)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        said = env_file_names(f"{self._missing_command(message)}{self._suggestion(message)}")
        self.exit(2, f"{self.prog}: error: {said}\n")

    def _missing_command(self, message: str) -> str:
        """"name a command: simulate, data, ... (`fedhh --help` says what each does)" for a
        command line that names none (before, `fedhh` alone, `fedhh admin` and `fedhh data`
        said "the following arguments are required: command", naming none to choose from)."""
        chosen = next((a for a in self._actions  # argparse keeps its actions private
                       if isinstance(a, argparse._SubParsersAction)), None)
        if chosen is None or message != ("the following arguments are required: "
                                         f"{chosen.metavar or chosen.dest}"):
            return message
        what = "command" if self.prog == "fedhh" else chosen.dest
        return (f"name {'an' if what[0] in 'aeiou' else 'a'} {what}: "
                f"{', '.join(chosen.choices)} (`{self.prog} --help` says what each does)")

    def _misread(self, value: str) -> str:
        """" (--coordinatr is no option of fedhh admin: did you mean --coordinator?)" when the
        word before a refused choice is an unknown option: its value was then read as the
        choice (`fedhh admin --coordinatr HOST:PORT list` was refused as "invalid choice:
        'HOST:PORT'", naming neither the option nor the typo)."""
        words = getattr(self, "_words", [])
        at = words.index(value) if value in words else 0
        before = words[at - 1].split("=", 1)[0] if at > 0 else ""
        if before[:1] not in ("-", "\u2013", "\u2014") or before in self._option_string_actions:
            return ""
        word = "--" + before.lstrip("-\u2013\u2014")
        close, ambiguous = _guess(word, [o for o in self._option_string_actions
                                         if o.startswith("--")])
        # An option of the subcommand, exact or (if none of this command's is close) misspelt,
        # wherever the word stands: after the study, `--workerz 2` got "did you mean
        # --workers?"; before it, only "no option".
        later = self._later_option(before, word, value, words[at + 1:],
                                   guess=not (close or ambiguous))
        return later or f" ({before} is no option of {self.prog}" + (
            f": did you mean {' or '.join(close)}?)" if close else
            f": {ambiguous})" if ambiguous else ")")

    def _later_option(self, option: str, word: str, value: str, rest: list[str],
                      guess: bool) -> str:
        """" (--workers must come after the study, as in fedhh experiments all --workers 2)"
        when ``option``, given before this command's subcommand with ``value``, is an option of
        the subcommand (before, "invalid choice: '2' ... (--workers is no option of fedhh
        experiments)", as if the option did not exist); " (--workerz is no option of fedhh
        experiments: did you mean --workers, after the study, as in ...?)" when ``word``, its
        spelling with two hyphens, is close to one and ``guess``."""
        for action in self._actions:
            if not isinstance(action, argparse._SubParsersAction):  # (argparse's, private)
                continue
            chosen = next((w for w in rest if w in action.choices), None)
            owners = [action.choices[chosen]] if chosen else list(action.choices.values())
            noun = (action.metavar if isinstance(action.metavar, str) else action.dest).lower()
            example = f"{self.prog} {chosen or noun.upper()}"
            if any(option in p._option_string_actions for p in owners):
                return f" ({option} must come after the {noun}, as in {example} {option} {value})"
            if not guess:
                return ""
            known = [o for p in owners for o in p._option_string_actions if o.startswith("--")]
            close, ambiguous = _guess(word, list(dict.fromkeys(known)))
            if close:
                return (f" ({option} is no option of {self.prog}: did you mean "
                        f"{' or '.join(close)}, after the {noun}, as in {example} {close[0]} "
                        f"{value}?)")
            if ambiguous:
                return f" ({option} is no option of {self.prog}; after the {noun}, {ambiguous})"
        return ""

    def _suggestion(self, message: str) -> str:
        """" (did you mean --eps-agg?)" for a misspelt option or choice (``--eps-ag``,
        ``strat``) close to one this parser knows; "" if none is (before, the error named the
        word alone, and options are not abbreviated, so ``--eps-a`` got no hint either)."""
        if message.startswith("unrecognized arguments: "):
            known = [o for o in self._option_string_actions if o.startswith("--")]
            # ("-dataset", and "—dataset" or "–dataset" pasted from a page that typeset the
            # two hyphens as a dash, are taken as the option they spell)
            given = message.split(": ", 1)[1].split()
            # An option of this (sub)command that reached it unrecognized was given before its
            # name, where the command above has no such option (`fedhh experiments --quiet
            # all`: before, "unrecognized arguments: --quiet (did you mean --quiet?)").
            early = [w for w in given if w.split("=", 1)[0] in self._option_string_actions]
            if early:
                name = self.prog.rsplit(" ", 1)[-1]
                return (f" ({' '.join(early)} must come after {name!r}, as in {self.prog} "
                        f"{' '.join(early)})")
            words = ["--" + w.split("=", 1)[0].lstrip("-\u2013\u2014")
                     for w in given if w[:1] in "-\u2013\u2014"]
        else:
            choice = re.fullmatch(r"argument [^:]+: invalid choice: '([^']*)' "
                                  r"\(choose from (.*)\)", message)
            if choice is None:
                return ""
            misread = self._misread(choice[1])
            if misread:
                return misread
            known, words = re.findall(r"'([^']*)'", choice[2]), [choice[1]]
        guesses: list[str] = []
        notes: list[str] = []
        for word in words:
            close, ambiguous = _guess(word, known)
            guesses += close
            notes += [ambiguous] if ambiguous else []
        if guesses:
            notes.append(f"did you mean {' or '.join(dict.fromkeys(guesses))}?")
        if notes:
            return f" ({'; '.join(notes)})"
        if message.startswith("unrecognized arguments: "):
            return _elsewhere(words, self.prog)
        return ""


def _elsewhere(options: list[str], prog: str) -> str:
    """" (--json is an option of fedhh simulate and fedhh loadtest, not of fedhh up)" for
    options close to none of this command's that other commands take: one copied from another
    command's example got the refusal alone, as if misspelt."""
    parts = []
    for option in dict.fromkeys(options):
        owners = [name for name in _commands_taking(option)
                  if not prog.startswith(name)]  # (`fedhh admin start`'s own `fedhh admin`)
        if owners:
            shown = owners if len(owners) <= 3 else [*owners[:2],
                                                     f"{len(owners) - 2} other commands"]
            parts.append(f"{option} is an option of {', '.join(shown[:-1])}"
                         f"{' and ' if len(shown) > 1 else ''}{shown[-1]}, not of {prog}")
    return f" ({'; '.join(parts)})" if parts else ""


def _commands_taking(option: str) -> list[str]:
    """The `fedhh` commands (``fedhh experiments`` for any of its studies) that take
    ``option`` (the whole parser is built: an error's path only)."""
    found: dict[str, None] = {}
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop(0)
        if parser.prog != "fedhh" and option in parser._option_string_actions:
            found[" ".join(parser.prog.split()[:2])] = None
        for action in parser._actions:  # (argparse keeps its actions private)
            if isinstance(action, argparse._SubParsersAction):
                parsers += action.choices.values()
    return list(found)


def _guess(word: str, known: list[str]) -> tuple[list[str], str]:
    """The known names ``word`` is likely cut short or misspelt from, and ""; or none, and
    "--e is ambiguous: ... begin with it" when it begins more than three.

    A name cut short is the names it begins, however close another is (``stat`` was answered
    "did you mean start?", not status), and ``--eps`` is --eps-agg or --eps-local (it was
    answered with nothing). One that begins many is not answered with a far match by letters
    (``fedhh up --e`` got "did you mean --web?", which --e does not begin)."""
    import difflib

    begun = [name for name in known if name.startswith(word)] if word.strip("-") else []
    if len(begun) > 3:
        shown = begun if len(begun) <= 5 else [*begun[:4], f"{len(begun) - 4} others"]
        return [], (f"{word} is ambiguous: {', '.join(shown[:-1])} and {shown[-1]} "
                    "begin with it")
    return begun or difflib.get_close_matches(word, known, n=1, cutoff=0.75), ""


# Set by deploy/docker-compose.yml in each service (and deploy/k8s's ConfigMap, with the
# source's name in FEDHH_OPTIONS_SOURCE): "--option=VARIABLE[,VARIABLE...] ...", the variables
# each option's value is made of. The operator edits deploy/.env and never types the options,
# so a refused value is named by its variable, not only by an option they never saw.
OPTIONS_FROM_ENV = "FEDHH_OPTIONS_FROM_ENV"
OPTIONS_SOURCE = "FEDHH_OPTIONS_SOURCE"


def env_file_names(message: str) -> str:
    """``message`` naming the .env variables behind the options it names, where
    $FEDHH_OPTIONS_FROM_ENV says which: "FEDHH_QUIET_CLOSE_MS (deploy/.env, given as
    --quiet-close-ms): must be an integer, got 'abc'" for argparse's "argument
    --quiet-close-ms: ...", and " (--web-origin is FEDHH_WEB_ORIGINS in deploy/.env)" after a
    later check's words that name the option."""
    sources: dict[str, list[str]] = {}
    for word in os.environ.get(OPTIONS_FROM_ENV, "").split():
        option, _, names = word.partition("=")
        if option.startswith("--") and names:
            sources[option] = names.split(",")
    if not sources:
        return message
    where = os.environ.get(OPTIONS_SOURCE) or "deploy/.env"
    given = re.match(r"argument (--[\w-]+)(?:/[\w-]+)*: ", message)
    if given and given[1] in sources:
        return (f"{' or '.join(sources[given[1]])} ({where}, given as {given[1]}): "
                f"{message[given.end():]}")
    named = [f"{option} is {' and '.join(names)} in {where}"
             for option, names in sources.items()
             if re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", message)]
    return message + (f" ({'; '.join(named)})" if named else "")


def usage_error(parser_prog: str, message: str) -> NoReturn:
    """Fail like argparse does for a bad option value: one line, exit code 2."""
    sys.stderr.write(f"{parser_prog}: error: {env_file_names(message)}\n")
    raise SystemExit(2)


def _version() -> str:
    """The installed distribution's version (the package metadata pyproject.toml wrote)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fedhh")
    except PackageNotFoundError:  # (run from a checkout that was never installed)
        return "(not installed)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `fedhh` parser with every subcommand, or only ``only`` (one import instead of all)."""
    parser = OneLineErrorParser(
        prog="fedhh", description="Private federated heavy-hitter discovery (OptPrefixTree)."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument("--version", action="version", version=f"fedhh {_version()}")
    # (COMMAND in the usage line: the fourteen names, listed under it, made it 115 columns)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=OneLineErrorParser)
    for name in SUBCOMMANDS if only is None else (only,):
        importlib.import_module(f"fedhh.cli.{name}").register(sub)
    return parser


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace
               ) -> argparse.ArgumentParser:
    """The (sub)command's own parser: the one whose usage an error about its words shows."""
    while True:
        chosen = next((a for a in parser._actions  # argparse keeps its actions private
                       if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, chosen.dest, None) if chosen is not None else None
        if chosen is None or name not in chosen.choices:
            return parser
        parser = chosen.choices[name]


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first non-option word), if known."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


# fedhh's own options, the only ones that may come before the command
TOP_OPTIONS = ("-h", "--help", "-v", "--verbose", "--version")


def misplaced_options(words: Sequence[str]) -> str | None:
    """The error of a command's options written before the command (`fedhh --insecure up`,
    `fedhh --eps-agg 2 up`), naming the line that works; None if there are none. Before,
    argparse set them aside and the command refused them: "fedhh up: error: unrecognized
    arguments: --insecure (did you mean --insecure?)", or took a value for the command:
    "invalid choice: '2'"."""
    import shlex

    at = next((i for i, word in enumerate(words) if word in SUBCOMMANDS), None)
    if at is None:
        return None
    before = [word for word in words[:at] if word.split("=", 1)[0] not in TOP_OPTIONS]
    if not any(word.startswith("-") for word in before):
        return None
    ours = [word for word in words[:at] if word not in before]
    line = shlex.join(["fedhh", *ours, words[at], *before, *words[at + 1:]])
    return (f"{' '.join(w for w in before if w.startswith('-'))} before the command "
            f"{words[at]}: a command's options go after it: {line}")


def os_error_line(error: OSError) -> str:
    """``error`` in one line: its reason, then the path(s) it names."""
    paths = [str(name) for name in (error.filename, error.filename2) if name is not None]
    reason = error.strerror or " ".join(str(error).split()) or type(error).__name__
    return f"{reason}: {' -> '.join(paths)}" if paths else reason


# A signal again within this many seconds of the first is the same request: timeout(1) sends
# its signal to the command and then to the command's process group, so the command gets it
# twice. Before, the second one interrupted the reporting of the first: "fedhh experiments:
# interrupted", then a KeyboardInterrupt traceback (and once, a process that never exited).
DUPLICATE_SIGNAL_S = 1.0
_first_signal: dict[int, float] = {}


def _interrupt(signum: int, frame: object) -> None:
    now = time.monotonic()
    first = _first_signal.get(signum)
    if first is not None and now - first < DUPLICATE_SIGNAL_S:
        return
    _first_signal[signum] = now
    raise KeyboardInterrupt


def _interrupt_once(signum: int, frame: object) -> None:
    for each in (signal.SIGINT, signal.SIGTERM):
        signal.signal(each, signal.SIG_IGN)
    raise KeyboardInterrupt


def interrupt_once() -> None:
    """SIGINT and SIGTERM for the commands that start services (`up`, `loadtest`): the first
    interrupts (KeyboardInterrupt: their ``with LocalTopology`` block stops every service and
    removes its temporary folder), and every later one is ignored until the command ends, so
    none cuts that clean-up short (each service's stop is bounded: SIGKILL after its grace).
    Before, a second signal, timeout(1)'s to the process group 0.2 s after its first, or a
    second Ctrl-C, struck inside the clean-up: `up` said "the services are stopped; their
    temporary folder is removed" and left the aggregator, the coordinator and device
    processes running, their folder gone. Call from the main thread."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt_once)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _escape_unencodable_output() -> None:
    """Write a character stdout's encoding lacks as a backslash escape (\\xe9, \\U0001f600)
    rather than fail: under a non-UTF-8 locale or PYTHONIOENCODING (a Latin-1 terminal, a
    Windows console redirected to a file), an item holding such a character ended `fedhh
    simulate` with a UnicodeEncodeError traceback in the middle of its table. stderr already
    escapes them (Python's default there)."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and (sys.stdout.encoding or "").lower().replace("-", "") \
            not in ("utf8", "utf8sig"):
        reconfigure(errors="backslashreplace")


def cache_hint(error: OSError) -> str:
    """" (the dataset cache: ...)" when ``error`` is about a folder or file in the dataset
    cache, which is ./cache unless FEDHH_CACHE says otherwise (before, a read-only working
    folder said only "Permission denied: /srv/ro/cache", not why fedhh writes there nor how
    to choose another place)."""
    registry = sys.modules.get("fedhh.data.registry")
    if registry is None or error.filename is None:
        return ""
    try:
        root = os.path.abspath(registry.cache_root())
        where = os.path.abspath(os.fsdecode(error.filename))
    except (OSError, TypeError, ValueError):
        return ""
    if os.path.commonpath([root, where]) != root:
        return ""
    return (f" (the dataset cache, where datasets are built and imported: "
            f"{'$' + registry.CACHE_ENV if os.environ.get(registry.CACHE_ENV) else './cache'}"
            f"; set {registry.CACHE_ENV} to a folder you can write; docs/datasets.md)")


class CommandFormatter(logging.Formatter):
    """A library's warning written as the command's own ('fedhh simulate: warning: ...'), the
    user reading it beside them; before, in the log's form ('2026-12-06 04:52:49,343 WARNING
    fedhh.data.text: ...') under fedhh simulate and fedhh data import. With --verbose, the
    log's form stays, its time and logger read with the debugging lines it adds."""

    def __init__(self, prog: str) -> None:
        super().__init__()
        self.prog = prog

    def format(self, record: logging.LogRecord) -> str:
        text = f"{self.prog}: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def main(argv: Sequence[str] | None = None) -> int:
    # gRPC's C core logs a failed TLS handshake (a scanner, a client without --ca, a wrong
    # CA) as a plain-text INFO line on stderr: in a service's log of JSON lines, and on an
    # operator's terminal above the one-line error that explains it. Errors only, unless the
    # caller asks otherwise; read when grpc is first imported, which is below.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    _escape_unencodable_output()
    words = sys.argv[1:] if argv is None else list(argv)
    misplaced = misplaced_options(words)
    if misplaced is not None:
        usage_error("fedhh", misplaced)
    parser = build_parser(_command(words))
    args, unknown = parser.parse_known_args(words)
    if "-v" in unknown or "--verbose" in unknown:
        # fedhh's own option after the command (`fedhh up --verbose`): taken there too (before,
        # "unrecognized arguments: --verbose", as argparse takes it before the command only)
        args.verbose = True
        unknown = [w for w in unknown if w not in ("-v", "--verbose")]
    if unknown:  # named by the subcommand that was given them, not by "fedhh"
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    # Every line a command's run ends with is named by the command path the user typed, as
    # argparse names its own errors ("fedhh experiments segmentation: error: ..."); before,
    # fedhh's own errors named only the first word ("fedhh experiments: error: ...").
    prog = _innermost(parser, args).prog
    stderr = logging.StreamHandler()
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
                        if args.verbose else CommandFormatter(prog))
    # (a service's command replaces it with its JSON lines: options.configure_logging)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        handlers=[stderr])
    computing = args.command in COMPUTING
    # (up's and loadtest's services take SIGTERM their own way)
    signals = (signal.SIGINT, signal.SIGTERM) if args.command in TERMINABLE else (signal.SIGINT,)
    previous = {signum: signal.getsignal(signum) for signum in signals}
    if computing:
        _first_signal.clear()
        for signum in previous:
            signal.signal(signum, _interrupt)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        # (a client, `admin wait` or `health`, printed a traceback of where Ctrl-C found it)
        sys.stderr.write(f"{prog}: interrupted\n")
        return INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    except FedhhError as error:
        usage_error(prog, str(error))
    except OSError as error:
        # A path the command cannot read or write (a folder that does not exist or cannot be
        # written, a file where a folder is wanted): one line naming it, as a bad option value
        # gets; -v shows the traceback.
        if args.verbose:
            raise
        usage_error(prog, os_error_line(error) + cache_hint(error))
    except Exception as error:
        # A service's refusal (gRPC status) is an answer, not a crash. grpc is only looked up
        # here, so commands that never load the network stack do not import it.
        grpc = sys.modules.get("grpc")
        if grpc is not None and isinstance(error, grpc.RpcError):
            from fedhh.cli.options import connection_problem

            code, details = error.code(), error.details() or ""
            address = getattr(args, "coordinator", None) or getattr(args, "address", None)
            hint = ""
            if code == grpc.StatusCode.UNAVAILABLE:
                # gRPC's words name no cause (a plaintext call to a TLS port: "Socket closed";
                # a CA that did not sign the certificate: "... signature failure: OK")
                hint = connection_problem(details, address, getattr(args, "ca", None))[0]
            elif code == grpc.StatusCode.UNIMPLEMENTED and address:
                # (`admin --coordinator` given the aggregator's port: "Method not found!")
                hint = (f"the service at {address} does not serve this call: give the "
                        "coordinator's gRPC address, in the compose stack port 7000; 7100 is "
                        "the aggregator's" if args.command == "admin" else
                        f"the service at {address} does not serve this call")
            elif code == grpc.StatusCode.UNAUTHENTICATED and args.command == "admin":
                # (a scratch folder's token against another's coordinator: the words named
                # neither the file nor which token the coordinator holds)
                given = getattr(args, "token_file", None)
                hint = (f"{'the token in --token-file ' + given if given else '$FEDHH_ADMIN_TOKEN'}"
                        " is not this coordinator's admin token: give the file its "
                        "--admin-token-file reads, admin.token in the --secrets folder of the "
                        "`fedhh certs` that set it up; in the compose stack, "
                        "deploy/secrets/admin.token")
            # (the details are the server's words, whoever sent them: one line, escaped)
            from fedhh.codec.shown import message_text

            said = message_text(details)
            usage_error(prog,
                        f"{code.name}: {said}" + (f" ({hint})" if hint else ""))
        raise
    finally:
        if computing:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
