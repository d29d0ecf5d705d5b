package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// RecoveryFile is the file, in a node's data dir, that an operator writes
// to recover a cluster that lost a majority of its servers: a JSON list
// of the servers the cluster will consist of, in hashicorp/raft's peers
// format (the one Consul's raft/peers.json uses):
//
//	[{"id": "n1", "address": "10.0.0.1:7500", "non_voter": false}]
//
// At start the node replaces its Raft configuration with that list, then
// renames the file to RecoveryFile+".done" so a later restart does not
// recover again. Write the same file on every surviving server, start
// them, and they elect a leader among themselves.
const RecoveryFile = "recovery.json"

// recoverIfAsked runs a pending manual recovery (RecoveryFile) before Raft
// starts. raft.RecoverCluster replays every entry of the local log into the
// FSM, committed or not, and writes a snapshot whose configuration is the
// given one: the survivors agree on what they hold, not on what the lost
// majority had committed. That is the price of recovery, and why it is a
// file an operator writes and never automatic.
func (n *Node) recoverIfAsked(p *raftParts) error {
	path := filepath.Join(n.cfg.DataDir, RecoveryFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return fmt.Errorf("recovery: %s: %w", path, err)
	}
	self := false
	for _, s := range conf.Servers {
		self = self || string(s.ID) == n.cfg.ID
	}
	if !self {
		return fmt.Errorf("recovery: %s does not list this server (%s): a recovered configuration without it would leave it out of its own cluster", path, n.cfg.ID)
	}
	n.log.Warn("recovering the cluster from a manual configuration: entries this node holds that the lost servers never committed are kept",
		"file", path, "servers", len(conf.Servers))
	if err := raft.RecoverCluster(n.raftConfig(nil), n.fsm, p.logs, p.store, p.snaps, p.transport, conf); err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	if err := os.Rename(path, path+".done"); err != nil {
		return fmt.Errorf("recovery done, but %s stays (remove it before the next start): %w", path, err)
	}
	n.log.Warn("cluster configuration recovered", "servers", len(conf.Servers), "applied", n.fsm.AppliedIndex())
	return nil
}
