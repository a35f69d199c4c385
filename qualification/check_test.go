package qualification

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// testNow is six days after the sample records' canary (2026-07-14T12:00:00Z).
var testNow = time.Date(2026, 7, 20, 12, 0, 0, 0, time.UTC)

func freshAt(now time.Time) Freshness {
	return Freshness{Now: now, MaxAge: DefaultMaxAge, ClockSkew: DefaultClockSkew}
}

func validRecord() *Record {
	return &Record{
		APIVersion:     APIVersionGate,
		Kind:           Kind,
		ID:             "v100-kernel-canary-1",
		State:          StateQualified,
		ApprovedBy:     "platform-review",
		SourceRevision: "3f2a9c1d4b5e6f708192a3b4c5d6e7f801234567",
		Hardware:       []string{"10de:1db6/10de:124a"},
		Target: Tuple{Kernel: "6.8.0-135-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.130.00",
			GPUOperator: "v26.3.4", DCGMExporter: "4.4.1-4.6.0-ubuntu22.04"},
		Source: &Tuple{Kernel: "6.8.0-134-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.130.00",
			GPUOperator: "v26.3.4", DCGMExporter: "4.4.1-4.6.0-ubuntu22.04"},
		Canary: Canary{CompletedAt: "2026-07-14T12:00:00Z", AllocationPassed: true, MonitoringPassed: true,
			RollbackPassed: true, Evidence: "change-record-42"},
	}
}

// found is one problem as the tests compare it.
type found struct {
	Kind  ProblemKind
	Field string
	Type  field.ErrorType
}

func summarize(p Problems) []found {
	var out []found
	for _, pr := range p {
		out = append(out, found{pr.Kind, pr.Err.Field, pr.Err.Type})
	}
	return out
}

func TestCheckValidRecord(t *testing.T) {
	for _, apiVersion := range []string{APIVersionKubeDC, APIVersionGate} {
		t.Run(apiVersion, func(t *testing.T) {
			r := validRecord()
			r.APIVersion = apiVersion
			if apiVersion == APIVersionKubeDC {
				r.Source = nil
			}
			assert.Empty(t, Check(r, freshAt(testNow)))
		})
	}
	t.Run("SHA-256 revision and upper-case hex", func(t *testing.T) {
		r := validRecord()
		r.SourceRevision = strings.Repeat("AbC0", 16)
		assert.Empty(t, Check(r, freshAt(testNow)))
	})
	t.Run("63-character id", func(t *testing.T) {
		r := validRecord()
		r.ID = strings.Repeat("a", 63)
		assert.Empty(t, Check(r, freshAt(testNow)))
	})
	t.Run("hardware is compared trimmed and lower-cased", func(t *testing.T) {
		r := validRecord()
		r.Hardware = []string{" 10DE:1DB6/10DE:124A ", "10de:2335/10de:18bf"}
		assert.Empty(t, Check(r, freshAt(testNow)))
	})
	t.Run("completedAt with fraction and offset", func(t *testing.T) {
		r := validRecord()
		r.Canary.CompletedAt = "2026-07-14T14:00:00.123+02:00"
		assert.Empty(t, Check(r, freshAt(testNow)))
	})
}

