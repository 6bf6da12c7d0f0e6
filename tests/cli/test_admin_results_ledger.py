"""`fedhh admin results` prints the run's privacy ledger as a JSON object, under "ledger" as
`fedhh simulate --json` does. Before, the wire's ``ledger_json`` text came out as one string
inside the JSON ("ledgerJson": "{\\"spends\\": ...}"), which a script had to parse again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.v1 import coordinator_pb2 as pb

LEDGER = {"spends": [{"round_index": 0, "eps_local": 4.79}], "target_epsilon": 2.0}


@pytest.mark.parametrize(("wired", "shown"), [(json.dumps(LEDGER), LEDGER), ("", None)])
def test_the_ledger_is_an_object(wired: str, shown: object, recorder: Path,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    results = pb.Results(run_id="r1", state="done", ledger_json=wired)
    monkeypatch.setattr(Recorder, "results", lambda self, run_id: results, raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "results", "r1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["ledger"] == shown
    assert "ledgerJson" not in printed


def test_networked_md_names_every_key_of_the_results(recorder: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """docs/networked.md's list of what `admin results` prints is the JSON's keys: it named
    five of the eight (not `runId`, `state`, `denyList`)."""
    results = pb.Results(run_id="r1", state="done", ledger_json=json.dumps(LEDGER))
    monkeypatch.setattr(Recorder, "results", lambda self, run_id: results, raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "results", "r1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    page = (Path(__file__).resolve().parents[2] / "docs" / "networked.md").read_text()
    sentence = page.split("`admin results` prints one JSON object:", 1)[1].split("(an object")[0]
    assert set(re.findall(r"`(\w+)`", sentence)) == set(printed)
