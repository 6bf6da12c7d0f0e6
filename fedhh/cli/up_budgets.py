"""Whether the devices of a `fedhh up --workdir` can pay for the run it plans, checked before any
device starts.

A workdir keeps its devices between runs, and with them two budgets that only grow: the
coordinator's lifetime charges (each run a device joins charges it the run's whole (eps_agg,
delta), ``fedhh_coordinator.budgets``), and each device's own sum of the local epsilons it
reported (``fedhh_device.budget``). Both add by basic composition (Dwork and Roth 2014,
Theorem 3.16) and are compared exactly (``fedhh.device.budget_sums``). A round needs n_min of
the devices to answer; where fewer can pay for it, every attempt of that round aborts and the
run fails. Before, a second `fedhh up --eps-agg 6` in one workdir (12 of the coordinator's 10)
ran 5 check-ins of 30 s each, ~170 s, and then failed with its devices "refused": the check
here says so in one sentence, with what to do, before the devices start.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from fedhh.config import RunConfig
from fedhh.device.budget_sums import exceeds
from fedhh.errors import ConfigError

REMEDY = ("use a new --workdir (its devices start with whole budgets) or a smaller --eps-agg, "
          "or wait until {when}")


def device_ids(workdir: Path, hosts: Mapping[str, Sequence[int]]) -> dict[int, int]:
    """The coordinator's device id of each user in ``hosts`` (device process name: the users
    it hosts) that an earlier run in ``workdir`` enrolled (its process's devices.json)."""
    from fedhh_device.fleet import STATE_FILE, load_identities

    ids: dict[int, int] = {}
    for name, users in hosts.items():
        enrolled = load_identities(workdir / name / STATE_FILE)
        ids.update((user, enrolled[user].device_id) for user in users if user in enrolled)
    return ids


def coordinator_refusals(store_file: Path, ids: Mapping[int, int], config: RunConfig
                         ) -> set[int]:
    """The users of ``ids`` whose device the coordinator would not admit to the run: their
    lifetime charges and its (eps_agg, delta) exceed the budget (``RunAdmission``, the
    coordinator's own test, at `fedhh up`'s ``LifetimeBudget()``)."""
    from fedhh_coordinator.budgets import LifetimeBudget, RunAdmission
    from fedhh_coordinator.store import Store

    if not ids or not store_file.is_file():
        return set()
    store = Store(store_file, selector=True)
    try:
        refused = RunAdmission(store, LifetimeBudget(), "", config.eps_agg,
                               config.delta).refused
    finally:
        store.close()
    return {user for user, device in ids.items() if device in refused}


def device_answers(workdir: Path, hosts: Mapping[str, Sequence[int]], users: set[int],
                   round_eps: Sequence[float], now: float) -> tuple[list[int], float | None]:
    """How many of ``users`` answer each round of ``round_eps`` (the local epsilon each round
    asks for) within their own budgets (``DeviceBudget``: a report whose epsilon would take the
    period's exact sum above the cap is refused, and a refused report costs nothing); and the
    time the first of their counted spends leaves the period (None without any)."""
    from fedhh_device.budget import DeviceBudget
    from fedhh_device.secagg_run import Floors

    floors = Floors()  # (`fedhh up` starts its devices at these)
    since = now - floors.budget_period_s
    answers = [0] * len(round_eps)
    first: float | None = None
    for name, hosted in hosts.items():
        for user in hosted:
            if user not in users:
                continue
            path = workdir / name / "budgets" / f"{user}.json"
            spent = DeviceBudget.load(path if path.exists() else None,
                                      floors.lifetime_eps_local, floors.budget_period_s)
            dates = [s.at for s in spent.spends if s.at >= since]
            charges = [s.eps_local for s in spent.spends if s.at >= since]
            if dates:
                first = min(dates) if first is None else min(first, *dates)
            for r, eps in enumerate(round_eps):
                if not exceeds([*charges, eps], floors.lifetime_eps_local):
                    charges.append(eps)
                    answers[r] += 1
    return answers, None if first is None else first + floors.budget_period_s


def refuse_spent_lifetime(workdir: Path, hosts: Mapping[str, Sequence[int]],
                          counted: Sequence[int], config: RunConfig) -> set[int]:
    """ConfigError, in one sentence with what to do, where the coordinator would admit fewer
    than n_min (``config.min_devices``) of the ``counted`` users (the Python devices holding
    an item) to the run; else those of them it would not admit. Needs no plan: it is checked
    before any service starts."""
    from fedhh.rpc.topology import STORE_FILE

    refused = coordinator_refusals(workdir / STORE_FILE, device_ids(workdir, hosts), config)
    refused &= set(counted)
    if len(counted) - len(refused) >= config.min_devices:
        return refused
    from fedhh_coordinator.budgets import LifetimeBudget

    budget = LifetimeBudget()
    days = f"{budget.period_s / 86400:g} days"
    raise ConfigError(
        f"--workdir {workdir}: {len(refused):,} of its {len(counted):,} devices cannot join "
        f"this run, their earlier runs there and its (eps_agg {config.eps_agg:g}, delta "
        f"{config.delta:g}) together above the lifetime budget the coordinator keeps for each "
        f"(eps {budget.eps:g}, delta {budget.delta:g} per {days}), and a round needs n_min "
        f"{config.min_devices:,}: every attempt would abort; "
        + REMEDY.format(when=f"the earlier runs are {days} old"))


def refuse_unpaid_rounds(workdir: Path, hosts: Mapping[str, Sequence[int]],
                         counted: Sequence[int], n_min: int, round_eps: Sequence[float],
                         now: float | None = None) -> None:
    """ConfigError, in one sentence with what to do, where fewer than ``n_min`` of the
    ``counted`` users (the Python devices holding an item that the coordinator admits) can
    pay for a round of the plan (``round_eps``: its rounds' local epsilons) from their own
    budgets."""
    now = time.time() if now is None else now
    total = len(counted)
    answers, freed = device_answers(workdir, hosts, set(counted), round_eps, now)
    short = next((r for r, count in enumerate(answers) if count < n_min), None)
    if short is None:
        return
    from fedhh_device.secagg_run import Floors

    floors = Floors()
    cap = (f"each reports at most local epsilon {floors.lifetime_eps_local:g} in "
           f"{floors.budget_period_s / 86400:g} days")
    if exceeds(round_eps, floors.lifetime_eps_local):
        raise ConfigError(
            f"this run's {len(round_eps)} rounds ask each device for local epsilon "
            f"{sum(round_eps):.4g} in all, more than its own budget allows ({cap}), so round "
            f"{short + 1}'s attempts would abort and the run fail: give a smaller --eps-agg, "
            "or fewer --rounds or --completion-rounds")
    when = ("the earlier runs' reports leave the period (the first on "
            f"{datetime.fromtimestamp(freed or now, UTC):%Y-%m-%d %H:%M} UTC)")
    raise ConfigError(
        f"--workdir {workdir}: round {short + 1} of this run's {len(round_eps)} (local epsilon "
        f"{round_eps[short]:.3g}) finds {answers[short]:,} of the {total:,} devices with "
        f"enough of their own budget left to answer it after their earlier runs there ({cap}), "
        f"and a round needs n_min {n_min:,}: its attempts would abort and the run fail; "
        + REMEDY.format(when=when))
