// The stale-stub check fails when a field is added to the proto without
// regenerating, and passes on the proto as it is.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const hasProtoc = !spawnSync("protoc", ["--version"]).error;

test("the stale-stub check catches a field added to the proto", { skip: hasProtoc ? false : "protoc is missing" }, () => {
  const dir = mkdtempSync(join(tmpdir(), "docket-proto-"));
  try {
    cpSync("../../proto/docketv1", join(dir, "docketv1"), { recursive: true });
    const check = () => spawnSync(process.execPath, ["scripts/gen.mjs", "--check", "--proto", dir], { encoding: "utf8" });
    const same = check();
    assert.equal(same.status, 0, same.stderr);
    const api = join(dir, "docketv1/api.proto");
    const text = readFileSync(api, "utf8");
    const grown = text.replace("message SnoozeResponse { TaskState state = 1; }", "message SnoozeResponse { TaskState state = 1; string added = 2; }");
    assert.notEqual(grown, text, "the test's anchor is gone from api.proto");
    writeFileSync(api, grown);
    const stale = check();
    assert.equal(stale.status, 1);
    assert.match(stale.stderr, /stale against proto\/ \(docketv1\/api\.ts\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
