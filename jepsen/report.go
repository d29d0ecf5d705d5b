package jepsen

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Summary is results.json.
type Summary struct {
	Scenario string   `json:"scenario"`
	Seed     uint64   `json:"seed"`
	Nodes    int      `json:"nodes"`
	Faults   []string `json:"faults"`
	// Overlap is how many faults could hold at once; UpgradeFrom the older
	// binary the cluster started on (a rolling-upgrade run).
	Overlap     int    `json:"overlap,omitempty"`
	UpgradeFrom string `json:"upgrade_from,omitempty"`
	// LogStore is the agents' Raft log store (bolt unless wal); Plant the
	// planted faults the agents ran with (planted.go), none in a real run.
	LogStore string `json:"log_store,omitempty"`
	Plant    string `json:"plant,omitempty"`
	Duration string `json:"duration"`
	// TLS and Auth say whether the nodes and every client of the run spoke
	// mutual TLS and sent role tokens (the default) or ran --insecure.
	TLS       bool           `json:"tls"`
	Auth      bool           `json:"auth"`
	Valid     bool           `json:"valid"`
	Ops       int            `json:"ops"`
	OpsByType map[string]int `json:"ops_by_type"`
	Windows   []Fault        `json:"fault_windows"`
	Results   []Result       `json:"results"`
	Recovery  []Recovery     `json:"recovery"`
	WorstRecS float64        `json:"worst_recovery_s"`
	FaultSecs float64        `json:"fault_time_s"` // total time some fault was active
	Final     []NodeState    `json:"final_nodes"`
	// FaultStats counts, per fault, the windows applied and healed, the
	// total time they held, and failed applications.
	FaultStats []FaultStat `json:"fault_stats"`
	Coverage   Coverage    `json:"coverage"`
}

// Report merges the event files into history.jsonl, runs the checkers and
// writes results.json and index.html into cfg.ReportDir.
func Report(cfg RunConfig, files []string) (*RunResult, error) {
	var evs []Event
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		e, err := ReadEvents(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("report %s: %w", p, err)
		}
		evs = append(evs, e...)
	}
	h := Parse(evs) // sorts evs by time
	out, err := os.Create(filepath.Join(cfg.ReportDir, "history.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	enc := json.NewEncoder(out)
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			out.Close()
			return nil, fmt.Errorf("report history: %w", err)
		}
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("report history: %w", err)
	}
	return WriteResults(cfg, h)
}

