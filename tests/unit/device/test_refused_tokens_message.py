"""The error for enrollment tokens the coordinator refused, in the singular for one user.
Before: "the coordinator refused the enrollment tokens of 1 users (0): ... if these users
enrolled before, their identities are in ...". """

from __future__ import annotations

from pathlib import Path

from fedhh_device.fleet import refused_tokens_message

REASON = "unknown or already used enrollment token"


def test_one_user_is_one(tmp_path: Path) -> None:
    assert refused_tokens_message({7: REASON}, tmp_path) == (
        f"the coordinator refused the enrollment token of user 7: {REASON}. A token enrolls "
        "one identity once: if this user enrolled before, its identity is in the --state-dir "
        f"that enrolled it ({tmp_path} holds none for it); otherwise mint a new token (fedhh "
        "admin mint-tokens --users)")


def test_several_users_are_counted_and_the_first_five_named() -> None:
    refused = {user: REASON for user in (9, 3, 4, 5, 6, 7, 8)}
    assert refused_tokens_message(refused, None) == (
        f"the coordinator refused the enrollment tokens of 7 users (3, 4, 5, 6, 7, ...): "
        f"{REASON}. A token enrolls one identity once: if these users enrolled before, their "
        "identities are in the --state-dir that enrolled them; otherwise mint new tokens "
        "(fedhh admin mint-tokens --users)")
