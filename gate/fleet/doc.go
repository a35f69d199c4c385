// Package fleet derives the state of the fleet from the objects the engine
// reads: the node index and the fleet facts the rollout, budget, proof and
// halt rules count on, and each node's proof. It judges nothing (package
// gate does) and imports no gate: what it needs of gate's configuration
// comes through Classifier, or is a section of it fleet owns and gate.Config
// holds (OutOfServiceConfig, ProofConfig).
//
// The move of the fleet derivations out of gate (issue 21 item 3) goes in
// dependency order, so that every step compiles with fleet below gate:
//
//  1. The vocabulary both need moves down first: the version parsers
//     (version.go, here since the move) and then the tuple's component table
//     and image references (gate/tuple.go, gate/image.go); gate keeps their
//     names as aliases (gate/fleetnames.go) until callers read them here.
//     The rules read the component table's methods (Value, Same, Compare,
//     Parse) directly, and TupleDiff, QuoteOrNone, Stamp and JobCompletion
//     (gate's one-line names of them went with proof.go).
//     The config sections the derivations read follow as fleet types that
//     gate.Config holds (outOfService and proof, here since their moves;
//     halts, budget next), or reach fleet through small interfaces as the
//     Classifier does.
//  2. The engine's input: gate.Cluster and the types of its parts become
//     fleet types. Done for the parts (record entries, workload versions,
//     proof facts and the DRA ones, the halt record and its halts, creation
//     gates and their readings, NodeMaintenances, etcd snapshots; gate
//     names them in fleetnames.go; precondition.Reading is its package's).
//     Left: Cluster itself, whose ten gate methods (nodeIndex, fleetView,
//     withNodes, plan, planSelector, creationGate, precondition, ...) must
//     first become gate functions or move with the derivations they serve.
//  3. The derivations, most self-contained first, each first as a git mv
//     with only the edits that make it compile (rename detection lets
//     concurrent edits of the old path merge), refactored in later commits:
//     node state (gate/nodestate.go), proof (gate/proof.go, proof_dra.go,
//     nodechecks.go), halt detection and the halt record (halt.go,
//     haltrecord.go), the budget and in-flight counts (now inside
//     rule_budget.go, rule_inflight.go, rule_rollout.go), windows. The rule
//     files keep the judgement and the message only.
//     Left: the halt record (gate/haltrecord.go: its parser and the halt
//     loop's KeepHalts), the budget's and in-flight counts, windows
//     (rule_window.go), and the rest of node state (below).
//     Node state: done for what the objects alone say (nodestate.go: the
//     states, NodeDown, the cordon holder, DownReasons, JobRan). Left in
//     gate/nodestate.go, which git therefore keeps as a modified file
//     rather than a rename: NodeStates (it reads gate's Config.Prove and
//     DetectHalts, halt detection's judgement, which stays in gate),
//     jobLive (jobFailed: rule_proof.go), halfApplied (nodesAt's kin; its
//     betweenTuples is fleet's), and the budget's out facts (addOutFacts,
//     outNodes), which move with the budget.
//     Halt detection: done for what the objects alone say (haltscope.go:
//     the forward Plans by hardware, the nodes each may halt on with their
//     Plan's Jobs and when their upgrade last moved, the stranded nodes;
//     JobCompletion, UpgradeStart, BetweenTuples). gate/halt.go is gone:
//     the judgement at the review's time (the recovery timeout, Ready, the
//     validators, the checks) and the messages are rule_halt.go's.
//     Proof: done (nodeproof.go, proof_dra.go, nodechecks.go, moved from
//     gate/proof.go, proof_dra.go, nodechecks.go). ProofConfig is the
//     config's proof section; its FactsOf and OwnValidators sort the Pods
//     a proof reads; a Prover (the section, the DRA drivers, the proof
//     facts, the view, and for proof.checks' baselines the vendors, records
//     and cluster-wide versions) proves nodes: a value a review builds on
//     its stack, no allocation per node. What depends on the clock (the
//     soak, a check or allocation Pod started after the node reached its
//     tuple) is worked out in Prove at the review's now, never kept in the
//     view. gate/prove.go keeps the names gate's rules, the loader and the
//     fleet generator call (Config.Prove, ProofFactsOf, OwnValidators,
//     ownValidatorsOn) and aliases of the proof's vocabulary; the rules
//     (rule_proof.go, the halt rule's notBack, inventory, the change
//     record) keep the judgement and the message.
//  4. One immutable View per set of loaded objects: built once per informer
//     event in the webhook (keyed, as the node index and the Plan selectors
//     are, on what it is built from) and once per snapshot in the CLI. It
//     holds what the objects alone say (per node: its SUC Jobs, whether it
//     is down and why, its destination, ...). What also depends on the
//     clock (a proof's soak, a halt's recovery timeout, a window) is worked
//     out from the view at the review's time, never stored in it: a view
//     outlives the instant it was built at. It is keyed on SUC's Jobs, the
//     halt record, the node index, the Plans and their selectors, the
//     records and the workload images (ViewInputs): the webhook builds it
//     from the assembled snapshots (Facts.Cluster, gate.FleetViewFor) and
//     the CLI's loader once it has read every part. It holds SUC's Jobs by
//     node, which are live (a node with a live SUC Job is upgrading),
//     answers who cordoned a node and why a node is down, and works out
//     halt detection's scope (HaltScope: the forward Plans, the nodes each
//     may halt on, the stranded nodes) lazily, per hardware, once per view;
//     gate's halt rule judges it at the review's time. A review that
//     judges the fleet with a node or its own Plan swapped in (withNodes,
//     withPlan) gets a view of its own that shares the Jobs' parts
//     (NextView) and works out only its own hardware's scope. The proof
//     facts' validator, unowned and allocation-check Pods key it too: it
//     holds them by node (PodsOn), which a proof read by a scan of every
//     list per node, and a proof reads when a node reached its tuple from
//     the node's SUC Jobs the view holds (UpgradeJobsByNode), not a scan of
//     every Job per node. Left: move in the nodes at a stored Plan's
//     destination (nodesAt) and the half-applied nodes (halfApplied), both
//     worked out per review today, and the cluster-wide versions a proof
//     with checks reads (gate's clusterVersions, per call).
//  5. No package-level caches. Done: the version parsers' memo (Versions)
//     is the view's (View.Versions): a review's transitions parse through
//     it, so the reviews of one set of objects share it and it goes with
//     them; callers without a view parse through a nil memo (every time).
package fleet
