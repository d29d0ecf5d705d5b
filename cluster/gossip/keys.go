package gossip

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log"
	"log/slog"
	"strings"
)

// KeySize is the length of a key NewKey makes: AES-256.
const KeySize = 32

// NewKey returns a fresh random key, base64, for a key file.
func NewKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("gossip key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// ParseKeys reads a keyring: one base64 key per line, the primary first;
// blank lines and lines starting with # are skipped. Each key must be 16,
// 24 or 32 bytes (AES-128, -192 or -256).
func ParseKeys(text string) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("gossip key on line %d: not base64: %w", line, err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("gossip key on line %d: %d bytes, want 16, 24 or 32", line, n)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// newStdLogger routes memberlist's "[LEVEL] memberlist: ..." lines to slog
// at the matching level.
func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l.With("component", "memberlist")}, "", 0)
}

type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for prefix, lv := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo, "[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError} {
		if strings.HasPrefix(msg, prefix) {
			level, msg = lv, strings.TrimSpace(strings.TrimPrefix(msg, prefix))
			break
		}
	}
	w.l.Log(context.Background(), level, strings.TrimPrefix(msg, "memberlist: "))
	return len(p), nil
}
