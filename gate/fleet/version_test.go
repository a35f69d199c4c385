package fleet

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	digestA = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	digestB = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// requireVersionError checks that err is a *VersionError for c naming value.
func requireVersionError(t *testing.T, err error, c Component, value string) {
	t.Helper()
	require.Error(t, err)
	var ve *VersionError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, c, ve.Component)
	assert.Equal(t, value, ve.Value)
	assert.NotEmpty(t, ve.Expected)
	assert.False(t, errors.Is(err, ErrIncomparable))
}

func TestVersionErrorMessage(t *testing.T) {
	_, err := ParseRKE2("1.36+rke2r1")
	require.Error(t, err)
	assert.Equal(t,
		`rke2 version "1.36+rke2r1" is not valid: expected v1.MINOR.PATCH+rke2rN, e.g. v1.36.1+rke2r1 (SUC also reads -rke2rN; a release candidate puts -rcN before it, e.g. v1.37.0-rc1+rke2r1)`,
		err.Error())

	long := strings.Repeat("9", 1000)
	_, err = ParseDriver(long)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 400, "a long value must be truncated in the message")
	assert.Contains(t, err.Error(), "(1000 bytes)")
	var ve *VersionError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, long, ve.Value, "the field keeps the full value")
}

func TestIncomparableError(t *testing.T) {
	_, err := CompareComponent(ComponentKernel, "6.8.0-135-generic", "6.8.0-135-lowlatency")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrIncomparable)
	var ie *IncomparableError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, ComponentKernel, ie.Component)
	assert.Equal(t, "6.8.0-135-generic", ie.A)
	assert.Equal(t, "6.8.0-135-lowlatency", ie.B)
	assert.NotEmpty(t, ie.Reason)
	assert.Contains(t, err.Error(), `"6.8.0-135-generic"`)
	assert.Contains(t, err.Error(), `"6.8.0-135-lowlatency"`)
}

func TestParseRKE2Version(t *testing.T) {
	valid := []struct {
		in   string
		want RKE2Version
	}{
		{"v1.36.1+rke2r1", RKE2Version{Major: 1, Minor: 36, Patch: 1, Rev: 1}},
		{"v1.36.1-rke2r1", RKE2Version{Major: 1, Minor: 36, Patch: 1, Rev: 1}},
		{"v1.36.1+rke2r2", RKE2Version{Major: 1, Minor: 36, Patch: 1, Rev: 2}},
		{"1.36.1+rke2r1", RKE2Version{Major: 1, Minor: 36, Patch: 1, Rev: 1}},
		{"v1.36.1-rc1+rke2r1", RKE2Version{Major: 1, Minor: 36, Patch: 1, RC: 1, Rev: 1}},
		{"v1.36.1-rc2-rke2r3", RKE2Version{Major: 1, Minor: 36, Patch: 1, RC: 2, Rev: 3}},
		{"v1.035.3+rke2r1", RKE2Version{Major: 1, Minor: 35, Patch: 3, Rev: 1}},
		{"v1.0.0+rke2r0", RKE2Version{Major: 1, Rev: 0}},
		{"v1.999999999.999999999+rke2r999999999", RKE2Version{Major: 1, Minor: 999999999, Patch: 999999999, Rev: 999999999}},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.in, func(t *testing.T) {
			got, err := ParseRKE2(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.NoError(t, ParseComponent(ComponentRKE2, tc.in))
		})
	}

	invalid := []string{
		"",
		"v1.36+rke2r1",
		"1.36+rke2r1",
		"v1.36.1",
		"v1.36.1+k3s1",
		"v1.36.1-k3s1",
		"v2.0.0+rke2r1",
		"v01.36.1+rke2r1",
		"v0.36.1+rke2r1",
		"vv1.36.1+rke2r1",
		"V1.36.1+rke2r1",
		"v1.36.1+rke2r",
		"v1.36.1+rke2",
		"v1.36.1rke2r1",
		"v1.36.1_rke2r1",
		"v1.36.1+rke2r1 ",
		" v1.36.1+rke2r1",
		"v1.36.1 +rke2r1",
		"v1.36.1+rke2r1\n",
		"v1.36.1+rke2r1x",
		"v1.36.1+rke2r1+rke2r1",
		"v1.36.1+rc1+rke2r1",
		"v1.36.1-rc+rke2r1",
		"v1.36.1-rc0+rke2r1",
		"v1.36.1-RC1+rke2r1",
		"v1.36.1-beta1+rke2r1",
		"v1.36.1+rke2r1-rc1",
		"v1.36.-1+rke2r1",
		"v1.1234567890.1+rke2r1",
		"v1.36.1234567890+rke2r1",
		"v1.36.1+rke2r1234567890",
		"v1.36.1-rc1234567890+rke2r1",
		"v1.36.99999999999999999999+rke2r1",
		"v1.31.14-rke2r2-build20260317",
		"v1.３6.1+rke2r1",
		"v1." + strings.Repeat("0", 130) + "1.1+rke2r1",
	}
	for _, in := range invalid {
		t.Run("invalid/"+in, func(t *testing.T) {
			_, err := ParseRKE2(in)
			requireVersionError(t, err, ComponentRKE2, in)
			requireVersionError(t, ParseComponent(ComponentRKE2, in), ComponentRKE2, in)
		})
	}
}

