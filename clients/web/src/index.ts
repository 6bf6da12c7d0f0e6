/** The fedhh web device: codecs, selection, floors and budget, the local randomizer and SecAgg+ (see docs/web-devices.md). */

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
export * from "./codec.js";
export * from "./selection.js";
export * from "./bounds.js";
export * from "./floors.js";
export * from "./budget.js";
export * from "./report.js";
export * from "./wire.js";
export * from "./round.js";
export * from "./loop.js";
export * from "./storage.js";
export * from "./identity.js";
export * from "./run.js";
