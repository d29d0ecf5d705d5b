// The TypeScript client against the Go client on one docket dev cluster,
// in one run and by turns: a producer at c=16 and c=256 (one 128-byte
// task per enqueue), and a drain of a prefilled queue (Go's bench drain,
// the same claim/submit loop in TypeScript, and the TypeScript Worker).
//   npm run bench -- [--duration 10] [--drain 20000] [--rounds 1]
import { execFile } from "node:child_process";
import { loadavg, cpus } from "node:os";
import { promisify } from "node:util";
import { Client, Worker, rawCodec } from "../src/index.js";
import { docketBinary, startCluster, stopCluster, type TestCluster } from "../scripts/cluster.mjs";

const run = promisify(execFile);
const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const DURATION_S = arg("duration", 10);
const DRAIN = arg("drain", 20000);
const ROUNDS = arg("rounds", 1);
const body = Buffer.from(Array.from({ length: 128 }, (_, i) => 97 + (i % 26)));

interface Row {
  side: "go" | "ts";
  what: string;
  rate: number;
  p50?: number;
  p99?: number;
  errors: number;
}

async function goBench(c: TestCluster, args: string[]): Promise<{ rate: number; p50: number; p99: number; errors: number }> {
  const { stdout } = await run(docketBinary(), ["bench", "--addr", c.env.DOCKET_ADDR!, "--tls-ca", c.env.DOCKET_TLS_CA!, "--ceiling=false", "--json", ...args], {
    env: { ...process.env, DOCKET_TOKEN: c.env.DOCKET_TOKEN },
    maxBuffer: 64 << 20,
    timeout: 600_000,
  });
  const rep = JSON.parse(stdout.slice(stdout.indexOf("{")));
  const main = rep.ops[rep.ops.length - 1];
  return { rate: main.items_per_sec, p50: main.p50_ms, p99: main.p99_ms, errors: main.errors };
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};

async function tsEnqueue(client: Client, queue: string, conc: number): Promise<Row> {
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
  return { side: "ts", what: `enqueue c=${conc}`, rate: lat.length / secs, p50: pct(lat, 0.5), p99: pct(lat, 0.99), errors };
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
  await fill(client, queue, DRAIN);
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
  return { side: "ts", what: `drain loop c=${conc} k=${k}`, rate: done / secs, errors };
}

async function tsDrainWorkers(client: Client, queue: string, workers: number, conc: number, k: number): Promise<Row> {
  await fill(client, queue, DRAIN);
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
  return { side: "ts", what: `Worker x${workers} concurrency=${conc} claimBatch=${k}`, rate: reported / secs, errors: DRAIN - reported };
}

const c = await startCluster();
const load0 = loadavg().map((x) => x.toFixed(2)).join(" ");
const rows: Row[] = [];
const client = Client.fromEnv({ addrs: c.env.DOCKET_ADDR!.split(","), tls: { ca: c.env.DOCKET_TLS_CA! }, token: c.env.DOCKET_TOKEN });
const log = (r: Row) => {
  rows.push(r);
  console.error(`${r.side} ${r.what}: ${r.rate.toFixed(0)}/s${r.p50 !== undefined ? ` p50 ${r.p50.toFixed(2)} ms p99 ${r.p99!.toFixed(2)} ms` : ""} errors ${r.errors}`);
};
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const conc of [16, 256]) {
      const g = await goBench(c, ["--workload", "enqueue", "--c", String(conc), "--duration", `${DURATION_S}s`, "--queue", `go-enq-${round}-${conc}`]);
      log({ side: "go", what: `enqueue c=${conc}`, ...g });
      log(await tsEnqueue(client, `ts-enq-${round}-${conc}`, conc));
    }
    const g = await goBench(c, ["--workload", "drain", "--count", String(DRAIN), "--c", "16", "--claim-batch", "16", "--queue", `go-drain-${round}`]);
    log({ side: "go", what: "drain loop c=16 k=16", ...g });
    log(await tsDrainLoop(client, `ts-drain-${round}`, 16, 16));
    log(await tsDrainWorkers(client, `ts-worker-${round}`, 4, 64, 16));
  }
} finally {
  client.close();
  await stopCluster(c);
}
const load1 = loadavg().map((x) => x.toFixed(2)).join(" ");
console.log(`| side | workload | rate (tasks/s) | p50 ms | p99 ms | errors |`);
console.log(`|---|---|---:|---:|---:|---:|`);
for (const r of rows) console.log(`| ${r.side} | ${r.what} | ${r.rate.toFixed(0)} | ${r.p50?.toFixed(2) ?? ""} | ${r.p99?.toFixed(2) ?? ""} | ${r.errors} |`);
console.log(`\n${cpus().length} CPUs, Node ${process.version}, load average ${load0} at start, ${load1} at end, ${new Date().toISOString()}`);
