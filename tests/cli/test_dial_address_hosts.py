"""An address to dial names a host: a name of DNS labels or an IP address, checked as the
command starts. Before, any text without a scheme, path, space or colon passed
(``bad_host!:7000``, ``café.example.org:7000``), and the service failed at its first call."""

from __future__ import annotations

import argparse

import pytest
from cli_kit import one_line_error

from fedhh.cli.options import remote_address


@pytest.mark.parametrize(("address", "needle"), [
    ("bad_host!:7000", "the host has the label 'bad_host!': a label is letters, digits"),
    ("café.example.org:7000", "the host is not ASCII; give an international name in its xn--"),
    ("a..b:7000", "the host has an empty label"),
    ("-aggregator:7100", "the host has the label '-aggregator'"),
    ("*.example.org:7000", "the host is a wildcard"),
    ("x" * 64 + ".example.org:7000", "has a label of 64 characters"),
    ("https://fedhh.example.org:7100", "the host holds a colon (a scheme, or a port twice"),
    ("::1:7000", "an IPv6 address goes in brackets, [::1]:7000"),
    ("fedhh .example.org:7000", "the host contains a space"),
    ("[1.2.3.4]:7000", "the host holds '1.2.3.4' in brackets, which hold an IPv6 address alone"),
    ("[:::]:7000", "the host holds ':::' in brackets"),
    ("1.2.3.999:7000", "the host ends in a label of digits alone, as an IPv4 address does"),
    ("2130706433:7000", "the host ends in a label of digits alone"),
    (".:7000", "the host is a dot alone"),
])
def test_a_host_that_is_not_one_is_refused_saying_why(address: str, needle: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        remote_address(address)
    message = str(refused.value)
    assert message.startswith(f"must be HOST:PORT with a port 1 to 65535, HOST a name or an IP "
                              f"address, got {address!r}: ") and needle in message, message


@pytest.mark.parametrize("address", [
    "127.0.0.1:7000", "localhost:7000", "[::1]:7000", "[fe80::1%eth0]:7000",
    "fedhh.example.org.:7000", "fedhh_coordinator_1:7000", "xn--caf-dma.example.org:443",
    "aggregator:7100", "[::ffff:10.0.0.1]:7000", "3com.example:7000",
])
def test_host_names_and_addresses_pass(address: str) -> None:
    assert remote_address(address) == address


def test_the_command_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["health", "--address", "bad_host!:7000"], capsys)
    assert "error: argument --address: must be HOST:PORT" in line and "'bad_host!'" in line
