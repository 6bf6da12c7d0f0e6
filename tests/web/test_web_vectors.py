"""Cross-implementation vectors between the Python library and the TypeScript web device
(clients/web): Python's vectors checked by TypeScript (`npm test`), and vectors the TypeScript
device makes with its production randomness checked here with the Python library, up to a whole
simulated round in which a TypeScript device's messages stand in for a Python device's.

Needs Node >= 20.19 and npm (`bootstrap.py test` installs Debian's nodejs and npm); the first run
installs the pinned npm packages (`npm ci`, from package-lock.json) into clients/web/node_modules,
later runs reuse them until the lock file changes.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import webkit

from fedhh.codec import Codec
from fedhh.device.randomizer import RandomizedResponse, a0_threshold
from fedhh.secagg import shamir
from fedhh.secagg.device import RoundKeys, SecAggDevice
from fedhh.secagg.messages import (
    AdvertiseKeys,
    EncryptedShare,
    MaskedInput,
    ShareKeysResponse,
    Stage,
    consistency_transcript,
    survivors_digest,
)
from fedhh.secagg.params import Threat, failure_bounds
from fedhh.secagg.prg import MaskGenerator, pair_mask_key, self_mask_key
from fedhh.secagg.primitives import (
    aead_decrypt,
    agree,
    ed25519_from_seed,
    ed25519_public_bytes,
    ed25519_verify,
    sha256,
    x25519_from_seed,
    x25519_public_bytes,
)
from fedhh.secagg.simulate import DropoutPlan, SimulatedRound, make_cohort
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.enrollment import check_enrollment_signature

REASON = webkit.skip_reason()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = pytest.mark.slow
WEB = webkit.WEB


@pytest.fixture(scope="module")
def built() -> Path:
    """clients/web installed from its lock file (once per lock file) and compiled."""
    try:
        return webkit.build()
    except webkit.BuildError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def ts_vectors(built: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the TypeScript device makes with crypto.getRandomValues (fresh every run)."""
    assert webkit.NODE is not None
    out = tmp_path_factory.mktemp("web") / "ts.json"
    webkit.run(webkit.NODE, str(built / "test" / "make_vectors.js"), str(out), timeout=120)
    return json.loads(out.read_text())


def _make_vectors_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_vectors",
                                                  WEB / "vectors" / "make_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_vectors_are_current() -> None:
    """vectors/python.json is what make_vectors.py writes from today's library."""
    text = _make_vectors_module().render()
    assert (WEB / "vectors" / "python.json").read_text() == text, (
        "clients/web/vectors/python.json is stale: run clients/web/vectors/make_vectors.py")


def test_typescript_passes_the_python_vectors(built: Path) -> None:
    """`npm test`: every Node test of clients/web/test, the vectors among them, and the
    device's waits (pause.test.ts: a wait past a timer's 2^31 - 1 ms chained, where it fired
    at once; a check-in with nothing to do sent again after a floor and a jittered backoff,
    where "retry after 0 ms" was a hot loop) and refused identities (refused_identity.test.ts:
    a cleared site or a reset coordinator says a new token is needed)."""
    assert webkit.NPM is not None
    done = webkit.run(webkit.NPM, "test", timeout=300)
    assert "# fail 0" in done.stdout and "# pass" in done.stdout, done.stdout[-2000:]
    for name in ("pause.test.js", "refused_identity.test.js"):
        assert (built / "test" / name).exists(), name  # (so npm test ran it)


def test_typescript_shamir_shares(ts_vectors: dict[str, Any]) -> None:
    """Every t of the TypeScript shares reconstruct the secret in Python; the points lie on one
    polynomial of degree t - 1, since sliding windows of t points all agree."""
    for case in ts_vectors["shamir"]:
        t = case["threshold"]
        points = [(x, shamir.decode_share(bytes.fromhex(y)))
                  for x, y in zip(case["xs"], case["ys"], strict=True)]
        secret = int(case["secret"], 16)
        for start in range(len(points) - t + 1):
            assert shamir.reconstruct(points[start:start + t]) == secret
        assert shamir.reconstruct(points[::-1][:t]) == secret


