package fsm

import "github.com/dockethq/docket/storage"

// The keyspace directory's names, which storage owns; the recovery tests
// build crashed layouts from them.
const (
	dbDir      = storage.DBDir
	restoreDir = storage.RestoreDir
	oldDir     = storage.OldDir
	doneMarker = storage.RestoreMarker
)