func TestRKE2VersionCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"v1.36.1+rke2r1", "v1.36.1+rke2r1", 0},
		{"v1.36.1-rke2r1", "v1.36.1+rke2r1", 0},
		{"1.36.1+rke2r1", "v1.036.01+rke2r01", 0},
		{"v1.36.1+rke2r2", "v1.36.1+rke2r1", 1},
		{"v1.36.1+rke2r1", "v1.36.1+rke2r2", -1},
		{"v1.36.2+rke2r1", "v1.36.1+rke2r9", 1},
		{"v1.37.0+rke2r1", "v1.36.9+rke2r9", 1},
		{"v1.9.0+rke2r1", "v1.10.0+rke2r1", -1},
		{"v1.36.1-rc1+rke2r1", "v1.36.1+rke2r1", -1},
		{"v1.36.1-rc9+rke2r9", "v1.36.1+rke2r1", -1},
		{"v1.36.1+rke2r1", "v1.36.1-rc1+rke2r1", 1},
		{"v1.36.1-rc1+rke2r1", "v1.36.1-rc2+rke2r1", -1},
		{"v1.36.1-rc2+rke2r1", "v1.36.1-rc1+rke2r5", 1},
		{"v1.36.1-rc1+rke2r1", "v1.36.1-rc1+rke2r2", -1},
		{"v1.36.1-rc1+rke2r1", "v1.36.0+rke2r1", 1},
	}
	for _, tc := range cases {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			a, err := ParseRKE2(tc.a)
			require.NoError(t, err)
			b, err := ParseRKE2(tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, a.Compare(b))
			assert.Equal(t, -tc.want, b.Compare(a), "antisymmetric")
			got, err := CompareComponent(ComponentRKE2, tc.a, tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRKE2VersionString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"v1.36.1+rke2r1", "v1.36.1+rke2r1"},
		{"v1.36.1-rke2r1", "v1.36.1+rke2r1"},
		{"1.36.1+rke2r2", "v1.36.1+rke2r2"},
		{"v1.036.01+rke2r01", "v1.36.1+rke2r1"},
		{"v1.36.1-rc1-rke2r1", "v1.36.1-rc1+rke2r1"},
		{"v1.36.1-rc01+rke2r1", "v1.36.1-rc1+rke2r1"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			v, err := ParseRKE2(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, v.String())
			back, err := ParseRKE2(v.String())
			require.NoError(t, err)
			assert.Equal(t, v, back)
		})
	}
}

func TestNormalizeRKE2(t *testing.T) {
	cases := []struct{ in, want string }{
		{"v1.36.1-rke2r1", "v1.36.1+rke2r1"},
		{"v1.36.1+rke2r1", "v1.36.1+rke2r1"},
		{"v1.36.1-rc1-rke2r1", "v1.36.1-rc1+rke2r1"},
		{"v1.36.1-rc1+rke2r1", "v1.36.1-rc1+rke2r1"},
		// Only the separator changes: no v is added, leading zeros stay.
		{"1.36.1-rke2r1", "1.36.1+rke2r1"},
		{"v1.036.1-rke2r1", "v1.036.1+rke2r1"},
		// Surrounding whitespace is trimmed before normalising.
		{"  v1.36.1-rke2r1\t", "v1.36.1+rke2r1"},
		// Unparsable: trimmed, otherwise unchanged.
		{" v1.36.1-k3s1 ", "v1.36.1-k3s1"},
		{"v2.0.0-rke2r1", "v2.0.0-rke2r1"},
		{"", ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			assert.Equal(t, tc.want, NormalizeRKE2(tc.in))
		})
	}
}

