import type { TLSOptions } from "./conn.js";

/** The environment variables the docket CLI reads, and `docket dev` writes to its env file. */
export const Env = {
  addr: "DOCKET_ADDR", // comma-separated node addresses
  tlsCA: "DOCKET_TLS_CA", // PEM file of the cluster CA: speak TLS
  tlsCert: "DOCKET_TLS_CERT", // PEM client certificate, with DOCKET_TLS_KEY
  tlsKey: "DOCKET_TLS_KEY", // PEM key of the client certificate
  token: "DOCKET_TOKEN", // bearer token sent with every call
} as const;

export interface EnvConfig {
  addrs: string[];
  tls?: TLSOptions;
  token?: string;
}

/**
 * Reads the client's configuration from env as the Go client's WithEnv
 * does: an unset or empty variable changes nothing, and a certificate
 * without a CA is an error rather than a silent plaintext connection.
 */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): EnvConfig {
  const addrs = (env[Env.addr] ?? "").split(",").map((a) => a.trim()).filter((a) => a !== "");
  const out: EnvConfig = { addrs };
  const ca = env[Env.tlsCA];
  if (ca) {
    out.tls = { ca, cert: env[Env.tlsCert] || undefined, key: env[Env.tlsKey] || undefined };
  } else if (env[Env.tlsCert]) {
    throw new Error(`docket: env: ${Env.tlsCert} is set without ${Env.tlsCA}`);
  }
  const token = env[Env.token]?.trim();
  if (token) out.token = token;
  return out;
}
