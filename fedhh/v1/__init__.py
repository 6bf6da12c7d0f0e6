"""Generated protobuf/gRPC code for proto/fedhh/v1 (do not edit)."""
