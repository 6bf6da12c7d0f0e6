"""An item whose code is longer than 1,024 bits (a 172-character search URL: 1,213 bits in the
default codebook) comes back whole from `fedhh simulate` given the completion rounds to reach
it. Before, the codes stopped at 1,024 bits (``MAX_SUPPORTED_BITS``): such an item was always
cut, read "the codes' limit, 1,024 bits", and no setting completed it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

from fedhh.codec import MAX_SUPPORTED_BITS, Codec

URL = "https://example.com/search?q=" + "+".join(f"word{i}" for i in range(22))


def test_an_item_past_1024_bits_comes_back_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert 1024 < Codec("unicode", MAX_SUPPORTED_BITS).encode_many([URL]).lengths[0] < 1300
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    users = [[URL] * bool(rng.random() < 0.7) + [f"w{rng.integers(3000)}"] for _ in range(1000)]
    dataset = tmp_path / "users.jsonl"
    dataset.write_text("".join(json.dumps(user) + "\n" for user in users), encoding="utf-8")
    out = tmp_path / "r.json"
    # 16 bits a round at P = 2^16: 4 main rounds and 76 completion rounds reach 1,280 bits
    code, _, stderr = run_cli(["simulate", "--dataset", str(dataset), "--eps-agg", "16",
                               "--dim-limit", "65536", "--completion-rounds", "76",
                               "--seed", "1", "--quiet", "--json", str(out)], capsys)
    assert code == 0, stderr
    payload = json.loads(out.read_text(encoding="utf-8"))
    [found] = [h for h in payload["heavy_hitters"] if h["item"].startswith("https://")]
    assert found["item"] == URL and not found["truncated"]
    assert not payload["cut_prefixes"]
