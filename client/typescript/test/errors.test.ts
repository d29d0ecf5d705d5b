// Bad input answers a typed error, never a bare gRPC status.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Client, InvalidArgumentError, NotFoundError, TooLargeError, UnauthenticatedError, configFromEnv } from "../src/index.js";
import { newClient, queueName } from "./helpers.js";

const c = newClient();
after(() => c.close());

test("a queue name of the wrong form is InvalidArgumentError naming the field", async () => {
  const e = await c.enqueue("no/slashes here", 1).then(() => undefined, (e) => e);
  assert.ok(e instanceof InvalidArgumentError, `got ${e}`);
  assert.match(e.field ?? "", /queue/);
});

test("an oversized payload is TooLargeError naming the field", async () => {
  const big = Buffer.alloc((1 << 20) + 1, 97);
  const e = await c.enqueue(queueName("big"), big.toString()).then(() => undefined, (e) => e);
  assert.ok(e instanceof TooLargeError, `got ${e}`);
  assert.match(e.field ?? "", /payload/);
});

test("an empty token is UnauthenticatedError", async () => {
  const env = configFromEnv();
  const anon = new Client({ ...env, token: "" });
  try {
    const e = await anon.enqueue(queueName("anon"), 1).then(() => undefined, (e) => e);
    assert.ok(e instanceof UnauthenticatedError, `got ${e}`);
  } finally {
    anon.close();
  }
});

test("an unknown task is NotFoundError", async () => {
  await assert.rejects(c.getTask("no-such-task"), (e) => e instanceof NotFoundError || e instanceof InvalidArgumentError);
});