// WriteResults checks h and writes results.json and index.html.
func WriteResults(cfg RunConfig, h *History) (*RunResult, error) {
	rs, recs := CheckAll(h)
	cov := cfg.Coverage
	if cov.Faults == nil {
		cov = DefaultCoverage(cfg.Faults, SmokeMinWindows)
	}
	rs = append(rs, CheckCoverage(h, cov))
	s := Summary{FaultStats: wantWindows(faultStats(h, append(append([]string(nil), cov.Faults...), cov.Once...)), cov), Coverage: cov, Scenario: cfg.Name, Seed: cfg.Seed, Nodes: cfg.Nodes, Faults: cfg.Faults, Duration: cfg.Duration.String(),
		TLS: !cfg.Insecure, Auth: !cfg.Insecure && cfg.OldBin == "", Overlap: cfg.Overlap, UpgradeFrom: cfg.OldBin, LogStore: cfg.LogStore, Plant: cfg.Plant, Valid: !Failed(rs), Ops: len(h.Ops), OpsByType: map[string]int{}, Results: rs, Recovery: recs, Final: h.Final}
	for _, o := range h.Ops {
		s.OpsByType[o.F+":"+o.Type]++
	}
	for _, f := range h.Faults {
		g := f
		g.Start -= h.Begin
		if g.End != math.MaxInt64 {
			g.End -= h.Begin
		}
		s.Windows = append(s.Windows, g)
	}
	for _, f := range h.Faults {
		if f.End != math.MaxInt64 && f.Name != "final-heal" {
			s.FaultSecs += float64(f.End-f.Start) / 1e9
		}
	}
	for _, r := range recs {
		s.WorstRecS = max(s.WorstRecS, r.Secs)
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.ReportDir, "results.json"), b, 0o644); err != nil {
		return nil, fmt.Errorf("results.json: %w", err)
	}
	if err := writeHTML(filepath.Join(cfg.ReportDir, "index.html"), s, h); err != nil {
		return nil, err
	}
	return &RunResult{Dir: cfg.ReportDir, Results: rs, Failed: Failed(rs), Ops: len(h.Ops), Recovery: recs}, nil
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{"sec": func(ns int64) float64 { return float64(ns) / 1e9 }}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>docket jepsen: {{.S.Scenario}}</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
.pass{background:#dfd}.fail{background:#fdd}.unknown{background:#ffd}pre{white-space:pre-wrap;font-size:12px;margin:0}</style></head>
<body><h1>docket jepsen: {{.S.Scenario}} — {{if .S.Valid}}VALID{{else}}INVALID{{end}}</h1>
<p>seed {{.S.Seed}}, {{.S.Nodes}} nodes, duration {{.S.Duration}}, faults {{.S.Faults}}, {{.S.Ops}} operations, {{printf "%.0f" .S.FaultSecs}} s of faults, worst recovery {{printf "%.3f" .S.WorstRecS}} s</p>
<p>{{if gt .S.Overlap 1}}up to {{.S.Overlap}} overlapping faults; {{end}}{{if .S.UpgradeFrom}}started on {{.S.UpgradeFrom}}, upgraded under the workload; {{end}}mode: {{if and .S.TLS .S.Auth}}mutual TLS, tokens on{{else if or .S.TLS .S.Auth}}TLS {{.S.TLS}}, tokens {{.S.Auth}}{{else}}plaintext, no tokens (--insecure){{end}}</p>
<table><tr><th>checker</th><th>verdict</th><th>checked</th><th>note / violations</th></tr>
{{range .S.Results}}<tr class="{{.Verdict}}"><td>{{.Name}}</td><td>{{.Verdict}}</td><td>{{.Checked}}</td><td>{{.Note}}{{range .Violations}}<pre>{{.}}</pre>{{end}}</td></tr>
{{end}}</table>
<h2>Faults</h2><table><tr><th>fault</th><th>windows</th><th>held s</th><th>failed to apply</th><th>ok ops inside</th><th>outcomes</th></tr>
{{range .S.FaultStats}}<tr class="{{if or .Failed (lt .Windows .Want)}}fail{{else}}pass{{end}}"><td>{{.Name}}</td><td>{{.Windows}}</td><td>{{printf "%.1f" .HeldS}}</td><td>{{.Failed}}</td><td>{{.OpsInWin}}</td><td>{{range .Outcomes}}{{.}}<br>{{end}}{{range $k, $n := .Damaged}}{{$n}} × {{$k}}<br>{{end}}</td></tr>
{{end}}</table><p>required: each named fault held at least {{.S.Coverage.MinWindows}} times; minimum ok operations {{.S.Coverage.MinOps}}; {{.S.Coverage.MinOpsInFaults}} acknowledged inside fault windows.</p>
<h2>Throughput (ok operations per second)</h2>{{.Thru}}
<h2>Latency (ms, log scale; green ok, red fail, orange info)</h2>{{.Lat}}
<h2>Fault windows</h2><table><tr><th>#</th><th>fault</th><th>nodes</th><th>start s</th><th>end s</th><th>detail</th><th>outcome</th></tr>
{{range .S.Windows}}<tr{{if .Finding}} class="fail"{{end}}><td>{{.Win}}</td><td>{{.Name}}</td><td>{{.Nodes}}</td><td>{{printf "%.1f" (sec .Start)}}</td><td>{{printf "%.1f" (sec .End)}}</td><td>{{.Detail}}</td><td>{{.Outcome}}{{if .Finding}}<pre>{{.Finding}}</pre>{{end}}</td></tr>{{end}}</table>
<p>Files: <a href="history.jsonl">history.jsonl</a>, <a href="results.json">results.json</a>, logs/.</p></body></html>`))

const plotW, plotH, padL, padB = 1000.0, 260.0, 50.0, 25.0

type plot struct {
	b    strings.Builder
	span float64 // seconds on the x axis
}

func (p *plot) x(sec float64) float64 { return padL + sec/p.span*(plotW-padL-10) }

func newPlot(h *History, span float64) *plot {
	p := &plot{span: math.Max(span, 1)}
	fmt.Fprintf(&p.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" style="border:1px solid #ccc">`, plotW, plotH)
	for _, f := range h.Faults {
		end := f.End
		if end == math.MaxInt64 {
			end = h.End
		}
		a, b := float64(f.Start-h.Begin)/1e9, float64(end-h.Begin)/1e9
		fmt.Fprintf(&p.b, `<rect x="%.1f" y="0" width="%.1f" height="%.0f" fill="#f88" opacity="0.25"><title>%s %v</title></rect>`,
			p.x(a), math.Max(p.x(b)-p.x(a), 1), plotH-padB, template.HTMLEscapeString(f.Name), f.Nodes)
		fmt.Fprintf(&p.b, `<text x="%.1f" y="10" font-size="9" fill="#a33">%s</text>`, p.x(a), template.HTMLEscapeString(f.Name))
	}
	for t := 0.0; t <= p.span; t += math.Max(10, math.Round(p.span/10/10)*10) {
		fmt.Fprintf(&p.b, `<text x="%.1f" y="%.0f" font-size="10">%.0fs</text>`, p.x(t), plotH-8, t)
	}
	return p
}

