// A real `docket dev` cluster (TLS and tokens, 3 nodes on 127.0.0.1) for
// the tests and the benchmark, and the means to be sure it is gone: a stop
// that escalates to SIGKILL, and an exit hook that kills every pid it knows
// even when the runner fails.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, readdirSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** The repository's docket binary: DOCKET_BIN, or bin/docket, built once if missing. */
export function docketBinary() {
  const bin = process.env.DOCKET_BIN || join(repoRoot, "bin/docket");
  if (!existsSync(bin)) {
    console.log(`building ${bin} (go build -o bin/docket ./cmd/docket)`);
    execFileSync("go", ["build", "-o", bin, "./cmd/docket"], { cwd: repoRoot, stdio: "inherit" });
  }
  return bin;
}

const portFree = (port) =>
  new Promise((res) => {
    const s = createServer();
    s.once("error", () => res(false));
    s.listen(port, "127.0.0.1", () => s.close(() => res(true)));
  });

// dev's ports are base-100+i .. base+300+i; a base whose every port is
// free now, chosen at random so that two runs on one machine rarely meet.
async function pickBase(nodes) {
  for (let i = 0; i < 50; i++) {
    const base = 20000 + 10 * Math.floor(Math.random() * 3000);
    const ports = [];
    for (const off of [-100, 0, 100, 200, 300]) for (let n = 1; n <= nodes; n++) ports.push(base + off + n);
    let ok = true;
    for (const p of ports) if (!(ok = await portFree(p))) break;
    if (ok) return base;
  }
  throw new Error("no free port range for the test cluster");
}

const known = new Set(); // every pid this process started or learned
let hooked = false;
function hookExit() {
  if (hooked) return;
  hooked = true;
  process.on("exit", () => {
    for (const pid of known) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  });
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Starts `docket dev` and resolves once it prints that the cluster is ready. */
export async function startCluster({ nodes = 3, readyMs = 120_000 } = {}) {
  const bin = docketBinary();
  hookExit();
  const dir = mkdtempSync(join(tmpdir(), "docket-ts-"));
  const dataDir = join(dir, "dev");
  const base = await pickBase(nodes);
  const dev = spawn(bin, ["dev", "--data-dir", dataDir, "--base-port", String(base), "--nodes", String(nodes)], {
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // its own group: a Ctrl-C of the runner reaches the runner, which stops it in order
  });
  known.add(dev.pid);
  let out = "";
  dev.stderr.on("data", (b) => (out += b));
  const nodesSeen = [];
  const ready = new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`docket dev not ready in ${readyMs} ms:\n${out}`)), readyMs);
    dev.stdout.on("data", (b) => {
      out += b;
      if (out.includes("Ctrl-C stops the cluster.")) {
        clearTimeout(timer);
        res();
      }
    });
    dev.once("exit", (code) => {
      clearTimeout(timer);
      rej(new Error(`docket dev exited (${code}) before it was ready:\n${out}`));
    });
  });
  const cluster = { dev, dir, dataDir, base, nodes: nodesSeen, env: {}, log: () => out };
  try {
    await ready;
  } catch (e) {
    await stopCluster(cluster);
    throw e;
  }
  dev.stdout.on("data", () => {}); // keep draining: a full pipe would block dev
  for (const m of out.matchAll(/^\s+(n\d+)\s+grpc (\S+)\s+raft (\S+)\s+pid (\d+)/gm)) {
    nodesSeen.push({ id: m[1], grpc: m[2], raft: m[3], pid: Number(m[4]) });
    known.add(Number(m[4]));
  }
  const envText = readFileSync(join(dataDir, "env"), "utf8");
  for (const m of envText.matchAll(/(DOCKET_[A-Z_]+)='([^']*)'/g)) cluster.env[m[1]] = m[2];
  if (!cluster.env.DOCKET_ADDR || !cluster.env.DOCKET_TLS_CA || !cluster.env.DOCKET_TOKEN) {
    await stopCluster(cluster);
    throw new Error(`env file without address, CA or token:\n${envText}`);
  }
  return cluster;
}

function agentPids(c) {
  const pids = new Set(c.nodes.map((n) => n.pid));
  // Nodes restarted by hand write their pid in their data dir.
  if (existsSync(c.dataDir)) {
    for (const d of readdirSync(c.dataDir)) {
      const f = join(c.dataDir, d, "docket.pid");
      if (existsSync(f)) {
        const pid = Number(readFileSync(f, "utf8").trim());
        if (pid > 0) pids.add(pid);
      }
    }
  }
  return [...pids];
}

/** Stops the cluster: SIGTERM to dev (which stops its nodes), then SIGKILL to whatever is left. */
export async function stopCluster(c, { graceMs = 20_000 } = {}) {
  const pids = agentPids(c);
  pids.forEach((p) => known.add(p));
  if (c.dev.exitCode === null && c.dev.signalCode === null) {
    const exited = new Promise((res) => c.dev.once("exit", res));
    try {
      c.dev.kill("SIGTERM");
    } catch {}
    await Promise.race([exited, new Promise((res) => setTimeout(res, graceMs))]);
  }
  for (const pid of [c.dev.pid, ...pids]) {
    if (pid && alive(pid)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  }
  // Bounded wait for the kernel to reap them before the data dir goes.
  for (let i = 0; i < 50 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
  for (const pid of [c.dev.pid, ...pids]) known.delete(pid);
  rmSync(c.dir, { recursive: true, force: true });
}
