// The TypeScript client against the Go client on one docket dev cluster,
// in one run and by turns: a producer at c=16 and c=256 (one 128-byte
// task per enqueue), and a drain of a prefilled queue (Go's bench drain,
// the same claim/submit loop in TypeScript, and the TypeScript Worker).
//   npm run bench -- [--duration 10] [--drain 20000] [--rounds 1] [--only drain|unshared|"enqueue c=16"]
import { execFile } from "node:child_process";
import { loadavg, cpus } from "node:os";
import { promisify } from "node:util";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { credentials, Metadata } from "@grpc/grpc-js";
import { Client, Worker, rawCodec } from "../src/index.js";
import { EnqueueRequest, QueueClient } from "../src/gen/docketv1/api.js";
import { NewTask } from "../src/gen/docketv1/command.js";
import { docketBinary, startCluster, stopCluster, type TestCluster } from "../scripts/cluster.mjs";

const run = promisify(execFile);
const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const DURATION_S = arg("duration", 10);
const DRAIN = arg("drain", 20000);
const ROUNDS = arg("rounds", 1);
const only = process.argv.includes("--only") ? process.argv[process.argv.indexOf("--only") + 1]! : "";
const want = (what: string) => only === "" || what.includes(only);
const body = Buffer.from(Array.from({ length: 128 }, (_, i) => 97 + (i % 26)));

interface Row {
  side: "go" | "ts";
  what: string;
  rate: number;
  p50?: number;
  p99?: number;
  errors: number;
  /** CPU seconds of the load generator's process, and of the three nodes, per 1,000 tasks. */
  clientCpu?: number;
  serverCpu?: number;
  tasks?: number;
}

// The nodes' user+system CPU (s), from /proc: where the server's share of
// a workload's cost shows, whichever client drove it.
const CLK_TCK = 100;
function nodesCpu(c: TestCluster): number {
  let sum = 0;
  for (const n of c.nodes) {
    try {
      const f = readFileSync(`/proc/${n.pid}/stat`, "utf8");
      const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
      sum += (Number(rest[11]) + Number(rest[12])) / CLK_TCK;
    } catch {}
  }
  return sum;
}

const selfCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** Runs one workload and adds the CPU each side spent on it. */
async function measured(c: TestCluster, f: () => Promise<Row & { goCpu?: number }>): Promise<Row> {
  const s0 = nodesCpu(c);
  const c0 = selfCpu();
  const r = await f();
  const tasks = r.tasks ?? 0;
  if (tasks > 0) {
    r.serverCpu = ((nodesCpu(c) - s0) * 1000) / tasks;
    r.clientCpu = (((r.goCpu ?? selfCpu() - c0)) * 1000) / tasks;
  }
  return r;
}

async function goBench(c: TestCluster, args: string[]): Promise<{ rate: number; p50: number; p99: number; errors: number; tasks: number; goCpu: number }> {
  // bash's `times` prints the CPU its children used: the Go bench process's own.
  const { stdout } = await run("bash", ["-c", '"$@" && times', "bench", docketBinary(), "bench", "--addr", c.env.DOCKET_ADDR!, "--tls-ca", c.env.DOCKET_TLS_CA!, "--ceiling=false", "--json", ...args], {
    env: { ...process.env, DOCKET_TOKEN: c.env.DOCKET_TOKEN },
    maxBuffer: 64 << 20,
    timeout: 600_000,
  });
  const json = stdout.slice(stdout.indexOf("{"), stdout.lastIndexOf("}") + 1);
  const rep = JSON.parse(json);
  const main = rep.ops[rep.ops.length - 1];
  const t = stdout.slice(stdout.lastIndexOf("}") + 1).trim().split("\n").pop()!.split(/\s+/);
  const secs = (v: string) => {
    const m = /^(\d+)m([\d.]+)s$/.exec(v);
    return m ? Number(m[1]) * 60 + Number(m[2]) : 0;
  };
  return { rate: main.items_per_sec, p50: main.p50_ms, p99: main.p99_ms, errors: main.errors, tasks: main.items, goCpu: secs(t[0]!) + secs(t[1]!) };
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};

