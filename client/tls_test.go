package client

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func Test_WithTLSRefusesUnreadableFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	missing := filepath.Join(t.TempDir(), "nope.pem")
	for name, opt := range map[string]Option{
		"missing CA":       WithTLS(missing, "", ""),
		"no CA":            WithTLS("", "", ""),
		"cert without key": WithTLS(missing, missing, ""),
	} {
		if c, err := New(ctx, []string{"127.0.0.1:1"}, opt); err == nil {
			_ = c.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
}
