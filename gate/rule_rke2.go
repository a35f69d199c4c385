package gate

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// rke2Rule: RKE2 is never downgraded and moves one Kubernetes minor at a
// time.
func rke2Rule(t *Transition, f *findings) {
	want := t.RKE2
	if t.After != nil {
		want = t.After.RKE2
	}
	if !t.factsOK || want == "" {
		return
	}
	target, err := t.versions.ParseRKE2(want)
	if err != nil {
		return // the version rule or the record rules report it
	}
	cur, err := t.versions.ParseRKE2(t.Current.RKE2)
	if err != nil {
		return
	}
	path := t.RKE2Path
	if t.Typed {
		path = t.AfterPath[ComponentRKE2]
	}
	if target.Compare(cur) < 0 {
		f.add(rke2Downgrade(t.Node.Name, path, t.Current.RKE2, want))
	}
	if target.Major == cur.Major && target.Minor > cur.Minor+1 {
		f.add(minorSkip(t.Node.Name, path, want, cur, target))
	}
}

// rke2Downgrade builds every RKE2Downgrade blocker.
func rke2Downgrade(node string, path *field.Path, have, want string) Blocker {
	if node != "" {
		return invalid(CodeRKE2Downgrade, node, path, want, "node %s runs RKE2 %s and would move to %s; RKE2 cannot be downgraded: restore from an etcd snapshot instead", node, have, want)
	}
	return invalid(CodeRKE2Downgrade, node, path, want, "the node runs RKE2 %s and would move to %s; RKE2 cannot be downgraded: restore from an etcd snapshot instead", have, want)
}

// minorSkip builds every MinorSkip blocker.
func minorSkip(node string, path *field.Path, want string, cur, target RKE2Version) Blocker {
	if node != "" {
		return invalid(CodeMinorSkip, node, path, want, "node %s runs Kubernetes 1.%d and %s is 1.%d; upgrade one minor at a time (next: 1.%d)", node, cur.Minor, want, target.Minor, cur.Minor+1)
	}
	return invalid(CodeMinorSkip, node, path, want, "the node runs Kubernetes 1.%d and %s is 1.%d; upgrade one minor at a time (next: 1.%d)", cur.Minor, want, target.Minor, cur.Minor+1)
}
