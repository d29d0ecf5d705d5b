package cluster_test

import (
	"testing"

	"github.com/dockethq/docket/cluster/internal/nodetest"
)

// A restore brings every replica back to the backup's keyspace, and the
// cluster goes on with ids above the backup's (nodetest runs the same
// round trip on each log store).
func Test_BackupRestoreRoundTrip(t *testing.T) {
	nodetest.BackupRestoreRoundTrip(t, nodetest.Cluster(t, 3))
}
