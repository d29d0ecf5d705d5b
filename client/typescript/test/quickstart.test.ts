// The README's TypeScript quickstart is examples/quickstart.ts verbatim,
// and it runs as printed against the cluster the env names.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";

const run = promisify(execFile);

test("the README shows the quickstart verbatim, under 40 lines", () => {
  const readme = readFileSync("../../README.md", "utf8");
  const prog = readFileSync("examples/quickstart.ts", "utf8");
  assert.ok(readme.includes("```ts\n" + prog + "```\n"), "README.md does not show client/typescript/examples/quickstart.ts verbatim in a ts block");
  assert.ok(prog.split("\n").length - 1 < 40, "the quickstart has 40 lines or more");
});

test("the quickstart runs", async () => {
  const { stdout } = await run("node_modules/.bin/tsx", ["examples/quickstart.ts"], { timeout: 60_000, env: process.env });
  assert.match(stdout, /sending to ada@example.com attempt 1/);
  assert.match(stdout, /task completed \{ sent: true \}/);
});
