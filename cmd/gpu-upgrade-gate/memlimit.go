package main

import (
	"fmt"
	"runtime/debug"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// EnvMemoryLimit names the container's memory limit, as the chart gives it
// through the downward API (resourceFieldRef limits.memory: bytes).
const EnvMemoryLimit = "GUG_MEMORY_LIMIT"

// memoryLimitShare of the container's limit is the Go runtime's soft
// memory limit: the collector works harder as the heap nears it instead
// of letting it double (GOGC), and the rest is left for what the runtime
// does not count (the binary's pages, thread stacks) before the kernel's
// OOM kill.
const memoryLimitShare = 0.9

// setMemoryLimit gives the Go runtime its soft memory limit from the
// container's (EnvMemoryLimit, a quantity: "268435456" or "256Mi"). An
// explicit GOMEMLIMIT wins; no limit, or a container without one (the
// downward API then gives the node's allocatable memory, still a bound),
// leaves the runtime's default. It says what it set, or why not.
func setMemoryLimit(getenv func(string) string) (string, error) {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return "GOMEMLIMIT=" + v + " (set by the environment)", nil
	}
	v := getenv(EnvMemoryLimit)
	if v == "" {
		return "", nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() <= 0 {
		return "", fmt.Errorf("%s=%q: expected the container's memory limit in bytes (resourceFieldRef limits.memory), e.g. 268435456", EnvMemoryLimit, v)
	}
	limit := int64(float64(q.Value()) * memoryLimitShare)
	debug.SetMemoryLimit(limit)
	return fmt.Sprintf("Go memory limit %d MiB (%.0f%% of %s=%d MiB)", limit>>20, memoryLimitShare*100, EnvMemoryLimit, q.Value()>>20), nil
}

// gcPercent is serve's collector target when GOGC is not set: the heap may
// grow by half its live data between collections instead of doubling. The
// live heap is almost all the caches (the fleet's Nodes, ~6.5 KB each), which
// never become garbage; what a collection reclaims is the reviews' garbage,
// whose rate follows the reviews, not the fleet. At GOGC=100 the headroom the
// reviews may fill is the size of the whole fleet cache (~42 MB at 5,000
// nodes), so RSS idle grows with the fleet twice over; at 50 it is half of
// that, for collections twice as often under load (each marks the same live
// heap). docs/performance.md (the 5,000-node RSS target) measures both.
const gcPercent = 50

// setGCPercent sets gcPercent unless the environment sets GOGC (which the
// runtime has already applied). It says what it set.
func setGCPercent(getenv func(string) string) string {
	if v := getenv("GOGC"); v != "" {
		return "GOGC=" + v + " (set by the environment)"
	}
	debug.SetGCPercent(gcPercent)
	return "GOGC=" + strconv.Itoa(gcPercent) + " (serve's default; set GOGC to change it)"
}
