package qualification

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTupleMembers(t *testing.T) {
	assert.Equal(t, []string{"kernel", "rke2", "driver", "gpuOperator", "dcgmExporter", "draDriver"}, TupleKeys())
	assert.True(t, IsOptionalTupleKey("draDriver"))
	assert.False(t, IsOptionalTupleKey("driver"))
	var tu Tuple
	for i, m := range tu.Members() {
		*m.Value = string(rune('a' + i))
	}
	assert.Equal(t, Tuple{Kernel: "a", RKE2: "b", Driver: "c", GPUOperator: "d", DCGMExporter: "e", DRADriver: "f"}, tu)
	assert.Equal(t, "kernel=a rke2=b driver=c gpuOperator=d dcgmExporter=e draDriver=f", tu.String())
	tu.DRADriver = ""
	assert.Equal(t, "kernel=a rke2=b driver=c gpuOperator=d dcgmExporter=e", tu.String(), "an optional member left out is not shown")
	assert.Equal(t, Tuple{Kernel: "a"}, trimmed(Tuple{Kernel: " a "}))
}
