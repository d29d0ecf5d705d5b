// Package gossip is how Docket servers find each other: a
// hashicorp/memberlist pool in which every server announces who it is
// (Meta: Raft id, Raft and gRPC addresses, build version, feature level)
// and learns which servers are alive, failed, or have left on purpose.
// It decides nothing about Raft: package cluster reads Members and turns
// them into a configuration (cluster/reconcile.go).
//
// # Encryption (keyring)
//
// With keys, every gossip packet and stream is encrypted and authenticated
// (AES-GCM, memberlist's keyring); a member without a key in the ring
// cannot decode anything and is never let in. Keys are 16, 24 or 32 bytes,
// written base64, one per line in a key file (docket agent
// --gossip-key-file, or DOCKET_GOSSIP_KEY; never argv); the first is the
// primary, which encrypts, and every key in the ring decrypts. `docket
// gossip keygen` prints a fresh 32-byte key.
//
// Rotating a key with no downtime (SetKeys; docket agent reloads the file
// on SIGHUP):
//
//  1. Append the new key to every node's key file, second line, and
//     SIGHUP every node. All now accept both keys and still send with
//     the old one.
//  2. Move the new key to the first line everywhere, SIGHUP every node.
//     Nodes now send with the new key and still accept the old one, so
//     nodes that are not yet reloaded keep talking.
//  3. Remove the old key everywhere, SIGHUP every node.
//
// Without keys gossip is plain: anyone who reaches the gossip port can
// join the pool, and the leader will add it to Raft as a non-voter. That
// is the insecure development path; a production cluster sets a key (and
// mutual TLS on Raft, which a rogue member cannot pass either).
//
// # Decisions and trade-offs
//
//   - memberlist v0.5.4, not the newest served (v0.7.0): v0.6 and later
//     pull newer Prometheus client modules into the whole build; the
//     protocol, keyring and leave semantics we use are the same.
//   - Timings: production uses memberlist's LAN defaults (probe every 1 s,
//     500 ms probe timeout, suspicion 4 x log(N+1) probe intervals,
//     push-pull every 30 s): a dead server is declared failed in about
//     5-10 s on 3-5 nodes. Config.Local (tests, docket dev on loopback)
//     probes every 200 ms with a 100 ms timeout, so a failure is seen in
//     about a second.
//   - The state of each member (alive, failed, left and since when) is
//     kept here, not read from memberlist, which forgets dead nodes after
//     GossipToTheDeadTime: the leader needs "failed since" to wait out its
//     dead-server timeout. Forget drops a member the caller has done with.
//   - A keyring can be rotated but not switched on or off at run time:
//     memberlist fixes encryption at Create. Turning it on needs a restart
//     of every node (a rolling restart with the key cannot talk to the old
//     plain nodes, so it is a full restart).
//   - The gossip listener is not bounded by connlimit: memberlist owns its
//     TCP listener and UDP socket (cluster/raftlog/DESIGN.md names the gap).
package gossip
