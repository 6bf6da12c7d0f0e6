/** The fedhh web device: SecAgg+ cryptography and the local randomizer (see docs/web-devices.md). */

export * from "./bytes.js";
export * from "./config.js";
export * from "./prg.js";
export * from "./primitives.js";
export * from "./random.js";
export * from "./randomizer.js";
export * from "./secagg.js";
export * as shamir from "./shamir.js";
export * from "./task.js";
export * as wire from "./gen/fedhh/v1/coordinator_pb.js";
export * as aggregatorWire from "./gen/fedhh/v1/aggregator_pb.js";
export * from "./graph.js";
export * from "./merkle.js";
export * from "./device.js";
export * from "./wire.js";
export * from "./round.js";
export * from "./loop.js";