def test_typescript_key_agreement(ts_vectors: dict[str, Any]) -> None:
    for case in ts_vectors["x25519"]:
        a = x25519_from_seed(bytes.fromhex(case["seed_a"]))
        b = x25519_from_seed(bytes.fromhex(case["seed_b"]))
        assert x25519_public_bytes(a).hex() == case["public_a"]
        assert x25519_public_bytes(b).hex() == case["public_b"]
        assert agree(a, bytes.fromhex(case["public_b"])).hex() == case["shared"]


def test_typescript_ciphertexts_decrypt(ts_vectors: dict[str, Any]) -> None:
    for case in ts_vectors["aead"]:
        key, aad, blob = (bytes.fromhex(case[f]) for f in ("key", "aad", "blob"))
        assert aead_decrypt(key, blob, aad) == bytes.fromhex(case["plaintext"])
        assert aead_decrypt(key, blob, aad + b"x") is None


def test_typescript_masks(ts_vectors: dict[str, Any]) -> None:
    masks = ts_vectors["masks"]
    for case in masks["keys"]:
        secret, sid = bytes.fromhex(case["secret"]), bytes.fromhex(case["session_id"])
        key = (self_mask_key(secret, sid, case["u"]) if case["kind"] == "self"
               else pair_mask_key(secret, sid, case["u"], case["v"]))
        assert key.hex() == case["key"]
    for case in masks["expansions"]:
        bits = case["bits"]
        mask = MaskGenerator(case["dimension"], bits).generate(bytes.fromhex(case["key"]))
        wire = mask.astype(f"<u{bits // 8}").tobytes()
        if "mask" in case:
            assert wire.hex() == case["mask"]
        else:
            assert sha256(wire).hex() == case["sha256"]


def test_typescript_randomizer(ts_vectors: dict[str, Any]) -> None:
    """The thresholds are Python's; the report is the one Python makes from the same words."""
    rand = ts_vectors["randomizer"]
    for case in rand["thresholds"]:
        assert a0_threshold(case["eps"]) == case["threshold0"], case["eps"]
    for case in rand["randomize"]:
        words = np.asarray(case["words"], dtype=np.uint32)
        assert len(words) == case["dim"]
        ones = RandomizedResponse(case["eps"]).randomize(case["index"], case["dim"],
                                                         _Replay(words))
        assert ones.tolist() == case["ones"]


class _Replay:
    """A word source that hands out recorded words (those the TypeScript device drew)."""

    def __init__(self, words: np.ndarray) -> None:
        self.words = words

    def uint32(self, size: int) -> np.ndarray:
        assert size == len(self.words)
        return self.words

    def below(self, highs: np.ndarray) -> np.ndarray:
        raise AssertionError("the randomizer draws words only")


def test_typescript_codecs_encode_random_items_as_python(ts_vectors: dict[str, Any]) -> None:
    """200 strings from many scripts (controls, combining marks, CJK, Hangul, emoji, ZWJ,
    private use, astral planes, right-to-left), encoded by every built-in codec in TypeScript.
    The strings are drawn from a fixed seed (make_vectors.ts INPUT_SEED), the same at every run."""
    assert ts_vectors["inputs_seed"] == "web-vectors-inputs-1"
    for case in ts_vectors["codecs"]:
        codec = Codec(case["spec"], case["max_bits"])
        differ = [(item, format(codec.encode(item), "x"), code)
                  for item, code in zip(case["items"], case["codes"], strict=True)
                  if format(codec.encode(item), "x") != code]
        assert not differ, (case["spec"], case["max_bits"], differ[:3])


def test_typescript_bounds_within_tolerance(ts_vectors: dict[str, Any]) -> None:
    """150 random (n, k, t) and floors: TypeScript's lying-server bound is within its stated
    tolerance of Python's, and TypeScript never accepts what the Python device refuses (a third
    of the cases put the target within 1e-9 of the bound)."""
    for case in ts_vectors["bounds"]:
        n, k, t = case["n"], case["k"], case["t"]
        bounds = failure_bounds(n, k, t, case["dropout"], case["corrupt"], Threat.LYING)
        python = bounds.privacy + bounds.disconnection
        tolerance = 2.0**-40 + 2.0**-45 * (n + 1) * math.log(n + 1)
        assert case["tolerance"] == pytest.approx(tolerance, rel=1e-12)
        assert abs(case["bound"] - python) <= tolerance * python + 1e-300, case
        if case["accept"]:
            assert python <= 2.0 ** -case["security_bits"], case


