"""`fedhh up --dashboard` (and the demo page) holds the stack until Ctrl-C. A SIGINT that lands
right after the "press Ctrl-C" line (a script that sends it once it reads the line) stops the
stack as asked. Before, the line was printed before the handler's try: such a signal ended a run
that had finished with exit 130 and "run left unfinished"."""

from __future__ import annotations

from typing import Any

import pytest

from fedhh.cli import up


def test_a_ctrl_c_right_after_the_prompt_line_stops_the_stack_cleanly(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def print_then_interrupted(*args: Any, **kwargs: Any) -> None:
        print(*args, **kwargs)
        if "press Ctrl-C" in str(args[0]):
            raise KeyboardInterrupt  # (where the signal's handler runs: the next bytecode)

    monkeypatch.setattr(up, "print", print_then_interrupted, raising=False)
    try:
        up.hold_until_interrupted()
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped the hold: the command would end 130, 'interrupted'")
    assert capsys.readouterr().out.splitlines()[-1] == "stopping"