func TestParseKubeVersion(t *testing.T) {
	valid := []struct {
		in   string
		want KubeVersion
	}{
		{"v1.37.2", KubeVersion{1, 37, 2}},
		{"1.37.2", KubeVersion{1, 37, 2}},
		{"v1.37.2+rke2r1", KubeVersion{1, 37, 2}},
		{"v1.36.1-rc1+rke2r1", KubeVersion{1, 36, 1}},
		{"v1.38.0-beta.0", KubeVersion{1, 38, 0}},
		{"v1.30.4+k3s1", KubeVersion{1, 30, 4}},
		{"v1.30.4-k3s1", KubeVersion{1, 30, 4}},
		{"v1.31.14-rke2r2-build20260317", KubeVersion{1, 31, 14}},
		{"v1.29.3-eks-adc7111", KubeVersion{1, 29, 3}},
		{"v2.0.0", KubeVersion{2, 0, 0}},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.in, func(t *testing.T) {
			got, err := ParseKube(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	invalid := []string{
		"",
		"v1.37",
		"v1",
		"v1.37.",
		"v1.37.2+",
		"v1.37.2-",
		"v1.37.2x",
		"v1.37.2 ",
		" v1.37.2",
		"v1.37.2+rke2 r1",
		"vv1.37.2",
		"v1.1234567890.2",
		"v1.37.2+" + strings.Repeat("a", 130),
	}
	for _, in := range invalid {
		t.Run("invalid/"+in, func(t *testing.T) {
			_, err := ParseKube(in)
			requireVersionError(t, err, componentKube, in)
		})
	}
}

func TestParseKernelVersion(t *testing.T) {
	valid := []struct {
		in      string
		parts   []int
		flavour string
	}{
		{"6.8.0-135-generic", []int{6, 8, 0, 135}, "generic"},
		{"6.8.0-99-generic", []int{6, 8, 0, 99}, "generic"},
		{"5.15.0-134-generic", []int{5, 15, 0, 134}, "generic"},
		{"5.14.0-427.13.1.el9_4.x86_64", []int{5, 14, 0, 427, 13, 1}, "el9_4.x86_64"},
		{"4.18.0-553.el8_10.x86_64", []int{4, 18, 0, 553}, "el8_10.x86_64"},
		{"6.7.5-200.fc39.x86_64", []int{6, 7, 5, 200}, "fc39.x86_64"},
		{"5.14.21-150500.55.49-default", []int{5, 14, 21, 150500, 55, 49}, "default"},
		{"6.7.4-arch1-1", []int{6, 7, 4}, "arch1-1"},
		{"6.8.0-1012-nvidia-64k", []int{6, 8, 0, 1012}, "nvidia-64k"},
		{"6.0.10-100+123.x86_64~", []int{6, 0, 10, 100}, "123.x86_64~"},
		{"6.8", []int{6, 8}, ""},
		{"6.8.0", []int{6, 8, 0}, ""},
		{"6.8.0-135", []int{6, 8, 0, 135}, ""},
		{"6.8.0.1-2", []int{6, 8, 0, 1, 2}, ""},
		{"6.8-generic", []int{6, 8}, "generic"},
		{"6.1.21-v8+", []int{6, 1, 21}, "v8+"},
		{"5.15.153.1-microsoft-standard-WSL2", []int{5, 15, 153, 1}, "microsoft-standard-WSL2"},
		{"6.8.0.1.2", []int{6, 8, 0, 1}, "2"},
		{"6.8.0.el9", []int{6, 8, 0}, "el9"},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.in, func(t *testing.T) {
			got, err := ParseKernel(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.parts, got.Parts)
			assert.Equal(t, tc.flavour, got.Flavour)
			assert.Equal(t, tc.in, got.raw)
			assert.NoError(t, ParseComponent(ComponentKernel, tc.in))
		})
	}
	invalid := []string{
		"",
		"6",
		"6-generic",
		"v6.8.0-135-generic",
		"6.8.0-135-generic ",
		" 6.8.0-135-generic",
		"6.8.0-135 generic",
		"6.8.0-135-gen/eric",
		"6.8.0-135-",
		"6.8.0-",
		"6.8.0.",
		"6.8.0+",
		"6.8.0-135abc",
		"6.8.0.1abc",
		"6..8",
		"6.8.",
		".6.8",
		"generic",
		"6.1234567890.0-1-generic",
		"6.8.0-1234567890-generic",
		"6.8.0-135.1234567890-generic",
		"6.8.0-135-génériqué",
		"6.8.0-" + strings.Repeat("1.", 70) + "1",
	}
	for _, in := range invalid {
		t.Run("invalid/"+in, func(t *testing.T) {
			_, err := ParseKernel(in)
			requireVersionError(t, err, ComponentKernel, in)
			requireVersionError(t, ParseComponent(ComponentKernel, in), ComponentKernel, in)
		})
	}
}

func TestKernelVersionCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"6.8.0-135-generic", "6.8.0-99-generic", 1},
		{"6.8.0-134-generic", "6.8.0-135-generic", -1},
		{"6.8.0-135-generic", "6.8.0-135-generic", 0},
		{"6.8.0-135-generic", "6.11.0-1-generic", -1},
		{"6.11.0-1-generic", "6.8.0-200-generic", 1},
		{"6.8", "6.8.0", 0},
		{"6.8-135-generic", "6.8.0-135-generic", 0},
		{"6.8-135-generic", "6.8.1-1-generic", -1},
		{"6.8.0", "6.8.0-1", -1},
		{"5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.2.1.el9_4.x86_64", 1},
		{"5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.13.el9_4.x86_64", 1},
		{"5.14.0-503.el9_4.x86_64", "5.14.0-427.13.1.el9_4.x86_64", 1},
		{"6.8.0.1-1-generic", "6.8.0-2-generic", 1},
		{"6.8.0.0-2-generic", "6.8.0-2-generic", 0},
		{"6.8.0-135-generic", "6.8.0-135.generic", 0},
	}
	for _, tc := range cases {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			a, err := ParseKernel(tc.a)
			require.NoError(t, err)
			b, err := ParseKernel(tc.b)
			require.NoError(t, err)
			got, err := a.Compare(b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			got, err = b.Compare(a)
			require.NoError(t, err)
			assert.Equal(t, -tc.want, got, "antisymmetric")
			got, err = CompareComponent(ComponentKernel, tc.a, tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	incomparable := []struct{ a, b string }{
		{"6.8.0-135-generic", "6.8.0-135-lowlatency"},
		{"6.8.0-135-generic", "6.8.0-136-lowlatency"},
		{"6.8.0-135-generic", "6.8.0-135"},
		{"6.8.0-135-generic", "6.8.0-135-Generic"},
		{"5.14.0-427.el9_4.x86_64", "5.14.0-427.el9_4.aarch64"},
	}
	for _, tc := range incomparable {
		t.Run("incomparable/"+tc.a+" vs "+tc.b, func(t *testing.T) {
			a, err := ParseKernel(tc.a)
			require.NoError(t, err)
			b, err := ParseKernel(tc.b)
			require.NoError(t, err)
			_, err = a.Compare(b)
			require.ErrorIs(t, err, ErrIncomparable)
			_, err = b.Compare(a)
			require.ErrorIs(t, err, ErrIncomparable)
			_, err = CompareComponent(ComponentKernel, tc.a, tc.b)
			require.ErrorIs(t, err, ErrIncomparable)
		})
	}
}

func TestParseDriverVersion(t *testing.T) {
	valid := []struct {
		in    string
		parts []int
	}{
		{"580.130.00", []int{580, 130, 0}},
		{"550.90.07", []int{550, 90, 7}},
		{"580.126.20", []int{580, 126, 20}},
		{"580.65", []int{580, 65}},
		{"595.91.07.1", []int{595, 91, 7, 1}},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.in, func(t *testing.T) {
			got, err := ParseDriver(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.parts, got.Parts)
			assert.Equal(t, tc.in, got.raw)
			assert.NoError(t, ParseComponent(ComponentDriver, tc.in))
		})
	}
	invalid := []string{
		"",
		"580",
		"580.130.00.1.2",
		"580.130.00a",
		"r580.130.00",
		"v580.130.00",
		"580.130.",
		".580.130",
		"580..130",
		"580.-130.00",
		"580.130.00 ",
		" 580.130.00",
		"580,130,00",
		"580.1234567890",
		"５80.130.00",
		strings.Repeat("1.", 70) + "1",
	}
	for _, in := range invalid {
		t.Run("invalid/"+in, func(t *testing.T) {
			_, err := ParseDriver(in)
			requireVersionError(t, err, ComponentDriver, in)
			requireVersionError(t, ParseComponent(ComponentDriver, in), ComponentDriver, in)
		})
	}
}

func TestDriverVersionCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"580.130.00", "580.126.20", 1},
		{"580.126.20", "580.130.00", -1},
		{"580.65", "580.126.20", -1},
		{"580.65", "580.65.0", 0},
		{"550.90.07", "550.90.7", 0},
		{"550.90.07", "550.127.05", -1},
		{"595.91.07", "580.126.20", 1},
		{"580.126.20", "580.126.20.1", -1},
	}
	for _, tc := range cases {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			a, err := ParseDriver(tc.a)
			require.NoError(t, err)
			b, err := ParseDriver(tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, a.Compare(b))
			assert.Equal(t, -tc.want, b.Compare(a), "antisymmetric")
			got, err := CompareComponent(ComponentDriver, tc.a, tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseGPUOperatorVersion(t *testing.T) {
	valid := []struct{ in, want string }{
		{"v26.3.4", "26.3.4"},
		{"v24.9.2", "24.9.2"},
		{"26.3.4", "26.3.4"},
		{"v26.3.0-rc.1", "26.3.0-rc.1"},
		{"v25.10.0", "25.10.0"},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.in, func(t *testing.T) {
			got, err := ParseGPUOperator(tc.in)
			require.NoError(t, err)
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got.String())
			assert.NoError(t, ParseComponent(ComponentGPUOperator, tc.in))
		})
	}
	invalid := []string{
		"",
		"v",
		"v26.3",
		"26",
		"vv26.3.4",
		"V26.3.4",
		"v26.03.4",
		"v26.3.4 ",
		" v26.3.4",
		"v26.3.4-",
		"v26.3.4-rc..1",
		"main-latest",
		"v26.3.4." + strings.Repeat("1", 130),
		"v99999999999999999999999.3.4",
	}
	for _, in := range invalid {
		t.Run("invalid/"+in, func(t *testing.T) {
			got, err := ParseGPUOperator(in)
			assert.Nil(t, got)
			requireVersionError(t, err, ComponentGPUOperator, in)
			requireVersionError(t, ParseComponent(ComponentGPUOperator, in), ComponentGPUOperator, in)
		})
	}
}

func TestGPUOperatorCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"v26.3.4", "v26.3.3", 1},
		{"v24.9.2", "v26.3.4", -1},
		{"26.3.4", "v26.3.4", 0},
		{"v26.3.0-rc.1", "v26.3.0", -1},
		{"v26.3.0-rc.2", "v26.3.0-rc.10", -1},
		{"v25.10.0", "v25.3.0", 1},
	}
	for _, tc := range cases {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			got, err := CompareComponent(ComponentGPUOperator, tc.a, tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			got, err = CompareComponent(ComponentGPUOperator, tc.b, tc.a)
			require.NoError(t, err)
			assert.Equal(t, -tc.want, got, "antisymmetric")
		})
	}
}

func TestParseDCGMExporterVersion(t *testing.T) {
	valid := []struct {
		in       string
		dcgm     []int
		exporter []int
		flavour  string
		digest   string
	}{
		{"4.4.1-4.6.0-ubuntu22.04", []int{4, 4, 1}, []int{4, 6, 0}, "ubuntu22.04", ""},
		{"4.5.3-4.8.2-distroless", []int{4, 5, 3}, []int{4, 8, 2}, "distroless", ""},
		{"3.3.5-3.4.1-ubuntu22.04", []int{3, 3, 5}, []int{3, 4, 1}, "ubuntu22.04", ""},
		{"4.5.3-4.8.2", []int{4, 5, 3}, []int{4, 8, 2}, "", ""},
		{"4.5.1-4.8.0-ubi9", []int{4, 5, 1}, []int{4, 8, 0}, "ubi9", ""},
		{"3.3.8-3.6.0-ubuntu22.04-fips", []int{3, 3, 8}, []int{3, 6, 0}, "ubuntu22.04-fips", ""},
		{digestA, nil, nil, "", digestA},
		{"4.5.3-4.8.2-distroless@" + digestA, nil, nil, "", digestA},
		{"nvcr.io/nvidia/k8s/dcgm-exporter@" + digestB, nil, nil, "", digestB},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.in, func(t *testing.T) {
			got, err := ParseDCGMExporter(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.dcgm, got.DCGM)
			assert.Equal(t, tc.exporter, got.Exporter)
			assert.Equal(t, tc.flavour, got.Flavour)
			assert.Equal(t, tc.digest, got.Digest)
			assert.Equal(t, tc.in, got.raw)
			assert.NoError(t, ParseComponent(ComponentDCGMExporter, tc.in))
		})
	}
	invalid := []string{
		"",
		"4.5.3",
		"4.5.3-",
		"4.5.3-4.8.2-",
		"4.5.3-4.8.2--distroless",
		"4.5.3-4.8.2-distro less",
		"4.5.3-4.8.2-distro/less",
		"4-4",
		"4.5.3-4",
		"v4.5.3-4.8.2",
		"4.5.3.1.2-4.8.2",
		"4.5.3-4.8.x-distroless",
		"latest",
		"4.5.3-4.8.2 ",
		"sha256:",
		"sha256:0123",
		strings.ToUpper(digestA[:7]) + digestA[7:],
		"sha256:" + strings.ToUpper(digestA[7:]),
		digestA + "0",
		"sha512:" + digestA[7:] + digestA[7:],
		"@" + digestA,
		"4.5.3-4.8.2@sha256:0123",
		"4.5.3 4.8.2@" + digestA,
		"4.5.3-4.8.2@" + digestA + "@" + digestA,
		"4.5.3-4.1234567890.2",
	}
	for _, in := range invalid {
		t.Run("invalid/"+in, func(t *testing.T) {
			_, err := ParseDCGMExporter(in)
			requireVersionError(t, err, ComponentDCGMExporter, in)
			requireVersionError(t, ParseComponent(ComponentDCGMExporter, in), ComponentDCGMExporter, in)
		})
	}
}

func TestDCGMExporterCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"4.5.3-4.8.2-distroless", "4.4.1-4.6.0-ubuntu22.04", 1},
		{"3.3.5-3.4.1-ubuntu22.04", "4.4.1-4.6.0-ubuntu22.04", -1},
		{"4.5.3-4.8.2-distroless", "4.5.3-4.8.2-ubuntu22.04", 0},
		{"4.5.3-4.8.2", "4.5.3-4.8.2-distroless", 0},
		{"4.5.3-4.8.2-distroless", "4.5.3-4.8.0-distroless", 1},
		{"4.5.1-4.8.0", "4.5.3-4.8.0", -1},
		{"4.5.3-4.6.0", "4.4.9-4.9.9", 1},
		{"4.10.0-4.8.2", "4.9.0-4.8.2", 1},
		{digestA, digestA, 0},
		{digestA, "4.5.3-4.8.2@" + digestA, 0},
	}
	for _, tc := range cases {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			a, err := ParseDCGMExporter(tc.a)
			require.NoError(t, err)
			b, err := ParseDCGMExporter(tc.b)
			require.NoError(t, err)
			got, err := a.Compare(b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			got, err = b.Compare(a)
			require.NoError(t, err)
			assert.Equal(t, -tc.want, got, "antisymmetric")
			got, err = CompareComponent(ComponentDCGMExporter, tc.a, tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	incomparable := []struct{ a, b string }{
		{digestA, digestB},
		{digestA, "4.5.3-4.8.2-distroless"},
		{"4.5.3-4.8.2-distroless", digestB},
	}
	for _, tc := range incomparable {
		t.Run("incomparable/"+tc.a+" vs "+tc.b, func(t *testing.T) {
			_, err := CompareComponent(ComponentDCGMExporter, tc.a, tc.b)
			require.ErrorIs(t, err, ErrIncomparable)
			var ie *IncomparableError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, ComponentDCGMExporter, ie.Component)
			assert.Equal(t, tc.a, ie.A)
			assert.Equal(t, tc.b, ie.B)
		})
	}
}

func TestCompareComponentErrors(t *testing.T) {
	cases := []struct {
		c        Component
		a, b     string
		badValue string
	}{
		{ComponentKernel, "bogus", "6.8.0-135-generic", "bogus"},
		{ComponentKernel, "6.8.0-135-generic", "", ""},
		{ComponentRKE2, "v1.36.1+rke2r1", "v1.36.1+k3s1", "v1.36.1+k3s1"},
		{ComponentRKE2, "1.36+rke2r1", "also bad", "1.36+rke2r1"},
		{ComponentDriver, "580", "580.126.20", "580"},
		{ComponentGPUOperator, "v26.3.4", "v26.3", "v26.3"},
		{ComponentDCGMExporter, "latest", digestA, "latest"},
	}
	for _, tc := range cases {
		t.Run(string(tc.c)+"/"+tc.a+" vs "+tc.b, func(t *testing.T) {
			_, err := CompareComponent(tc.c, tc.a, tc.b)
			requireVersionError(t, err, tc.c, tc.badValue)
			assert.Contains(t, err.Error(), ExpectedForm(tc.c))
		})
	}

	t.Run("unknown component", func(t *testing.T) {
		_, err := CompareComponent("pci", "a", "a")
		require.ErrorIs(t, err, errUnknownComponent)
		require.ErrorIs(t, ParseComponent("pci", "a"), errUnknownComponent)
		assert.Empty(t, ExpectedForm("pci"))
	})
}

func TestSameComponent(t *testing.T) {
	cases := []struct {
		c    Component
		a, b string
		want bool
	}{
		{ComponentRKE2, "v1.36.1-rke2r1", "v1.36.1+rke2r1", true},
		{ComponentRKE2, "v1.36.1-rc1-rke2r1", "v1.36.1-rc1+rke2r1", true},
		{ComponentRKE2, " v1.36.1-rke2r1 ", "v1.36.1+rke2r1", true},
		// Only +/- is normalised: a missing v or leading zeros still differ,
		// as in the anchor CLI's exact-match rule.
		{ComponentRKE2, "1.36.1+rke2r1", "v1.36.1+rke2r1", false},
		{ComponentRKE2, "v1.036.1+rke2r1", "v1.36.1+rke2r1", false},
		{ComponentRKE2, "v1.36.1+rke2r1", "v1.36.1+rke2r2", false},
		{ComponentRKE2, "v1.36.1-rc1+rke2r1", "v1.36.1+rke2r1", false},
		{ComponentRKE2, "v1.36.1-k3s1", "v1.36.1+k3s1", false},
		{ComponentKernel, "6.8.0-135-generic", "6.8.0-135-generic", true},
		{ComponentKernel, " 6.8.0-135-generic\n", "6.8.0-135-generic", true},
		{ComponentKernel, "6.8.0-135-generic", "6.8.0-135.generic", false},
		{ComponentDriver, "550.90.07", "550.90.7", false},
		{ComponentDriver, "580.126.20", "580.126.20", true},
		{ComponentGPUOperator, "26.3.4", "v26.3.4", false},
		{ComponentDCGMExporter, "4.5.3-4.8.2-distroless", "4.5.3-4.8.2-ubuntu22.04", false},
		{ComponentDCGMExporter, "4.5.3-4.8.2-distroless", "4.5.3-4.8.2-distroless", true},
		{ComponentDCGMExporter, digestA, digestA, true},
		{ComponentDCGMExporter, digestA, digestB, false},
		{ComponentDCGMExporter, "4.5.3-4.8.2@" + digestA, digestA, true},
		{ComponentDCGMExporter, digestA, "4.5.3-4.8.2-distroless", false},
	}
	for _, tc := range cases {
		t.Run(string(tc.c)+"/"+tc.a+" vs "+tc.b, func(t *testing.T) {
			assert.Equal(t, tc.want, SameComponent(tc.c, tc.a, tc.b))
			assert.Equal(t, tc.want, SameComponent(tc.c, tc.b, tc.a), "symmetric")
		})
	}
}

func TestExpectedForm(t *testing.T) {
	seen := map[string]Component{}
	for _, c := range Components {
		form := ExpectedForm(c)
		require.NotEmpty(t, form, c)
		prev, dup := seen[form]
		assert.False(t, dup, "%s and %s share an expected form", c, prev)
		seen[form] = c
	}
	assert.Equal(t, "v1.MINOR.PATCH+rke2rN, e.g. v1.36.1+rke2r1 (SUC also reads -rke2rN; a release candidate puts -rcN before it, e.g. v1.37.0-rc1+rke2r1)", ExpectedForm(ComponentRKE2))
	assert.Equal(t, []Component{"kernel", "rke2", "driver", "gpuOperator", "dcgmExporter", "draDriver"}, Components)
}

func TestImageVersion(t *testing.T) {
	cases := []struct {
		image   string
		version string
		ok      bool
	}{
		{"rancher/rke2-upgrade:v1.36.1-rke2r1", "v1.36.1-rke2r1", true},
		{"nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless", "4.5.3-4.8.2-distroless", true},
		{"nvcr.io/nvidia/k8s/dcgm-exporter@" + digestA, digestA, true},
		{"nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless@" + digestA, digestA, true},
		{"registry:5000/ns/name:tag", "tag", true},
		{"registry:5000/ns/name", "", false},
		{"registry:5000/ns/name@" + digestB, digestB, true},
		{"localhost:5000/name:v26.3.4", "v26.3.4", true},
		{"nvcr.io/nvidia/gpu-operator", "", false},
		{"ubuntu", "", false},
		{"ubuntu:22.04", "22.04", true},
		{"name:", "", false},
		{"name@", "", false},
		{"name:tag@", "", false}, // malformed: no version is read from it
		{"", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.image, func(t *testing.T) {
			v, ok := ImageVersion(tc.image)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.version, v)
		})
	}
}

