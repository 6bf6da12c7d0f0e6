"""The session stream without gRPC: an aggregator's framed session port (docs/secagg.md, "The
framed session port"). ``frames``: the wire format both ends share; ``server``: the port;
``client``: a device's channel to it, whose calls behave as grpc.aio's stream calls do."""
