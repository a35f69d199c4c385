package scale

import "time"

// Peers is `make bench-peers` (issue 28 goal 2, TestScalePeers): the same
// Plan create, round-robin through one kube-apiserver, to a plain
// namespace, to one a ValidatingAdmissionPolicy guards, to one a webhook
// that only allows (the hop's floor), to the gate (every rule it applies)
// and to Kyverno's and Gatekeeper's namespaces, each peer enforcing the
// gate's Plan-shape rules it can express (hack/tools/peers/policies).
type Peers struct {
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Fleet    FleetInfo `json:"fleet"`
	Plan     string    `json:"plan"`
	// Series are the writes of each round, in their first round's order.
	Series []string   `json:"series"`
	Runs   []PeersRun `json:"runs"`
	// Versions of the peers measured (peer: module version).
	Versions map[string]string `json:"versions"`
	// Absent are the peers not measured, and why.
	Absent map[string]string `json:"absent,omitempty"`
	// Rules: for each rule of the policies, whether each engine denied a
	// Plan breaking only it (dry run) and allowed the Plan that breaks none.
	Rules []PeerRule `json:"rules"`
	// Idle is each process's memory once its caches are synced and its
	// policy enforced, before the runs.
	Idle     []ProcessUse `json:"idle"`
	Failures []string     `json:"failures,omitempty"`
}

// PeersRun is one mode of the interleaved run.
type PeersRun struct {
	Name string `json:"name"`
	// Gap is the time between the starts of two writes (0: back to back).
	Gap        time.Duration    `json:"gap"`
	Rounds     int              `json:"rounds"`
	Series     map[string]Stats `json:"series"`
	LoadBefore string           `json:"loadBefore"`
	LoadAfter  string           `json:"loadAfter"`
	// Processes: each webhook process's CPU over the run and its memory
	// after it.
	Processes []ProcessUse `json:"processes"`
	// Webhooks: what the API server waited for each validating webhook it
	// called on the run's Plan creates, the mean of its
	// apiserver_admission_webhook_admission_duration_seconds (by webhook
	// name): the hop and the engine together, as the API server sees them.
	Webhooks map[string]time.Duration `json:"webhooks,omitempty"`
	// GateHandler and GatePhases are the gate's own handling of its
	// series' reviews, from its decision log (durationMs, phasesMs).
	GateHandler Stats            `json:"gateHandler"`
	GatePhases  map[string]Stats `json:"gatePhases,omitempty"`
}

// ProcessUse is one process's memory (bytes) and CPU time.
type ProcessUse struct {
	Name string `json:"name"`
	RSS  int64  `json:"rss"`
	HWM  int64  `json:"hwm"`
	// FileRSS is the part of RSS mapped from the binary (RssFile), idle only.
	FileRSS int64         `json:"fileRSS,omitempty"`
	CPU     time.Duration `json:"cpu,omitempty"`
}

// PeerRule is one rule and what each engine answered to a Plan breaking
// only it ("denied", "ALLOWED", or the error).
type PeerRule struct {
	Code    string            `json:"code"`
	Answers map[string]string `json:"answers"`
}
