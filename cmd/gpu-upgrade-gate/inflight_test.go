package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestCheckSeesAPlanInFlight: issue 23's case, offline. With the example
// List the canary Plan is ALLOW; with one other GPU Plan in flight added to
// the List (as the recipe now saves Plans) it is DENY, RolloutInFlight, as
// the webhook answers in that state (TestCheckEqualsTheWebhook runs both
// through a real API server).
func TestCheckSeesAPlanInFlight(t *testing.T) {
	canary := ex + "plans/gpu-v100-canary.yaml"
	raw, err := os.ReadFile(exSnapshot)
	require.NoError(t, err)
	var list map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &list))
	planYAML, err := os.ReadFile(canary)
	require.NoError(t, err)
	var other map[string]any
	require.NoError(t, yaml.Unmarshal(planYAML, &other))
	other["metadata"].(map[string]any)["name"] = "gpu-v100-other"
	sel := other["spec"].(map[string]any)["nodeSelector"].(map[string]any)["matchExpressions"].([]any)[0].(map[string]any)
	sel["values"] = []any{"gpu-v100-02"}

	decide := func(t *testing.T, l map[string]any) jsonDecision {
		data, err := json.Marshal(l)
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "cluster.json")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		var stdout, stderr bytes.Buffer
		run(flagValue(checkArgs(canary, "-o", "json"), "--cluster", path), &stdout, &stderr)
		var out []jsonDecision
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stderr.String())
		require.Len(t, out, 1)
		return out[0]
	}
	codes := func(d jsonDecision) []gate.Code {
		var cs []gate.Code
		for _, b := range d.Blockers {
			cs = append(cs, b.Code)
		}
		return cs
	}
	t.Run("alone: ALLOW", func(t *testing.T) {
		d := decide(t, list)
		assert.True(t, d.Allowed, "%v", codes(d))
	})
	t.Run("another GPU Plan in flight: DENY", func(t *testing.T) {
		with := map[string]any{}
		for k, v := range list {
			with[k] = v
		}
		with["items"] = append(append([]any{}, list["items"].([]any)...), other)
		d := decide(t, with)
		assert.False(t, d.Allowed)
		assert.Contains(t, codes(d), gate.CodeRolloutInFlight)
	})
}
