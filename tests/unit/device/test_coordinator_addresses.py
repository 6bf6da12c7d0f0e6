"""``fedhh device --coordinator``: each comma-separated entry is a service's gRPC address,
optionally with its framed port's after a "=" (docs/secagg.md, "The framed port"); anything
else is refused before a device starts."""

from __future__ import annotations

import pytest

from fedhh.errors import ConfigError
from fedhh_device.main import coordinator_addresses


def test_entries_name_a_grpc_address_and_optionally_a_framed_port() -> None:
    assert coordinator_addresses("a:7000") == [("a:7000", "")]
    assert coordinator_addresses(" a:7000=a:7001 , b:7000,[::1]:7000=[::1]:7001,") == [
        ("a:7000", "a:7001"), ("b:7000", ""), ("[::1]:7000", "[::1]:7001")]


@pytest.mark.parametrize("text", ["", " , ", "a", "a:7000=b", "a:7000=b:0", "a:x=b:1",
                                  "=b:7001", "a:7000=b:7001=c:1", "a:7000=", "a:1,=b:2"])
def test_malformed_entries_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        coordinator_addresses(text)
