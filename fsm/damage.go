package fsm

const damagedMsg = "the keyspace is damaged on disk: this replica applies nothing more until it is repaired"

// damagedSegment ends a segment whose apply read damaged bytes (a task
// body in a blob file that fails its checksum). A panic there came back
// at every start, since the replay met the same bytes. The segment's
// batch is dropped, so none of its entries applied and each answers the
// fault; the marker makes the next open refuse, and the fault takes the
// node out of service as a damaged log does.
func (f *FSM) damagedSegment(cause error, results []interface{}) int {
	err := f.keyspaceDamaged(cause)
	for i := range results {
		results[i] = err
	}
	return len(results)
}

// keyspaceDamaged marks the keyspace damaged for a read that met bad
// bytes and latches the fault; it returns the error that names the repair.
func (f *FSM) keyspaceDamaged(cause error) error {
	err := f.home.Damaged(cause)
	f.setFault(err, damagedMsg)
	return err
}
