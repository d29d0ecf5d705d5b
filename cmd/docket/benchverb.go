package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dockethq/docket/cmd/docket/bench"
)

// runBench is `docket bench`; the workloads live in package bench.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	err = bench.Run(ctx, exe, args, stdout, stderr)
	if errors.Is(err, bench.ErrUsage) {
		// bench's text already begins with "usage": say it once.
		return fmt.Errorf("%w%s", errUsage, strings.TrimPrefix(err.Error(), bench.ErrUsage.Error()))
	}
	return err
}