func TestCheckRules(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(r *Record)
		want   []found
		detail string // must appear in the first problem's message
	}{
		{"apiVersion unknown", func(r *Record) { r.APIVersion = "kube-dc.io/v1" },
			[]found{{ProblemInvalid, "apiVersion", field.ErrorTypeNotSupported}}, `"kube-dc.io/v1"`},
		{"apiVersion missing", func(r *Record) { r.APIVersion = "" },
			[]found{{ProblemInvalid, "apiVersion", field.ErrorTypeRequired}}, APIVersionGate},
		{"kind wrong", func(r *Record) { r.Kind = "GPUUpgradeQualifications" },
			[]found{{ProblemInvalid, "kind", field.ErrorTypeNotSupported}}, `supported values: "GPUUpgradeQualification"`},
		{"kind missing", func(r *Record) { r.Kind = "" },
			[]found{{ProblemInvalid, "kind", field.ErrorTypeRequired}}, Kind},
		{"id missing", func(r *Record) { r.ID = "  " },
			[]found{{ProblemInvalid, "id", field.ErrorTypeRequired}}, "id: Required value"},
		{"id upper case", func(r *Record) { r.ID = "V100" },
			[]found{{ProblemInvalid, "id", field.ErrorTypeInvalid}}, `"V100": expected lowercase letters`},
		{"id ends with a dash", func(r *Record) { r.ID = "v100-" },
			[]found{{ProblemInvalid, "id", field.ErrorTypeInvalid}}, `"v100-"`},
		{"id underscore", func(r *Record) { r.ID = "v100_canary" },
			[]found{{ProblemInvalid, "id", field.ErrorTypeInvalid}}, "v100_canary"},
		{"id 64 characters", func(r *Record) { r.ID = strings.Repeat("a", 64) },
			[]found{{ProblemInvalid, "id", field.ErrorTypeTooLong}}, "may not be more than 63 bytes (it is 64)"},
		{"id too long and malformed", func(r *Record) { r.ID = strings.Repeat("A", 64) },
			[]found{{ProblemInvalid, "id", field.ErrorTypeTooLong}, {ProblemInvalid, "id", field.ErrorTypeInvalid}}, "63"},
		{"state draft", func(r *Record) { r.State = "draft" },
			[]found{{ProblemNotQualified, "state", field.ErrorTypeNotSupported}}, `"draft": supported values: "qualified"`},
		{"state case-sensitive", func(r *Record) { r.State = "Qualified" },
			[]found{{ProblemNotQualified, "state", field.ErrorTypeNotSupported}}, `"Qualified"`},
		{"state missing", func(r *Record) { r.State = "" },
			[]found{{ProblemNotQualified, "state", field.ErrorTypeRequired}}, "qualified"},
		{"approvedBy blank", func(r *Record) { r.ApprovedBy = " \t" },
			[]found{{ProblemInvalid, "approvedBy", field.ErrorTypeRequired}}, "approvedBy: Required value"},
		{"sourceRevision missing", func(r *Record) { r.SourceRevision = "" },
			[]found{{ProblemInvalid, "sourceRevision", field.ErrorTypeRequired}}, "40 (SHA-1) or 64 (SHA-256)"},
		{"sourceRevision short", func(r *Record) { r.SourceRevision = "3f2a9c1" },
			[]found{{ProblemInvalid, "sourceRevision", field.ErrorTypeInvalid}}, `"3f2a9c1": expected the full Git commit`},
		{"sourceRevision 41 digits", func(r *Record) { r.SourceRevision = strings.Repeat("a", 41) },
			[]found{{ProblemInvalid, "sourceRevision", field.ErrorTypeInvalid}}, "got 41 characters"},
		{"sourceRevision not hex", func(r *Record) { r.SourceRevision = strings.Repeat("g", 40) },
			[]found{{ProblemInvalid, "sourceRevision", field.ErrorTypeInvalid}}, "hex digits"},
		{"hardware missing", func(r *Record) { r.Hardware = nil },
			[]found{{ProblemInvalid, "hardware", field.ErrorTypeRequired}}, "at least one GPU identity"},
		{"hardware empty", func(r *Record) { r.Hardware = []string{} },
			[]found{{ProblemInvalid, "hardware", field.ErrorTypeRequired}}, "at least one"},
		{"hardware without subsystem IDs", func(r *Record) { r.Hardware = []string{"10de:1db6/10de:124a", "10de:1db6"} },
			[]found{{ProblemInvalid, "hardware[1]", field.ErrorTypeInvalid}},
			`"10de:1db6": this is only vendor:device; add the subsystem IDs: expected vendor:device/subvendor:subdevice, e.g. 10de:1db6/10de:124a; a vendor:device without subsystem IDs is not enough`},
		{"hardware 0x prefix", func(r *Record) { r.Hardware = []string{"0x10de:0x1db6"} },
			[]found{{ProblemInvalid, "hardware[0]", field.ErrorTypeInvalid}}, "expected vendor:device/subvendor:subdevice, e.g. 10de:1db6/10de:124a"},
		{"hardware blank entry", func(r *Record) { r.Hardware = []string{"10de:1db6/10de:124a", " "} },
			[]found{{ProblemInvalid, "hardware[1]", field.ErrorTypeRequired}}, "vendor:device/subvendor:subdevice"},
		{"hardware duplicate after normalisation", func(r *Record) {
			r.Hardware = []string{"10de:1db6/10de:124a", "10de:2335/10de:18bf", " 10DE:1DB6/10de:124A"}
		}, []found{{ProblemInvalid, "hardware[2]", field.ErrorTypeDuplicate}}, "same GPU identity as hardware[0]"},
		{"target.kernel blank", func(r *Record) { r.Target.Kernel = " " },
			[]found{{ProblemInvalid, "target.kernel", field.ErrorTypeRequired}}, "tuple after the upgrade"},
		{"target all blank", func(r *Record) { r.Target = Tuple{}; r.Source = nil }, []found{
			{ProblemInvalid, "target.kernel", field.ErrorTypeRequired},
			{ProblemInvalid, "target.rke2", field.ErrorTypeRequired},
			{ProblemInvalid, "target.driver", field.ErrorTypeRequired},
			{ProblemInvalid, "target.gpuOperator", field.ErrorTypeRequired},
			{ProblemInvalid, "target.dcgmExporter", field.ErrorTypeRequired},
		}, "target.kernel"},
		{"target version syntax is not checked here", func(r *Record) { r.Target.RKE2 = "not-a-version"; r.Source.RKE2 = "also-not" }, nil, ""},
		{"source.dcgmExporter blank", func(r *Record) { r.Source.DCGMExporter = "" },
			[]found{{ProblemInvalid, "source.dcgmExporter", field.ErrorTypeRequired}}, "the tuple the canary started from"},
		{"source equals target", func(r *Record) { s := r.Target; r.Source = &s },
			[]found{{ProblemInvalid, "source", field.ErrorTypeInvalid}}, "source equals target; a record must change at least one"},
		{"source equals target after trimming", func(r *Record) { s := r.Target; s.Kernel = " " + s.Kernel; r.Source = &s },
			[]found{{ProblemInvalid, "source", field.ErrorTypeInvalid}}, "source equals target"},
		{"source in a kube-dc record", func(r *Record) { r.APIVersion = APIVersionKubeDC },
			[]found{{ProblemInvalid, "source", field.ErrorTypeForbidden}}, "only gpu-upgrade-gate.io/v1alpha1 records have a source tuple"},
		{"completedAt missing", func(r *Record) { r.Canary.CompletedAt = "" },
			[]found{{ProblemInvalid, "canary.completedAt", field.ErrorTypeRequired}}, "RFC 3339"},
		{"completedAt lowercase t and z", func(r *Record) { r.Canary.CompletedAt = "2026-07-14t12:00:00z" },
			[]found{{ProblemInvalid, "canary.completedAt", field.ErrorTypeInvalid}}, `"2026-07-14t12:00:00z": expected an RFC 3339 time`},
		{"completedAt lowercase z", func(r *Record) { r.Canary.CompletedAt = "2026-07-14T12:00:00z" },
			[]found{{ProblemInvalid, "canary.completedAt", field.ErrorTypeInvalid}}, "RFC 3339"},
		{"completedAt with a space", func(r *Record) { r.Canary.CompletedAt = "2026-07-14 12:00:00Z" },
			[]found{{ProblemInvalid, "canary.completedAt", field.ErrorTypeInvalid}}, "RFC 3339"},
		{"completedAt bare date", func(r *Record) { r.Canary.CompletedAt = "2026-07-14" },
			[]found{{ProblemInvalid, "canary.completedAt", field.ErrorTypeInvalid}}, "RFC 3339"},
		{"completedAt without zone", func(r *Record) { r.Canary.CompletedAt = "2026-07-14T12:00:00" },
			[]found{{ProblemInvalid, "canary.completedAt", field.ErrorTypeInvalid}}, "RFC 3339"},
		{"stale", func(r *Record) { r.Canary.CompletedAt = "2026-06-01T00:00:00Z" },
			[]found{{ProblemStale, "canary.completedAt", field.ErrorTypeInvalid}},
			"canary completed 2026-06-01T00:00:00Z, 1188h0m0s before now; at most 720h0m0s is allowed: run the canary again and renew the record"},
		{"future", func(r *Record) { r.Canary.CompletedAt = "2026-07-20T12:10:00Z" },
			[]found{{ProblemFuture, "canary.completedAt", field.ErrorTypeInvalid}},
			"canary completed 2026-07-20T12:10:00Z, 10m0s after now (2026-07-20T12:00:00Z); at most 5m0s of clock skew is allowed"},
		{"allocation failed", func(r *Record) { r.Canary.AllocationPassed = false },
			[]found{{ProblemCanaryIncomplete, "canary.allocationPassed", field.ErrorTypeInvalid}}, "canary.allocationPassed: Invalid value: false: expected true"},
		{"monitoring failed", func(r *Record) { r.Canary.MonitoringPassed = false },
			[]found{{ProblemCanaryIncomplete, "canary.monitoringPassed", field.ErrorTypeInvalid}}, "monitoring"},
		{"rollback failed", func(r *Record) { r.Canary.RollbackPassed = false },
			[]found{{ProblemCanaryIncomplete, "canary.rollbackPassed", field.ErrorTypeInvalid}}, "rollback"},
		{"evidence blank", func(r *Record) { r.Canary.Evidence = "\n" },
			[]found{{ProblemInvalid, "canary.evidence", field.ErrorTypeRequired}}, "change-record-42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRecord()
			tt.edit(r)
			p := Check(r, freshAt(testNow))
			assert.Equal(t, tt.want, summarize(p))
			if len(p) > 0 {
				assert.Contains(t, p[0].Err.Error(), tt.detail)
			}
		})
	}
}

