"""Signed tasks (fedhh.rpc.tasks): a cohort's shared part signed once and each member's own
fields after it read as the member's whole Task, and verify for that member only; a changed
byte of the signed part, an unsigned part that sets anything but the member's own fields, or a
signed part that sets one of them is refused; a relay's swap of the own part fails the
device's admission check."""

from __future__ import annotations

import functools

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import AuthenticationError
from fedhh.rpc.tasks import COHORT_TASK_CONTEXT, CohortTasks, verify_task
from fedhh.secagg.config import Admission
from fedhh.secagg.device import SecAggDevice
from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.primitives import ed25519_verify
from fedhh.secagg.simulate import make_cohort
from fedhh.v1 import coordinator_pb2 as pb

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = KEY.public_key().public_bytes_raw()


def shared() -> pb.Task:
    return pb.Task(run_id="r", round=3, attempt=2, prefix_bits=12, prefixes=[5, 9, 4000],
                   deny_list=[7], segment_bits=4, eps_local=2.5, codec="5bit", max_bits=60,
                   aggregator_address="a:1", round_config=b"config",
                   round_config_signature=b"sig", deadline_unix_ms=123)


def whole(device_id: int) -> pb.Task:
    task = shared()
    task.device_id, task.secagg_id = device_id, device_id + 1
    task.admission = b"proof %d" % device_id
    return task


def member_task(device_id: int) -> pb.SignedTask:
    return CohortTasks(shared(), KEY).task(device_id, device_id + 1, b"proof %d" % device_id)


def with_changes(signed: pb.SignedTask, **fields: object) -> pb.SignedTask:
    changed = pb.SignedTask()
    changed.CopyFrom(signed)
    for name, value in fields.items():
        setattr(changed, name, value)
    return changed


def test_each_member_reads_its_whole_task_under_one_signature() -> None:
    cohort = CohortTasks(shared(), KEY)
    tasks = {d: cohort.task(d, d + 1, b"proof %d" % d) for d in (1, 2, 300)}
    assert len({t.shared_signature for t in tasks.values()}) == 1
    for device_id, signed in tasks.items():
        assert verify_task(signed, PUBLIC, device_id) == whole(device_id)


def test_a_task_is_refused_to_another_device() -> None:
    with pytest.raises(AuthenticationError, match="another device"):
        verify_task(member_task(4), PUBLIC, 5)


@pytest.mark.parametrize("position", [0, 10, -1])
def test_a_changed_byte_of_the_signed_part_fails(position: int) -> None:
    signed = member_task(4)
    task = bytearray(signed.task)
    task[position % signed.shared_length] ^= 1
    with pytest.raises(AuthenticationError, match="signature"):
        verify_task(with_changes(signed, task=bytes(task)), PUBLIC, 4)


@pytest.mark.parametrize("extra", [
    pb.Task(eps_local=9.0),  # overrides the signed eps_local in the merge
    pb.Task(prefixes=[1]),  # appends to the signed prefix list
    pb.Task(device_id=4),  # a repeated own field: not the canonical encoding
])
def test_the_unsigned_part_sets_only_the_members_own_fields(extra: pb.Task) -> None:
    signed = member_task(4)
    changed = with_changes(signed, task=signed.task + extra.SerializeToString())
    with pytest.raises(AuthenticationError, match="unsigned part"):
        verify_task(changed, PUBLIC, 4)


def test_a_signed_part_that_sets_an_own_field_is_refused() -> None:
    with pytest.raises(ValueError, match="must set none of"):
        CohortTasks(whole(4), KEY)
    stray = shared().SerializeToString() + pb.Task(secagg_id=9).SerializeToString()
    own = pb.Task(device_id=4, secagg_id=5, admission=b"proof 4").SerializeToString()
    signed = pb.SignedTask(task=stray + own, shared_length=len(stray),
                           shared_signature=KEY.sign(COHORT_TASK_CONTEXT + stray))
    with pytest.raises(AuthenticationError, match="signed part sets"):
        verify_task(signed, PUBLIC, 4)


@pytest.mark.parametrize("change", ["longer", "shorter", "no context", "unsigned"])
def test_a_wrong_split_or_signature_is_refused(change: str) -> None:
    signed = member_task(4)
    length = signed.shared_length
    changes: dict[str, dict[str, object]] = {
        "longer": {"shared_length": len(signed.task) + 1},
        "shorter": {"shared_length": length - 1},
        "no context": {"shared_signature": KEY.sign(signed.task[:length])},
        "unsigned": {"shared_signature": b""},
    }
    changed = with_changes(signed, **changes[change])
    with pytest.raises(AuthenticationError):
        verify_task(changed, PUBLIC, 4)


def test_a_memoised_verifier_verifies_a_cohort_once() -> None:
    asked: list[bytes] = []

    @functools.cache
    def verify(public: bytes, signature: bytes, message: bytes) -> bool:
        asked.append(message)
        return ed25519_verify(public, signature, message)

    cohort = CohortTasks(shared(), KEY)
    for device_id in (1, 2, 3):
        assert verify_task(cohort.task(device_id, device_id, b""), PUBLIC, device_id,
                           verify).device_id == device_id
    assert asked == [COHORT_TASK_CONTEXT + shared().SerializeToString()]


@pytest.mark.parametrize("swap", ["secagg_id and admission", "admission"])
def test_a_relays_swap_of_the_own_part_fails_the_devices_admission_check(swap: str) -> None:
    """The own part is unsigned: a relay that gives member 2 member 3's secagg_id and
    admission, or member 3's admission alone, makes member 2's own admission check refuse
    the round before the device takes part (SecAggDevice with device_auth, as every networked
    device runs it)."""
    cohort = make_cohort(n=8, dimension=12, k=7, t=4, n_min=4, seed=11, device_auth=True)
    mine, theirs = cohort.admissions[2], cohort.admissions[3]
    secagg_id = 3 if swap == "secagg_id and admission" else 2
    admission = Admission(secagg_id, *mine.keys, theirs.proof)
    with pytest.raises(SecAggConfigError, match="admission is not the coordinator's"):
        SecAggDevice(cohort.signed, cohort.coordinator_public, secagg_id,
                     identity_key=cohort.identity_keys[2], admission=admission,
                     round_keys=cohort.round_keys[2])
    SecAggDevice(cohort.signed, cohort.coordinator_public, 2,  # (the honest own part)
                 identity_key=cohort.identity_keys[2], admission=mine,
                 round_keys=cohort.round_keys[2])