func TestParseImage(t *testing.T) {
	cases := []struct {
		image string
		want  Image
		err   string
	}{
		{"rancher/rke2-upgrade:v1.36.1-rke2r1", Image{Domain: "docker.io", Path: "rancher/rke2-upgrade", Tag: "v1.36.1-rke2r1"}, ""},
		{"docker.io/rancher/rke2-upgrade", Image{Domain: "docker.io", Path: "rancher/rke2-upgrade"}, ""},
		{"index.docker.io/rancher/rke2-upgrade", Image{Domain: "docker.io", Path: "rancher/rke2-upgrade"}, ""},
		{"registry-1.docker.io/rancher/rke2-upgrade", Image{Domain: "registry-1.docker.io", Path: "rancher/rke2-upgrade"}, ""},
		{"ubuntu", Image{Domain: "docker.io", Path: "library/ubuntu"}, ""},
		{"registry:5000/ns/name:tag@" + digestA, Image{Domain: "registry:5000", Path: "ns/name", Tag: "tag", Digest: digestA}, ""},
		{"rancher/RKE2-upgrade", Image{}, "must be lowercase"},
		{"name:", Image{}, "invalid reference format"},
		{"name@sha256:abc", Image{}, "invalid"},
		{"", Image{}, "invalid reference format"},
		{strings.Repeat("a", 600), Image{}, "more than 512"},
	}
	for _, tc := range cases {
		t.Run(tc.image, func(t *testing.T) {
			got, err := ParseImage(tc.image)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Contains(t, err.Error(), "expected [registry[:port]/]repository")
				assert.Less(t, len(err.Error()), 400, "the value is clipped")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestMatchesRepository(t *testing.T) {
	cases := []struct {
		image, entry string
		want         bool
	}{
		{"rancher/rke2-upgrade", "rancher/rke2-upgrade", true},
		{"index.docker.io/rancher/rke2-upgrade:v1.36.1-rke2r1", "rancher/rke2-upgrade", true},
		{"registry-1.docker.io/rancher/rke2-upgrade", "rancher/rke2-upgrade", true},
		{"mirror.corp.example:5000/rancher/rke2-upgrade", "rancher/rke2-upgrade", true},
		{"harbor.corp.example/dockerhub/rancher/rke2-upgrade", "rancher/rke2-upgrade", true},
		{"harbor.corp.example/rancher/rke2-upgrade-tools", "rancher/rke2-upgrade", false},
		{"registry.example.com/platform/gpu-node-upgrade", "rancher/rke2-upgrade", false},
		// An entry that names a registry pins it.
		{"mirror.corp.example/rancher/rke2-upgrade", "registry.corp.example/rancher/rke2-upgrade", false},
		{"registry.corp.example/rancher/rke2-upgrade", "registry.corp.example/rancher/rke2-upgrade", true},
		{"index.docker.io/rancher/rke2-upgrade", "docker.io/rancher/rke2-upgrade", true},
	}
	for _, tc := range cases {
		t.Run(tc.image+" vs "+tc.entry, func(t *testing.T) {
			img, err := ParseImage(tc.image)
			require.NoError(t, err)
			assert.Equal(t, tc.want, matchesRepository(img, tc.entry))
		})
	}
}

// TestVersionsMemo: a memo gives what the parser gives, valid or not, for
// every component (each parser its own memory: one spelling valid for one
// is not for another), stays bounded, and belongs to its owner: two views
// share none, and a nil memo parses every time.
func TestVersionsMemo(t *testing.T) {
	vs := NewVersions()
	for i := range componentTable {
		s := &componentTable[i]
		t.Run(string(s.Name), func(t *testing.T) {
			for _, v := range []string{"1.2.3", "v26.3.1", "6.8.0-45-generic", "v1.36.2+rke2r1", "570.124.06", "4.5.3-4.8.2-distroless", digestA, "", " 1.2.3", strings.Repeat("9", maxVersionLen+1)} {
				want := s.parse(nil, v)
				for range 2 { // the second answer is the remembered one
					got := s.parse(vs, v)
					if want == nil {
						assert.NoError(t, got, "%q", v)
					} else {
						assert.EqualError(t, got, want.Error(), "%q", v)
					}
				}
				for _, w := range []string{"1.2.4", "v26.3.2", "6.8.0-46-generic", "v1.37.0+rke2r1"} {
					wc, werr := s.compare(nil, v, w)
					gc, gerr := s.compare(vs, v, w)
					assert.Equal(t, wc, gc, "%q %q", v, w)
					assert.Equal(t, werr == nil, gerr == nil, "%q %q", v, w)
					assert.Equal(t, s.same(nil, v, w), s.same(vs, v, w), "%q %q", v, w)
				}
			}
		})
	}
	for i := range 3 * rememberedVersions {
		_, _ = vs.ParseDriver("570.124." + strconv.Itoa(i))
	}
	assert.LessOrEqual(t, len(vs.seen[memoDriver]), rememberedVersions, "the memo stays bounded")
	_, _ = vs.ParseKernel(strings.Repeat("9", maxVersionLen+1))
	assert.NotContains(t, vs.seen[memoKernel], strings.Repeat("9", maxVersionLen+1), "an overlong value is never kept")

	a, b := NewView(ViewInputs{}, func(*batchv1.Job) bool { return false }), NewView(ViewInputs{}, func(*batchv1.Job) bool { return false })
	require.NotNil(t, a.Versions())
	assert.NotSame(t, a.Versions(), b.Versions(), "each view owns its memo")
	assert.Same(t, a.Versions(), a.Versions())
	var none *Versions
	v, err := none.ParseRKE2("v1.36.2+rke2r1")
	require.NoError(t, err)
	assert.Equal(t, 36, v.Minor)
}
