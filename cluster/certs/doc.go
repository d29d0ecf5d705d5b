// Package certs loads a node's TLS material (the cluster CA, the node's
// certificate and key) from PEM files, reloads it on demand, and builds the
// tls.Configs and gRPC credentials of every channel a node serves or dials:
//
//   - the client API (APIServerConfig, ServerCredentials): the node's
//     certificate; a client certificate required, checked if given, or not
//     asked for (ClientAuth);
//   - Raft, both ways (PeerServerConfig, PeerClientConfig): mutual, and
//     only a server certificate of the cluster CA passes;
//   - a node's own gRPC calls to other nodes (PeerCredentials): forwarding
//     to the leader, discovery polls, consistency checks.
//
// It sits under cluster so that transport may import it; the Go client may
// not (client imports only proto) and builds its own tls.Config.
//
// # Decisions and trade-offs
//
//   - A peer is a node when its certificate chains to the cluster CA, names
//     ServerName ("server.docket") and allows ServerAuth; the address it
//     was dialled at does not matter (Consul's verify_server_hostname).
//     `docket tls cert --client` never writes that name, so a worker's
//     certificate from the same CA is refused by Raft at the handshake. The
//     usage alone would not do: a server certificate also carries
//     ClientAuth, and the name is what an operator can see in the file.
//   - TLS 1.3 only (MinVersion): every client we ship is Go, 1.3 has no
//     weak suites to configure, and its handshake is one round trip.
//   - Reload swaps one pointer to a consistent set (certificate, key, CA).
//     Every config reads it per handshake (GetConfigForClient on the server
//     side, a fresh config per dial on the client side), so new connections
//     see the new files at once and open ones keep theirs until they close;
//     the pooled Raft and gRPC connections between nodes therefore change
//     certificate only when they reconnect. A set that fails to load (key
//     not matching, not signed by the CA, expired) is refused and the old
//     one stays: a half-copied file never takes a node off the network.
//   - An expired certificate of our own is refused at Load and Reload, so
//     a node never starts with one it could not use.
//   - Changing the CA is a reload too; a rotation to a new CA needs a CA
//     file holding both CAs until every node has a certificate of the new.
package certs
