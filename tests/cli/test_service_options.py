"""An option that several process commands share (the services, the device process) parses
the same way in each: the same type, default and whether it is required, but for the few that
differ on purpose. Their definitions live once in ``fedhh.cli.options`` (listen, service,
enrollment, outcome, web and framed options); this holds a copy that drifts to account."""

from __future__ import annotations

import argparse

from fedhh.cli.main import build_parser

PROCESSES = ("aggregator", "coordinator", "selector", "combiner", "device")
# Each service's own port; a selector has no store of its own to default to; a combiner holds
# the rounds of several shards' aggregators; a device process must keep its identities and
# budgets, where a service's journal is optional; an aggregator's connections carry whole
# fleets' session streams, so it admits more streams on one than a coordinator or selector.
ON_PURPOSE = {"--listen", "--db", "--store", "--max-rounds", "--state-dir",
              "--max-streams-per-connection"}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    commands = next(a for a in build_parser()._actions
                    if isinstance(a, argparse._SubParsersAction))
    return {name: commands.choices[name] for name in PROCESSES}


def test_an_option_shared_by_process_commands_parses_alike_in_each() -> None:
    seen: dict[str, dict[str, tuple[object, object, bool]]] = {}
    for name, parser in _parsers().items():
        for action in parser._actions:
            for option in action.option_strings:
                seen.setdefault(option, {})[name] = (action.type, repr(action.default),
                                                     action.required)
    shared = {option: by for option, by in seen.items() if len(by) > 1}
    assert {"--metrics-port", "--tombstone-ttl", "--enroll-rate", "--web-listen"} <= set(shared)
    drifted = {option: by for option, by in shared.items()
               if option not in ON_PURPOSE and len(set(by.values())) > 1}
    assert drifted == {}
