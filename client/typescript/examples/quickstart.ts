// Quickstart: enqueue a task and work it with a typed worker.
// source data/dev/env, then: npx tsx examples/quickstart.ts
import { Client, Worker } from "@dockethq/docket";

interface Email {
  to: string;
}

const client = Client.fromEnv();
const id = await client.enqueue("email", { to: "ada@example.com" } satisfies Email);

const worker = new Worker<Email, { sent: boolean }>(client, "email", async (email, task) => {
  console.log("sending to", email.to, "attempt", task.attempt);
  return { sent: true };
});

const done = await client.waitResult(id, { timeoutMs: 30_000 });
console.log("task", done.state, client.codec.decode(done.result));
await worker.close();
client.close();