func TestCheckReportsEveryProblem(t *testing.T) {
	r := &Record{
		APIVersion:     APIVersionGate,
		Kind:           "Qualification",
		ID:             "Bad_ID",
		State:          "pending",
		SourceRevision: "xyz",
		Hardware:       []string{"10de:1db6", "10de:1db6/10de:124a", "10DE:1DB6/10DE:124A"},
		Target:         Tuple{Kernel: "6.8.0-135-generic"},
		Source:         &Tuple{RKE2: "v1.36.1+rke2r1"},
		Canary:         Canary{CompletedAt: "2026-01-01T00:00:00Z", MonitoringPassed: true},
	}
	want := []found{
		{ProblemInvalid, "kind", field.ErrorTypeNotSupported},
		{ProblemInvalid, "id", field.ErrorTypeInvalid},
		{ProblemNotQualified, "state", field.ErrorTypeNotSupported},
		{ProblemInvalid, "approvedBy", field.ErrorTypeRequired},
		{ProblemInvalid, "sourceRevision", field.ErrorTypeInvalid},
		{ProblemInvalid, "hardware[0]", field.ErrorTypeInvalid},
		{ProblemInvalid, "hardware[2]", field.ErrorTypeDuplicate},
		{ProblemInvalid, "target.rke2", field.ErrorTypeRequired},
		{ProblemInvalid, "target.driver", field.ErrorTypeRequired},
		{ProblemInvalid, "target.gpuOperator", field.ErrorTypeRequired},
		{ProblemInvalid, "target.dcgmExporter", field.ErrorTypeRequired},
		{ProblemInvalid, "source.kernel", field.ErrorTypeRequired},
		{ProblemInvalid, "source.driver", field.ErrorTypeRequired},
		{ProblemInvalid, "source.gpuOperator", field.ErrorTypeRequired},
		{ProblemInvalid, "source.dcgmExporter", field.ErrorTypeRequired},
		{ProblemStale, "canary.completedAt", field.ErrorTypeInvalid},
		{ProblemInvalid, "canary.allocationPassed", field.ErrorTypeInvalid},
		{ProblemInvalid, "canary.rollbackPassed", field.ErrorTypeInvalid},
		{ProblemInvalid, "canary.evidence", field.ErrorTypeRequired},
	}
	// The canary booleans are CanaryIncomplete, not Invalid.
	want[16].Kind, want[17].Kind = ProblemCanaryIncomplete, ProblemCanaryIncomplete
	p := Check(r, freshAt(testNow))
	assert.Equal(t, want, summarize(p))

	assert.Len(t, p.ErrorList(), len(want))
	assert.Len(t, p.Of(ProblemInvalid), 15)
	assert.Equal(t, "state", p.Of(ProblemNotQualified)[0].Field)
	assert.Len(t, p.Of(ProblemCanaryIncomplete), 2)
	assert.Len(t, p.Of(ProblemStale), 1)
	assert.Empty(t, p.Of(ProblemFuture))
}

