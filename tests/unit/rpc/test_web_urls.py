"""Connect URLs given to devices in their tasks: the coordinator's --aggregator-web-url and the
third part of the combiner's --worker are checked before anything starts."""

from __future__ import annotations

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.serving import check_web_url
from fedhh_aggregator.workers import WorkerSpec, parse_worker


@pytest.mark.parametrize("url", ["https://agg.example.org:7180", "https://10.0.0.2:443",
                                 "http://127.0.0.1:7180", "http://localhost:1"])
def test_a_connect_url_is_https_or_loopback_http_to_a_port(url: str) -> None:
    assert check_web_url(url, "--aggregator-web-url") == url


@pytest.mark.parametrize("url", ["agg.example.org:7180", "https://agg.example.org",
                                 "https://agg.example.org:7180/path", "ftp://agg:21",
                                 "http://agg.example.org:7180", "https://:7180",
                                 "https://agg:0", "https://agg:70000",
                                 "https://agg:٤٤٣"])  # (other scripts' digits: were taken)
def test_anything_else_is_refused_with_the_flag_named(url: str) -> None:
    with pytest.raises(ConfigError, match="--aggregator-web-url"):
        check_web_url(url, "--aggregator-web-url")


def test_a_worker_names_its_connect_url_third() -> None:
    assert parse_worker("w0:7100") == WorkerSpec("w0:7100", "w0:7100", "")
    assert parse_worker("w0:7100=pub:7100") == WorkerSpec("w0:7100", "pub:7100", "")
    assert parse_worker("w0:7100=pub:7100=https://pub:7180") == WorkerSpec(
        "w0:7100", "pub:7100", "https://pub:7180")
    with pytest.raises(ConfigError, match="Connect URL"):
        parse_worker("w0:7100=pub:7100=pub:7180")
