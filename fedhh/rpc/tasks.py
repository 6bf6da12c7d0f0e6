"""Signed tasks: the coordinator signs each device's task, the device verifies it.

The signature is Ed25519 over ``TASK_CONTEXT || task bytes`` (the context keeps a task
signature from ever verifying as a round-config or any other signature of the same key).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf.message import DecodeError

from fedhh.errors import AuthenticationError
from fedhh.secagg.primitives import ed25519_verify
from fedhh.v1 import coordinator_pb2 as pb

TASK_CONTEXT = b"fedhh/v1/task"


def sign_task(task: pb.Task, key: Ed25519PrivateKey, shared: bytes = b"") -> pb.SignedTask:
    """``task`` signed; with ``shared``, the serialized fields every member of a cohort
    receives alike, the task is ``shared`` followed by ``task``'s own fields. Protobuf parses
    concatenated messages as their merge, so the device reads one Task either way; the shared
    part (the prefix list, the deny list, the round config) is serialized once per cohort
    instead of once per device. ``task`` must set none of the shared fields (a repeated field
    set in both would be concatenated)."""
    payload = shared + task.SerializeToString()
    return pb.SignedTask(task=payload, signature=key.sign(TASK_CONTEXT + payload))


def verify_task(signed: pb.SignedTask, coordinator_public: bytes) -> pb.Task:
    """The task, if the coordinator's signature verifies; AuthenticationError otherwise."""
    if not ed25519_verify(coordinator_public, signed.signature, TASK_CONTEXT + signed.task):
        raise AuthenticationError("the task's signature is invalid")
    try:
        return pb.Task.FromString(signed.task)
    except DecodeError as error:
        raise AuthenticationError(f"the task's encoding is invalid ({error})") from None
