"""Creating a run and rebuilding its working parts from the store.

``create_run`` is what StartRun does: validate the configuration for the network, solve the
per-round local epsilon for n_min contributors (the ledger), encode the deny list, and store the
run with its initial tree state, in one transaction. ``RunParts.load`` rebuilds the prefix tree,
its state and the ledger of a stored run, as the runner and the results call need them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeVar

import numpy as np

from fedhh import __version__
from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.config import MAX_DENY_ITEMS, Mode, RunConfig, with_most_completions
from fedhh.errors import ConfigError, NotFoundError, StoreDamaged, shown
from fedhh.privacy import PrivacyLedger, methods
from fedhh.privacy import ledger as ledger_format
from fedhh.privacy.accountant import allocation_offsets
from fedhh.server import LocalRandomizer, PrefixTree, TailKind, TreeState
from fedhh.server.prefixtree import Found
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.slow_reads import shared
from fedhh_coordinator.store import (
    ACTIVE,
    RUN_ID,
    RUN_ID_RULE,
    RunHead,
    RunRow,
    Store,
    decoded,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


async def create_run(store: Store, config: RunConfig, run_id: str = "",
                     budget: LifetimeBudget | None = None) -> RunRow:
    """Validate, plan and store a new run (pending); raises ConfigError or PrivacyError.

    The request is validated before ``budget`` (the coordinator's lifetime budget) is checked:
    a malformed field is a ConfigError naming it, not a PrivacyError about the budget (before,
    StartRun checked the budget first, and delta = 1.0 was "exceeds every device's lifetime
    budget", FAILED_PRECONDITION, rather than "delta must be in (0, 1)").

    All of it runs off the event loop (the store is thread-safe): the solver takes a fraction
    of a second, and a long deny list seconds more to check, encode and store (170,000 items:
    ~1.3 s), during which the coordinator would otherwise answer no device and no caller."""
    return await asyncio.to_thread(_create_run, store, config, run_id, budget)


def check_run_id(run_id: str) -> None:
    """ConfigError unless ``run_id`` is a run id a caller may choose (``RUN_ID_RULE``): checked
    before the store is asked anything about it."""
    if not RUN_ID.fullmatch(run_id):
        raise ConfigError(f"run_id must be {RUN_ID_RULE}, got {shown(run_id)}")


def _create_run(store: Store, config: RunConfig, run_id: str,
                budget: LifetimeBudget | None) -> RunRow:
    config.validate(Mode.NETWORK)
    run_id = run_id or secrets.token_hex(8)
    check_run_id(run_id)
    if budget is not None:
        budget.check_run(config.eps_agg, config.delta)
    # Too few devices for the later completion rounds' weights (their local epsilon would not
    # stay positive): the run goes without them, and stores so.
    asked = config.completion()
    config, ledger = with_most_completions(config, open_ledger, lambda ledger: ledger.eps_local)
    if config.completion() < asked:
        log.warning("completion rounds dropped: too few devices to budget them", extra={
            "run_id": run_id, "asked": asked, "kept": config.completion(),
            "min_devices": config.min_devices})
    codec = Codec.from_spec(config.codec, config.code_bits(Mode.NETWORK))
    deny = np.unique(codec.encode_many(config.deny_items()).codes)
    mechanism, rounds = mechanisms(config, ledger)
    tree = PrefixTree(config.tree(Mode.NETWORK), codec, mechanism, deny, rounds)
    store.create_run(run_id, config.to_dict(), ledger.eps_local,
                     tree.initial_state().to_dict(), ledger.to_dict(), cw.to_ints(deny))
    return store.run(run_id)


def open_ledger(config: RunConfig) -> PrivacyLedger:
    """The run's ledger: the local epsilon solved for (eps_agg, delta) over the rounds at
    n_min contributors, capped at ``max_eps_local`` (less noise than the devices accept would
    only get every task refused; a smaller epsilon spends less than the budget allows). With
    completion rounds the rounds are an allocation (``RunConfig.round_weights``): each round
    runs and is charged at its own local epsilon (``PrivacyLedger.round_epsilon``)."""
    method = config.privacy_method or methods.DEFAULT_METHOD
    weights = config.round_weights()

    def ledger_at(eps_local: float | None) -> PrivacyLedger:
        # (solved no higher than the cap: a target above what the cap spends is met at it)
        if weights is not None:
            return PrivacyLedger.open_allocated(
                config.eps_agg, config.delta, allocation_offsets(weights), config.min_devices,
                1.0, eps_local=eps_local, cap=config.max_eps_local)
        return PrivacyLedger.open(config.eps_agg, config.delta, config.rounds,
                                  config.min_devices, 1.0, method, eps_local=eps_local,
                                  cap=config.max_eps_local)

    ledger = ledger_at(config.eps_local)
    if ledger.eps_local > config.max_eps_local:
        ledger = ledger_at(config.max_eps_local)
    return ledger


def mechanisms(config: RunConfig, ledger: PrivacyLedger
               ) -> tuple[LocalRandomizer, tuple[LocalRandomizer, ...] | None]:
    """The randomizer of the run and, with an allocation, of each round."""
    tail = TailKind(config.tail)
    rounds = None
    if ledger.offsets:
        rounds = tuple(LocalRandomizer(ledger.round_epsilon(i), tail)
                       for i in range(ledger.rounds))
    return LocalRandomizer(ledger.eps_local, tail), rounds


@dataclass
class RunParts:
    """A stored run's configuration, prefix tree, tree state and ledger."""

    run_id: str
    config: RunConfig
    tree: PrefixTree
    state: TreeState
    ledger: PrivacyLedger

    @classmethod
    def load(cls, row: RunRow) -> RunParts:
        """StoreDamaged if the row's config, ledger or tree state does not read back."""
        return RunFixed.of(row).parts(row)


@dataclass(frozen=True)
class RunFixed:
    """What of a stored run never changes once StartRun stored it: its configuration and its
    prefix tree (codec, deny list, and mechanisms at the ledger's eps_local and allocation,
    which charges leave as they are: ``PrivacyLedger.record`` adds spends), with its row's
    ``created_at`` (``RunHead``), which tells it from any other run of its id. Kept, it
    rebuilds the run's parts from the changing part of its row alone (``parts``)."""

    config: RunConfig
    tree: PrefixTree
    created_at: float = 0.0
    # what a reader derives from it, by name, made once (GetRun's wire config: ~0.85 s of
    # converting 1,000,000 deny items)
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, row: RunRow, created_at: float = 0.0) -> RunFixed:
        """StoreDamaged if the row's config, ledger or deny list does not read back."""
        config = stored_config(row)
        mechanism, rounds = mechanisms(config, stored_ledger(row))
        width = config.code_bits(Mode.NETWORK)
        tree = PrefixTree(config.tree(Mode.NETWORK), run_codec(config), mechanism,
                          _read(row, "deny_codes", lambda codes: cw.from_ints(codes, width)),
                          rounds)
        return cls(config, tree, created_at)

    def parts(self, row: RunRow | RunHead) -> RunParts:
        """The run's parts with ``row``'s tree state and ledger (StoreDamaged if they do not
        read back)."""
        return RunParts(row.run_id, self.config, self.tree,
                        _read(row, "tree", TreeState.from_dict), stored_ledger(row))


K = TypeVar("K")


class Latest(Generic[K, T]):
    """The values read latest, by key: at most ``size``, their weights (``weigh``) at most
    ``weight`` in all, the latest one kept whatever it weighs. Thread-safe."""

    def __init__(self, size: int, weight: int, weigh: Callable[[T], int]) -> None:
        self.size, self.weight, self._weigh = size, weight, weigh
        self._kept: OrderedDict[K, tuple[T, int]] = OrderedDict()
        self._weighs = 0  # (of the values kept)
        self._lock = threading.Lock()

    def get(self, key: K) -> T | None:
        """The value kept of ``key`` (now the latest read), or None."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                return None
            self._kept.move_to_end(key)
            return kept[0]

    def put(self, key: K, value: T, over: T | None = None) -> None:
        """Keep ``value`` as the latest read, where ``key`` holds nothing or ``over``: a
        value another caller kept meanwhile, read later, stays."""
        weighs = self._weigh(value)
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[0] is over:
                self._weighs += weighs - (kept[1] if kept is not None else 0)
                self._kept[key] = (value, weighs)
            self._kept.move_to_end(key)
            while len(self._kept) > 1 and (len(self._kept) > self.size
                                           or self._weighs > self.weight):
                self._weighs -= self._kept.popitem(last=False)[1][1]

    def __len__(self) -> int:
        return len(self._kept)


# The runs whose fixed parts (``RunFixed``: config and tree, its deny list's codes) are kept,
# the latest read: each a run's page, download, live render and GetRun rebuilt from its row
# whole (~3 s with a 1,000,000-item deny list), and 32 live pages of one run held every slow
# reads' thread. A few, and their deny lists FIXED_DENY_ITEMS items at most among them: a run
# with 1,000,000 (``MAX_DENY_ITEMS``) of 35 characters holds ~160 MiB kept
# (/tmp/p58admin/fixed_rss.py), and 8 such runs viewed held 1.3 GB.
FIXED_RUNS = 8
FIXED_DENY_ITEMS = 2 * MAX_DENY_ITEMS


class FixedRuns:
    """The runs' fixed parts (``RunFixed``), each loaded once in a slow reads' thread for
    every caller that comes while it loads and kept for the latest ``size`` runs read, ``items``
    deny items at most among them (the latest run's kept whatever it holds): the dashboard's
    views and the admin service's GetRun share one. ``get`` is used on the event loop,
    ``current`` in the slow reads' threads."""

    def __init__(self, size: int = FIXED_RUNS, items: int | None = None) -> None:
        self._kept: Latest[str, RunFixed] = Latest(
            size, FIXED_DENY_ITEMS if items is None else items, _deny_items)
        # run id -> its load under way, which the callers that come meanwhile await
        self._loading: dict[str, asyncio.Future[RunFixed]] = {}

    async def get(self, store: Store, run_id: str) -> RunFixed:
        """The run's ``RunFixed``, kept or loaded (NotFoundError, StoreDamaged as
        ``Store.run``). The caller checks it against the row it reads (``current``): a run
        of the id created since is another run."""
        fixed = self._kept.get(run_id)
        if fixed is None:
            fixed = await shared(self._loading, run_id, load_fixed, store, run_id)
            self._kept.put(run_id, fixed)
        return fixed

    def current(self, store: Store, run_id: str, fixed: RunFixed) -> tuple[RunHead, RunFixed]:
        """The changing part of the run's row and ``fixed``, loaded again and kept in its
        place if the row is not the one ``fixed`` was built from (another run of its id,
        created since: its row deleted, a store restored from a backup). Before, the stale
        one stayed kept, and each call after loaded the new run's row whole again."""
        row = store.run_head(run_id)
        if row.created_at != fixed.created_at:
            stale, fixed = fixed, load_fixed(store, run_id)
            self._kept.put(run_id, fixed, over=stale)
        return row, fixed


def _deny_items(fixed: RunFixed) -> int:
    return len(fixed.tree.deny)


def load_fixed(store: Store, run_id: str) -> RunFixed:
    """The run's ``RunFixed``, labelled with its row's created_at read before its row: a run
    of the id stored again between the two reads leaves it labelled as the old one, which the
    next ``current`` finds stale (read after, the old run's parts would pass as the new's)."""
    created_at = store.run_head(run_id).created_at
    return RunFixed.of(store.run(run_id), created_at)


def run_codec(config: RunConfig) -> Codec:
    """The codec of a networked run of ``config``."""
    return Codec.from_spec(config.codec, config.code_bits(Mode.NETWORK))


# The runs whose deny lists are kept displayed (ShownDenyLists), the latest shown: a list may
# hold 1,000,000 items (MAX_DENY_ITEMS), ~93 MiB displayed (35 characters an item), so a few
# runs only, and DENY_SHOWN_ITEMS items at most among them.
DENY_SHOWN_RUNS = 4
DENY_SHOWN_ITEMS = 2 * MAX_DENY_ITEMS


class ShownDenyLists:
    """Runs' deny lists as shown (``Codec.display_item`` of each code), each displayed once
    for GetResults and the dashboard both, in a slow reads' thread, for the last ``size`` runs
    shown (``DENY_SHOWN_ITEMS`` items at most among them), from the run's fixed part
    (``RunFixed``: its tree's codec and deny codes), and known by its ``created_at``, as it is:
    a run of the id stored since is another. Displaying takes ~0.2 ms a code with the unicode
    codebook: GetResults displayed a 300,000-item list at each call (~60 s of CPU), apart from
    the dashboard's copy of it."""

    def __init__(self, size: int = DENY_SHOWN_RUNS) -> None:
        # run id -> the created_at of the run shown, and its list
        self._kept: Latest[str, tuple[float, tuple[str, ...]]] = Latest(
            size, DENY_SHOWN_ITEMS, lambda kept: len(kept[1]))
        # (run id, created_at) -> its display under way, which the callers that come
        # meanwhile await
        self._showing: dict[tuple[str, float], asyncio.Future[tuple[str, ...]]] = {}

    def kept(self, run_id: str, created_at: float) -> tuple[str, ...] | None:
        """The list of the run of ``created_at`` if it is kept (now the latest shown)."""
        kept = self._kept.get(run_id)
        return kept[1] if kept is not None and kept[0] == created_at else None

    async def show(self, run_id: str, fixed: RunFixed) -> tuple[str, ...]:
        """The list of the run whose fixed part is ``fixed``, displayed. One display a run,
        in a slow reads' thread; the callers that come meanwhile wait for it here, on the
        event loop, holding no thread: before, each waited in a thread of its own, and four
        GetResults of one run's 300,000-item list held every slow reads' thread
        (``slow_reads.THREADS``) for a minute, the dashboard's pages and the other calls'
        reads waiting behind them. A caller that goes away leaves the display to the others
        (shielded)."""
        kept = self.kept(run_id, fixed.created_at)
        if kept is not None:
            return kept
        return await shared(self._showing, (run_id, fixed.created_at), self.shown, run_id,
                            fixed)

    def shown(self, run_id: str, fixed: RunFixed) -> tuple[str, ...]:
        """``show``'s list, displayed in the caller's thread where it is not kept. Its codes
        are the tree's: before, the row was read whole again for them, and a run's first
        GetResults decoded its deny codes twice (~1.5 s with 1,000,000 items)."""
        kept = self.kept(run_id, fixed.created_at)
        if kept is not None:
            return kept
        codec = fixed.tree.codec
        shown = tuple(codec.display_item(code) for code in cw.to_ints(fixed.tree.deny))
        self._kept.put(run_id, (fixed.created_at, shown), over=self._kept.get(run_id))
        return shown


def stored_config(row: RunRow) -> RunConfig:
    """The run's configuration, as valid as when it was stored (StartRun validated it): a
    figure out of bounds (``rounds: -5``) is damage, named here, not an error of whatever
    calculation met it first. A configuration a later fedhh wrote (``newer_records``) is
    StoreDamaged too, which says so: this fedhh cannot read it, but nothing in it is damaged.
    So are the run's ledger and tree state."""
    return _read(row, "config", lambda data: _valid_config(json.dumps(data, sort_keys=True)))


def config_alone(store: Store, head: RunHead) -> RunConfig:
    """``stored_config`` of the run whose row's changing part is ``head``, its deny codes not
    read (``Store.run_config``)."""
    # (the row's deny codes left empty: stored_config reads its config and ledger alone)
    return stored_config(RunRow(head.run_id, store.run_config(head.run_id), head.state,
                                head.eps_local, head.tree, head.ledger, [], head.error))


# What each stored record of a run holds as this fedhh writes it: its fields, and those of the
# entries of its lists of records.
_RECORDS: dict[str, tuple[str, frozenset[str], dict[str, frozenset[str]]]] = {
    "config": ("settings", frozenset(f.name for f in fields(RunConfig)), {}),
    "tree": ("tree state fields", frozenset(f.name for f in fields(TreeState)),
             {"discovered": frozenset(f.name for f in fields(Found))}),
    "ledger": ("ledger fields", frozenset(ledger_format.FIELDS),
               {"spends": frozenset(ledger_format.SPEND_FIELDS)}),
}


def newer_fields(record: Any, known: frozenset[str],
                 lists: dict[str, frozenset[str]] | None = None) -> list[str]:
    """The fields of a stored record (a JSON object) that this fedhh does not know, where it
    holds every one this fedhh knows, and so does each entry of its ``lists`` (a list field's
    entries: their fields, shown as ``field[].name``, read in the first, since a writer writes
    each alike): a record a later fedhh wrote (each writes every field it knows:
    ``RunConfig.to_dict``, ``TreeState.to_dict``, ``PrivacyLedger.to_dict``) in a store that
    an earlier one now opens (a rollback). [] otherwise, an unknown name beside a missing one
    included: a name changed in the file is damage, which the record's reader refuses, as it
    refuses a field it does not know in a record this fedhh could have written."""
    if not isinstance(record, dict):
        return []
    unknown, complete = sorted(set(record) - known), known <= set(record)
    for name, entry_known in (lists or {}).items():
        entries = record.get(name)
        if isinstance(entries, list) and entries and isinstance(entries[0], dict):
            unknown += [f"{name}[].{field}" for field in sorted(set(entries[0]) - entry_known)]
            complete = complete and entry_known <= set(entries[0])
    return unknown if unknown and complete else []


def newer_settings(config: dict[str, Any]) -> list[str]:
    """``newer_fields`` of a stored run configuration."""
    _, known, lists = _RECORDS["config"]
    return newer_fields(config, known, lists)


def newer_records(row: RunRow | RunHead, records: tuple[str, ...] = tuple(_RECORDS)) -> str:
    """What says that a later fedhh wrote the run's ``records`` (``newer_fields`` of its
    config, tree state and ledger; a ledger version past the one this fedhh writes), as the
    end of a sentence naming the run; "" if nothing does."""
    parts = []
    version = row.ledger.get("version") if isinstance(row.ledger, dict) else None
    if "ledger" in records and isinstance(version, int) and version > ledger_format.VERSION:
        parts.append(f"its ledger is version {version}, past the {ledger_format.VERSION} this "
                     "one reads")
    for record in records:
        what, known, lists = _RECORDS[record]
        unknown = newer_fields(getattr(row, record), known, lists)
        if unknown:
            parts.append(f"its {what} {', '.join(map(shown, unknown))} are unknown to this one")
    if not parts:
        return ""
    return f"was written by a newer fedhh: {'; '.join(parts)} ({__version__})"


def check_unfinished_runs(store: Store, location: str) -> None:
    """ConfigError, before the runner drives anything, where an unfinished run was written by
    a later fedhh (``newer_records``): this one would fail it for good as damaged (seen: a
    run 'running' under a later fedhh, the earlier one started on its store, was 'failed'
    at once, "the stored run is damaged: config: unknown run settings: new_knob", and the
    later fedhh, started again, found it failed), or, where its reader took the fields it
    knows, drive it on and write its tree state and ledger back without the others. The store
    is left as it is. A run damaged otherwise fails alone, as the runner finds it."""
    for run_id, _ in store.run_states(ACTIVE):
        try:
            row = store.run(run_id)
        except (StoreDamaged, NotFoundError):
            continue
        newer = newer_records(row)
        if newer:
            raise ConfigError(f"--db {location}: the unfinished run {run_id!r} {newer}; start "
                              "the fedhh that wrote it to finish or cancel the run. The store "
                              "is left as it is")


# The configs checked that are kept (``_valid_config``), the latest read: at most this many,
# their JSON at most CHECKED_BYTES in all, the latest kept whatever its JSON weighs (a config
# over the bound, dropped as soon as kept, was checked again at every read: ~1 s and more
# each). A config holds its deny list: ~12 MB of JSON at 1,000,000 items
# (``MAX_DENY_ITEMS``), ~65 MB as a RunConfig; kept by their text (an ``lru_cache`` of 64), 64
# such configs were held twice over, GBs.
CHECKED_CONFIGS = 64
CHECKED_BYTES = 16 * 2**20
# sha256 of a config's JSON -> (the config checked, the JSON's length)
_checked: Latest[bytes, tuple[RunConfig, int]] = Latest(CHECKED_CONFIGS, CHECKED_BYTES,
                                                        lambda kept: kept[1])


def _valid_config(text: str) -> RunConfig:
    """Validation takes ~6 ms (the tree's feasibility checks), ~1 s with 1,000,000 deny items,
    and GetResults, ListRuns and the runner's loads read the config each time: a stored config
    is checked once while kept (a RunConfig is immutable; a refusal is not kept)."""
    key = hashlib.sha256(text.encode()).digest()
    kept = _checked.get(key)
    if kept is not None:
        return kept[0]
    config = RunConfig.from_dict(json.loads(text)).validate(Mode.NETWORK)
    _checked.put(key, (config, len(text)))
    return config


def stored_ledger(row: RunRow | RunHead) -> PrivacyLedger:
    return _read(row, "ledger", PrivacyLedger.from_dict)


def _read(row: RunRow | RunHead, field: str, decode: Callable[[Any], T]) -> T:
    """``decode`` of one field of a stored run, or StoreDamaged naming the run and the field,
    or saying that a later fedhh wrote it (``newer_records``)."""
    newer = newer_records(row, (field,)) if field in _RECORDS else ""
    if newer:
        raise StoreDamaged(f"the stored run {row.run_id!r} {newer}")
    return decoded(f"run {row.run_id!r}", field, decode, getattr(row, field))
