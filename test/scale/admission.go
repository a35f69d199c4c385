package scale

import "time"

// Admission is the interleaved run of writes through the real API server
// (issue 14): the same write to a plain namespace, to one a
// ValidatingAdmissionPolicy guards, and to the gate, round-robin, in each
// mode (paced or back to back, idle or with Pod churn).
type Admission struct {
	Plan   string   `json:"plan"`
	Job    string   `json:"job"`
	Policy []string `json:"policy"` // the policy's CEL expressions
	// Series are the writes of each round, in their first round's order.
	Series []string        `json:"series"`
	Modes  []AdmissionMode `json:"modes"`
	// Reads compares the ways to list a node's GPU holders, read alone.
	Reads []HolderReadMode `json:"reads,omitempty"`
	// Freshness: a Pod created on the node, then listed at once.
	Freshness []HolderFreshness `json:"freshness,omitempty"`
	// Informers: a Pod informer per GPU node (spec.nodeName), the option of
	// keeping holders in the gate instead of listing them.
	Informers *NodeInformers `json:"informers,omitempty"`
	// Direct: the load generator sending the same Plan review straight to
	// the webhook (no API server in between), paced and back to back.
	Direct []DirectRun `json:"direct,omitempty"`
}

// AdmissionMode is one mode of the interleaved run.
type AdmissionMode struct {
	Name string `json:"name"`
	// Gap is the time between the starts of two writes (0: back to back).
	Gap   time.Duration `json:"gap"`
	Churn bool          `json:"churn"`
	// ChurnOps are the churn client's requests during the mode.
	ChurnOps   int              `json:"churnOps"`
	Series     map[string]Stats `json:"series"`
	LoadBefore string           `json:"loadBefore"`
	LoadAfter  string           `json:"loadAfter"`
	// GateHandler is the gate's own handling of the gate series' reviews
	// (durationMs in its decision log): decode, facts, holder read, engine.
	GateHandler Stats `json:"gateHandler"`
	// GatePhases and JobPhases split the gate's handling of the gate and
	// job-gate series' reviews by phase (phasesMs in its decision log:
	// admit, read, decode, facts, engine, holders, decide, respond).
	GatePhases map[string]Stats `json:"gatePhases,omitempty"`
	JobPhases  map[string]Stats `json:"jobPhases,omitempty"`
	// WebhookMean is the API server's mean time calling the Plan webhook
	// (apiserver_admission_webhook_admission_duration_seconds).
	WebhookMean time.Duration `json:"webhookMean"`
	// PodReadWaitMean is the mean apiserver_watch_cache_read_wait_seconds of
	// Pod reads in the mode (every client's, the churn's too).
	PodReadWaitMean time.Duration `json:"podReadWaitMean"`
	// Connections are the distinct TCP connections from the API server to
	// the webhook seen during the mode (1: kept alive).
	Connections int `json:"connections"`
	// GateGCs are the webhook process's garbage collections in the mode.
	GateGCs int `json:"gateGCs"`
}

// HolderReadMode is one way of listing a node's Pods, in one mode.
type HolderReadMode struct {
	Mode  string           `json:"mode"`
	Reads map[string]Stats `json:"reads"`
	Load  string           `json:"load"`
}

// HolderFreshness counts, per read, how often a Pod created a moment before
// was in the first listing.
type HolderFreshness struct {
	Read   string `json:"read"`
	Churn  bool   `json:"churn"`
	Trials int    `json:"trials"`
	Seen   int    `json:"seen"`
}

// NodeInformers is the cost of one Pod informer per GPU node.
type NodeInformers struct {
	Nodes     int           `json:"nodes"`
	SyncTime  time.Duration `json:"syncTime"`
	HeapBytes int64         `json:"heapBytes"`
	// Goroutines added by the informers.
	Goroutines int `json:"goroutines"`
	// Lag is from a Pod's create returning to its informer holding it.
	Lag  Stats  `json:"lag"`
	Load string `json:"load"`
}

// DirectRun is the load generator against the webhook alone.
type DirectRun struct {
	Name string        `json:"name"`
	Gap  time.Duration `json:"gap"`
	Stat Stats         `json:"stat"`
	Load string        `json:"load"`
}
