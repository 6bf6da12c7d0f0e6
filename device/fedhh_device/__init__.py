"""The device process: hosts many simulated devices, each with its own data, keys and
randomness, polling the coordinator and running the secure-aggregation protocol."""
