// The leader is killed (SIGKILL) while 4 workers process 2,000 tasks: every
// task completes exactly once, and the workers carry on by themselves.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "../src/index.js";
import { newClient, queueName, testNodes, until } from "./helpers.js";

const TASKS = 2000;
const c = newClient();
after(() => c.close());

test("leader kill under 4 workers: 2,000 tasks, each completed exactly once", async () => {
  const q = queueName("kill");
  const ids: string[] = [];
  for (let i = 0; i < TASKS; i += 500) {
    const res = await c.enqueueBatch(Array.from({ length: 500 }, (_, j) => ({ queue: q, payload: { n: i + j } })));
    for (const r of res) {
      assert.equal(r.error, undefined);
      ids.push(r.id);
    }
  }
  const leaks: Error[] = [];
  const onWarning = (w: Error) => w.name === "MaxListenersExceededWarning" && leaks.push(w);
  process.on("warning", onWarning);
  const runs = new Map<string, number>(); // handler runs that returned, per task
  const errors: unknown[] = [];
  const workers = Array.from({ length: 4 }, (_, k) =>
    new Worker<{ n: number }, number>(
      newClient(), // each worker its own connections, as separate processes would have
      q,
      async (p, t) => {
        // Long enough that the kill lands while handlers run.
        await new Promise((r) => setTimeout(r, 5));
        runs.set(t.id, (runs.get(t.id) ?? 0) + 1);
        return p.n;
      },
      { concurrency: 8, claimBatch: 4, leaseMs: 10_000, workerId: `kill-w${k}`, onError: (e) => errors.push(e) },
    ),
  );
  try {
    await until("a quarter of the tasks to complete", () => runs.size >= TASKS / 4, 60_000);
    const before = await c.clusterStatus();
    const leader = testNodes().find((n) => n.grpc === before.leaderAddr);
    assert.ok(leader, `leader ${before.leaderAddr} not among ${JSON.stringify(testNodes())}`);
    process.kill(leader.pid, "SIGKILL");
    const killedAt = runs.size;
    await until("a new leader", async () => {
      const s = await c.clusterStatus({ timeoutMs: 5_000 }).catch(() => undefined);
      return !!s && s.leaderAddr !== "" && s.leaderAddr !== before.leaderAddr;
    }, 30_000, 200);
    await until(`all ${TASKS} tasks to run (ran ${runs.size})`, () => runs.size >= TASKS, 120_000, 200);
    assert.ok(killedAt < TASKS, "the kill landed before the work was done");
    // Every task is completed, as the cluster tells it.
    for (let i = 0; i < ids.length; i += 100) {
      const ts = await Promise.all(ids.slice(i, i + 100).map((id) => c.getTask(id)));
      for (const t of ts) assert.equal(t.state, "completed", `task ${t.id} is ${t.state}`);
    }
    const twice = [...runs].filter(([, n]) => n !== 1);
    assert.deepEqual(twice, [], "tasks whose handler ran more than once");
    assert.equal(runs.size, TASKS);
    assert.deepEqual(leaks.map((w) => w.message), [], "listeners pile up on a long-lived signal");
    console.log(`leader kill: ${runs.size}/${TASKS} tasks completed exactly once; ${killedAt} done before the kill; ${errors.length} errors recovered from`);
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    for (const w of workers) w.client.close();
    process.off("warning", onWarning);
  }
});
