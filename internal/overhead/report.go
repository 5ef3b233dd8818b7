package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// cell is one target at one body size, pooled over rounds.
type cell struct {
	Target string `json:"target"`
	Size   int    `json:"size_bytes"`
	// Latency phase (--latency-concurrency workers, 1 by default).
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
	// Throughput phase (--concurrency workers).
	RPS         float64 `json:"rps"`
	LoadedP50us float64 `json:"loaded_p50_us"`
	LoadedP99us float64 `json:"loaded_p99_us"`
	// CPU time of the target's process per request in the throughput
	// phase: the proxy's own cost (for direct, the stub backends').
	CPUusPerReq float64 `json:"cpu_us_per_request"`
	// Against direct at the same size; zero on the direct row.
	AddedP50us       float64 `json:"added_p50_us"`
	AddedP99us       float64 `json:"added_p99_us"`
	AddedLoadedP50us float64 `json:"added_loaded_p50_us"`
	// Share of the throughput phase's answers per stub replica.
	Replicas []int `json:"replica_counts"`

	lat, loaded []time.Duration
	elapsed     time.Duration
	cpu         time.Duration
}

func (c *cell) add(lat, thr result, cpu time.Duration) {
	c.lat = append(c.lat, lat.Latencies...)
	c.loaded = append(c.loaded, thr.Latencies...)
	c.elapsed += thr.Elapsed
	c.cpu += cpu
	if c.Replicas == nil {
		c.Replicas = make([]int, len(thr.Replicas))
	}
	for i, n := range thr.Replicas {
		c.Replicas[i] += n
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func (c *cell) finish() {
	slices.Sort(c.lat)
	slices.Sort(c.loaded)
	c.P50us, c.P99us = us(percentile(c.lat, 50)), us(percentile(c.lat, 99))
	c.LoadedP50us, c.LoadedP99us = us(percentile(c.loaded, 50)), us(percentile(c.loaded, 99))
	if c.elapsed > 0 {
		c.RPS = float64(len(c.loaded)) / c.elapsed.Seconds()
	}
	if len(c.loaded) > 0 {
		c.CPUusPerReq = us(c.cpu) / float64(len(c.loaded))
	}
}

type machine struct {
	CPU        string `json:"cpu"`
	NumCPU     int    `json:"num_cpu"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	Go         string `json:"go"`
	HAProxy    string `json:"haproxy,omitempty"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

type reportConfig struct {
	Sizes              []int `json:"sizes"`
	Concurrency        int   `json:"concurrency"`
	LatencyConcurrency int   `json:"latency_concurrency"`
	Requests           int   `json:"requests"`
	LatencyRequests    int   `json:"latency_requests"`
	Warmup             int   `json:"warmup"`
	Rounds             int   `json:"rounds"`
	Bodies             int   `json:"bodies"`
	Replicas           int   `json:"replicas"`
	HashBytes          int   `json:"haproxy_hash_bytes"`
	HAProxyThreads     int   `json:"haproxy_threads"`
}

type report struct {
	Machine machine      `json:"machine"`
	Config  reportConfig `json:"config"`
	Rows    []*cell      `json:"rows"`
}

func machineInfo(haproxy string) machine {
	m := machine{NumCPU: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, HAProxy: haproxy, LoadBefore: loadAvg()}
	if v, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(v))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func writeJSON(w io.Writer, r report) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(r)
}

// The targets the table's footer checks.
const (
	targetAddedP50us = 150
	targetAddedP99us = 1000
)

func writeTable(w io.Writer, r report) {
	m, c := r.Machine, r.Config
	fmt.Fprintf(w, "machine: %s, %d CPUs, %s/%s, %s", m.CPU, m.NumCPU, m.GOOS, m.GOARCH, m.Go)
	if m.HAProxy != "" {
		fmt.Fprintf(w, ", %s", m.HAProxy)
	}
	fmt.Fprintf(w, "\nload average before %s, after %s\n", m.LoadBefore, m.LoadAfter)
	fmt.Fprintf(w, "latency: %d in flight, %d requests; throughput: %d in flight, %d requests; %d warm-up, %d round(s), %d stub replicas\n\n",
		c.LatencyConcurrency, c.LatencyRequests, c.Concurrency, c.Requests, c.Warmup, c.Rounds, c.Replicas)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "body\ttarget\tp50 µs\tp99 µs\tadded p50\tadded p99\trps c=%d\tp50 c=%d\tp99 c=%d\tproxy CPU µs/req\treplica split\t\n", c.Concurrency, c.Concurrency, c.Concurrency)
	for _, x := range r.Rows {
		added := func(v float64) string {
			if x.Target == "direct" {
				return "—"
			}
			return fmt.Sprintf("%+.0f", v)
		}
		split := make([]string, len(x.Replicas))
		for i, n := range x.Replicas {
			split[i] = fmt.Sprint(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.1f\t%s\t\n", sizeName(x.Size), x.Target,
			x.P50us, x.P99us, added(x.AddedP50us), added(x.AddedP99us), x.RPS, x.LoadedP50us, x.LoadedP99us, x.CPUusPerReq,
			strings.Join(split, "/"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, x := range r.Rows {
		if x.Target != "prefixgate" {
			continue
		}
		var ha *cell
		for _, y := range r.Rows {
			if y.Target == "haproxy" && y.Size == x.Size {
				ha = y
			}
		}
		verdict := func(ok bool) string {
			if ok {
				return "met"
			}
			return "MISSED"
		}
		fmt.Fprintf(w, "%s: added p50 %.0f µs (≤ %d: %s), added p99 %.0f µs (≤ %d: %s)", sizeName(x.Size),
			x.AddedP50us, targetAddedP50us, verdict(x.AddedP50us <= targetAddedP50us),
			x.AddedP99us, targetAddedP99us, verdict(x.AddedP99us <= targetAddedP99us))
		if ha != nil {
			fmt.Fprintf(w, ", rps %.0f vs HAProxy %.0f (≥: %s)", x.RPS, ha.RPS, verdict(x.RPS >= ha.RPS))
		}
		fmt.Fprintln(w)
	}
}

func sizeName(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}
