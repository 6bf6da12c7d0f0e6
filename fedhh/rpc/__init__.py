"""gRPC plumbing shared by the services (TLS, serving, the error map, metrics, logs).

This package imports grpc; ``import fedhh`` never imports it, so the library stays usable without
a network stack.
"""