func (p *plot) done() template.HTML { p.b.WriteString("</svg>"); return template.HTML(p.b.String()) }

var colors = map[string]string{FEnqueue: "#1f77b4", FClaim: "#2ca02c", FSubmit: "#9467bd", FHeartbeat: "#8c564b", FNack: "#e377c2"}

func writeHTML(path string, s Summary, h *History) error {
	span := float64(h.End-h.Begin) / 1e9
	// throughput: 1 s buckets of ok completions per function
	thru := newPlot(h, span)
	n := int(span) + 1
	buckets := map[string][]int{}
	peak := 1
	for _, o := range h.Ops {
		if o.Type != OK || o.Queue != "" || (o.F == FClaim && o.Task == "") {
			continue // the feature queues' ops would crowd the main queue's plot
		}
		if buckets[o.F] == nil {
			buckets[o.F] = make([]int, n)
		}
		i := min(int((o.Complete-h.Begin)/1e9), n-1)
		buckets[o.F][i]++
		peak = max(peak, buckets[o.F][i])
	}
	fs := make([]string, 0, len(buckets))
	for f := range buckets {
		fs = append(fs, f)
	}
	sort.Strings(fs)
	for k, f := range fs {
		var pts []string
		for i, v := range buckets[f] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", thru.x(float64(i)+0.5), (plotH-padB)-float64(v)/float64(peak)*(plotH-padB-15)))
		}
		c := colors[f]
		if c == "" {
			c = "#333"
		}
		fmt.Fprintf(&thru.b, `<polyline fill="none" stroke="%s" points="%s"/><text x="%.0f" y="%d" font-size="11" fill="%s">%s</text>`,
			c, strings.Join(pts, " "), plotW-90, 25+14*k, c, f)
	}
	fmt.Fprintf(&thru.b, `<text x="2" y="20" font-size="10">%d/s</text>`, peak)
	// latency: one dot per completed op (sampled to at most 20000)
	lat := newPlot(h, span)
	step := max(1, len(h.Ops)/20000)
	y := func(ms float64) float64 { // 1 ms .. 10 s, log scale
		v := math.Log10(math.Min(math.Max(ms, 1), 10000)) / 4
		return (plotH - padB) - v*(plotH-padB-10)
	}
	for _, ms := range []float64{1, 10, 100, 1000, 10000} {
		fmt.Fprintf(&lat.b, `<text x="2" y="%.0f" font-size="10">%.0f</text>`, y(ms)+3, ms)
	}
	for i := 0; i < len(h.Ops); i += step {
		o := h.Ops[i]
		if o.Answered == 0 {
			continue
		}
		c := map[string]string{OK: "#2a2", Fail: "#d22", Info: "#f80"}[o.Type]
		fmt.Fprintf(&lat.b, `<circle cx="%.1f" cy="%.1f" r="1.2" fill="%s"/>`, lat.x(float64(o.Invoke-h.Begin)/1e9),
			y(float64(o.Answered-o.Invoke)/float64(time.Millisecond)), c)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("index.html: %w", err)
	}
	err = page.Execute(f, map[string]any{"S": s, "Thru": thru.done(), "Lat": lat.done()})
	return errorsJoinClose(err, f)
}

func errorsJoinClose(err error, f *os.File) error {
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("index.html: %w", err)
	}
	return nil
}

// wantWindows sets each fault's required window count: MinWindows, or one
// for a fault that can happen only once (Coverage.Once).
func wantWindows(stats []FaultStat, cov Coverage) []FaultStat {
	for i := range stats {
		stats[i].Want = cov.MinWindows
		if slicesContains(cov.Once, stats[i].Name) {
			stats[i].Want = 1
		}
	}
	return stats
}
