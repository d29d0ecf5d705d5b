// npm test: the stale-stub check, the type check, the build of both module
// formats, then every test file
// against one real `docket dev` cluster that this script always stops.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { startCluster, stopCluster } from "./cluster.mjs";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const t0 = Date.now();

if (spawnSync("protoc", ["--version"]).error) {
  console.log("check:gen skipped: protoc is missing (apt-get install -y protobuf-compiler)");
} else {
  execFileSync(process.execPath, [join(pkg, "scripts/gen.mjs"), "--check"], { stdio: "inherit" });
}
execFileSync(process.execPath, [join(pkg, "node_modules/typescript/bin/tsc"), "-p", join(pkg, "tsconfig.json"), "--noEmit"], { stdio: "inherit" });
console.log("typecheck ok");
// Both module formats build and load by the package's own name, as a
// user's import and require would resolve it.
execFileSync(process.execPath, [join(pkg, "scripts/build.mjs")], { stdio: "inherit" });
execFileSync(process.execPath, ["-e", "const d = require('@dockethq/docket'); if (typeof d.Client !== 'function' || typeof d.Worker !== 'function') process.exit(1)"], { cwd: pkg, stdio: "inherit" });
execFileSync(process.execPath, ["--input-type=module", "-e", "const d = await import('@dockethq/docket'); if (typeof d.Client !== 'function' || typeof d.NotFoundError !== 'function') process.exit(1)"], { cwd: pkg, stdio: "inherit" });
console.log("dist/esm and dist/cjs load");

// Two runs, one file at a time: the files share the cluster, and the
// leader kill comes last because it leaves the cluster with two nodes
// (node --test orders the files of one run by itself).
const runs = [
  ["test/unit.test.ts", "test/gencheck.test.ts", "test/conn.test.ts", "test/producer.test.ts", "test/fair.test.ts", "test/worker.test.ts", "test/ride.test.ts", "test/errors.test.ts", "test/quickstart.test.ts"],
  ["test/leaderkill.test.ts"],
];

const cluster = await startCluster();
console.log(`cluster up in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${cluster.env.DOCKET_ADDR}`);
let code = 1;
const stop = async (sig) => {
  await stopCluster(cluster);
  process.exit(sig === "SIGINT" ? 130 : 143);
};
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
try {
  for (const files of runs) {
    const child = spawn(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=1", "--test-timeout=300000", ...files], {
      cwd: pkg,
      stdio: "inherit",
      env: {
        ...process.env,
        ...cluster.env,
        DOCKET_TLS_CERT: "",
        DOCKET_TLS_KEY: "",
        DOCKET_TEST_NODES: JSON.stringify(cluster.nodes),
        DOCKET_TEST_DATA: cluster.dataDir,
      },
    });
    code = await new Promise((res) => child.once("exit", (c, s) => res(c ?? (s ? 1 : 0))));
    if (code !== 0) break;
  }
} finally {
  await stopCluster(cluster);
}
console.log(`npm test: ${code === 0 ? "passed" : "FAILED"} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(code);
