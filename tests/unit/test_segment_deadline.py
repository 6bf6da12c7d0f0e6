"""Kept prefixes a round's segment leaves out are named, not dropped silently: the plan-time
warning (``deadline_warning``) and the run's note (``trim_note``). Before, 3 rounds over 48-bit
codes at P = 2^16 queried one of round 1's kept prefixes in round 2 with no word."""

from __future__ import annotations

from fedhh.config import Mode, RunConfig
from fedhh.server import TreeConfig
from fedhh.server.segment import deadline_warning, forced_segment, rounds_to_fit, trim_note


def test_the_forced_segment_is_the_rest_shared_by_the_later_rounds() -> None:
    assert forced_segment(3, 48, 1 << 16) == 16     # 48 - 16 = 32 bits in 2 rounds
    assert forced_segment(4, 60, 10_000_000) == 13  # the paper's: 60 - 23 = 37 in 3 rounds
    assert forced_segment(1, 16, 1 << 16) == 0      # the first round covers every bit
    assert forced_segment(5, 10, 1 << 16) == 0
    # 32 bits left after round 1; 64 prefixes leave 10 bits a round: 1 + ceil(32 / 10) = 5
    assert rounds_to_fit(48, 1 << 16, 64) == 5
    assert forced_segment(5, 48, 1 << 16) == 8 and (1 << 16) >> 8 >= 64
    assert rounds_to_fit(48, 1 << 16, 1 << 16) is None  # not even one bit a prefix


def test_the_warning_names_the_settings_and_what_to_change() -> None:
    warning = deadline_warning(3, 48, 1 << 16)
    assert warning is not None
    assert warning.startswith("3 rounds for --max-bits 48 force a round after the first to a "
                              "segment of at least 16 bits, and --dim-limit 65,536 "
                              "(prefixes x 2^s) fits only 1 prefix in it")
    assert "--rounds 4 (each round then fits at least 16)" in warning
    assert "a larger --dim-limit, a smaller --max-bits, or --completion-rounds" in warning
    assert deadline_warning(4, 60, 10_000_000) is None  # 1,220 prefixes fit at 13 bits
    assert deadline_warning(4, 60, 1_000_000) is None  # the paper's P = 10^6: 61 fit at 14
    assert deadline_warning(5, 48, 1 << 16) is None


def test_the_tree_warns_only_when_a_deadline_trims() -> None:
    tree = TreeConfig(rounds=3, dim_limit=1 << 16, main_bits=48)
    assert tree.deadline_warning(48) == deadline_warning(3, 48, 1 << 16)
    assert TreeConfig(rounds=4, dim_limit=1 << 16, main_bits=48,
                      completion_rounds=1).deadline_warning(48) is None  # no deadline
    assert TreeConfig(rounds=3, dim_limit=1 << 16, main_bits=48,
                      segment_bits=16).deadline_warning(48) is None  # segments chosen
    # `fedhh up`'s network default, P = 2^16, without completion rounds: 2 prefixes at 15 bits
    config = RunConfig(rounds=4, max_bits=60, completion_rounds=0)
    warning = config.tree(Mode.NETWORK).deadline_warning(config.max_bits)
    assert warning is not None and "fits only 2 prefixes" in warning


def test_the_note_counts_each_rounds_left_out_prefixes() -> None:
    rounds = [{"round": 1, "trimmed": 23, "continuing": 1, "next_segment_bits": 16},
              {"round": 2, "trimmed": 0, "continuing": 1, "next_segment_bits": 16},
              {"round": 3, "trimmed": 2, "continuing": 5, "next_segment_bits": 13},
              {"round": 4, "trimmed": 0, "continuing": 0, "next_segment_bits": None}]
    note = trim_note(rounds, 1 << 16)
    assert note is not None
    assert note.startswith(
        "25 kept prefixes could not be queried: round 1 kept 24 prefixes to extend and the "
        "next round queried 1 (16-bit segments: 1 x 2^16 within the dimension limit 65,536); "
        "round 3 kept 7 prefixes to extend and the next round queried 5 (13-bit segments: "
        "5 x 2^13 within the dimension limit 65,536). Only the top-estimated prefixes go on")
    assert "more --rounds, a larger --dim-limit, a smaller --max-bits" in note
    assert trim_note(rounds[1:2], 1 << 16) is None
    assert trim_note([], 1 << 16) is None
