"""A PostgreSQL ``--db`` URL's passwords never reach a message (probe 37).

Before, ``redact`` hid only the user's password (``USER:PASSWORD@``): a password given as the
URL's ``password=`` (or ``sslpassword=``) query parameter, as libpq allows, was printed whole in
every message naming the store; and a URL the driver could not parse was refused with the
driver's message, which quotes the token it could not parse (a password with a stray ``%``
or a space) or the whole URL (an unclosed IPv6 bracket), so ``fedhh coordinator`` printed the
password on its console and in its log. Now both are replaced by ``***``. Nothing here needs a
PostgreSQL server: each URL is refused before a connection is tried, or by a closed port."""

from __future__ import annotations

import socket

import pytest

from fedhh.errors import ConfigError
from fedhh_coordinator.db import open_database
from fedhh_coordinator.db.interface import redact, redact_text

SECRET = "s3cretPW"


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://u:s3cretPW@h/db", "postgresql://u:***@h/db"),
    ("postgresql://h/db?password=s3cretPW", "postgresql://h/db?password=***"),
    ("postgresql://u@h/db?sslmode=require&PASSWORD=s3cretPW&x=1",
     "postgresql://u@h/db?sslmode=require&PASSWORD=***&x=1"),
    ("postgres://u@h/db?sslpassword=s3cretPW", "postgres://u@h/db?sslpassword=***"),
    ("postgresql://u@h/db?password=a@s3cretPW", "postgresql://u@h/db?password=***"),
    ("postgresql://u:p@s3cretPW@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("/var/lib/fedhh/coordinator.sqlite", "/var/lib/fedhh/coordinator.sqlite"),
])
def test_redact_hides_every_password(url: str, expected: str) -> None:
    assert redact(url) == expected


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("url", [
    "postgresql://u:s3cret%zzPW@127.0.0.1:{port}/db",     # a stray % in the password
    "postgresql://u:s3cretPW@[::1:{port}/db",              # an unclosed IPv6 bracket
    "postgresql://u@127.0.0.1:{port}/db?password=s3cret PW",  # a space in the password
    "postgresql://u@127.0.0.1:{port}/db?password=s3cretPW",   # well-formed, nobody there
    "postgresql://u:s3cret%50W@127.0.0.1:{port}/db?bogus=1",  # an unknown parameter
])
def test_a_refused_url_never_shows_its_password(url: str) -> None:
    pytest.importorskip("psycopg")
    url = url.format(port=closed_port())
    with pytest.raises(ConfigError) as refused:
        open_database(url)
    message = str(refused.value)
    assert "cannot connect to postgresql://u" in message
    for part in ("s3cret", "zzPW", "%50W", "cretPW"):
        assert part not in message, message


def test_redact_text_replaces_decoded_and_written_forms() -> None:
    url = "postgresql://u:p%40ss@h/db?password=q%20r"
    text = f'bad "{url}", "p%40ss", "p@ss", "q%20r", "q r"'
    assert redact_text(text, url) == \
        'bad "postgresql://u:***@h/db?password=***", "***", "***", "***", "***"'
