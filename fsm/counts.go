package fsm

import "github.com/dockethq/docket/storage"

// Counts reports how many tasks of one queue and tenant are pending and
// delayed on the local replica. It reads one catalog key, so the claim
// long-poll can ask it on every call; Stats also seeks each priority's head.
// One Get needs no snapshot (view): it sees one state by itself.
func (f *FSM) Counts(queue, tenant string) (pending, delayed uint64, err error) {
	r, release, err := f.reader()
	if err != nil {
		return 0, 0, err
	}
	defer release()
	m, err := storage.GetQueueMeta(r, queue, tenant)
	if err != nil {
		return 0, 0, err
	}
	return m.Pending, m.Delayed, nil
}

// Paused reports whether claims of one queue and tenant are paused on the
// local replica: one Get, which the bloom filters answer for the usual
// queue without a record.
func (f *FSM) Paused(queue, tenant string) (bool, error) {
	r, release, err := f.reader()
	if err != nil {
		return false, err
	}
	defer release()
	cfg, err := storage.GetQueueConfig(r, queue, tenant)
	if err != nil {
		return false, err
	}
	return cfg.GetPaused(), nil
}
