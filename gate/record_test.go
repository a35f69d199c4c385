package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

func TestDecideRecord(t *testing.T) {
	cases := []struct {
		name    string
		cm      func(t *testing.T) *corev1.ConfigMap
		now     time.Time
		want    []Code
		warning string
	}{
		{name: "valid record", cm: func(t *testing.T) *corev1.ConfigMap { return written(record()) }},
		{name: "RecordInvalid: no key", cm: func(t *testing.T) *corev1.ConfigMap {
			cm := written(record())
			cm.Data = map[string]string{"record.yaml": "x"}
			return cm
		}, want: []Code{CodeRecordInvalid}},
		{name: "RecordInvalid: yes is not a boolean", cm: func(t *testing.T) *corev1.ConfigMap {
			cm := written(record())
			cm.Data[qualification.ConfigMapKey] += "\n" // still valid
			cm.Data[qualification.ConfigMapKey] = replaceOnce(cm.Data[qualification.ConfigMapKey], "allocationPassed: true", "allocationPassed: yes")
			return cm
		}, want: []Code{CodeRecordInvalid}},
		{name: "RecordInvalid: version that does not parse", cm: func(t *testing.T) *corev1.ConfigMap {
			return written(record(func(r *qualification.Record) { r.Target.RKE2 = "1.36" }))
		}, want: []Code{CodeRecordInvalid}},
		{name: "RecordNotQualified", cm: func(t *testing.T) *corev1.ConfigMap {
			return written(record(func(r *qualification.Record) { r.State = "pending" }))
		}, want: []Code{CodeRecordNotQualified}},
		{name: "CanaryIncomplete", cm: func(t *testing.T) *corev1.ConfigMap {
			return written(record(func(r *qualification.Record) { r.Canary.RollbackPassed = false }))
		}, want: []Code{CodeCanaryIncomplete}},
		{name: "EvidenceFromFuture", cm: func(t *testing.T) *corev1.ConfigMap { return written(record()) },
			now: completedAt.Add(-time.Hour), want: []Code{CodeEvidenceFromFuture}},
		{name: "stale record only warns", cm: func(t *testing.T) *corev1.ConfigMap { return written(record()) },
			now: completedAt.Add(800 * time.Hour), warning: "is stale"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = testNow
			}
			d := DecideRecord(DefaultConfig(), RecordRequest{ConfigMap: tc.cm(t), User: UserInfo{Name: recordAuthor}, Now: now})
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			if tc.warning != "" {
				assert.Contains(t, d.Warnings[0], tc.warning)
			}
		})
	}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	panic("not found: " + old)
}

// TestRecordEditRevokes: an edit that leaves a record unable to qualify is
// allowed (it revokes the record, with a warning and an audit mark); the
// same content as a new record is refused.
func TestRecordEditRevokes(t *testing.T) {
	for name, cm := range map[string]func(t *testing.T) *corev1.ConfigMap{
		"withdrawn": func(t *testing.T) *corev1.ConfigMap {
			return written(record(func(r *qualification.Record) { r.State = "withdrawn" }))
		},
		"made invalid": func(t *testing.T) *corev1.ConfigMap {
			c := written(record())
			c.Data[qualification.ConfigMapKey] = "revoked: see INC-1234\n"
			return c
		},
	} {
		t.Run(name, func(t *testing.T) {
			create := DecideRecord(DefaultConfig(), RecordRequest{ConfigMap: cm(t), User: UserInfo{Name: recordAuthor}, Now: testNow})
			assert.False(t, create.Allowed, "a new record must be valid")
			d := DecideRecord(DefaultConfig(), RecordRequest{ConfigMap: cm(t), Old: written(record()), Update: true, User: UserInfo{Name: recordAuthor}, Now: testNow})
			assert.True(t, d.Allowed, d.Message())
			assert.NotEmpty(t, d.Codes(), "the codes say why it no longer qualifies")
			assert.Equal(t, "true", d.AuditAnnotations()[AuditRevoked])
			assert.Contains(t, d.Warnings[len(d.Warnings)-1], "this edit revokes record ConfigMap gpu-upgrade-gate/v100-r580")
		})
	}
	t.Run("a valid edit is not a revocation", func(t *testing.T) {
		d := DecideRecord(DefaultConfig(), RecordRequest{ConfigMap: written(record()), Old: written(record()), Update: true, User: UserInfo{Name: recordAuthor}, Now: testNow})
		assert.True(t, d.Allowed)
		assert.False(t, d.Revoked)
	})
}
