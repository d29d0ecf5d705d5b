// Finding and following the leader, and retries by error class. Every RPC
// of the package goes through Conn.invoke; client/DESIGN.md's rules for the
// Go client hold here too.
import { credentials, Metadata, status as Status, connectivityState, type CallOptions, type ChannelCredentials, type ChannelOptions, type ClientUnaryCall, type ServiceError } from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import { ClusterClient, QueueClient, StatusRequest } from "./gen/docketv1/api.js";
import { ClosedError, DeadlineError, isServiceError, mapError, OutcomeUnknownError, Reason, statusDetails, UnavailableError, DocketError } from "./errors.js";

export interface TLSOptions {
  /** PEM of the cluster CA: a file path or the PEM itself. */
  ca: string | Buffer;
  /** PEM client certificate and key (file paths or PEM), for mutual TLS. */
  cert?: string | Buffer;
  key?: string | Buffer;
}

export interface ConnOptions {
  addrs: string[];
  tls?: TLSOptions;
  token?: string;
  /** Budget of one attempt in ms (a long poll's wait comes on top). Default 2000. */
  attemptTimeoutMs?: number;
  /** Deadline of a call, retries included, when the caller gives none. Default 30000. */
  callTimeoutMs?: number;
}

/** Per-call options every method takes. */
export interface CallOpts {
  /** Ends the call, retries included. */
  signal?: AbortSignal;
  /** Deadline of the call, retries included, in ms. */
  timeoutMs?: number;
}

type Cb<Res> = (err: ServiceError | null, res?: Res) => void;
export type Unary<C, Req, Res> = (c: C, req: Req, md: Metadata, opts: Partial<CallOptions>, cb: Cb<Res>) => ClientUnaryCall;

interface Node {
  addr: string;
  queue: QueueClient;
  cluster: ClusterClient;
}

const LEADER_MD = "docket-leader";
// Unavailable reasons that promise nothing was done: safe to send again
// whatever the call.
const NOTHING_DONE = new Set<string>([Reason.NotLeader, Reason.ShuttingDown, Reason.Overloaded, Reason.NotServing]);

function pem(v: string | Buffer): Buffer {
  if (Buffer.isBuffer(v)) return v;
  return v.includes("-----BEGIN") ? Buffer.from(v) : readFileSync(v);
}

export function makeCredentials(tls?: TLSOptions): ChannelCredentials {
  if (!tls) return credentials.createInsecure();
  if ((tls.cert === undefined) !== (tls.key === undefined)) throw new DocketError("docket: tls.cert and tls.key go together");
  return credentials.createSsl(pem(tls.ca), tls.key ? pem(tls.key) : null, tls.cert ? pem(tls.cert) : null);
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (ms <= 0) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });

export class Conn {
  private readonly nodes = new Map<string, Node>();
  private readonly creds: ChannelCredentials;
  private readonly chOpts: ChannelOptions;
  private readonly token?: string;
  private leader?: string;
  private discovering?: Promise<void>;
  private rr = 0;
  private closed = false;
  readonly attemptTimeoutMs: number;
  readonly callTimeoutMs: number;

  constructor(o: ConnOptions) {
    const addrs = o.addrs.map((a) => a.trim()).filter((a) => a !== "");
    if (addrs.length === 0) throw new DocketError("docket: no node address given (addrs or DOCKET_ADDR)");
    this.creds = makeCredentials(o.tls);
    this.token = o.token;
    this.attemptTimeoutMs = o.attemptTimeoutMs ?? 2000;
    this.callTimeoutMs = o.callTimeoutMs ?? 30000;
    this.chOpts = {
      // A frozen leader is noticed in about 15 s even on an idle
      // connection, and a node that comes back is reachable within a
      // second: gRPC's default reconnect backoff grows to 2 minutes.
      "grpc.keepalive_time_ms": 10000,
      "grpc.keepalive_timeout_ms": 5000,
      "grpc.keepalive_permit_without_calls": 1,
      "grpc.initial_reconnect_backoff_ms": 100,
      "grpc.max_reconnect_backoff_ms": 1000,
      "grpc.max_receive_message_length": 64 << 20,
      // Retries are ours, by Docket's error classes; gRPC's own would
      // resend non-idempotent calls on its rules, not ours.
      "grpc.enable_retries": 0,
    };
    for (const a of addrs) this.node(a);
  }

