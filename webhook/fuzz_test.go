package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// FuzzAdmissionReview feeds raw AdmissionReview bytes through each handler
// over HTTP, as the API server sends them. The facts are not synced here, so
// every Plan and Node review that decodes must still be denied (fail
// closed), and record reviews run the whole record path. Nothing may panic
// or answer 5xx, and the same bytes always get the same answer.
func FuzzAdmissionReview(f *testing.F) {
	plan := `{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":"p","namespace":"system-upgrade"},"spec":{"concurrency":1,"version":"v1.36.1+rke2r1","upgrade":{"image":"rancher/rke2-upgrade"}}}`
	node := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"nvidia.com/gpu.present":"true"}}}`
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"r","namespace":"gpu-upgrade-gate","labels":{"gpu-upgrade-gate.io/qualification":"true"}},"data":{"qualification.yaml":"apiVersion: kube-dc.io/v1alpha1\nkind: GPUUpgradeQualification\nid: x\n"}}`
	job := `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"system-upgrade","labels":{"upgrade.cattle.io/plan":"p","upgrade.cattle.io/node":"n"}},"spec":{"parallelism":1}}`
	for _, s := range []struct{ group, kind, resource, op, obj string }{
		{"batch", "Job", "jobs", "CREATE", job},
		{"upgrade.cattle.io", "Plan", "plans", "CREATE", plan},
		{"", "Node", "nodes", "UPDATE", node},
		{"", "ConfigMap", "configmaps", "CREATE", cm},
		{"", "Node", "plans", "CREATE", plan},
		{"nvidia.com", "NVIDIADriver", "nvidiadrivers", "DELETE", `{"apiVersion":"nvidia.com/v1alpha1","kind":"NVIDIADriver","metadata":{"name":"d"},"spec":{"version":"580.130.00"}}`},
		{"", "Node", "nodes", "UPDATE", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"nvidia.com/gpu.present":"true","nvidia.com/gpu-driver-upgrade-state":"pod-restart-required"}}}`},
		{"apps", "Deployment", "deployments", "UPDATE", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"gpu-operator","namespace":"gpu-operator"},"spec":{"template":{"spec":{"containers":[{"name":"gpu-operator","image":"x:v1"}]}}}}`},
	} {
		f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"` + s.group + `","version":"v1","kind":"` + s.kind +
			`"},"resource":{"group":"` + s.group + `","version":"v1","resource":"` + s.resource + `"},"operation":"` + s.op + `","object":` + s.obj + `,"oldObject":` + s.obj + `}}`))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"request":null}`))

	// Live reads find nothing: a Job start can then only be denied.
	s := &Server{Config: gate.DefaultConfig(), Facts: &Facts{Config: gate.DefaultConfig(), Live: liveObjects{}}, Log: logr.Discard(),
		Now: func() time.Time { return time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) }}
	// Every served path, from the one list the server registers: facts never
	// sync here, so a Job start, a reload step, an operator upgrade or SUC's
	// completion write is refused; anything else is allowed without facts.
	// slow is controller-runtime's handler for every path: the one-pass
	// Node path (review.go) must answer every body exactly as it does.
	paths, slow := map[string]http.Handler{}, map[string]http.Handler{}
	for path, h := range s.handlers() {
		paths[path], slow[path] = h.serve(), &webhook.Admission{Handler: h}
	}
	serveWith := func(hs map[string]http.Handler, path string, body []byte) (int, []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		hs[path].ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes()
	}
	serve := func(path string, body []byte) (int, []byte) { return serveWith(paths, path, body) }
	for _, b := range nodeScanSeeds {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkNodeScan(t, body)
		for path := range paths {
			code, out := serve(path, body)
			if code >= 500 {
				t.Fatalf("%s answered %d: %s", path, code, out)
			}
			code2, out2 := serve(path, body)
			if code != code2 || !bytes.Equal(out, out2) {
				t.Fatalf("%s: same input, different answers:\n%s\n%s", path, out, out2)
			}
			if code3, out3 := serveWith(slow, path, body); code != code3 || !bytes.Equal(out, out3) {
				t.Fatalf("%s: answered %d %s, controller-runtime's handler %d %s", path, code, out, code3, out3)
			}
			var ar struct {
				Response *struct {
					Allowed bool `json:"allowed"`
				} `json:"response"`
			}
			if json.Unmarshal(out, &ar) == nil && ar.Response != nil && ar.Response.Allowed && path != PathRecords {
				// Only a review that the engine never needs facts for may be
				// allowed without them: a Node that is not a GPU node, a
				// Plan outside the SUC namespaces, a Job write that starts
				// no Job.
				var in struct {
					Request struct {
						Namespace string          `json:"namespace"`
						Operation string          `json:"operation"`
						Object    json.RawMessage `json:"object"`
						OldObject json.RawMessage `json:"oldObject"`
					} `json:"request"`
				}
				_ = json.Unmarshal(body, &in)
				var obj struct {
					Metadata struct {
						Namespace string `json:"namespace"`
					} `json:"metadata"`
				}
				_ = json.Unmarshal(in.Request.Object, &obj)
				if path == PathPlans && obj.Metadata.Namespace == "system-upgrade" {
					t.Fatalf("a Plan in a SUC namespace was allowed without facts: %s", out)
				}
				if path == PathJobs {
					var old *batchv1.Job
					job, err := decodeJob(in.Request.Object)
					if in.Request.Operation == "UPDATE" {
						old, _ = decodeJob(in.Request.OldObject)
					}
					if err == nil && (in.Request.Operation == "CREATE" || old != nil) && gate.JobStarts(old, job) {
						t.Fatalf("a Job start was allowed without facts: %s", out)
					}
				}
			}
		}
	})
}
