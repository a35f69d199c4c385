package testenv

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// What the parts of a cluster that cannot run here (kubelets, nfd-master
// with GPU Feature Discovery, the pod of SUC's Job) write while a node is
// upgraded, each written by the test as that part, under its own identity,
// so the API server and the webhook configuration's match conditions treat
// it as they would treat the real writer.

// NFDMasterUser is nfd-master as NFD's chart runs it (exempt from the Node
// webhook by its namespace's group); GPU Feature Discovery's labels reach
// the Node through it too.
const NFDMasterUser = "system:serviceaccount:node-feature-discovery:nfd-node-feature-discovery"

func (e *Env) clientAs(user string, groups ...string) (client.Client, error) {
	return client.New(e.CP.ConfigFor(user, groups...), client.Options{Scheme: e.Scheme})
}

// KubeletClient acts as node's kubelet.
func (e *Env) KubeletClient(node string) (client.Client, error) {
	return e.clientAs("system:node:"+node, "system:nodes", "system:authenticated")
}

// CordonAsSUCJob makes the cordon that the init container of SUC's Job pod
// makes (`kubectl cordon <node>`, as the Plan's ServiceAccount: SUC's own
// here, as in SUC's upstream manifests): SUC's controller never cordons,
// the Job's pod does (v0.20.1 pkg/upgrade/job/job.go), and no kubelet runs
// that pod here.
func (e *Env) CordonAsSUCJob(ctx context.Context, node string) error {
	c, err := e.clientAs(SUCUser, "system:serviceaccounts", "system:serviceaccounts:"+SUCNamespace, "system:authenticated")
	if err != nil {
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	return c.Patch(ctx, n, client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`)))
}

// MoveNodeTo writes what the cluster reports once node runs t: its
// kubelet's node info (kernel, kubelet version) through nodes/status as that
// kubelet, then NFD's kernel label and GFD's driver label as nfd-master.
func (e *Env) MoveNodeTo(ctx context.Context, node string, t qualification.Tuple) error {
	kubelet, err := e.KubeletClient(node)
	if err != nil {
		return err
	}
	var n corev1.Node
	if err := kubelet.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return err
	}
	n.Status.NodeInfo.KernelVersion, n.Status.NodeInfo.KubeletVersion = t.Kernel, t.RKE2
	if err := kubelet.Status().Update(ctx, &n); err != nil {
		return fmt.Errorf("node %s: the kubelet's status write: %w", node, err)
	}
	// The rights come from Base's platform-admins binding, standing in for
	// NFD's chart's ClusterRole.
	nfd, err := e.clientAs(NFDMasterUser, "system:serviceaccounts", "system:serviceaccounts:node-feature-discovery", "platform-admins", "system:authenticated")
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{"feature.node.kubernetes.io/kernel-version.full":%q,"nvidia.com/cuda.driver-version.full":%q}}}`, t.Kernel, t.Driver)
	if err := nfd.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("node %s: nfd-master's label write: %w", node, err)
	}
	return nil
}

// ProveUpgradedNode writes the proof that arrives once an upgraded node is
// back (docs/proof.md), as the kubelet would write it: the GPU Operator's
// validator Pod on node Ready at `at`, and an allocation check that started
// at `at` and Succeeded.
func (e *Env) ProveUpgradedNode(ctx context.Context, node string, at time.Time) error {
	pods := ProofPods(node, at)
	pods[1].Status.StartTime = &metav1.Time{Time: at}
	return e.writePods(ctx, pods)
}

// writePods creates the Pods, then writes their status as the kubelet would.
func (e *Env) writePods(ctx context.Context, pods []*corev1.Pod) error {
	for _, p := range pods {
		status := p.Status
		if err := e.Admin.Create(ctx, p); err != nil {
			return fmt.Errorf("create Pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		p.Status = status
		if err := e.Admin.Status().Update(ctx, p); err != nil {
			return fmt.Errorf("write the status of Pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// WebhookLatency is what the API server measured around its calls of one
// webhook (apiserver_admission_webhook_admission_duration_seconds, every
// operation and outcome summed): how many calls and their total seconds.
// That is the time the webhook adds to each write it reviews, TLS and
// serialisation included.
type WebhookLatency struct {
	Calls   float64
	Seconds float64
}

// Mean is the mean time one call added.
func (l WebhookLatency) Mean() time.Duration {
	if l.Calls == 0 {
		return 0
	}
	return time.Duration(l.Seconds / l.Calls * float64(time.Second))
}

// Sub is the latency of the calls made since before.
func (l WebhookLatency) Sub(before WebhookLatency) WebhookLatency {
	return WebhookLatency{Calls: l.Calls - before.Calls, Seconds: l.Seconds - before.Seconds}
}

// WebhookLatencies reads the API server's /metrics: the latency of each
// validating webhook by its name (e.g. jobs.gpu-upgrade-gate.io).
func (e *Env) WebhookLatencies(ctx context.Context) (map[string]WebhookLatency, error) {
	cs, err := kubernetes.NewForConfig(e.CP.RESTConfig())
	if err != nil {
		return nil, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET the API server's /metrics: %w", err)
	}
	const metric = "apiserver_admission_webhook_admission_duration_seconds"
	out := map[string]WebhookLatency{}
	for _, line := range strings.Split(string(raw), "\n") {
		rest, ok := strings.CutPrefix(line, metric)
		if !ok {
			continue
		}
		suffix, rest, ok := strings.Cut(rest, "{")
		if !ok || (suffix != "_sum" && suffix != "_count") {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		m := webhookNameRE.FindStringSubmatch(labels)
		if !ok || m == nil || !strings.Contains(labels, `type="validating"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", metric, line, err)
		}
		l := out[m[1]]
		if suffix == "_sum" {
			l.Seconds += v
		} else {
			l.Calls += v
		}
		out[m[1]] = l
	}
	return out, nil
}

var webhookNameRE = regexp.MustCompile(`(?:^|,)name="([^"]+)"`)

// SUCReviews are SUC's writes of resource (nodes, jobs) that the webhook
// named reviewed, in the audit log's order: how SUC met the gate.
func (e *Env) SUCReviews(webhookName, resource string) ([]controlplane.AuditEvent, error) {
	events, err := e.CP.AuditEvents()
	if err != nil {
		return nil, err
	}
	var out []controlplane.AuditEvent
	for _, ev := range events {
		if _, reviewed := ev.Annotations[webhookName+"/decision"]; reviewed && ev.Stage == "ResponseComplete" && ev.ObjectRef != nil &&
			ev.ObjectRef.Resource == resource && ev.ObjectRef.Subresource == "" && ev.Username() == SUCUser {
			out = append(out, ev)
		}
	}
	return out, nil
}
