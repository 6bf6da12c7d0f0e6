"""`fedhh experiments --scheduler` refuses an address it cannot connect to as it is parsed, and
says what to give instead for the addresses a user is likely to paste: the dashboard's http://
link (the one link `dask scheduler` prints) and Dask's other protocols. Before, each read only
"a scheduler is [tcp://]HOST:PORT", which did not say tls:// is taken too."""

from __future__ import annotations

import argparse

import pytest

from fedhh.cli.experiments import scheduler_address

FORM = "a scheduler is [tcp://]HOST:PORT (or tls://HOST:PORT), e.g. tcp://10.0.0.5:8786, got "


@pytest.mark.parametrize("address", ["http://192.0.2.2:8787/status", "HTTPS://a.example:8787"])
def test_a_dashboard_link_is_refused_saying_what_to_give(address: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        scheduler_address(address)
    assert str(refused.value) == (
        f"{FORM}{address!r}: that is a web page (a scheduler's dashboard?); give the address "
        "its log prints as 'Scheduler at:'")


@pytest.mark.parametrize("address", ["ws://127.0.0.1:8786", "ucx://10.0.0.5:8786", "inproc://x"])
def test_another_dask_protocol_is_refused_naming_the_two_taken(address: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        scheduler_address(address)
    assert str(refused.value) == (f"{FORM}{address!r}: fedhh connects over tcp:// or tls:// "
                                  "only; start the scheduler with --protocol tcp")


@pytest.mark.parametrize("address", ["bogus", "", "tcp://127.0.0.1", "tcp://127.0.0.1:99999"])
def test_other_malformed_addresses_get_the_form_alone(address: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        scheduler_address(address)
    assert str(refused.value) == f"{FORM}{address!r}"


@pytest.mark.parametrize("address", ["tcp://10.0.0.5:8786", "tls://a.example:8786",
                                     "10.0.0.5:8786", "tcp://[::1]:8786"])
def test_addresses_of_tcp_and_tls_are_taken_as_given(address: str) -> None:
    assert scheduler_address(address) == address


@pytest.mark.parametrize(("address", "taken"), [("Tcp://host:8786", "tcp://host:8786"),
                                                ("TLS://A.example:8786", "tls://A.example:8786")])
def test_a_scheme_in_any_case_is_taken_in_lower_case(address: str, taken: str) -> None:
    # (RFC 3986 section 3.1: schemes are case-insensitive; Dask's registry knows 'tcp' only)
    assert scheduler_address(address) == taken
