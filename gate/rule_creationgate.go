package gate

import (
	"fmt"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// creationGateRule (review-level): a GPU mode transition (a person's mode
// label write, or nfd-master's mode step) and a GPU upgrade (a Plan or a
// Node write that moves GPU nodes, SUC's Job start on a GPU node, a driver
// change and its per-node step) start only while every configured creation
// gate reads its closed value. A gate that cannot be read counts as open.
func creationGateRule(rv review, f *findings, _ *Decision) {
	b := rv.base()
	if len(b.cfg.CreationGates) == 0 {
		return
	}
	var step string
	if r, ok := rv.(*NodeReview); ok {
		if len(r.modeDiff) == 0 {
			return // a Plan it pulls the node into is judged as that Plan
		}
		step = "a GPU mode transition of node " + r.req.Node.Name
	} else {
		if len(b.ts) == 0 {
			return // moves no GPU node
		}
		step = "a GPU upgrade starts"
		if b.act != "" {
			step += " (" + b.act + ")"
		}
	}
	for _, g := range b.cfg.CreationGates {
		if r := b.cl.creationGate(g); !r.Closed() {
			f.add(creationGateOpen(r, step))
		}
	}
}

// creationGateOpen builds every CreationGateOpen blocker.
func creationGateOpen(r GateReading, step string) Blocker {
	seen := fmt.Sprintf("reads %q", qualification.Clip(r.Value))
	if r.Err != nil {
		seen = "cannot be read (" + qualification.Clip(r.Err.Error()) + "), which counts as open"
	}
	return forbidden(CodeCreationGateOpen, "", nil, "creation gate %s (%s) %s, expected %q (closed) before %s: new GPU workloads could land meanwhile; close it first: %s",
		r.Gate.Name, r.Gate.Where(), seen, r.Gate.Closed, step, r.Gate.HowToClose())
}

// creationGate is g's reading in the cluster; one the source did not read
// counts as open.
func (cl *Cluster) creationGate(g CreationGate) GateReading {
	for _, r := range cl.CreationGates {
		if r.Gate == g {
			return r
		}
	}
	return GateReading{Gate: g, Err: fmt.Errorf("the gate's source did not read it")}
}