def test_typescript_reports_replay_in_python(ts_vectors: dict[str, Any]) -> None:
    """Reports made by the TypeScript device with production draws and words: the Python device
    makes the same report from the same draws and words."""
    from fedhh_device.report import DeviceData, make_report
    for case in ts_vectors["reports"]:
        f = case["task"]
        task = pb.Task(run_id="run-sel", round=2, codec=f["codec"], max_bits=f["max_bits"],
                       prefix_bits=f["prefix_bits"], prefixes=[int(w) for w in f["prefixes"]],
                       segment_bits=f["segment_bits"], deny_list=[int(w) for w in f["deny_list"]],
                       selection=f["selection"], prefix_conditioning=f["prefix_conditioning"],
                       eps_local=f["eps_local"], round_config=bytes.fromhex(f["round_config"]))
        source = _ReplayDraws(case["draws"], case["words"])
        ones = make_report(DeviceData(tuple(case["items"]), np.array(case["counts"])), task,
                           source)
        assert ones.tolist() == case["ones"], case["items"]
        assert source.draws == [], "Python drew less than TypeScript"


class _ReplayDraws:
    """Recorded draws below a bound, then recorded words."""

    def __init__(self, draws: list[int], words: list[int]) -> None:
        self.draws, self.words = list(draws), np.asarray(words, dtype=np.uint32)

    def below(self, highs: np.ndarray) -> np.ndarray:
        out, self.draws = self.draws[: len(highs)], self.draws[len(highs):]
        assert len(out) == len(highs)
        assert all(0 <= x < h for x, h in zip(out, np.asarray(highs), strict=True))
        return np.asarray(out, dtype=np.int64)

    def uint32(self, size: int) -> np.ndarray:
        assert size == len(self.words)
        return self.words


def test_typescript_consistency_signature(ts_vectors: dict[str, Any]) -> None:
    for case in ts_vectors["consistency"]:
        key = ed25519_from_seed(bytes.fromhex(case["identity_seed"]))
        assert ed25519_public_bytes(key).hex() == case["identity_public"]
        sid = bytes.fromhex(case["session_id"])
        transcript = consistency_transcript(sid, case["device_id"],
                                            survivors_digest(tuple(case["survivors"])))
        signature = bytes.fromhex(case["signature"])
        assert ed25519_verify(ed25519_public_bytes(key), signature, transcript)
        assert key.sign(transcript) == signature  # Ed25519 is deterministic


def test_typescript_wire_messages_parse_in_python(ts_vectors: dict[str, Any]) -> None:
    """Requests encoded by the generated TypeScript code are the Python protobuf messages."""
    enroll = ts_vectors["wire"]["enroll"]
    parsed = pb.EnrollRequest.FromString(bytes.fromhex(enroll["bytes"]))
    assert parsed.enrollment_token == enroll["token"].encode()
    assert parsed.identity_public_key.hex() == enroll["identity_public_key"]
    assert parsed.label == enroll["label"] == "browser-\u00e9t\u00e9"
    assert parsed.attestation.hex() == enroll["attestation"]
    # signed over the enrollment proof as the Python device builds it (the coordinator's check)
    assert parsed.enrollment_signature.hex() == enroll["enrollment_signature"]
    check_enrollment_signature(parsed)
    get_task = ts_vectors["wire"]["get_task"]
    request = pb.GetTaskRequest.FromString(bytes.fromhex(get_task["bytes"]))
    assert request.device_id == int(get_task["device_id"]) == 2**63 + 5
    assert request.wait_ms == get_task["wait_ms"]
    assert (request.known_task.hex(), request.c_pk.hex(), request.s_pk.hex()) == (
        get_task["known_task"], get_task["c_pk"], get_task["s_pk"])


