"""The dashboard's listening socket and request log: ``fedhh.rpc.http_listener``, which the
Connect port shares, with the dashboard's limits (64 connections, 10 s for a TLS handshake and
for the first request head)."""

from fedhh.rpc.http_listener import HEAD_TIMEOUT_S, MAX_CONNECTIONS, Listener, RequestLog

__all__ = ["HEAD_TIMEOUT_S", "MAX_CONNECTIONS", "Listener", "RequestLog"]
