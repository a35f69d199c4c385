package qualification

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}

// kubeDC is the anchor-format valid record.
func kubeDC(t *testing.T) string { return readTestdata(t, "valid-kubedc.yaml") }

// replace edits exactly one occurrence of old, so a test cannot silently test
// the unedited record.
func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Equal(t, 1, strings.Count(s, old), "test input must contain %q exactly once", old)
	return strings.Replace(s, old, new, 1)
}

// padTo pads a valid record with a comment to exactly n bytes.
func padTo(t *testing.T, s string, n int) string {
	t.Helper()
	pad := n - len(s) - len("#\n")
	require.GreaterOrEqual(t, pad, 0)
	out := s + "#" + strings.Repeat("x", pad) + "\n"
	require.Len(t, out, n)
	return out
}

func TestParseValidRecords(t *testing.T) {
	tests := []struct {
		file string
		want *Record
	}{
		{"valid-kubedc.yaml", &Record{
			APIVersion: APIVersionKubeDC, Kind: Kind, ID: "v100-kernel-canary-1", State: StateQualified,
			ApprovedBy: "platform-review", SourceRevision: "3F2A9C1D4B5E6F708192A3B4C5D6E7F801234567",
			Hardware: []string{"10de:1db6/10de:124a"},
			Target: Tuple{Kernel: "6.8.0-135-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.130.00",
				GPUOperator: "v26.3.4", DCGMExporter: "4.4.1-4.6.0-ubuntu22.04"},
			Canary: Canary{CompletedAt: "2026-07-14T12:00:00Z", AllocationPassed: true, MonitoringPassed: true,
				RollbackPassed: true, Evidence: "change-record-42"},
		}},
		{"valid-kubedc.json", &Record{
			APIVersion: APIVersionKubeDC, Kind: Kind, ID: "v100-kernel-canary-1", State: StateQualified,
			ApprovedBy: "platform-review", SourceRevision: "3f2a9c1d4b5e6f708192a3b4c5d6e7f801234567",
			Hardware: []string{"10de:1db6/10de:124a"},
			Target: Tuple{Kernel: "6.8.0-135-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.130.00",
				GPUOperator: "v26.3.4", DCGMExporter: "4.4.1-4.6.0-ubuntu22.04"},
			Canary: Canary{CompletedAt: "2026-07-14T12:00:00Z", AllocationPassed: true, MonitoringPassed: true,
				RollbackPassed: true, Evidence: "change-record-42"},
		}},
		{"valid-gate.yaml", &Record{
			APIVersion: APIVersionGate, Kind: Kind, ID: "h200-driver-canary-3", State: StateQualified,
			ApprovedBy:     "platform-review",
			SourceRevision: "9c56cc51b374c3ba189210d5b6d4bf57790d351c96c47c02190ecf1e430635ab",
			Hardware:       []string{"10de:2335/10de:18bf", "10DE:1DB6/10DE:124A"},
			Target: Tuple{Kernel: "6.8.0-135-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.130.00",
				GPUOperator: "v26.3.4", DCGMExporter: "4.4.1-4.6.0-ubuntu22.04"},
			Source: &Tuple{Kernel: "6.8.0-134-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.126.09",
				GPUOperator: "v26.3.4", DCGMExporter: "4.4.1-4.6.0-ubuntu22.04"},
			Canary: Canary{CompletedAt: "2026-07-14T14:00:00.5+02:00", AllocationPassed: true, MonitoringPassed: true,
				RollbackPassed: true, Evidence: "change-record-57"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rec, err := Parse([]byte(readTestdata(t, tt.file)))
			require.NoError(t, err)
			assert.Equal(t, tt.want, rec)
			assert.Empty(t, Check(rec, freshAt(testNow)))

			f, err := os.Open(filepath.Join("testdata", tt.file))
			require.NoError(t, err)
			defer f.Close()
			loaded, err := Load(f)
			require.NoError(t, err)
			assert.Equal(t, tt.want, loaded)
		})
	}
}

func TestParseRefusals(t *testing.T) {
	base := kubeDC(t)
	tests := []struct {
		name  string
		input string
		want  []string // every string must appear in the error
	}{
		// Size.
		{"one byte over the limit", padTo(t, base, MaxRecordBytes+1),
			[]string{"record is 65537 bytes; at most 65536 are allowed"}},
		{"far over the limit", strings.Repeat("#\n", MaxRecordBytes),
			[]string{"record is 131072 bytes; at most 65536 are allowed"}},

		// Documents.
		{"second document", base + "---\nid: other\n", []string{"more than one YAML document (a second one starts at line 22)"}},
		{"trailing bare ---", base + "---\n", []string{"more than one YAML document", `remove the extra "---"`}},
		{"trailing --- with a comment", base + "--- # next\n", []string{"more than one YAML document"}},
		{"document end then ---", base + "...\n---\n", []string{"more than one YAML document"}},
		{"second document not valid YAML", base + "---\nid: [\n", []string{"more than one YAML document", "not valid YAML"}},
		{"empty", "", []string{"record is empty", "apiVersion, kind, id"}},
		{"blank lines", "\n\n  \n", []string{"record is empty"}},
		{"comment only", "# nothing here\n# still nothing\n", []string{"record is empty"}},
		{"empty document", "---\n...\n", []string{"record is empty"}},
		{"null tilde", "~\n", []string{`record is null ("~")`}},
		{"null word", "null", []string{`record is null ("null")`}},
		{"not valid YAML", "id: [\n", []string{"record is not valid YAML"}},
		{"sequence at top level", "- id: x\n", []string{"line 1: record must be a YAML mapping", "got a sequence"}},
		{"scalar at top level", "qualified\n", []string{"record must be a YAML mapping", `got the scalar "qualified"`}},

		// Unknown fields.
		{"metadata", replace(t, base, "id: v100", "metadata:\n  name: x\nid: v100"),
			[]string{`line 4: unknown field "metadata"`, "flat document without metadata or spec", "known fields: apiVersion, kind, id, state, approvedBy, sourceRevision, hardware, target, canary"}},
		{"spec", replace(t, base, "id: v100", "spec: {}\nid: v100"),
			[]string{`unknown field "spec"`, "flat document"}},
		{"top-level typo", replace(t, base, "approvedBy:", "approvedby:"),
			[]string{`unknown field "approvedby"`, "known fields: apiVersion"}},
		{"target.cuda", replace(t, base, "  kernel: 6.8.0-135-generic\n", "  kernel: 6.8.0-135-generic\n  cuda: \"13.0\"\n"),
			[]string{`unknown field "target.cuda"`, "known fields of target: kernel, rke2, driver, gpuOperator, dcgmExporter, draDriver"}},
		{"target.draDriver in a kube-dc record", replace(t, base, "  kernel: 6.8.0-135-generic\n", "  kernel: 6.8.0-135-generic\n  draDriver: v25.8.1\n"),
			[]string{"target.draDriver: field is not allowed in kube-dc.io/v1alpha1 records; use apiVersion gpu-upgrade-gate.io/v1alpha1 to name the DRA driver version"}},
		{"canary.xid", replace(t, base, "  evidence:", "  xid: 79\n  evidence:"),
			[]string{`unknown field "canary.xid"`, "known fields of canary: completedAt, allocationPassed, monitoringPassed, rollbackPassed, evidence"}},
		{"source in a kube-dc record", replace(t, base, "canary:\n", "source:\n  kernel: 6.8.0-134-generic\ncanary:\n"),
			[]string{"line 17: source: field is not allowed in kube-dc.io/v1alpha1 records", "gpu-upgrade-gate.io/v1alpha1"}},
		{"null source in a kube-dc record", replace(t, base, "canary:\n", "source: ~\ncanary:\n"),
			[]string{"source: field is not allowed in kube-dc.io/v1alpha1 records"}},
		{"source before apiVersion in a kube-dc record", "source: {}\n" + base,
			[]string{"line 1: source: field is not allowed"}},
		{"non-scalar key", replace(t, base, "state: qualified\n", "? [state]\n: qualified\n"),
			[]string{"record: a key must be a plain string, got a sequence"}},

		// Duplicate keys.
		{"duplicate id", readTestdata(t, "invalid-duplicate-key.yaml"),
			[]string{`line 4: duplicate key "id" at line 4; first at line 3`}},
		{"duplicate nested key", replace(t, base, "  rke2: v1.36.1+rke2r1\n", "  rke2: v1.36.1+rke2r1\n  rke2: v1.35.0+rke2r1\n"),
			[]string{`line 13: duplicate key "target.rke2" at line 13; first at line 12`}},
		{"duplicate quoted and plain key", `{"id": "a", id: "b"}`, []string{`duplicate key "id"`}},

		// Booleans.
		{"yes", replace(t, base, "allocationPassed: true", "allocationPassed: yes"),
			[]string{`canary.allocationPassed: "yes" is not a boolean; write true or false`, "line 18", "YAML 1.1"}},
		{"no", replace(t, base, "monitoringPassed: true", "monitoringPassed: no"),
			[]string{`canary.monitoringPassed: "no" is not a boolean; write true or false`}},
		{"on", replace(t, base, "rollbackPassed: true", "rollbackPassed: on"),
			[]string{`canary.rollbackPassed: "on" is not a boolean`}},
		{"off", replace(t, base, "rollbackPassed: true", "rollbackPassed: off"),
			[]string{`canary.rollbackPassed: "off" is not a boolean`}},
		{"y", replace(t, base, "rollbackPassed: true", "rollbackPassed: y"),
			[]string{`canary.rollbackPassed: "y" is not a boolean`}},
		{"n", replace(t, base, "rollbackPassed: true", "rollbackPassed: n"),
			[]string{`canary.rollbackPassed: "n" is not a boolean`}},
		{"quoted true", replace(t, base, "allocationPassed: true", `allocationPassed: "true"`),
			[]string{`canary.allocationPassed: "true" is not a boolean; write true or false`, "quotes make it a string"}},
		{"single-quoted false", replace(t, base, "allocationPassed: true", `allocationPassed: 'false'`),
			[]string{`canary.allocationPassed: "false" is not a boolean`, "quotes"}},
		{"integer 1", replace(t, base, "allocationPassed: true", "allocationPassed: 1"),
			[]string{`canary.allocationPassed: "1" is not a boolean; write true or false`}},
		{"tagged true", replace(t, base, "allocationPassed: true", "allocationPassed: !!bool true"),
			[]string{`canary.allocationPassed: "true" is not a boolean`, "explicit tags"}},
		{"mapping as boolean", replace(t, base, "allocationPassed: true", "allocationPassed: {passed: true}"),
			[]string{"canary.allocationPassed: a mapping is not a boolean"}},

		// Strings, sequences and mappings.
		{"mapping as id", replace(t, base, "id: v100-kernel-canary-1", "id: {name: v100}"),
			[]string{"line 4: id: expected a string, got a mapping"}},
		{"sequence as target.kernel", replace(t, base, "kernel: 6.8.0-135-generic", "kernel: [6.8.0-135-generic]"),
			[]string{"target.kernel: expected a string, got a sequence"}},
		{"hardware scalar", replace(t, base, "hardware:\n  - 10de:1db6/10de:124a\n", "hardware: 10de:1db6/10de:124a\n"),
			[]string{"hardware: expected a sequence of strings", `got the scalar "10de:1db6/10de:124a"`}},
		{"hardware item mapping", replace(t, base, "  - 10de:1db6/10de:124a\n", "  - 10de:1db6/10de:124a\n  - {vendor: 10de}\n"),
			[]string{"hardware[1]: expected a string, got a mapping"}},
		{"target scalar", replace(t, base, "target:\n", "target: 6.8.0\nx:\n"),
			[]string{"target: expected a mapping with the fields kernel, rke2, driver, gpuOperator, dcgmExporter", `got the scalar "6.8.0"`}},
		{"canary sequence", "apiVersion: kube-dc.io/v1alpha1\ncanary: [true]\n",
			[]string{"canary: expected a mapping with the fields completedAt"}},
		{"binary tag", replace(t, base, "evidence: change-record-42", "evidence: !!binary aGk="),
			[]string{`canary.evidence: explicit tag "!!binary" is not allowed`}},
		{"custom tag", replace(t, base, "approvedBy: platform-review", "approvedBy: !person platform-review"),
			[]string{`approvedBy: explicit tag "!person" is not allowed`}},

		// Control characters (reachable only through escapes).
		{"NEL escape", replace(t, base, "evidence: change-record-42", `evidence: "change\x85record"`),
			[]string{"line 21: canary.evidence: contains the control character U+0085 at byte 6"}},
		{"NUL escape", replace(t, base, "approvedBy: platform-review", `approvedBy: "platform\0review"`),
			[]string{"approvedBy: contains the control character U+0000"}},
		{"carriage return escape", replace(t, base, "id: v100-kernel-canary-1", `id: "v100\r"`),
			[]string{"id: contains the control character U+000D"}},
		{"escape in hardware", replace(t, base, "  - 10de:1db6/10de:124a\n", "  - \"10de:1db6/10de:124a\\e\"\n"),
			[]string{"hardware[0]: contains the control character U+001B"}},

		{"custom tag on a mapping", replace(t, base, "target:\n", "target: !tuple\n"),
			[]string{`line 10: explicit tag "!tuple" is not allowed`}},
		{"custom tag on a sequence", replace(t, base, "hardware:\n", "hardware: !ids\n"),
			[]string{`explicit tag "!ids" is not allowed`}},

		// Anchors and aliases.
		{"anchor and alias", replace(t, base, "rke2: v1.36.1+rke2r1", "rke2: &r v1.36.1+rke2r1\n  driver2: *r"),
			[]string{"anchor &r is not allowed", "alias *r is not allowed"}},
		{"billion laughs", "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n",
			[]string{"anchor &a is not allowed", "alias *a is not allowed"}},

		// Several loader problems are reported together.
		{"several problems", replace(t, replace(t, base, "allocationPassed: true", "allocationPassed: yes"), "id: v100", "metadata: {}\nid: v100"),
			[]string{`unknown field "metadata"`, `canary.allocationPassed: "yes" is not a boolean`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Parse([]byte(tt.input))
			require.Error(t, err)
			assert.Nil(t, rec)
			var le *LoadError
			require.ErrorAs(t, err, &le)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	base := kubeDC(t)
	tests := []struct {
		name  string
		input string
		check func(t *testing.T, r *Record)
	}{
		{"exactly 65536 bytes", padTo(t, base, MaxRecordBytes), func(t *testing.T, r *Record) {
			assert.Equal(t, "v100-kernel-canary-1", r.ID)
		}},
		{"leading ---", "---\n" + base, nil},
		{"leading --- with a comment", "--- # record\n" + base, nil},
		{"trailing ...", base + "...\n", nil},
		{"leading --- and trailing ...", "---\n" + base + "...\n", nil},
		{"True TRUE False FALSE", replace(t, replace(t, replace(t, base,
			"allocationPassed: true", "allocationPassed: True"),
			"monitoringPassed: true", "monitoringPassed: TRUE"),
			"rollbackPassed: true", "rollbackPassed: FALSE"),
			func(t *testing.T, r *Record) {
				assert.True(t, r.Canary.AllocationPassed)
				assert.True(t, r.Canary.MonitoringPassed)
				assert.False(t, r.Canary.RollbackPassed)
			}},
		{"False", replace(t, base, "allocationPassed: true", "allocationPassed: False"), func(t *testing.T, r *Record) {
			assert.False(t, r.Canary.AllocationPassed)
		}},
		{"null boolean loads as false", replace(t, base, "allocationPassed: true", "allocationPassed:"), func(t *testing.T, r *Record) {
			assert.False(t, r.Canary.AllocationPassed)
		}},
		{"unquoted number keeps its text", replace(t, base, "driver: 580.130.00", "driver: 580.130"), func(t *testing.T, r *Record) {
			assert.Equal(t, "580.130", r.Target.Driver)
		}},
		{"unquoted float keeps trailing zero", replace(t, base, "driver: 580.130.00", "driver: 580.10"), func(t *testing.T, r *Record) {
			assert.Equal(t, "580.10", r.Target.Driver)
		}},
		{"unquoted integer and hex keep their text", replace(t, replace(t, base, "driver: 580.130.00", "driver: 0580"), "gpuOperator: v26.3.4", "gpuOperator: 0x1F"), func(t *testing.T, r *Record) {
			assert.Equal(t, "0580", r.Target.Driver)
			assert.Equal(t, "0x1F", r.Target.GPUOperator)
		}},
		{"unquoted timestamp keeps its text", replace(t, base, "completedAt: 2026-07-14T12:00:00Z", "completedAt: 2026-07-14T12:00:00.000+02:00"), func(t *testing.T, r *Record) {
			assert.Equal(t, "2026-07-14T12:00:00.000+02:00", r.Canary.CompletedAt)
		}},
		{"unquoted boolean word in a string keeps its text", replace(t, base, "approvedBy: platform-review", "approvedBy: yes"), func(t *testing.T, r *Record) {
			assert.Equal(t, "yes", r.ApprovedBy)
		}},
		{"explicit !!str", replace(t, base, "approvedBy: platform-review", "approvedBy: !!str 12"), func(t *testing.T, r *Record) {
			assert.Equal(t, "12", r.ApprovedBy)
		}},
		{"null id loads empty", replace(t, base, "id: v100-kernel-canary-1", "id:"), func(t *testing.T, r *Record) {
			assert.Equal(t, "", r.ID)
			assert.Equal(t, "id", Check(r, freshAt(testNow)).ErrorList()[0].Field)
		}},
		{"tilde id loads empty", replace(t, base, "id: v100-kernel-canary-1", "id: ~"), func(t *testing.T, r *Record) {
			assert.Equal(t, "", r.ID)
		}},
		{"null hardware, target and canary", "apiVersion: kube-dc.io/v1alpha1\nhardware:\ntarget: ~\ncanary: null\n", func(t *testing.T, r *Record) {
			assert.Nil(t, r.Hardware)
			assert.Equal(t, Tuple{}, r.Target)
			assert.Equal(t, Canary{}, r.Canary)
		}},
		{"flow style", `{apiVersion: gpu-upgrade-gate.io/v1alpha1, hardware: [10de:1db6/10de:124a], source: null}`, func(t *testing.T, r *Record) {
			assert.Equal(t, []string{"10de:1db6/10de:124a"}, r.Hardware)
			assert.Nil(t, r.Source)
		}},
		{"the DRA driver named in a gate record", "apiVersion: gpu-upgrade-gate.io/v1alpha1\ntarget: {kernel: k, draDriver: v25.8.1}\nsource: {kernel: j}\n", func(t *testing.T, r *Record) {
			assert.Equal(t, Tuple{Kernel: "k", DRADriver: "v25.8.1"}, r.Target)
			assert.Equal(t, &Tuple{Kernel: "j"}, r.Source, "a tuple may leave the DRA driver out")
		}},
		{"empty source mapping in a gate record", "apiVersion: gpu-upgrade-gate.io/v1alpha1\nsource: {}\n", func(t *testing.T, r *Record) {
			assert.Equal(t, &Tuple{}, r.Source)
		}},
		{"tab and newlines in a string", replace(t, base, "evidence: change-record-42", "evidence: |\n    change record 42\n    \tsigned off\n"), func(t *testing.T, r *Record) {
			assert.Equal(t, "change record 42\n\tsigned off\n", r.Canary.Evidence)
		}},
		{"standard tags on collections", replace(t, replace(t, base, "target:\n", "target: !!map\n"), "hardware:\n", "hardware: !!seq\n"), func(t *testing.T, r *Record) {
			assert.Equal(t, "v1.36.1+rke2r1", r.Target.RKE2)
			assert.Len(t, r.Hardware, 1)
		}},
		{"CRLF line endings", strings.ReplaceAll(base, "\n", "\r\n"), func(t *testing.T, r *Record) {
			assert.Equal(t, "change-record-42", r.Canary.Evidence)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Parse([]byte(tt.input))
			require.NoError(t, err)
			require.NotNil(t, rec)
			if tt.check != nil {
				tt.check(t, rec)
			}
		})
	}
}

// countingReader serves an endless record and counts the bytes read from it.
type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	c.n += len(p)
	return len(p), nil
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestLoad(t *testing.T) {
	base := kubeDC(t)
	t.Run("exactly the limit", func(t *testing.T) {
		rec, err := Load(strings.NewReader(padTo(t, base, MaxRecordBytes)))
		require.NoError(t, err)
		assert.Equal(t, "v100-kernel-canary-1", rec.ID)
	})
	t.Run("one byte over the limit", func(t *testing.T) {
		_, err := Load(strings.NewReader(padTo(t, base, MaxRecordBytes+1)))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "record is more than 65536 bytes; at most 65536 are allowed")
	})
	t.Run("reads at most the limit plus one byte", func(t *testing.T) {
		r := &countingReader{}
		_, err := Load(io.LimitReader(r, 10*MaxRecordBytes))
		require.Error(t, err)
		assert.LessOrEqual(t, r.n, MaxRecordBytes+1)
	})
	t.Run("read error", func(t *testing.T) {
		_, err := Load(failingReader{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "read record: disk on fire")
	})
	t.Run("strict like Parse", func(t *testing.T) {
		_, err := Load(strings.NewReader(base + "---\n"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "more than one YAML document")
	})
}

func TestTestdataInvalidFilesDoNotLoad(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"invalid-yes-boolean.yaml", []string{`canary.allocationPassed: "yes" is not a boolean`, `canary.monitoringPassed: "true" is not a boolean`}},
		{"invalid-unknown-field.yaml", []string{`unknown field "metadata"`, `unknown field "target.cuda"`}},
		{"invalid-two-documents.yaml", []string{"more than one YAML document (a second one starts at line 21)"}},
		{"invalid-duplicate-key.yaml", []string{`duplicate key "id" at line 4; first at line 3`}},
		{"invalid-source-in-kubedc.yaml", []string{"source: field is not allowed in kube-dc.io/v1alpha1 records"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := Parse([]byte(readTestdata(t, tt.file)))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestFromConfigMap(t *testing.T) {
	base := kubeDC(t)
	meta := metav1.ObjectMeta{Name: "v100-kernel", Namespace: "gpu-upgrade-gate", Labels: map[string]string{ConfigMapLabel: "true"}}
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		wantErr []string
	}{
		{"ok", &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{ConfigMapKey: base}}, nil},
		{"missing key", &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"record.yaml": base}},
			[]string{"ConfigMap gpu-upgrade-gate/v100-kernel", `no data key "qualification.yaml"`}},
		{"no data at all", &corev1.ConfigMap{ObjectMeta: meta},
			[]string{"ConfigMap gpu-upgrade-gate/v100-kernel", `no data key "qualification.yaml"`}},
		{"binaryData", &corev1.ConfigMap{ObjectMeta: meta, BinaryData: map[string][]byte{ConfigMapKey: []byte(base)}},
			[]string{"ConfigMap gpu-upgrade-gate/v100-kernel", "binaryData", "data.qualification.yaml"}},
		{"binaryData beside data", &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{ConfigMapKey: base}, BinaryData: map[string][]byte{ConfigMapKey: []byte(base)}},
			[]string{"binaryData"}},
		{"record does not load", &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{ConfigMapKey: base + "---\n"}},
			[]string{"ConfigMap gpu-upgrade-gate/v100-kernel data.qualification.yaml: record holds more than one YAML document"}},
		{"nil", nil, []string{"no ConfigMap"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := FromConfigMap(tt.cm)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, "v100-kernel-canary-1", rec.ID)
				return
			}
			require.Error(t, err)
			assert.Nil(t, rec)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("load error stays inspectable", func(t *testing.T) {
		_, err := FromConfigMap(&corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{ConfigMapKey: "~"}})
		var le *LoadError
		require.ErrorAs(t, err, &le)
		assert.Len(t, le.Problems, 1)
	})
}

func TestLoadErrorIsCapped(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		b.WriteString("unknown")
		b.WriteString(strings.Repeat("x", i))
		b.WriteString(": 1\n")
	}
	_, err := Parse([]byte(b.String()))
	var le *LoadError
	require.ErrorAs(t, err, &le)
	assert.Len(t, le.Problems, maxLoadProblems+1)
	assert.Equal(t, "and 80 more problems", le.Problems[maxLoadProblems])
}

func TestLongValuesAreClipped(t *testing.T) {
	long := strings.Repeat("k", 5000)
	_, err := Parse([]byte("canary: {allocationPassed: " + long + "}\n"))
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 800)
	assert.Contains(t, err.Error(), strings.Repeat("k", ClipLength)+"... (5000 bytes in all)")
}