func TestCheckTestdata(t *testing.T) {
	t.Run("invalid-check-many.yaml", func(t *testing.T) {
		r, err := Parse([]byte(readTestdata(t, "invalid-check-many.yaml")))
		require.NoError(t, err)
		assert.Equal(t, []found{
			{ProblemInvalid, "id", field.ErrorTypeInvalid},
			{ProblemNotQualified, "state", field.ErrorTypeNotSupported},
			{ProblemInvalid, "approvedBy", field.ErrorTypeRequired},
			{ProblemInvalid, "sourceRevision", field.ErrorTypeInvalid},
			{ProblemInvalid, "hardware[0]", field.ErrorTypeInvalid},
			{ProblemInvalid, "hardware[2]", field.ErrorTypeDuplicate},
			{ProblemInvalid, "target.rke2", field.ErrorTypeRequired},
			{ProblemInvalid, "source.rke2", field.ErrorTypeRequired},
			{ProblemStale, "canary.completedAt", field.ErrorTypeInvalid},
			{ProblemCanaryIncomplete, "canary.allocationPassed", field.ErrorTypeInvalid},
			{ProblemCanaryIncomplete, "canary.rollbackPassed", field.ErrorTypeInvalid},
			{ProblemInvalid, "canary.evidence", field.ErrorTypeRequired},
		}, summarize(Check(r, freshAt(testNow))))
	})
	t.Run("invalid-stale.yaml", func(t *testing.T) {
		r, err := Parse([]byte(readTestdata(t, "invalid-stale.yaml")))
		require.NoError(t, err)
		p := Check(r, freshAt(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)))
		require.Len(t, p, 1)
		assert.Equal(t, ProblemStale, p[0].Kind)
		assert.Equal(t, `canary.completedAt: Invalid value: "2026-05-01T00:00:00Z": canary completed 2026-05-01T00:00:00Z, 744h0m0s before now; at most 720h0m0s is allowed: run the canary again and renew the record`,
			p[0].Err.Error())
	})
}

