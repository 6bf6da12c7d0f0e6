/**
 * The web device proves it holds the identity key it enrols: `CoordinatorClient.enroll` signs
 * the enrolment proof (wire.ts `enrollmentProof`) with it, byte for byte as the Python device
 * (fedhh/rpc/device_users.py). The coordinator refuses an unsigned or badly signed enrolment,
 * so without this the web device could not enrol at all; the vector below is the one
 * tests/security/test_enrol_pop.py pins for the Python side.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { createRouterTransport } from "@connectrpc/connect";

import { fromHex, toHex, utf8 } from "../src/bytes.js";
import {
  DeviceService,
  type EnrollRequest,
  EnrollResponseSchema,
} from "../src/gen/fedhh/v1/coordinator_pb.js";
import { ed25519Verify } from "../src/primitives.js";
import { CoordinatorClient, enrollmentProof } from "../src/wire.js";

// Seed 00 01 .. 1f, token "ab" * 32 (as text), label "web-é", no attestation.
const SEED = Uint8Array.from({ length: 32 }, (_, i) => i);
const TOKEN = "ab".repeat(32);
const LABEL = "web-é";
const PUBLIC = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8";
const PROOF =
  "66656468682f76312f656e726f6c6c6d656e742d70726f6f6600" +
  "271a413bd339c5709fdceaec41f14f11e9fbfb5042d72d331c65f32b284cd09a" +
  "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8" +
  "76fb2af69670bfb7e346bd118da7f84f67125857c7fd862f7f11020bc565829d" +
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const SIGNATURE =
  "0867bdbd7f41240a1e800ed687505a78a30cacb5097464014e01ccdfe02b9177" +
  "5757ccd81b58d453cc19e4ac220d1b6d4664bc5dbf0f669978f6c81865e97006";

function recording(): { client: CoordinatorClient; requests: EnrollRequest[] } {
  const requests: EnrollRequest[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(DeviceService, {
      async enroll(request) {
        requests.push(request);
        return create(EnrollResponseSchema, { deviceId: 7n, credential: new Uint8Array(32),
                                              coordinatorPublicKey: new Uint8Array(32) });
      },
    });
  });
  return { client: new CoordinatorClient(transport), requests };
}

test("the enrolment proof is the Python device's, byte for byte", async () => {
  const proof = await enrollmentProof(utf8(TOKEN), fromHex(PUBLIC), LABEL, new Uint8Array());
  assert.equal(toHex(proof), PROOF);
});

test("an enrolment is signed with the identity key it enrols", async () => {
  const { client, requests } = recording();
  const identity = await client.enroll(TOKEN, LABEL, SEED);
  assert.equal(identity.deviceId, 7n);
  assert.equal(requests.length, 1);
  const [request] = requests;
  assert.equal(toHex(request!.identityPublicKey), PUBLIC);
  assert.equal(toHex(request!.enrollmentSignature), SIGNATURE);
  const proof = await enrollmentProof(request!.enrollmentToken, request!.identityPublicKey,
                                      request!.label, request!.attestation);
  assert.ok(ed25519Verify(request!.identityPublicKey, request!.enrollmentSignature, proof));
});

test("a retry of a lost enrolment sends the same signed request", async () => {
  const { client, requests } = recording();
  await client.enroll(TOKEN, LABEL, SEED);
  await client.enroll(TOKEN, LABEL, SEED);
  assert.equal(requests.length, 2);
  assert.equal(toHex(requests[1]!.enrollmentSignature), toHex(requests[0]!.enrollmentSignature));
});

test("the signature covers the token and the label", async () => {
  const { client, requests } = recording();
  await client.enroll(TOKEN, LABEL, SEED);
  const signature = requests[0]!.enrollmentSignature;
  const public_ = requests[0]!.identityPublicKey;
  const otherToken = await enrollmentProof(utf8("cd".repeat(32)), public_, LABEL, new Uint8Array());
  const otherLabel = await enrollmentProof(utf8(TOKEN), public_, "web-e", new Uint8Array());
  assert.ok(!ed25519Verify(public_, signature, otherToken));
  assert.ok(!ed25519Verify(public_, signature, otherLabel));
});
