"""Who may call what.

- Control calls (the coordinator): metadata ``authorization: Bearer <token>``, compared in
  constant time with the token read at startup; OpenRound also needs the coordinator's Ed25519
  signature on the config (checked by the registry against the configured public key).
- Device calls: the coordinator's admission of the device to the round (a Merkle inclusion proof
  of its identity key under the signed config's identity root), and the identity key's signature
  over the call (``fedhh.rpc.aggregator_wire.call_transcript``).

Every failure is an :class:`~fedhh.errors.AuthenticationError` (UNAUTHENTICATED), raised before
anything is handed to the round.
"""

from __future__ import annotations

import grpc

from fedhh.errors import AuthenticationError, ConfigError
from fedhh.rpc.aggregator_wire import CallKind, admission_from_pb, call_transcript
from fedhh.rpc.credentials import Metadata, presents
from fedhh.secagg.config import Admission
from fedhh.secagg.primitives import ed25519_verify
from fedhh.v1 import aggregator_pb2 as pb
from fedhh_aggregator.rounds import Round

TOKEN_ENV = "FEDHH_CONTROL_TOKEN"
MIN_TOKEN_BYTES = 16


class ControlAuth:
    """Checks the coordinator's bearer token on every control call."""

    def __init__(self, token: bytes) -> None:
        if len(token) < MIN_TOKEN_BYTES:
            raise ConfigError(f"the control token must be at least {MIN_TOKEN_BYTES} bytes")
        self._token = token

    def check(self, context: grpc.aio.ServicerContext) -> None:
        self.check_metadata(context.invocation_metadata())

    def check_metadata(self, metadata: Metadata) -> None:
        """The check on a call's metadata alone: what the gRPC port's ``CredentialGate`` runs
        before it reads the request (``fedhh.rpc.serving``), so a caller without the token
        costs the service its metadata only, not a message up to the receive cap."""
        # One answer for a missing and a wrong token; the bearer is read and compared (in
        # constant time) as on every port (fedhh.rpc.credentials).
        if not presents(metadata, self._token):
            raise AuthenticationError("missing or invalid control token")


def device_admission(round_: Round, creds: pb.DeviceCredentials) -> Admission:
    """The caller's admission, if it proves membership of this round's cohort."""
    if not creds.HasField("admission"):
        raise AuthenticationError("missing device credentials")
    admission = admission_from_pb(creds.admission)
    if not round_.admitted(admission):
        raise AuthenticationError("the admission is not the coordinator's for this round")
    return admission


def check_call(round_: Round, admission: Admission, creds: pb.DeviceCredentials, kind: CallKind,
               body_digest: bytes) -> int:
    """The device id, if ``creds`` signs this call with the admitted identity key."""
    transcript = call_transcript(kind, round_.session_id, admission.device_id, body_digest)
    if not ed25519_verify(admission.identity_key, bytes(creds.signature), transcript):
        raise AuthenticationError("the call is not signed by the admitted device")
    return admission.device_id


def authenticate_device(round_: Round, creds: pb.DeviceCredentials, kind: CallKind,
                        body_digest: bytes) -> int:
    """Both checks: admission, then the call's signature; returns the device id."""
    return check_call(round_, device_admission(round_, creds), creds, kind, body_digest)
