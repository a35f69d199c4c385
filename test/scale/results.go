// Package scale holds the results of the scale and fault tests
// (scale_test.go, build tag scale), which `make bench` runs and
// test/scale/report publishes in docs/performance.md.
package scale

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/loadgen"
)

// Results of one scale run, written as JSON.
type Results struct {
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Machine  Machine      `json:"machine"`
	Fleet    FleetInfo    `json:"fleet"`
	Memory   *Memory      `json:"memory,omitempty"`
	Load     []LoadResult `json:"load,omitempty"`
	Faults   *Faults      `json:"faults,omitempty"`
	// Admission: writes through the API server, interleaved (admission.go).
	Admission *Admission `json:"admission,omitempty"`
	// Failures are the phases that did not complete, with why.
	Failures []string `json:"failures,omitempty"`
}

// Machine the run was on.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	MemoryMiB int    `json:"memoryMiB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
}

// ThisMachine describes the machine.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.Atoi(f[1])
				m.MemoryMiB = kb / 1024
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

// LoadAverage is /proc/loadavg's 1, 5 and 15 minute averages ("uptime").
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// FleetInfo describes the fleet created in the API server.
type FleetInfo struct {
	Nodes         int     `json:"nodes"`
	GPUNodes      int     `json:"gpuNodes"`
	Hardware      int     `json:"hardware"`
	Zones         int     `json:"zones"`
	Plans         int     `json:"plans"`
	Records       int     `json:"records"`
	Pods          int     `json:"pods"`
	LabelsPerNode float64 `json:"labelsPerNode"`
	ImagesPerNode float64 `json:"imagesPerNode"`
	// NodeReviewBytes is the mean size of a Node review's body.
	NodeReviewBytes int `json:"nodeReviewBytes"`
	// CreateSeconds is how long creating the fleet took; Workers created it.
	CreateSeconds float64 `json:"createSeconds"`
	Workers       int     `json:"workers"`
	Load          string  `json:"load"`
}

// Memory of the serve process (bytes).
type Memory struct {
	// Synced: once /readyz passed and every review was answered as expected
	// (the caches hold the fleet), after a few idle seconds.
	SyncedRSS int64  `json:"syncedRSS"`
	SyncedHWM int64  `json:"syncedHWM"`
	Load      string `json:"load"`
	// AfterLoad: at the end of the load runs.
	AfterLoadRSS int64 `json:"afterLoadRSS"`
	AfterLoadHWM int64 `json:"afterLoadHWM"`
}

// Stats of a latency sample.
type Stats struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50"`
	P90 time.Duration `json:"p90"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// StatsOf computes Stats.
func StatsOf(ds []time.Duration) Stats {
	s := Stats{N: len(ds)}
	s.P50, s.P90, s.P99, s.Max = loadgen.Percentiles(ds)
	return s
}

// LoadResult is one load scenario, repeated.
type LoadResult struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Command     string    `json:"command"`
	Runs        []LoadRun `json:"runs"`
}

// LoadRun is one repetition.
type LoadRun struct {
	Summary    loadgen.Summary `json:"summary"`
	LoadBefore string          `json:"loadBefore"`
	LoadAfter  string          `json:"loadAfter"`
}

// Faults is the fault run: load at a fixed rate while the faults happen.
type Faults struct {
	Rate     float64         `json:"rate"`
	Reviews  int             `json:"reviews"`
	Summary  loadgen.Summary `json:"summary"`
	Windows  []FaultWindow   `json:"windows"`
	Panics   int             `json:"panics"`
	Restarts int             `json:"restarts"`
	// FinalWrong are the reviews answered wrongly after the run, with the
	// cluster's state restored (0: the caches recovered).
	FinalWrong int      `json:"finalWrong"`
	Notes      []string `json:"notes"`
	Load       string   `json:"load"`
}

// FaultWindow is one fault, from when it started to when the state was
// restored (plus a grace), and the answers given meanwhile.
type FaultWindow struct {
	Name string `json:"name"`
	// From and To are seconds since the run started.
	From float64 `json:"from"`
	To   float64 `json:"to"`
	// Accepted are the reason codes a denial may carry in the window where
	// the fleet expects an allow (fail closed).
	Accepted   []string `json:"accepted"`
	Answered   int      `json:"answered"`
	Correct    int      `json:"correct"`
	FailClosed int      `json:"failClosed"`
	// Shed are the gate's overload denials (loadgen.Shed).
	Shed   int `json:"shed"`
	Wrong  int `json:"wrong"`
	Failed int `json:"failed"`
	// Recovered is how long after the restoring action the webhook gave the
	// decision that needs the fresh state.
	Recovered time.Duration `json:"recovered"`
	Detail    string        `json:"detail"`
}
