package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

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
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return err
}
