// Pieces that need no cluster: the environment, codecs, error mapping.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Metadata, status } from "@grpc/grpc-js";
import { configFromEnv, jsonCodec, mapError, InvalidArgumentError, StaleFenceError, OutcomeUnknownError, UnavailableError, NotFoundError, MemoryLimitError, TenantLimitError, TooLargeError, Client, DocketError } from "../src/index.js";
import { Status, ErrorInfo, BadRequest } from "../src/gen/google/rpc/status.js";

test("configFromEnv reads what the CLI reads", () => {
  const c = configFromEnv({ DOCKET_ADDR: " a:1, b:2 ,", DOCKET_TLS_CA: "/ca.pem", DOCKET_TOKEN: " s3cret " });
  assert.deepEqual(c.addrs, ["a:1", "b:2"]);
  assert.deepEqual(c.tls, { ca: "/ca.pem", cert: undefined, key: undefined });
  assert.equal(c.token, "s3cret");
  assert.throws(() => configFromEnv({ DOCKET_TLS_CERT: "/c.pem" }), /DOCKET_TLS_CERT is set without DOCKET_TLS_CA/);
});

test("a client without an address is refused at once", () => {
  assert.throws(() => new Client({ addrs: [] }), DocketError);
});

test("jsonCodec round-trips and stores undefined as no bytes", () => {
  assert.deepEqual(jsonCodec.decode(jsonCodec.encode({ a: [1, "x"] })), { a: [1, "x"] });
  assert.equal(jsonCodec.encode(undefined).length, 0);
});

function svcErr(code: number, details: Status["details"], msg = "m") {
  const md = new Metadata();
  md.set("grpc-status-details-bin", Buffer.from(Status.encode({ code, message: msg, details }).finish()));
  return Object.assign(new Error(msg), { code, details: msg, metadata: md });
}

test("mapError follows the error contract", () => {
  const info = (reason: string, metadata: Record<string, string> = {}) => ({
    typeUrl: "type.googleapis.com/google.rpc.ErrorInfo",
    value: Buffer.from(ErrorInfo.encode({ reason, domain: "docket.dev", metadata }).finish()),
  });
  const bad = {
    typeUrl: "type.googleapis.com/google.rpc.BadRequest",
    value: Buffer.from(BadRequest.encode({ fieldViolations: [{ field: "tasks[0].queue", description: "x" }] }).finish()),
  };
  const inv = mapError(svcErr(status.INVALID_ARGUMENT, [bad]));
  assert.ok(inv instanceof InvalidArgumentError);
  assert.equal((inv as InvalidArgumentError).field, "tasks[0].queue");
  const stale = mapError(svcErr(status.FAILED_PRECONDITION, [info("STALE_FENCE")], "fence is 42"));
  assert.ok(stale instanceof StaleFenceError);
  assert.doesNotMatch((stale as Error).message, /42/, "a stale writer learns only that it is stale");
  assert.ok(mapError(svcErr(status.UNAVAILABLE, [info("LEADERSHIP_LOST")])) instanceof OutcomeUnknownError);
  assert.ok(mapError(svcErr(status.UNAVAILABLE, [info("NOT_LEADER", { leader: "x:1" })])) instanceof UnavailableError);
  assert.ok(mapError(svcErr(status.NOT_FOUND, [])) instanceof NotFoundError);
  assert.ok(mapError(svcErr(status.RESOURCE_EXHAUSTED, [info("MEMORY_LIMIT")])) instanceof MemoryLimitError);
  assert.ok(mapError(svcErr(status.RESOURCE_EXHAUSTED, [info("TENANT_LIMIT")])) instanceof TenantLimitError);
  assert.ok(mapError(svcErr(status.RESOURCE_EXHAUSTED, [])) instanceof TooLargeError);
});
