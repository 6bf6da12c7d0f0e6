"""`fedhh device --users` and its tokens: ranges, shards i/N, and the users a tokens file names
(one token per line, line u for user u, or ``USER TOKEN`` lines for one process's share)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.device_users import read_tokens, shard_range, tokens_for, user_range

A, B, C = ("a" * 64, "b" * 64, "c" * 64)


@pytest.mark.parametrize(("users", "count"), [(200, 3), (1387, 4), (7, 7), (10, 6), (1, 1)])
def test_shards_are_disjoint_cover_every_user_and_are_never_empty(users: int,
                                                                  count: int) -> None:
    shards = [shard_range(i, count, users) for i in range(count)]
    assert [u for shard in shards for u in shard] == list(range(users))
    sizes = {len(shard) for shard in shards}
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_user_specs() -> None:
    assert user_range("10:20", 100) == range(10, 20)
    assert user_range(":", 100) == range(100)
    assert user_range("1/2", 100) == range(50, 100)
    # (read as every integer option is, fedhh/integers.py; before, int(): "invalid")
    assert user_range("1e1:2.0e1", 100) == range(10, 20)
    assert user_range("1/2.0", 100) == range(50, 100)


@pytest.mark.parametrize("text", ["2/2", "-1/2", "a:b", "5:200", "20:10", "3/101", "1/0",
                                  "random:5", "auto/4", "0.5:2", "0:inf", "0x1:2"])
def test_bad_user_specs_are_refused_by_name(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--users|shards"):
        user_range(text, 100)


def test_a_positional_file_gives_line_u_to_user_u(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"{A}\n\n{C}\n")
    assert read_tokens(path) == {0: A, 2: C}
    assert tokens_for(str(path), [2]) == {2: C}


def test_a_keyed_file_gives_only_the_users_it_names(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"5 {A}\n9 {B}\n\n13 {C}\n")
    assert read_tokens(path) == {5: A, 9: B, 13: C}
    assert tokens_for(str(path), [9, 13]) == {9: B, 13: C}
    with pytest.raises(ConfigError, match=r"no token for users \[6\]"):
        tokens_for(str(path), [5, 6])


@pytest.mark.parametrize(("text", "match"), [
    (f"5 {A}\n{B}\n", "not both"),
    (f"x {A}\n", "USER TOKEN"),
    (f"5 {A}\n5 {B}\n", "a second token for user 5"),
    ("5 é\n", "cannot read"),
])
def test_a_malformed_tokens_file_is_one_clear_error(tmp_path: Path, text: str,
                                                    match: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        read_tokens(path)


def test_a_file_that_is_not_ascii_is_said_to_be_no_tokens_file(tmp_path: Path) -> None:
    """Before: "cannot read the enrollment tokens file users.txt: 'ascii' codec can't decode
    byte 0xf0 in position 0: ordinal not in range(128)", for a dataset given in its place;
    the coordinator's import of its tokens file said the same."""
    from fedhh_coordinator.enrollment import import_tokens

    path = tmp_path / "users.txt"
    path.write_text("\U0001f642 caf\u00e9 hello\n", encoding="utf-8")
    said = (f"cannot read the enrollment tokens file {path}: line 1: byte 1 of the line is not "
            "ASCII (0xf0), so this is not a tokens file (tokens are hex digits, one a line or "
            "after a user number, as `fedhh certs` and `fedhh admin mint-tokens` write them): is "
            "it another file, a dataset?")
    with pytest.raises(ConfigError) as refused:
        read_tokens(path)
    assert str(refused.value) == said
    with pytest.raises(ConfigError) as refused:
        import_tokens(None, str(path))  # type: ignore[arg-type]  # (refused before the store)
    assert str(refused.value) == said


def test_a_byte_not_ascii_is_placed_by_its_line_and_byte_from_1(tmp_path: Path) -> None:
    # (before, "byte 6 is not ASCII": counted from 0, from the file's start)
    path = tmp_path / "tokens"
    path.write_bytes(b"ab\nxy\xe9z\n")
    with pytest.raises(ConfigError, match=r"tokens: line 2: byte 3 of the line is not ASCII "
                                          r"\(0xe9\), so"):
        read_tokens(path)


def test_a_range_past_the_dataset_names_its_users_and_the_largest_range() -> None:
    """Before: "--users '0:700' is outside the dataset's 0..600", as if user 600 existed; and
    "5/4" was told only "must be START:END, i/N or tokens"."""
    with pytest.raises(ConfigError) as refused:
        user_range("0:700", 600)
    assert str(refused.value) == ("--users '0:700' is outside the dataset's 600 users: "
                                  "START:END names users START..END-1, within 0:600")
    assert user_range("0:600", 600) == range(600)
    with pytest.raises(ConfigError, match=r"i/N \(shard i of N, 0 <= i < N\)"):
        user_range("5/4", 600)


@pytest.mark.parametrize(("text", "said"), [
    # a column too many (before: "expected one token per line ... or USER TOKEN on every
    # line, not both", though no line held one field)
    (f"0 {A} alice\n1 {B} bob\n", "tokens:1: 3 fields; expected one token per line (line u "
     "for user u) or USER TOKEN on every line"),
    (f"0 {A}\n1 {B} bob\n", "tokens:2: 3 fields;"),
    # USER,TOKEN, a cut token, a word (before: read as tokens; the process started and every
    # device was refused at enrolment)
    (f"0,{A}\n1,{B}\n", f"tokens:1: '0,{A[:18]}...' (66 characters) is no enrollment token: "
     "a token is 64 hex digits, one a line or after a user number and a space, as `fedhh "
     "certs` and `fedhh admin mint-tokens` write them"),
    (f"{A}\n{B[:63]}\n", "tokens:2: '" + "b" * 20 + "...' (63 characters) is no enrollment"),
    (f"5 {A}\n6 {'g' * 64}\n", "tokens:2: '" + "g" * 20 + "...' (64 characters) is no"),
    ("5 secret\n", "tokens:1: 'secret' (6 characters) is no enrollment token"),
])
def test_a_file_of_other_columns_or_tokens_is_refused_by_line(tmp_path: Path, text: str,
                                                             said: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        read_tokens(path)
    assert str(refused.value).startswith(f"{tmp_path}/{said}"), refused.value


def test_the_token_length_is_the_coordinators() -> None:
    from fedhh.rpc.device_users import TOKEN_HEX_DIGITS
    from fedhh_coordinator.enrollment import TOKEN_BYTES

    assert TOKEN_HEX_DIGITS == 2 * TOKEN_BYTES


def test_minted_tokens_read_back(tmp_path: Path) -> None:
    from fedhh_coordinator.enrollment import new_tokens

    minted = new_tokens(3)
    path = tmp_path / "tokens"
    path.write_text("".join(f"{u} {t}\n" for u, t in enumerate(minted)))
    assert read_tokens(path) == dict(enumerate(minted))
    path.write_text("".join(f"{t.upper()}\n" for t in minted))
    assert read_tokens(path) == {u: t.upper() for u, t in enumerate(minted)}
