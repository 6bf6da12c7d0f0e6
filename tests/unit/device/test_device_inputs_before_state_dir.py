"""A device process reads its inputs (--dataset, --users, --enrollment-tokens-file) before it
makes and locks its --state-dir: a refused input leaves nothing behind. Before, the folder
and its lock file were made first, so `fedhh device --dataset nope.txt --state-dir S` ended
with a refusal and a new S holding .fedhh-device.lock. The tokens file's refusal gives the
system's reason, not Python's ("[Errno 2] No such file or directory: 'nope.txt'")."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.cli.main import build_parser
from fedhh.errors import FedhhError
from fedhh_device.main import read_inputs


@pytest.mark.parametrize(("inputs", "refusal"), [
    (["--dataset", "{root}/nope.txt", "--users", "0:2"],
     "^--dataset: {root}/nope.txt does not exist"),
    (["--dataset", "{root}/users.txt", "--users", "tokens", "--enrollment-tokens-file",
      "{root}/nope.tokens"],
     "^cannot read the enrollment tokens file {root}/nope.tokens: No such file or directory$"),
    (["--dataset", "{root}/users.txt", "--users", "0:9"],
     "^--users '0:9' is outside the dataset's 3 users"),
])
def test_a_refused_input_makes_no_state_dir(inputs: list[str], refusal: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "users.txt").write_text("apple pear\nfig\napple\n")
    state = tmp_path / "state"
    args = build_parser("device").parse_args([
        "device", "--insecure", "--coordinator", "127.0.0.1:9", "--state-dir", str(state),
        *(part.format(root=tmp_path) for part in inputs)])
    with pytest.raises(FedhhError, match=refusal.format(root=tmp_path)):
        read_inputs(args)
    assert not state.exists()
