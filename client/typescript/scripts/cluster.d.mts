export interface TestCluster {
  dir: string;
  dataDir: string;
  base: number;
  nodes: { id: string; grpc: string; raft: string; pid: number }[];
  env: Record<string, string>;
  log(): string;
}
export const repoRoot: string;
export function docketBinary(): string;
export function startCluster(o?: { nodes?: number; readyMs?: number }): Promise<TestCluster>;
export function stopCluster(c: TestCluster, o?: { graceMs?: number }): Promise<void>;
