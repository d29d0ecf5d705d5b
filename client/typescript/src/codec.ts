/** Turns a handler's typed values into task bytes and back. */
export interface Codec<T = unknown> {
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

/** JSON in UTF-8: the default codec, and what the Go client's EnqueueJSON and Handle speak. */
export const jsonCodec: Codec<any> = {
  encode(v: unknown): Uint8Array {
    // undefined (a handler that returns nothing) is stored as no bytes,
    // as a Go handler's nil result is.
    return v === undefined ? new Uint8Array(0) : Buffer.from(JSON.stringify(v), "utf8");
  },
  decode(b: Uint8Array): unknown {
    return b.length === 0 ? undefined : JSON.parse(Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("utf8"));
  },
};

/** Bytes as they are: for payloads that are not JSON. */
export const rawCodec: Codec<Uint8Array> = {
  encode: (v) => v,
  decode: (b) => b,
};