func TestCheckNil(t *testing.T) {
	p := Check(nil, freshAt(testNow))
	require.Len(t, p, 1)
	assert.Equal(t, ProblemInvalid, p[0].Kind)
}

func TestFreshnessBoundaries(t *testing.T) {
	completed := time.Date(2026, 7, 14, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		now   time.Time
		f     func(now time.Time) Freshness
		at    string // completedAt; default completed in UTC
		kinds []ProblemKind
	}{
		{"exactly maxAge passes", completed.Add(DefaultMaxAge), freshAt, "", nil},
		{"maxAge plus 1s is stale", completed.Add(DefaultMaxAge + time.Second), freshAt, "", []ProblemKind{ProblemStale}},
		{"maxAge plus 1ns is stale", completed.Add(DefaultMaxAge + 1), freshAt, "", []ProblemKind{ProblemStale}},
		{"exactly skew in the future passes", completed.Add(-DefaultClockSkew), freshAt, "", nil},
		{"skew plus 1s is future", completed.Add(-DefaultClockSkew - time.Second), freshAt, "", []ProblemKind{ProblemFuture}},
		{"same instant passes", completed, freshAt, "", nil},
		{"offsets compare in absolute time: exactly maxAge passes", completed.Add(DefaultMaxAge), freshAt, "2026-07-14T14:00:00+02:00", nil},
		{"offsets compare in absolute time: +1s is stale", completed.Add(DefaultMaxAge + time.Second), freshAt, "2026-07-14T07:00:00-05:00", []ProblemKind{ProblemStale}},
		{"offsets compare in absolute time: future", completed.Add(-DefaultClockSkew - time.Second), freshAt, "2026-07-14T14:00:00+02:00", []ProblemKind{ProblemFuture}},
		{"now in another zone", completed.Add(DefaultMaxAge).In(time.FixedZone("x", -7*3600)), freshAt, "", nil},
		{"custom maxAge exactly passes", completed.Add(48 * time.Hour), func(now time.Time) Freshness {
			return Freshness{Now: now, MaxAge: 48 * time.Hour, ClockSkew: 0}
		}, "", nil},
		{"custom maxAge plus 1s fails", completed.Add(48*time.Hour + time.Second), func(now time.Time) Freshness {
			return Freshness{Now: now, MaxAge: 48 * time.Hour, ClockSkew: 0}
		}, "", []ProblemKind{ProblemStale}},
		{"zero skew: 1s ahead is future", completed.Add(-time.Second), func(now time.Time) Freshness {
			return Freshness{Now: now, MaxAge: DefaultMaxAge, ClockSkew: 0}
		}, "", []ProblemKind{ProblemFuture}},
		{"year 1 is stale, not an overflow", completed, freshAt, "0001-01-01T00:00:00Z", []ProblemKind{ProblemStale}},
		{"year 9999 is future, not an overflow", completed, freshAt, "9999-12-31T23:59:59Z", []ProblemKind{ProblemFuture}},
		{"unparseable time skips freshness", completed.Add(10 * DefaultMaxAge), freshAt, "2026-07-14", []ProblemKind{ProblemInvalid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRecord()
			r.Canary.CompletedAt = completed.Format(time.RFC3339)
			if tt.at != "" {
				r.Canary.CompletedAt = tt.at
			}
			var kinds []ProblemKind
			for _, p := range Check(r, tt.f(tt.now)) {
				kinds = append(kinds, p.Kind)
			}
			assert.Equal(t, tt.kinds, kinds)
		})
	}
}

