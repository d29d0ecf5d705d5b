// Group commit, as the Go client's sharer (client/coalesce.go): below
// `limit` RPCs in flight calls go out at the end of the event loop's turn,
// together; past it, calls queue, and the next free slot sends all of them
// as one request. A full request (MAX_ITEMS or MAX_BYTES) gains nothing by
// waiting: up to `burst` of them go beyond the limit.
import { DocketError, InvalidArgumentError, PermissionDeniedError, UnauthenticatedError } from "./errors.js";

/** gRPC's UNIMPLEMENTED: a server older than the call. */
export const UNIMPLEMENTED = 12;

interface Pending<T, R> {
  items: T[];
  bytes: number;
  weight: number;
  resolve: (r: R[]) => void;
  reject: (e: unknown) => void;
}

const MAX_ITEMS = 1000; // the server's items-per-call limit (docketv1.MaxBatch)
const MAX_BYTES = 4 << 20; // half the server's default request limit

export class Sharer<T, R> {
  private inflight = 0;
  private scheduled = false;
  private queue: Pending<T, R>[] = [];

  constructor(
    private readonly limit: number,
    private readonly size: (t: T) => number,
    private readonly alone: (items: T[]) => Promise<R[]>,
    private readonly shared: (items: T[]) => Promise<R[]>,
    // What an item counts against the server's per-call limit: 1, or a
    // claim's max_tasks (ClaimBatch bounds their sum).
    private readonly weight: (t: T) => number = () => 1,
    // RPCs beyond `limit` that a full request may take (Go's lane.WithBurst).
    private readonly burst = 0,
  ) {}

  async send(items: T[]): Promise<R[]> {
    if (this.limit <= 0) return this.alone(items);
    return new Promise<R[]>((resolve, reject) => {
      this.queue.push({ items, bytes: items.reduce((s, t) => s + this.size(t), 0), weight: items.reduce((s, t) => s + this.weight(t), 0), resolve, reject });
      // Callers that an answer resolved call again within the same turn
      // of the event loop: wait for the end of the turn, so that they
      // share one RPC instead of the first going alone and the rest
      // queueing behind it. A lone caller waits one turn, not a timer.
      if ((this.inflight < this.limit || this.burst > 0) && !this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.pump();
        });
      }
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && (this.inflight < this.limit || (this.inflight < this.limit + this.burst && this.headIsFull()))) {
      const calls: Pending<T, R>[] = [];
      let n = 0;
      let bytes = 0;
      while (this.queue.length > 0) {
        const c = this.queue[0]!;
        if (calls.length > 0 && (n + c.weight > MAX_ITEMS || bytes + c.bytes > MAX_BYTES)) break;
        calls.push(this.queue.shift()!);
        n += c.weight;
        bytes += c.bytes;
      }
      this.inflight++;
      void this.flush(calls).finally(() => {
        this.inflight--;
        this.pump();
      });
    }
  }

  /** Whether the calls at the head of the queue fill one request: one more would not fit, or one alone is past a bound. */
  private headIsFull(): boolean {
    let n = 0;
    let bytes = 0;
    for (const c of this.queue) {
      n += c.weight;
      bytes += c.bytes;
      if (n > MAX_ITEMS || bytes > MAX_BYTES) return true;
    }
    return false;
  }

  private async flush(calls: Pending<T, R>[]): Promise<void> {
    if (calls.length === 1) {
      const c = calls[0]!;
      await this.alone(c.items).then(c.resolve, c.reject);
      return;
    }
    let out: R[];
    try {
      out = await this.shared(calls.flatMap((c) => c.items));
    } catch (e) {
      // One caller's bad item must fail that caller only, and a server
      // older than the shared RPC does not know it: resend each alone.
      // Idempotency keys and fences make the resend safe, and a claim is
      // repeatable.
      if (e instanceof InvalidArgumentError || e instanceof PermissionDeniedError || e instanceof UnauthenticatedError || (e instanceof DocketError && e.code === UNIMPLEMENTED)) {
        await Promise.all(calls.map((c) => this.alone(c.items).then(c.resolve, c.reject)));
        return;
      }
      for (const c of calls) c.reject(e);
      return;
    }
    let i = 0;
    for (const c of calls) {
      c.resolve(out.slice(i, i + c.items.length));
      i += c.items.length;
    }
  }
}