async function tsEnqueue(client: Client, queue: string, conc: number, label = ""): Promise<Row> {
  // Warm the connections and the leader cache, as Go's bench does.
  await client.enqueue(queue, body, { codec: rawCodec });
  const lat: number[] = [];
  let errors = 0;
  const end = Date.now() + DURATION_S * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (Date.now() < end) {
        const s = performance.now();
        try {
          await client.enqueue(queue, body, { codec: rawCodec });
          lat.push(performance.now() - s);
        } catch {
          errors++;
        }
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  return { side: "ts", what: `enqueue c=${conc}${label}`, rate: lat.length / secs, p50: pct(lat, 0.5), p99: pct(lat, 0.99), errors, tasks: lat.length };
}

// The transport alone: one grpc-js Enqueue per task straight to the
// leader, without the client's leader following, sharing or codec.
async function rawEnqueue(c: TestCluster, leader: string, queue: string, conc: number): Promise<Row> {
  const qc = new QueueClient(leader, credentials.createSsl(readFileSync(c.env.DOCKET_TLS_CA!)));
  const md = new Metadata();
  md.set("authorization", `Bearer ${c.env.DOCKET_TOKEN}`);
  const one = () =>
    new Promise<void>((res, rej) =>
      qc.enqueue(EnqueueRequest.fromPartial({ tasks: [NewTask.fromPartial({ queue, payload: body, idempotencyKey: randomUUID() })] }), md, (e) => (e ? rej(e) : res())),
    );
  await one();
  const lat: number[] = [];
  let errors = 0;
  const end = Date.now() + DURATION_S * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (Date.now() < end) {
        const s = performance.now();
        try {
          await one();
          lat.push(performance.now() - s);
        } catch {
          errors++;
        }
      }
    }),
  );
  qc.close();
  const secs = (performance.now() - t0) / 1000;
  return { side: "ts", what: `raw grpc-js enqueue c=${conc}, unshared`, rate: lat.length / secs, p50: pct(lat, 0.5), p99: pct(lat, 0.99), errors, tasks: lat.length };
}

async function fill(client: Client, queue: string, n: number) {
  for (let i = 0; i < n; i += 1000) {
    const res = await client.enqueueBatch(Array.from({ length: Math.min(1000, n - i) }, () => ({ queue, payload: body })), { codec: rawCodec });
    if (res.some((r) => r.error)) throw new Error("fill failed");
  }
}

