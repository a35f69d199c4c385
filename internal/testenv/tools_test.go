package testenv

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedCompileTools are the tools built beside the project's tests whose
// packages overlap the project's own dependencies (client-go, apimachinery,
// api, apiserver): hack/controlplane.sh and hack/tools/build.sh build them
// as the tests build, so a first `make test` compiles each shared package
// once. That holds only while every module they share is at one version
// everywhere: one differing module (x/net, say) changes the compile of
// every package above it.
var sharedCompileTools = []string{"kube-apiserver", "helm"}

func TestToolsShareTheProjectsModuleVersions(t *testing.T) {
	root := filepath.Join("..", "..")
	mods := map[string]map[string]string{"project": requirements(t, filepath.Join(root, "go.mod"))}
	names := []string{"project"}
	for _, tool := range sharedCompileTools {
		mods[tool] = requirements(t, filepath.Join(root, "hack", "tools", tool, "go.mod"))
		names = append(names, tool)
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			t.Run(a+"/"+b, func(t *testing.T) {
				assert.Empty(t, versionMismatches(mods[a], mods[b]),
					"modules %s and %s both require at other versions: set them to one version (the higher) in both go.mod files", a, b)
			})
		}
	}
}

func TestVersionMismatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b map[string]string
		want []string
	}{
		{"agree", map[string]string{"golang.org/x/net": "v0.62.0", "only/a": "v1"}, map[string]string{"golang.org/x/net": "v0.62.0", "only/b": "v2"}, nil},
		{"differ", map[string]string{"golang.org/x/net": "v0.62.0", "golang.org/x/sys": "v0.49.0"}, map[string]string{"golang.org/x/net": "v0.57.0", "golang.org/x/sys": "v0.49.0"},
			[]string{"golang.org/x/net v0.62.0 / v0.57.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, versionMismatches(tc.a, tc.b))
		})
	}
}

// versionMismatches names each module a and b both require at different
// versions.
func versionMismatches(a, b map[string]string) []string {
	var out []string
	for path, va := range a {
		if vb, ok := b[path]; ok && va != vb {
			out = append(out, fmt.Sprintf("%s %s / %s", path, va, vb))
		}
	}
	sort.Strings(out)
	return out
}

// requirements reads a go.mod through `go mod edit -json` (no network, no
// module download): each required module's version, a replace's where one
// applies. Module graph pruning (go ≥ 1.17) lists in go.mod every module that
// provides a package to the build.
func requirements(t *testing.T, gomod string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", gomod).Output()
	require.NoError(t, err, "go mod edit -json %s", gomod)
	type module struct{ Path, Version string }
	var file struct {
		Require []module
		Replace []struct{ Old, New module }
	}
	require.NoError(t, json.Unmarshal(out, &file), gomod)
	versions := map[string]string{}
	for _, r := range file.Require {
		versions[r.Path] = r.Version
	}
	for _, r := range file.Replace {
		if _, ok := versions[r.Old.Path]; ok && r.New.Version != "" && (r.Old.Version == "" || r.Old.Version == versions[r.Old.Path]) {
			versions[r.Old.Path] = r.New.Version
		}
	}
	return versions
}
