package raftlog

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's hclog output to slog, so a node has
// one structured log stream.
type hclogAdapter struct {
	log  *slog.Logger
	name string
	args []interface{}
}

// NewHCLog is an hclog.Logger that writes to l, for hashicorp/raft and
// raft-wal, tagged with component name.
func NewHCLog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{log: l.With("component", name), name: name}
}

func toSlogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Info:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...interface{}) {
	h.log.Log(context.Background(), toSlogLevel(level), msg, args...)
}
func (h *hclogAdapter) Trace(msg string, args ...interface{}) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...interface{}) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...interface{})  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...interface{})  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...interface{}) { h.Log(hclog.Error, msg, args...) }
func (h *hclogAdapter) enabled(l hclog.Level) bool {
	return h.log.Enabled(context.Background(), toSlogLevel(l))
}
func (h *hclogAdapter) IsTrace() bool              { return false }
func (h *hclogAdapter) IsDebug() bool              { return h.enabled(hclog.Debug) }
func (h *hclogAdapter) IsInfo() bool               { return h.enabled(hclog.Info) }
func (h *hclogAdapter) IsWarn() bool               { return h.enabled(hclog.Warn) }
func (h *hclogAdapter) IsError() bool              { return h.enabled(hclog.Error) }
func (h *hclogAdapter) ImpliedArgs() []interface{} { return h.args }
func (h *hclogAdapter) With(args ...interface{}) hclog.Logger {
	return &hclogAdapter{log: h.log.With(args...), name: h.name, args: append(append([]interface{}{}, h.args...), args...)}
}
func (h *hclogAdapter) Name() string { return h.name }
func (h *hclogAdapter) Named(name string) hclog.Logger {
	return &hclogAdapter{log: h.log.With("sub", name), name: h.name + "." + name, args: h.args}
}
func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{log: h.log, name: name, args: h.args}
}

// SetLevel is a no-op: the slog handler decides levels.
func (h *hclogAdapter) SetLevel(hclog.Level) {}
func (h *hclogAdapter) GetLevel() hclog.Level {
	if h.IsDebug() {
		return hclog.Debug
	}
	return hclog.Info
}
func (h *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.log.Handler(), slog.LevelInfo)
}
func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slog.NewLogLogger(h.log.Handler(), slog.LevelInfo).Writer()
}
