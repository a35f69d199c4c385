package gate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// skewRule (Plans): no kubelet newer than the API server.
func skewRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok || r.rke2 == "" {
		return
	}
	serverVersion, path := r.cl.ServerVersion, r.rke2Path
	target, err := ParseRKE2(r.rke2)
	if err != nil {
		return // the version rule or the record rules report it
	}
	server, err := ParseKube(serverVersion)
	if err != nil {
		f.add(factsMissing("", path, fmt.Sprintf("the API server version %q, which the version skew check needs,", serverVersion), fromAPI, err))
		return
	}
	if target.Major > server.Major || (target.Major == server.Major && target.Minor > server.Minor) {
		f.add(versionSkew(path, target, server))
	}
}

// versionSkew builds every VersionSkew blocker.
func versionSkew(path *field.Path, target RKE2Version, server KubeVersion) Blocker {
	return invalid(CodeVersionSkew, "", path, target.String(), "RKE2 %s is newer than the API server v%d.%d; a kubelet may never be newer than the control plane: upgrade the servers first", target, server.Major, server.Minor)
}
