"""An explicit eps_local too small for a device's coins (they resolve 2^-32) is refused by name
wherever a run is configured: the command line, a config file and the admin API all validate
through RunConfig.validate. Below ~9.31e-10 the implemented randomized response turns a 0 into a
1 with probability 1/2 and keeps a 1 with probability 1/2, so reports carry nothing. Before, it
was accepted, and the estimator's 1 / (a1 - a0) divided by zero after the first round
(`fedhh simulate --eps-local 1e-10`: a ZeroDivisionError traceback)."""

from __future__ import annotations

import pytest

from fedhh.config import Mode, RunConfig
from fedhh.device.randomizer import SCALE, a0_threshold
from fedhh.errors import ConfigError
from fedhh.rpc.run_config import from_proto, to_proto

# The two neighbouring doubles around the floor (found by bisection on a0_threshold).
LARGEST_REFUSED = 9.313225746154785e-10
SMALLEST_KEPT = 9.313225746154787e-10
NETWORK = dict(target_devices=1000, min_devices=100)


def test_the_floor_is_where_the_coins_stop_telling_a_0_from_a_1() -> None:
    assert 2 * a0_threshold(LARGEST_REFUSED) == SCALE
    assert 2 * a0_threshold(SMALLEST_KEPT) < SCALE


@pytest.mark.parametrize("eps", [5e-324, 1e-10, LARGEST_REFUSED])
@pytest.mark.parametrize("mode", [Mode.SIMULATION, Mode.NETWORK])
def test_an_eps_local_below_the_coins_resolution_is_refused_by_name(eps: float,
                                                                   mode: Mode) -> None:
    with pytest.raises(ConfigError, match=(
            f"^eps_local {eps:g} is below what a device's coins resolve \\(2\\^-32\\): ")):
        RunConfig(eps_local=eps, **NETWORK).validate(mode)


def test_the_admin_apis_config_is_refused_the_same() -> None:
    wired = from_proto(to_proto(RunConfig(eps_local=1e-10, **NETWORK)))
    with pytest.raises(ConfigError, match=r"^eps_local 1e-10 is below"):
        wired.validate(Mode.NETWORK)


def test_the_smallest_eps_local_the_coins_resolve_is_kept() -> None:
    config = RunConfig(eps_local=SMALLEST_KEPT, **NETWORK)
    assert config.validate(Mode.NETWORK).eps_local == SMALLEST_KEPT


def test_pi_rappors_refusal_gives_pi_rappors_reason() -> None:
    """The refusal spoke of the randomized response's coins (a 1 kept as often as a 0 is
    turned into one) also for a PI-RAPPOR run, whose reports are field vectors: below the
    floor, PI-RAPPOR at 30-bit segments finds no set S with the device's element more likely
    in it than another's, and the round ended in an AssertionError."""
    from fedhh.pirappor.params import round_parameters

    with pytest.raises(AssertionError, match="no admissible PI-RAPPOR set"):
        round_parameters(1e-10, 30)
    with pytest.raises(ConfigError) as refused:
        RunConfig(eps_local=1e-10, randomizer="pi-rappor", **NETWORK).validate(Mode.NETWORK)
    said = str(refused.value)
    assert "PI-RAPPOR's chance of putting a device's own element in S" in said
    assert "keeps a 1 as often" not in said
    with pytest.raises(ConfigError, match="keeps a 1 as often as it turns a 0 into one"):
        RunConfig(eps_local=1e-10, randomizer="ohe-rr", **NETWORK).validate(Mode.NETWORK)


@pytest.mark.parametrize("cap", [5e-324, 1e-300, LARGEST_REFUSED])
def test_a_max_eps_local_below_the_coins_resolution_is_refused_by_name(cap: float) -> None:
    """A cap on the solved eps_local below the floor made every solved eps_local the cap: a
    run with max_eps_local 1e-300 was stored (StartRun OK, eps_local 1e-300), its reports
    carrying nothing, where the same eps_local given itself is refused."""
    with pytest.raises(ConfigError, match=(
            f"^max_eps_local {cap:g} is below what a device's coins resolve \\(2\\^-32\\): ")):
        RunConfig(max_eps_local=cap, **NETWORK).validate(Mode.NETWORK)
    wired = from_proto(to_proto(RunConfig(max_eps_local=cap, **NETWORK)))
    with pytest.raises(ConfigError, match=f"^max_eps_local {cap:g} is below"):
        wired.validate(Mode.NETWORK)


def test_the_smallest_max_eps_local_the_coins_resolve_is_kept() -> None:
    config = RunConfig(max_eps_local=SMALLEST_KEPT, **NETWORK)
    assert config.validate(Mode.NETWORK).max_eps_local == SMALLEST_KEPT
