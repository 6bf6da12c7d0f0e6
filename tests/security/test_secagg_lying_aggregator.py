"""A lying aggregator against the real coordinator and real device processes (issue 10, item 1).

The attacker is the real aggregator service with its protocol server replaced by
:class:`LyingServer` (this file, run as a script, serves it). It follows the protocol until the
masked inputs are in, keeps every masked vector, picks a victim v, and tells half of v's mask
partners that v survived (so they reveal b-shares of v) and the other half that v dropped (so
they reveal s-shares of v's mask key); with the consistency check it shows the two halves
different survivor sets. With t b-shares and t s-shares it rebuilds both secrets, checks them
(b_v against v's commitment, s_v against v's public key) and removes every mask from v's
vector: v's report, exactly.

With the parameters the coordinator used to choose (curious server: t <= k/2, no consistency
check) and the devices' old floors, the victim's vector was recovered. Now the coordinator
chooses lying-server parameters (t > (k + c)/2) with the consistency check, and devices refuse
anything less: the partners shown the other story refuse to unmask for lack of signatures, and
neither secret reaches t shares.

:class:`InflatingServer` (mode "inflate") runs the protocol honestly and then lies about the
contributors: test_aggregator_outcomes.py uses it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedhh.secagg import (
    AbortReason,
    ConsistencyRequest,
    ConsistencyResponse,
    MaskedInput,
    ProtocolViolation,
    SecAggServer,
    ServerMessage,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
    Violation,
    shamir,
)
from fedhh.secagg.messages import consistency_transcript, survivors_digest
from fedhh.secagg.prg import pair_mask_key, self_mask_key
from fedhh.secagg.primitives import (
    LABELS,
    agree,
    ed25519_verify,
    sha256,
    u32,
    x25519_from_seed,
    x25519_public_bytes,
)

REPORT_ENV = "FEDHH_ATTACK_REPORT"
MODE_ENV = "FEDHH_ATTACK_MODE"
DEVICES = 60
DIMENSION = 1 << 10


# -- the attacker ------------------------------------------------------------------------------

class LyingServer(SecAggServer):
    """The real protocol server, except that it lies about one victim's survival (module
    docstring) and reports what it could learn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.vectors: dict[int, np.ndarray] = {}
        self.victim = 0
        self.view: dict[int, tuple[int, ...]] = {}  # the survivor set each device is shown
        self.b_points: list[tuple[int, int]] = []
        self.s_points: list[tuple[int, int]] = []
        self.answered: set[int] = set()
        self.rosters: dict[int, list[int]] = {}

    def handle_masked_input(self, message: MaskedInput) -> bool:
        accepted = super().handle_masked_input(message)
        if accepted:  # an honest server adds it and drops it; this one keeps a copy
            self.vectors[message.device_id] = np.array(message.vector, dtype=self._masks.dtype)
        return accepted

    def _split(self, u3: set[int]) -> None:
        # The victim: the survivor with the most surviving partners (the best odds).
        self.victim = max(sorted(u3), key=lambda v: sum(w in u3 for w in self._partners[v]))
        partners = [w for w in self._partners[self.victim] if w in u3]
        told_alive = set(partners[:len(partners) // 2]) | {self.victim}
        full, without = tuple(sorted(u3)), tuple(sorted(u3 - {self.victim}))
        self.view = {w: full if w in told_alive else without for w in u3}

    def _close_masked_input(self) -> dict[int, ServerMessage]:
        u3 = set(self._fingerprints)
        self._split(u3)
        requests = super()._close_masked_input()
        if not self.config.consistency_check:
            return requests
        lies: dict[int, ServerMessage] = {
            w: ConsistencyRequest(self.session_id, w, self.view[w]) for w in requests}
        self._consistency_requests = dict(lies)  # type: ignore[arg-type]
        return lies

    def handle_consistency_check(self, message: ConsistencyResponse) -> bool:
        w = message.device_id
        view = self.view.get(w)
        admission = self._adverts[w].admission if w in self._adverts else None
        if view is None or admission is None or not ed25519_verify(
                admission.identity_key, message.signature,
                consistency_transcript(self.session_id, w, survivors_digest(view))):
            raise ProtocolViolation(Violation.BAD_SIGNATURE, f"signature of {w}")
        self._consistency[w] = message.signature
        return True

    def _unmask_requests_for(self, u3: set[int], signers: Any) -> dict[int, ServerMessage]:
        requests: dict[int, ServerMessage] = {}
        check = self.config.consistency_check
        for w in sorted(u3):
            if check and w not in signers:
                continue
            shown = set(self.view[w])
            partners = self._partners[w]
            alive = tuple(x for x in partners if x in shown)
            dropped = tuple(x for x in partners if x not in shown)
            sigs = tuple((x, signers[x]) for x in alive
                         if x in signers and self.view[x] == self.view[w]) if check else ()
            requests[w] = UnmaskRequest(self.session_id, w, alive, dropped, sigs)
        self._unmask_requests = dict(requests)  # type: ignore[arg-type]
        self._missing_secrets = 1  # (the honest early close does not apply)
        return requests

    def _close_share_keys(self) -> dict[int, ServerMessage]:
        # Each device's roster, ascending: its j-th neighbour holds its shares at the point j.
        self.rosters = {v: sorted(up.dsts.tolist()) for v, up in self._share_responses.items()}
        return super()._close_share_keys()

    def handle_unmask(self, message: UnmaskResponse) -> bool:
        v = message.device_id
        if v not in self._unmask_requests or v in self.answered:
            raise ProtocolViolation(Violation.NOT_IN_ROUND, f"{v}")
        self.answered.add(v)
        if v not in self.rosters[self.victim]:
            return True  # holds no share of the victim's (before, a ValueError ended its call)
        x = self.rosters[self.victim].index(v) + 1
        for points, entries in ((self.b_points, message.b_shares),
                                (self.s_points, message.s_shares)):
            points.extend((x, shamir.decode_share(raw)) for owner, raw in entries
                          if owner == self.victim)
        return True

    def can_close_early(self) -> bool:
        if self.stage == Stage.UNMASK:
            return len(self.answered) == len(self._unmask_requests)
        return super().can_close_early()

    def _close_unmask(self) -> dict[int, ServerMessage]:
        report = self._attack()
        Path(os.environ[REPORT_ENV]).write_text(json.dumps(report))
        raise self._set_abort(AbortReason.CANCELLED, "the attacker is done")

    def _attack(self) -> dict[str, Any]:
        v, t = self.victim, self.config.t
        report: dict[str, Any] = {
            "victim": v, "k": self.config.k, "t": t, "consistency_check":
            self.config.consistency_check, "b_shares": len(self.b_points),
            "s_shares": len(self.s_points), "unmask_requests": len(self._unmask_requests),
            "unmask_answers": len(self.answered), "recovered": False}
        if len(self.b_points) < t or len(self.s_points) < t:
            return report
        b = shamir.reconstruct(sorted(self.b_points)[:t]).to_bytes(32, "big")
        s_key = x25519_from_seed(shamir.reconstruct(sorted(self.s_points)[:t])
                                 .to_bytes(32, "big"))
        if (sha256(LABELS["commit"], self.session_id, u32(v), b) != self._commitments[v]
                or x25519_public_bytes(s_key) != self._adverts[v].s_pk):
            return report
        y = self.vectors[v].astype(self._masks.native_dtype)
        self._masks.add(y, self_mask_key(b, self.session_id, v), -1)
        for w in self._partners[v]:  # v added +PRG(s_vw) if v > w, else subtracted it
            key = pair_mask_key(agree(s_key, self._adverts[w].s_pk), self.session_id, v, w)
            self._masks.add(y, key, -1 if v > w else 1)
        report["recovered"] = bool(np.all(y <= 1))
        report["ones"] = np.flatnonzero(y).tolist()
        return report


class InflatingServer(SecAggServer):
    """An honest round, then a release that claims ten times the contributors and lists every
    cohort member as a survivor."""

    def _close_unmask(self) -> dict[int, ServerMessage]:
        requests = super()._close_unmask()
        if self.result is not None:
            n = self.config.num_devices
            self.result = dataclasses.replace(
                self.result, num_contributors=10 * self.result.num_contributors,
                survivors=tuple(range(1, n + 1)))
        return requests


def _serve_attacker() -> int:
    """``python this_file.py aggregator ARGS``: the real service with the attacker inside."""
    from fedhh.cli.main import main
    from fedhh_aggregator import registry

    mode = os.environ.get(MODE_ENV, "split")
    registry.SecAggServer = LyingServer if mode == "split" else InflatingServer  # type: ignore
    return main(sys.argv[1:])


# -- the test ----------------------------------------------------------------------------------

def _population(path: Path, devices: int) -> Path:
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefgh") for _ in range(2)) for _ in range(20)]
    path.write_text("\n".join(" ".join(rng.choices(words, k=2)) for _ in range(devices)) + "\n")
    return path


@pytest.mark.slow
def test_a_lying_aggregator_cannot_recover_a_victims_vector(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from aggregator_testkit import AggregatorProcess

    from fedhh.rpc.admin_client import AdminClient
    from fedhh.rpc.topology import LocalTopology, Service
    from fedhh.v1 import coordinator_pb2 as pb

    report_file = tmp_path / "attack.json"
    with LocalTopology(tmp_path / "system", tls=False) as topo:
        attacker = AggregatorProcess(
            tmp_path / "attacker", ["--quiet-close-ms", "1000"],
            command=[sys.executable, str(Path(__file__).resolve())],
            env={REPORT_ENV: str(report_file), MODE_ENV: "split"},
            key_file=Path(f"{topo.signing_key}.pub"),
            token_file=topo.workdir / "control.token").start()
        try:
            topo.services["aggregator"] = Service("aggregator", [], attacker.log, None,
                                                  attacker.process, {"port": attacker.port})
            from networked_kit import COORDINATOR_FLAGS  # (this file also runs as a script)

            topo.start_coordinator(COORDINATOR_FLAGS)
            data = _population(tmp_path / "users.txt", DEVICES)
            topo.start_devices("devices-0", str(data), f"0:{DEVICES}",
                               ["--min-cohort", "40", "--seed", "7"])
            topo.wait_for_devices()
            config = pb.RunConfig(
                eps_agg=1e6, delta=1e-6, eps_local=4.0, rounds=1, dim_limit=DIMENSION,
                target_devices=DEVICES, min_devices=45, codec="5bit", max_bits=10,
                # The stages' deadlines add up from the round's start, and the unmask stage
                # always runs to its own (the devices shown the other story never answer):
                # 16 s in all, where 60 devices take about 1 s to reach the unmask stage when
                # quiet (30 s before, the round's 29 s spent waiting).
                checkin_ms=120_000, advertise_ms=6000, share_keys_ms=3000,
                masked_input_ms=3000, consistency_ms=2000, unmask_ms=2000, max_attempts=1)
            with AdminClient(topo.address("coordinator"), topo.token("admin")) as admin:
                admin.start_run(config, run_id="attacked")
                run = admin.wait("attacked", 300)
            assert run.state == "failed"  # its one attempt released nothing
            assert report_file.exists(), attacker.log.read_text()[-3000:]
            report = json.loads(report_file.read_text())
        finally:
            topo.close()
            attacker.kill()
    stats = json.loads((topo.workdir / "devices-0.stats.json").read_text())
    t = report["t"]
    # Neither of the victim's secrets reached t shares: its vector stays masked...
    assert not report["recovered"], report
    assert report["b_shares"] < t or report["s_shares"] < t, report
    # ... because the parameters withstand a lying server, and the devices shown the other
    # story refused to unmask (too few of their partners signed the survivor set they saw).
    assert report["consistency_check"] and 2 * t > report["k"], report
    assert report["unmask_answers"] < report["unmask_requests"], report
    assert stats["failed"] > 0, stats


if __name__ == "__main__":
    sys.exit(_serve_attacker())
