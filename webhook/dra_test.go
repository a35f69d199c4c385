package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestDRAServed: the gate watches ResourceSlices and ResourceClaims only
// where the API server serves both; otherwise it says why (DRA nodes stay
// unproven), and a failed discovery is an error, not "not served".
func TestDRAServed(t *testing.T) {
	both := []metav1.APIResource{{Name: "resourceslices"}, {Name: "resourceclaims"}, {Name: "deviceclasses"}}
	cases := []struct {
		name      string
		resources []*metav1.APIResourceList
		want      string
	}{
		{name: "served", resources: []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: both}}},
		{name: "group not served", resources: []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1beta1", APIResources: both}},
			want: "the API server does not serve resource.k8s.io/v1"},
		{name: "claims missing", resources: []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: both[:1]}},
			want: "the API server serves no resourceclaims in resource.k8s.io/v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := draServed(&fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
