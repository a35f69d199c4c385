package scale

import "time"

// Growth is the growth curve (growth_test.go, issue 14 item 6): for each
// fleet size, the webhook's memory once synced and its Node and Plan review
// figures, so a team with a large fleet can size it. Written as
// growth.json.
type Growth struct {
	Started time.Time     `json:"started"`
	Machine Machine       `json:"machine"`
	Command string        `json:"command"`
	Points  []GrowthPoint `json:"points"`
	// Failures are the sizes that did not complete, with why.
	Failures []string `json:"failures,omitempty"`
}

// GrowthPoint is one fleet size.
type GrowthPoint struct {
	Fleet FleetInfo `json:"fleet"`
	// ProofPods are the validator and allocation-check Pods the webhook
	// caches (one validator per GPU node, as the GPU Operator runs).
	ProofPods int `json:"proofPods"`
	// SyncedRSS and SyncedHWM: bytes, after every review was answered as
	// expected and a few idle seconds.
	SyncedRSS int64 `json:"syncedRSS"`
	SyncedHWM int64 `json:"syncedHWM"`
	// SyncedFileRSS is the part of SyncedRSS mapped from the binary
	// (RssFile): the floor no cache change moves.
	SyncedFileRSS int64  `json:"syncedFileRSS,omitempty"`
	Load          string `json:"load"`
	// NodeFlat is Node relabel reviews flat out; Plan200 Plan reviews at
	// 200/s offered. AfterLoadRSS is the RSS after both.
	NodeFlat     LoadRun `json:"nodeFlat"`
	Plan200      LoadRun `json:"plan200"`
	AfterLoadRSS int64   `json:"afterLoadRSS"`
	AfterLoadHWM int64   `json:"afterLoadHWM"`
}
