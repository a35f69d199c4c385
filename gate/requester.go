package gate

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// SystemIdentity classes: a bounded set, so a metric labelled by it stays
// small whatever the cluster's identities are.
const (
	IdentityKubelet      = "kubelet"       // system:node:<name>, group system:nodes
	IdentitySUC          = "suc"           // a ServiceAccount of a SUC namespace
	IdentityExempt       = "exempt"        // a user or group a configured exemption names (GPU Operator, NFD)
	IdentityControlPlane = "control-plane" // kube-controller-manager, kube-scheduler, the API server, kube-system's ServiceAccounts
)

// controlPlaneUsers are the control plane's own identities.
var controlPlaneUsers = []string{"system:kube-controller-manager", "system:kube-scheduler", "system:apiserver", "system:kube-proxy"}

// SystemIdentity says which kind of system controller the requester is, ""
// for a person or any other client. System controllers must never wait on
// the gate except on the per-node steps it guards on purpose, so a denial of
// one elsewhere is an incident (the GPUUpgradeGateSystemDenied alert).
func (c *Config) SystemIdentity(u UserInfo) string {
	switch {
	case strings.HasPrefix(u.Name, "system:node:") || slices.Contains(u.Groups, "system:nodes"):
		return IdentityKubelet
	case isSUC(c, u):
		return IdentitySUC
	case slices.ContainsFunc(c.Exemptions, func(e Exemption) bool {
		return slices.Contains(e.Users, u.Name) || slices.ContainsFunc(u.Groups, func(g string) bool { return slices.Contains(e.Groups, g) })
	}):
		return IdentityExempt
	case slices.Contains(controlPlaneUsers, u.Name) || inKubeSystem(u.Name):
		return IdentityControlPlane
	}
	return ""
}

// inKubeSystem: the user is a ServiceAccount of kube-system, the control
// plane's controllers (split as the API server spells the name).
func inKubeSystem(user string) bool {
	ns, _, err := serviceaccount.SplitUsername(user)
	return err == nil && ns == metav1.NamespaceSystem
}
