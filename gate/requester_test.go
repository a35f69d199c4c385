package gate

import "testing"

func TestSystemIdentity(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		name string
		user UserInfo
		want string
	}{
		{"a kubelet", UserInfo{Name: "system:node:gpu-1", Groups: []string{"system:nodes", "system:authenticated"}}, IdentityKubelet},
		{"SUC's ServiceAccount", UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts:system-upgrade"}}, IdentitySUC},
		{"a GPU Operator operand (exempt by group)", UserInfo{Name: "system:serviceaccount:gpu-operator:nvidia-driver", Groups: []string{"system:serviceaccounts:gpu-operator"}}, IdentityExempt},
		{"nfd-master (exempt by group)", UserInfo{Name: "system:serviceaccount:node-feature-discovery:nfd-master", Groups: []string{"system:serviceaccounts:node-feature-discovery"}}, IdentityExempt},
		{"the node lifecycle controller", UserInfo{Name: "system:serviceaccount:kube-system:node-controller"}, IdentityControlPlane},
		{"the scheduler", UserInfo{Name: "system:kube-scheduler"}, IdentityControlPlane},
		// The neighbours: people and other clients are not system identities,
		// whatever their names look like.
		{"a person", UserInfo{Name: "alice", Groups: []string{"system:authenticated"}}, ""},
		{"a person in system:masters", UserInfo{Name: "admin", Groups: []string{"system:masters"}}, ""},
		{"a GitOps ServiceAccount", UserInfo{Name: "system:serviceaccount:argocd:argocd-application-controller", Groups: []string{"system:serviceaccounts:argocd"}}, ""},
		{"a user named like SUC's group but not in it", UserInfo{Name: "system:serviceaccounts:system-upgrade"}, ""},
		{"a user named like a node without the prefix", UserInfo{Name: "node:gpu-1"}, ""},
		// Split as the API server spells a ServiceAccount's name: a
		// namespace that only starts with kube-system, or a name no
		// ServiceAccount can have, is not kube-system's.
		{"a ServiceAccount of kube-system-tools", UserInfo{Name: "system:serviceaccount:kube-system-tools:node-controller"}, ""},
		{"a name with kube-system's prefix and no valid ServiceAccount name", UserInfo{Name: "system:serviceaccount:kube-system:a:b"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cfg.SystemIdentity(tc.user); got != tc.want {
				t.Errorf("SystemIdentity(%+v) = %q, want %q", tc.user, got, tc.want)
			}
		})
	}
}
