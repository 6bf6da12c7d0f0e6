"""Signed tasks: the coordinator signs what a cohort's members receive alike, once for them all;
each device verifies that signature and checks its own part.

A task is the cohort's shared part (the query: prefix list, deny list, segment length,
eps_local, codec; the round config and its signature; the aggregator's addresses) followed by
the member's own part (device_id, secagg_id, admission); protobuf parses the two as their
merge. The coordinator signs ``COHORT_TASK_CONTEXT || shared`` (Ed25519; the context keeps the
signature from ever verifying as a round config's or any other of the same key) once per
cohort, where it signed each member's whole task: 45.6 -> 2.1 us per member of a 2,500-device
shard on a 2.1 GHz core (``bench/bench_tasks.py``).

The own part needs no signature of its own. A relay (a selector) that altered it could only
make the device drop out, as dropping its call would: ``device_id`` must be the device's own
(:func:`verify_task` checks it), and the admission is the inclusion proof of the device's own
keys at leaf ``secagg_id`` under the identity root of the round config the coordinator signed,
which the device checks before it takes part (``SecAggDevice`` with ``device_auth``, which
every networked device requires). So that the unsigned part cannot override a signed field in
the merge, it must hold those three fields and nothing else, in their canonical encoding, and
the signed part none of them.
"""

from __future__ import annotations

from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf.message import DecodeError

from fedhh.errors import AuthenticationError
from fedhh.secagg.primitives import ed25519_verify
from fedhh.v1 import coordinator_pb2 as pb

__all__ = ["COHORT_TASK_CONTEXT", "CohortTasks", "verify_task"]

COHORT_TASK_CONTEXT = b"fedhh/v1/cohort-task"
_OWN_FIELDS = ("device_id", "secagg_id", "admission")


class CohortTasks:
    """The tasks of one cohort: ``shared`` (which must set none of a member's own fields)
    serialized and signed with ``key`` once, then each member's own part appended."""

    def __init__(self, shared: pb.Task, key: Ed25519PrivateKey) -> None:
        if any(getattr(shared, name) for name in _OWN_FIELDS):
            raise ValueError("a cohort's shared task must set none of "
                             f"{', '.join(_OWN_FIELDS)}")
        self._shared = shared.SerializeToString()
        self._signature = key.sign(COHORT_TASK_CONTEXT + self._shared)

    def task(self, device_id: int, secagg_id: int, admission: bytes) -> pb.SignedTask:
        """The task of the member ``device_id``, ``secagg_id`` in the round."""
        own = pb.Task(device_id=device_id, secagg_id=secagg_id, admission=admission)
        return pb.SignedTask(task=self._shared + own.SerializeToString(),
                             shared_signature=self._signature, shared_length=len(self._shared))


def verify_task(signed: pb.SignedTask, coordinator_public: bytes, device_id: int,
                verify: Callable[[bytes, bytes, bytes], bool] = ed25519_verify) -> pb.Task:
    """The task of ``device_id``, if the coordinator signed its shared part and its own part
    is only that device's fields; AuthenticationError otherwise (the module's docstring).

    ``verify`` is :func:`ed25519_verify` or a memo of it (a process that simulates a cohort
    meets the same shared part and signature once per member)."""
    length = signed.shared_length
    if length > len(signed.task):
        raise AuthenticationError("the task's shared part is longer than the task")
    shared_bytes, own_bytes = signed.task[:length], signed.task[length:]
    if not verify(coordinator_public, signed.shared_signature,
                  COHORT_TASK_CONTEXT + shared_bytes):
        raise AuthenticationError("the task's signature is invalid")
    try:
        task, own = pb.Task.FromString(shared_bytes), pb.Task.FromString(own_bytes)
    except DecodeError as error:
        raise AuthenticationError(f"the task's encoding is invalid ({error})") from None
    if any(getattr(task, name) for name in _OWN_FIELDS):
        raise AuthenticationError("the task's signed part sets a member's own field")
    canonical = pb.Task(device_id=own.device_id, secagg_id=own.secagg_id,
                        admission=own.admission).SerializeToString()
    if canonical != own_bytes:
        raise AuthenticationError("the task's unsigned part sets more than the device's own "
                                  "fields")
    if own.device_id != device_id:
        raise AuthenticationError("the task is for another device")
    task.device_id, task.secagg_id, task.admission = own.device_id, own.secagg_id, own.admission
    return task