  private node(addr: string): Node {
    let n = this.nodes.get(addr);
    if (!n) {
      n = { addr, queue: new QueueClient(addr, this.creds, this.chOpts), cluster: new ClusterClient(addr, this.creds, this.chOpts) };
      this.nodes.set(addr, n);
    }
    return n;
  }

  /** The leader's address as last learned, if any. */
  get leaderAddr(): string | undefined {
    return this.leader;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const n of this.nodes.values()) {
      n.queue.close();
      n.cluster.close();
    }
  }

  private metadata(): Metadata {
    const md = new Metadata();
    // An empty token is sent as none, so the server's Unauthenticated
    // answer (a typed error) says what is wrong.
    if (this.token) md.set("authorization", `Bearer ${this.token}`);
    return md;
  }

  private unusable(n: Node): boolean {
    const st = n.queue.getChannel().getConnectivityState(false);
    return st === connectivityState.TRANSIENT_FAILURE;
  }

  /**
   * Asks every known node for Status at once and takes the first answer
   * that names a leader; concurrent callers share one discovery.
   */
  private discover(deadline: number): Promise<void> {
    if (this.discovering) return this.discovering;
    const budget = Math.max(1, Math.min(deadline - Date.now(), this.attemptTimeoutMs));
    const p = new Promise<void>((resolve) => {
      let left = this.nodes.size;
      let done = false;
      const finish = () => {
        if (!done) {
          done = true;
          resolve();
        }
      };
      for (const n of [...this.nodes.values()]) {
        n.cluster.status(StatusRequest.fromPartial({}), this.metadata(), { deadline: Date.now() + budget }, (err, res) => {
          if (!err && res) {
            for (const s of res.servers) if (s.grpcAddr) this.node(s.grpcAddr);
            if (res.leaderGrpcAddr && !done) {
              this.leader = res.leaderGrpcAddr;
              this.node(res.leaderGrpcAddr);
              finish();
            }
          }
          if (--left === 0) finish();
        });
      }
    });
    this.discovering = p.finally(() => {
      this.discovering = undefined;
    });
    return this.discovering;
  }

  /** The node to try next in this round, or undefined when every one failed in it. */
  private async pick(failed: Set<string>, deadline: number): Promise<Node | undefined> {
    if (!this.leader) await this.discover(deadline);
    if (this.leader && !failed.has(this.leader)) {
      const n = this.node(this.leader);
      if (!this.unusable(n) || failed.size === 0) return n;
    }
    const rest = [...this.nodes.values()].filter((n) => !failed.has(n.addr));
    if (rest.length === 0) return undefined;
    const usable = rest.filter((n) => !this.unusable(n));
    const from = usable.length > 0 ? usable : rest;
    return from[this.rr++ % from.length];
  }

  private noteLeader(from: string, md: Metadata | undefined, extra?: string): void {
    const v = md?.get(LEADER_MD)[0];
    const hint = (typeof v === "string" && v) || extra;
    if (hint && hint !== from) {
      this.leader = hint;
      this.node(hint);
    }
  }

  /**
   * Sends one RPC to the leader, following it and retrying by error
   * class until the call's deadline. idempotent says the call is safe to
   * send again after an unknown outcome. waitMs is a long poll's wait,
   * added to the attempt's budget.
   */
  async invoke<Req, Res>(
    svc: "queue" | "cluster",
    fn: Unary<any, Req, Res>,
    req: Req,
    o: CallOpts & { idempotent: boolean; waitMs?: number },
  ): Promise<Res> {
    const start = Date.now();
    const deadline = start + (o.timeoutMs ?? Math.max(this.callTimeoutMs, (o.waitMs ?? 0) + this.attemptTimeoutMs));
    let backoff = 50;
    let last: unknown;
    // Bounded by the deadline; the count bounds a clock that misbehaves.
    for (let round = 0; round < 10000; round++) {
      const failed = new Set<string>();
      for (;;) {
        if (this.closed) throw new ClosedError("docket: client closed");
        if (o.signal?.aborted) throw new DeadlineError("docket: call aborted", { cause: o.signal.reason ?? last });
        const now = Date.now();
        if (now >= deadline) throw new DeadlineError(`docket: deadline exceeded${last ? `: ${(last as Error).message}` : ""}`, { cause: last });
        const n = await this.pick(failed, deadline);
        if (!n) break;
        const attemptEnd = Math.min(deadline, Date.now() + this.attemptTimeoutMs + (o.waitMs ?? 0));
        try {
          return await this.once(svc, n, fn, req, attemptEnd, o.signal);
        } catch (raw) {
          const e = raw as ServiceError;
          if (!isServiceError(e)) throw raw;
          const d = statusDetails(e.metadata);
          this.noteLeader(n.addr, e.metadata, d.leader);
          if (e.code === Status.CANCELLED && o.signal?.aborted) throw new DeadlineError("docket: call aborted", { cause: o.signal.reason });
          if (e.code === Status.DEADLINE_EXCEEDED) {
            if (attemptEnd >= deadline) throw new DeadlineError("docket: deadline exceeded", { cause: last ?? e });
            // The attempt's budget ran out: the node is frozen or slow,
            // and the request may still apply.
            last = new OutcomeUnknownError(`docket: outcome unknown: no answer from ${n.addr} within ${this.attemptTimeoutMs} ms`, { code: e.code, cause: e });
            if (this.leader === n.addr) this.leader = undefined;
            failed.add(n.addr);
            if (!o.idempotent) throw last;
            continue;
          }
          const m = mapError(e);
          if (m instanceof OutcomeUnknownError) {
            if (this.leader === n.addr) this.leader = undefined;
            failed.add(n.addr);
            last = m;
            if (!o.idempotent) throw m;
            continue;
          }
          if (m instanceof UnavailableError) {
            if (this.leader === n.addr && !d.leader) this.leader = undefined;
            failed.add(n.addr);
            last = m;
            // A connection that broke mid-call may have delivered the
            // request: only a reason that says nothing was done, or no
            // connection at all, makes a non-idempotent call safe to resend.
            const neverSent = /No connection established|connect ECONNREFUSED|Connection refused/i.test(e.details ?? "");
            if (!o.idempotent && !(d.reason && NOTHING_DONE.has(d.reason)) && !neverSent) {
              throw new OutcomeUnknownError(`docket: outcome unknown: ${m.message}`, { code: e.code, cause: e });
            }
            continue;
          }
          throw m;
        }
      }
      // Every node failed in this round: back off with full jitter.
      const left = deadline - Date.now();
      if (left <= 0) break;
      await sleep(Math.min(left, Math.random() * backoff), o.signal);
      backoff = Math.min(backoff * 2, 500);
    }
    if (last instanceof UnavailableError || last === undefined) {
      throw new UnavailableError(`docket: no leader reachable${last ? `: ${(last as Error).message}` : ""}`, { cause: last });
    }
    throw last;
  }

  private once<Req, Res>(svc: "queue" | "cluster", n: Node, fn: Unary<any, Req, Res>, req: Req, deadline: number, signal?: AbortSignal): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      const client = svc === "queue" ? n.queue : n.cluster;
      const onAbort = () => call.cancel();
      const call = fn(client, req, this.metadata(), { deadline }, (err, res) => {
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(res as Res);
      });
      call.on("metadata", (md: Metadata) => this.noteLeader(n.addr, md));
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}