// The same loop as Go's bench drain: c callers claim up to k without
// waiting and submit each, until a claim comes back empty.
async function tsDrainLoop(client: Client, queue: string, conc: number, k: number): Promise<Row> {
  let done = 0;
  let errors = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      for (let i = 0; i < 1_000_000; i++) {
        const ts = await client.claim(queue, { max: k, leaseMs: 30_000 });
        if (ts.length === 0) return;
        const rs = await Promise.all(ts.map((t) => client.complete(t)));
        for (const r of rs) r.error ? errors++ : done++;
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  return { side: "ts", what: `drain loop c=${conc} k=${k}`, rate: done / secs, errors, tasks: done };
}

async function tsDrainWorkers(client: Client, queue: string, workers: number, conc: number, k: number): Promise<Row> {
  let done = 0;
  const t0 = performance.now();
  let finish!: () => void;
  const all = new Promise<void>((r) => (finish = r));
  const ws = Array.from({ length: workers }, () =>
    new Worker(client, queue, async () => {
      if (++done === DRAIN) finish();
    }, { concurrency: conc, claimBatch: k, leaseMs: 30_000, waitMs: 1000, codec: rawCodec }),
  );
  const timeout = setTimeout(finish, 300_000);
  await all;
  clearTimeout(timeout);
  // Handlers returned; the last submits are in flight. Count to the last
  // report: close waits for them.
  await Promise.all(ws.map((w) => w.close()));
  const secs = (performance.now() - t0) / 1000;
  const reported = ws.reduce((s, w) => s + w.processed, 0);
  return { side: "ts", what: `Worker x${workers} concurrency=${conc} claimBatch=${k}`, rate: reported / secs, errors: DRAIN - reported, tasks: reported };
}

const c = await startCluster();
const load0 = loadavg().map((x) => x.toFixed(2)).join(" ");
const rows: Row[] = [];
const client = Client.fromEnv({ addrs: c.env.DOCKET_ADDR!.split(","), tls: { ca: c.env.DOCKET_TLS_CA! }, token: c.env.DOCKET_TOKEN });
const log = (r: Row) => {
  rows.push(r);
  console.error(`${r.side} ${r.what}: ${r.rate.toFixed(0)}/s${r.p50 !== undefined ? ` p50 ${r.p50.toFixed(2)} ms p99 ${r.p99!.toFixed(2)} ms` : ""} errors ${r.errors} cpu/1000 client ${r.clientCpu?.toFixed(2)} nodes ${r.serverCpu?.toFixed(2)}`);
};
const unshared = new Client({ addrs: c.env.DOCKET_ADDR!.split(","), tls: { ca: c.env.DOCKET_TLS_CA! }, token: c.env.DOCKET_TOKEN, shareInflight: 0 });
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const conc of [16, 256]) {
      if (!want(`enqueue c=${conc}`)) continue;
      log(await measured(c, async () => ({ side: "go", what: `enqueue c=${conc}`, ...(await goBench(c, ["--workload", "enqueue", "--c", String(conc), "--duration", `${DURATION_S}s`, "--queue", `go-enq-${round}-${conc}`])) })));
      log(await measured(c, () => tsEnqueue(client, `ts-enq-${round}-${conc}`, conc)));
    }
    // The layers at c=16 without sharing: grpc-go against grpc-js, then
    // the client's own code on top of grpc-js.
    if (want("unshared")) {
      log(await measured(c, async () => ({ side: "go", what: "enqueue c=16, unshared", ...(await goBench(c, ["--workload", "enqueue", "--c", "16", "--shared-rpcs", "0", "--duration", `${DURATION_S}s`, "--queue", `go-enqu-${round}`])) })));
      const leader = (await client.clusterStatus()).leaderAddr;
      log(await measured(c, () => rawEnqueue(c, leader, `ts-raw-${round}`, 16)));
      log(await measured(c, () => tsEnqueue(unshared, `ts-enqu-${round}`, 16, ", unshared")));
    }
    if (want("drain")) {
      // Go's drain fills its queue inside its own run, so its CPU is left out.
      const g = await goBench(c, ["--workload", "drain", "--count", String(DRAIN), "--c", "16", "--claim-batch", "16", "--queue", `go-drain-${round}`]);
      log({ side: "go", what: "drain loop c=16 k=16", rate: g.rate, p50: g.p50, p99: g.p99, errors: g.errors });
      await fill(client, `ts-drain-${round}`, DRAIN);
      log(await measured(c, () => tsDrainLoop(client, `ts-drain-${round}`, 16, 16)));
      await fill(client, `ts-worker-${round}`, DRAIN);
      log(await measured(c, () => tsDrainWorkers(client, `ts-worker-${round}`, 16, 16, 16)));
    }
  }
} finally {
  client.close();
  unshared.close();
  await stopCluster(c);
}
const load1 = loadavg().map((x) => x.toFixed(2)).join(" ");
const f2 = (v?: number) => (v === undefined ? "" : v.toFixed(2));
console.log(`| side | workload | rate (tasks/s) | p50 ms | p99 ms | errors | client CPU s/1000 | nodes CPU s/1000 |`);
console.log(`|---|---|---:|---:|---:|---:|---:|---:|`);
for (const r of rows) console.log(`| ${r.side} | ${r.what} | ${r.rate.toFixed(0)} | ${f2(r.p50)} | ${f2(r.p99)} | ${r.errors} | ${f2(r.clientCpu)} | ${f2(r.serverCpu)} |`);
console.log(`\n${cpus().length} CPUs, Node ${process.version}, load average ${load0} at start, ${load1} at end, ${new Date().toISOString()}`);