func TestValidateFreshness(t *testing.T) {
	base := field.NewPath("freshness")
	tests := []struct {
		name   string
		maxAge time.Duration
		skew   time.Duration
		want   []string // exact error strings
	}{
		{"defaults", DefaultMaxAge, DefaultClockSkew, nil},
		{"ceiling and max skew", MaxAgeCeiling, MaxClockSkew, nil},
		{"smallest values", time.Nanosecond, 0, nil},
		{"zero maxAge", 0, DefaultClockSkew, []string{
			`freshness.maxAge: Invalid value: "0s": the maximum canary age must be greater than 0 and at most 2160h0m0s (default 720h0m0s)`}},
		{"negative maxAge", -time.Hour, DefaultClockSkew, []string{
			`freshness.maxAge: Invalid value: "-1h0m0s": the maximum canary age must be greater than 0 and at most 2160h0m0s (default 720h0m0s)`}},
		{"maxAge above ceiling", 2161 * time.Hour, DefaultClockSkew, []string{
			`freshness.maxAge: Invalid value: "2161h0m0s": the maximum canary age must be greater than 0 and at most 2160h0m0s (default 720h0m0s)`}},
		{"negative skew", DefaultMaxAge, -time.Second, []string{
			`freshness.clockSkew: Invalid value: "-1s": the clock skew must be between 0s and 1h0m0s (default 5m0s)`}},
		{"skew above 1h", DefaultMaxAge, time.Hour + time.Second, []string{
			`freshness.clockSkew: Invalid value: "1h0m1s": the clock skew must be between 0s and 1h0m0s (default 5m0s)`}},
		{"both wrong", 0, 2 * time.Hour, []string{
			`freshness.maxAge: Invalid value: "0s": the maximum canary age must be greater than 0 and at most 2160h0m0s (default 720h0m0s)`,
			`freshness.clockSkew: Invalid value: "2h0m0s": the clock skew must be between 0s and 1h0m0s (default 5m0s)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range ValidateFreshness(tt.maxAge, tt.skew, base) {
				got = append(got, e.Error())
			}
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("nil path", func(t *testing.T) {
		errs := ValidateFreshness(0, -1, nil)
		require.Len(t, errs, 2)
		assert.Equal(t, "maxAge", errs[0].Field)
		assert.Equal(t, "clockSkew", errs[1].Field)
	})
}

func TestRecordHelpers(t *testing.T) {
	r := validRecord()
	r.SourceRevision = "3F2A9C1D4B5E6F708192A3B4C5D6E7F801234567"
	r.Hardware = []string{" 10DE:2335/10DE:18BF", "10de:1db6/10de:124a", "", "10de:2335/10de:18bf "}
	r.Canary.CompletedAt = "2026-07-14T14:00:00+02:00"

	assert.Equal(t, []string{"10de:1db6/10de:124a", "10de:2335/10de:18bf"}, r.NormalizedHardware())
	assert.Equal(t, "v100-kernel-canary-1@3f2a9c1d4b5e6f708192a3b4c5d6e7f801234567", r.Ref())

	at, err := r.CompletedAt()
	require.NoError(t, err)
	assert.True(t, at.Equal(time.Date(2026, 7, 14, 12, 0, 0, 0, time.UTC)))

	exp, err := r.Expiry(DefaultMaxAge)
	require.NoError(t, err)
	assert.True(t, exp.Equal(time.Date(2026, 8, 13, 12, 0, 0, 0, time.UTC)))

	r.Canary.CompletedAt = "2026-07-14"
	_, err = r.CompletedAt()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `canary.completedAt "2026-07-14" is not an RFC 3339 time`)
	_, err = r.Expiry(DefaultMaxAge)
	require.Error(t, err)

	assert.Empty(t, (&Record{}).NormalizedHardware())
}