def test_generated_wire_code_is_current(built: Path) -> None:
    """clients/web/src/gen is what protoc-gen-es makes from proto/ today."""
    done = subprocess.run([sys.executable, str(WEB / "generate_proto.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


class _FirstBytes:
    """A RandomSource that returns ``head`` first (the TypeScript device's b_u), then a stream."""

    def __init__(self, head: bytes, rest: Any) -> None:
        self.head, self.rest = head, rest

    def __call__(self, n: int) -> bytes:
        if self.head:
            if n != len(self.head):
                raise AssertionError(f"expected a draw of {len(self.head)} bytes, got {n}")
            out, self.head = self.head, b""
            return out
        return bytes(self.rest(n))


def _round_with_typescript_device(ts: dict[str, Any], *,
                                  drops: bool) -> tuple[SimulatedRound, int]:
    """python.json's first round (same seed, so the same Python devices), with device ``me``'s
    messages replaced by the TypeScript device's: its keys, its encrypted shares, its masked
    input. Device ``me`` itself stays a Python SecAggDevice holding the TypeScript keys and
    b_u, so the messages it would have sent can be compared with the TypeScript ones."""
    device = ts["device"]
    me = device["device_id"]
    python = json.loads((WEB / "vectors" / "python.json").read_text())["device_rounds"][0]
    cohort = make_cohort(n=7, dimension=37, k=6, t=3, modulus_bits=16, seed=b"web-vectors-16")
    assert cohort.session_id.hex() == python["session_id"]
    reports: dict[int, np.ndarray] = {u: np.zeros(0, np.int64) for u in range(1, 8)}
    reports.update({u: np.array([u, 2 * u, 30], np.int64) for u in range(1, 8) if u != me})
    reports[me] = np.asarray(device["ones"], np.int64)
    ts_shares = tuple(EncryptedShare(me, s["dst"], bytes.fromhex(s["ciphertext"]))
                      for s in device["shares"])
    sid = cohort.session_id

    def swap(stage: Stage, u: int, message: Any) -> Any:
        if u != me:
            return message
        if stage == Stage.ADVERTISE_KEYS:
            assert isinstance(message, AdvertiseKeys)
            assert (message.c_pk.hex(), message.s_pk.hex()) == (device["c_pk"], device["s_pk"])
        elif stage == Stage.SHARE_KEYS:
            assert isinstance(message, ShareKeysResponse)
            assert message.b_commitment.hex() == device["b_commitment"]
            return ShareKeysResponse(sid, me, ts_shares, bytes.fromhex(device["b_commitment"]))
        elif stage == Stage.MASKED_INPUT:
            assert isinstance(message, MaskedInput)
            ts_vector = np.frombuffer(bytes.fromhex(device["masked_input"]), "<u2")
            np.testing.assert_array_equal(message.vector, ts_vector)
            return MaskedInput(sid, me, ts_vector.astype(message.vector.dtype))
        return message

    dropouts = DropoutPlan.at(Stage.MASKED_INPUT, {me}) if drops else None
    driver = SimulatedRound(cohort, reports, dropouts, to_server=swap)
    keys = RoundKeys(x25519_from_seed(bytes.fromhex(device["c_seed"])),
                     x25519_from_seed(bytes.fromhex(device["s_seed"])))
    driver.devices[me] = SecAggDevice(
        cohort.signed, cohort.coordinator_public, me, round_keys=keys, masks=driver.masks,
        rand=_FirstBytes(bytes.fromhex(device["b"]), cohort.rand.spawn(b"ts-stand-in")))
    return driver, me


def test_typescript_device_in_a_python_round(ts_vectors: dict[str, Any]) -> None:
    """The Python devices decrypt the TypeScript device's shares, its masked input is the one
    the Python device computes from the same keys and b_u, and the server, unmasking with the
    TypeScript b-shares, releases exactly the sum of the reports."""
    driver, me = _round_with_typescript_device(ts_vectors, drops=False)
    outcome = driver.run()
    assert outcome.abort is None, outcome.abort
    assert not outcome.device_aborts, outcome.device_aborts
    assert outcome.result is not None and me in outcome.contributors
    np.testing.assert_array_equal(outcome.result.total.astype(np.int64), outcome.expected_total)


def test_typescript_device_dropping_out(ts_vectors: dict[str, Any]) -> None:
    """The TypeScript device drops after sharing its keys: the server rebuilds its mask key
    s_u^SK from the TypeScript s-shares and removes its pairwise masks from the others' inputs."""
    driver, me = _round_with_typescript_device(ts_vectors, drops=True)
    outcome = driver.run()
    assert outcome.abort is None, outcome.abort
    assert not outcome.device_aborts, outcome.device_aborts
    assert outcome.result is not None and me not in outcome.contributors
    assert outcome.revealed.get(me) == {"s"}
    np.testing.assert_array_equal(outcome.result.total.astype(np.int64), outcome.expected_total)
