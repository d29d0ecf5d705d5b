package leader

import (
	"context"
	"fmt"
)

// Once runs one round of the loop name (reap, timeout, promote, purge,
// schedule), for the scenario tests, which live outside the package
// because they run over a memnode.Node.
func (l *Loops) Once(ctx context.Context, name string) error {
	fn := map[string]func(context.Context) error{"reap": l.reapOnce, "timeout": l.timeOutOnce,
		"promote": l.promoteOnce, "purge": l.purgeOnce, "schedule": l.ScheduleOnce}[name]
	if fn == nil {
		return fmt.Errorf("no loop %q", name)
	}
	return fn(ctx)
}
