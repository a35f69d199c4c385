// Package gate is the decision engine: typed objects and facts in, a
// Decision out. It reads no cluster, clock, network or log; adapters
// (webhook, cmd) fill the inputs and render the answer.
//
// Contents:
//
//   - code.go: the reason codes, a stable interface.
//   - rules.go: the rule table, which is also the dispatcher. Each row names
//     its codes, the reviews that apply it and the function that applies it
//     (Judge over one transition, Apply over the review: review.go); every
//     review runs the table once, in its order (applyTable), which is the
//     order blockers are reported in. CodesOf says which codes a review can
//     emit. Each row documents its codes (Docs: codedoc.go, a one-line
//     meaning, an example message, what to do); the README's code table,
//     each webhook contract's code list and docs/codes.md are generated
//     from them (go test ./webhook -run TestCodeDocsAreGenerated -update),
//     and the table is tested against the reviews (TestRowsAppliedPerReview).
//   - rule_<name>.go: one rule (or a small family): where it applies and
//     the one function that builds each code's blocker, with the message
//     contract "[Code] what is wrong, with the values seen; what to do" and
//     the field path to blame.
//   - transition.go: Transition, node N moving from tuple A to tuple B under
//     record R: what every per-node rule judges.
//   - fleetnames.go: the tuple's component table (name, parser, comparison,
//     where the fact comes from, upgrade-check's flag), the version parsers
//     and image references, package fleet's (fleet/tuple.go, version.go,
//     image.go), under the names the rules call them by.
//   - The reviews, which build transitions and run the table:
//     plan.go (PreparePlan; PrepareNodeStep for one node's step of a Plan),
//     select.go (PendingNodes, PredictHash; SUC's node selection itself,
//     PlanSelector, is package fleet's), node.go (Node updates), driver.go
//     (the GPU Operator's driver path), record.go (record ConfigMaps,
//     validate-record),
//     upgradecheck.go (typed values), rule_planstatus.go (JudgePlanStatus:
//     who may change a Plan's status.applying).
//   - Package fleet (gate/fleet) derives fleet state and judges nothing: the
//     node index and its fleet facts (GPU nodes, cordoned, down, by host,
//     by hardware and tuple), SUC's selection, what one node's labels and
//     status say (IsGPUNode, FactsOf, NodeFacts). It imports no gate; the
//     Config is its Classifier. nodeindex.go here only ties the index to a
//     Cluster.
//   - facts.go (the Cluster the rules read), holders.go (GPU holders),
//     config.go (configuration, exemptions, break glass),
//     decision.go (Decision, Blocker, audit annotations), inventory.go.
//
// Every review is two steps so the engine stays pure: Prepare works out the
// nodes; the adapter lists the GPU holders of just those (HolderNodes);
// Decide answers with every violated rule at once. The holder row is the
// table's last, so an adapter can list them while every other row applies
// (PlanReview.DecideListing).
package gate
