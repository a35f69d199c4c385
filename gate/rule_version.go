package gate

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// anchorRKE2 is the anchor CLI's RKE2 form. Typed values keep it: SUC's
// -rke2rN spelling and release candidates, which ParseRKE2 also reads, are
// refused as the anchor refuses them.
var anchorRKE2 = regexp.MustCompile(`^v?1\.[0-9]+\.[0-9]+\+rke2r[0-9]+$`)

// versionRule: every version the transition compares must parse: the
// node's current values, and the destination values the request writes
// (a record's own values are the record's problem: RecordInvalid).
func versionRule(t *Transition, f *findings) {
	if t.unjudgeable() {
		return
	}
	for i := range componentTable {
		s := &componentTable[i]
		cur := s.Value(t.Current)
		if strings.TrimSpace(cur) == "" {
			continue // the facts rule reports it
		}
		if err := versionProblem(t, s, cur); err != nil {
			f.add(versionInvalid(t.Node.Name, t.pathOf(t.CurrentPath, s.Name, t.Path), cur, err))
		}
		if t.After == nil {
			continue
		}
		if after := s.Value(*t.After); (t.Typed || after != cur) && strings.TrimSpace(after) != "" {
			if err := versionProblem(t, s, after); err != nil {
				f.add(versionInvalid("", t.pathOf(t.AfterPath, s.Name, t.Path), after, err))
			}
		}
	}
	if t.After == nil && t.RKE2Path != nil && t.RKE2Path != t.RecordPath && t.RKE2 != "" {
		if _, err := t.versions.ParseRKE2(t.RKE2); err != nil {
			f.add(versionInvalid("", t.RKE2Path, t.RKE2, err))
		}
	}
}

func versionProblem(t *Transition, s *ComponentSpec, v string) error {
	if t.Typed && s.Name == ComponentRKE2 && !anchorRKE2.MatchString(v) {
		return fmt.Errorf("rke2 version %q is not valid here: upgrade-check takes a release, v1.MINOR.PATCH+rke2rN (not the -rke2rN spelling, not a -rcN release candidate, which Plans may name)", qualification.Clip(v))
	}
	return s.Parse(t.versions, v)
}

// versionInvalid builds every VersionInvalid blocker: a version in the
// request or a node's fact that does not parse (the error names the value
// and the accepted form).
func versionInvalid(node string, path *field.Path, value string, err error) Blocker {
	msg := strings.TrimSuffix(err.Error(), ".")
	if node != "" {
		return invalid(CodeVersionInvalid, node, path, value, "node %s %s; fix what publishes it on the node", node, msg)
	}
	return invalid(CodeVersionInvalid, node, path, value, "%s; write it in that form", msg)
}
