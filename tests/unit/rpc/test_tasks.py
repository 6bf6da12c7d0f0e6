"""Signed tasks (fedhh.rpc.tasks): a task signed as a shared part and a device's own fields
reads as the one Task with all of them, verifies, and fails on any byte changed."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import AuthenticationError
from fedhh.rpc.tasks import sign_task, verify_task
from fedhh.v1 import coordinator_pb2 as pb

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = KEY.public_key().public_bytes_raw()


def whole(device_id: int) -> pb.Task:
    return pb.Task(run_id="r", round=3, attempt=2, device_id=device_id, prefix_bits=12,
                   prefixes=[5, 9, 4000], deny_list=[7], segment_bits=4, eps_local=2.5,
                   codec="5bit", max_bits=60, aggregator_address="a:1",
                   round_config=b"config", round_config_signature=b"sig",
                   secagg_id=device_id + 1, admission=b"proof %d" % device_id,
                   deadline_unix_ms=123)


def test_a_task_in_two_parts_reads_as_the_whole_task() -> None:
    shared = pb.Task()
    shared.CopyFrom(whole(0))
    for own_field in ("device_id", "secagg_id", "admission"):
        shared.ClearField(own_field)
    shared_bytes = shared.SerializeToString()
    for device_id in (1, 2, 300):
        own = pb.Task(device_id=device_id, secagg_id=device_id + 1,
                      admission=b"proof %d" % device_id)
        signed = sign_task(own, KEY, shared_bytes)
        assert verify_task(signed, PUBLIC) == whole(device_id)
        assert verify_task(sign_task(whole(device_id), KEY), PUBLIC) == whole(device_id)


@pytest.mark.parametrize("position", [0, 10, -1])
def test_a_changed_byte_fails_verification(position: int) -> None:
    signed = sign_task(pb.Task(device_id=4), KEY, whole(0).SerializeToString())
    task = bytearray(signed.task)
    task[position] ^= 1
    with pytest.raises(AuthenticationError):
        verify_task(pb.SignedTask(task=bytes(task), signature=signed.signature), PUBLIC)
