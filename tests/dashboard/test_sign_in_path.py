"""Sign-in with the admin token file's path instead of its line (`deploy/secrets/admin.token`,
as docs/dashboard.md names the file) is told to paste the line. Before: "That is not the admin
token." alone, the answer to any wrong token, which it still is for one that is no path."""

from __future__ import annotations

from dashboard_kit import Served


def test_a_path_for_the_token_is_told_to_paste_the_line(served: Served) -> None:
    for guess in ("deploy/secrets/admin.token", "/run/secrets/admin.token", "admin.token"):
        status, headers, body = served.request("POST", "/login", {"token": guess})
        assert status == 401 and "Set-Cookie" not in headers
        assert (b"That is not the admin token: it reads as a file&#x27;s path; paste the one "
                b"line that file holds (cat it), not its name.") in body, guess
    status, _, body = served.request("POST", "/login", {"token": "wrong" * 8})
    assert status == 401 and b"That is not the admin token.</p>" in body
