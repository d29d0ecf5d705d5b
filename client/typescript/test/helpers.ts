import { randomBytes } from "node:crypto";
import { Client } from "../src/index.js";

/** A client of the test cluster, from the env that docket dev wrote. */
export const newClient = (o: Parameters<typeof Client.fromEnv>[0] = {}) => Client.fromEnv(o);

/** A queue name no other test uses. */
export const queueName = (what: string) => `ts-${what}-${randomBytes(3).toString("hex")}`;

/**
 * Polls cond until it holds; fails after timeoutMs. Bounded in time and in
 * rounds, and never a sleep standing in for a state.
 */
export async function until(what: string, cond: () => Promise<boolean> | boolean, timeoutMs = 15_000, everyMs = 50): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (let i = 0; i < Math.ceil(timeoutMs / everyMs) + 1; i++) {
    if (await cond()) return;
    if (Date.now() >= end) break;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export interface TestNode {
  id: string;
  grpc: string;
  pid: number;
}
export const testNodes = (): TestNode[] => JSON.parse(process.env.DOCKET_TEST_NODES ?? "[]");
