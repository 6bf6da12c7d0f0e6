/** The fedhh web device: SecAgg+ cryptography and the local randomizer (see docs/web-devices.md). */

export * from "./bytes.js";
export * from "./config.js";
export * from "./prg.js";
export * from "./primitives.js";
export * from "./random.js";
export * from "./randomizer.js";
export * from "./secagg.js";
export * as shamir from "./shamir.js";
