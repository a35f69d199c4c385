package fleet

import (
	"errors"
	"strings"
	"testing"
)

// Each target seeds with f.Add; more seeds live in testdata/fuzz/<FuzzName>/.
// Both kinds run in plain `go test`.

// checkVersionError fails unless err is a *VersionError for c naming s.
func checkVersionError(t *testing.T, err error, c Component, s string) {
	t.Helper()
	var ve *VersionError
	if !errors.As(err, &ve) {
		t.Fatalf("error for %q is %T, want *VersionError: %v", s, err, err)
	}
	if ve.Component != c || ve.Value != s || ve.Expected == "" {
		t.Fatalf("VersionError for %q = %+v", s, ve)
	}
	_ = ve.Error()
}

func FuzzParseRKE2(f *testing.F) {
	for _, s := range []string{"v1.36.1+rke2r1", "v1.36.1-rke2r1", "1.36.1-rc1-rke2r2", "v1.036.1+rke2r0", "v2.0.0+rke2r1", "v1.36.1+k3s1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRKE2(s)
		v2, err2 := ParseRKE2(s)
		if v != v2 || (err == nil) != (err2 == nil) {
			t.Fatalf("ParseRKE2(%q) not deterministic", s)
		}
		n := NormalizeRKE2(s)
		if n != NormalizeRKE2(s) {
			t.Fatalf("NormalizeRKE2(%q) not deterministic", s)
		}
		if err != nil {
			checkVersionError(t, err, ComponentRKE2, s)
			if n != strings.TrimSpace(s) && ParseComponent(ComponentRKE2, strings.TrimSpace(s)) != nil {
				t.Fatalf("NormalizeRKE2 changed unparsable %q to %q", s, n)
			}
			return
		}
		if s != strings.TrimSpace(s) {
			t.Fatalf("ParseRKE2 accepted surrounding whitespace in %q", s)
		}
		if v.Major != 1 || v.Minor < 0 || v.Patch < 0 || v.RC < 0 || v.Rev < 0 {
			t.Fatalf("ParseRKE2(%q) = %+v", s, v)
		}
		if c := v.Compare(v); c != 0 {
			t.Fatalf("Compare(%q, itself) = %d", s, c)
		}
		back, err := ParseRKE2(v.String())
		if err != nil || back != v {
			t.Fatalf("ParseRKE2(%q).String() = %q does not round-trip: %+v, %v", s, v.String(), back, err)
		}
		nv, err := ParseRKE2(n)
		if err != nil || nv != v || strings.Contains(n, "-rke2r") {
			t.Fatalf("NormalizeRKE2(%q) = %q: %+v, %v", s, n, nv, err)
		}
		if !SameComponent(ComponentRKE2, s, strings.Replace(n, "+rke2r", "-rke2r", 1)) {
			t.Fatalf("SameComponent does not equate +/- forms of %q", s)
		}
	})
}

func FuzzParseKube(f *testing.F) {
	for _, s := range []string{"v1.37.2", "v1.37.2+rke2r1", "v1.36.1-rc1+rke2r1", "v1.38.0-beta.0", "1.30.4+k3s1", "v1.37", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseKube(s)
		v2, err2 := ParseKube(s)
		if v != v2 || (err == nil) != (err2 == nil) {
			t.Fatalf("ParseKube(%q) not deterministic", s)
		}
		if err != nil {
			checkVersionError(t, err, componentKube, s)
			return
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("ParseKube(%q) = %+v", s, v)
		}
		if strings.ContainsAny(s, " \t\r\n") {
			t.Fatalf("ParseKube accepted whitespace in %q", s)
		}
	})
}

func FuzzParseKernel(f *testing.F) {
	for _, s := range []string{"6.8.0-135-generic", "5.14.0-427.13.1.el9_4.x86_64", "6.0.10-100+123.x86_64~", "6.8", "6.7.4-arch1-1", "6.8.0-1234567890-generic", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseKernel(s)
		v2, err2 := ParseKernel(s)
		if (err == nil) != (err2 == nil) || v.Flavour != v2.Flavour || cmpParts(v.Parts, v2.Parts) != 0 || len(v.Parts) != len(v2.Parts) {
			t.Fatalf("ParseKernel(%q) not deterministic", s)
		}
		if err != nil {
			checkVersionError(t, err, ComponentKernel, s)
			return
		}
		if len(v.Parts) < 2 || v.release < 2 || v.release > 4 || v.raw != s {
			t.Fatalf("ParseKernel(%q) = %+v", s, v)
		}
		for _, p := range v.Parts {
			if p < 0 || p > 999999999 {
				t.Fatalf("ParseKernel(%q) part %d out of range", s, p)
			}
		}
		c, err := v.Compare(v)
		if err != nil || c != 0 {
			t.Fatalf("Compare(%q, itself) = %d, %v", s, c, err)
		}
		if c, err := CompareComponent(ComponentKernel, s, s); err != nil || c != 0 {
			t.Fatalf("CompareComponent(%q, itself) = %d, %v", s, c, err)
		}
	})
}

func FuzzParseDriver(f *testing.F) {
	for _, s := range []string{"580.130.00", "550.90.07", "580.65", "580", "580.130.00.1.2", "580.1a.0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseDriver(s)
		v2, err2 := ParseDriver(s)
		if (err == nil) != (err2 == nil) || len(v.Parts) != len(v2.Parts) || cmpParts(v.Parts, v2.Parts) != 0 {
			t.Fatalf("ParseDriver(%q) not deterministic", s)
		}
		if err != nil {
			checkVersionError(t, err, ComponentDriver, s)
			return
		}
		if len(v.Parts) < 2 || len(v.Parts) > 4 || v.raw != s {
			t.Fatalf("ParseDriver(%q) = %+v", s, v)
		}
		if c := v.Compare(v); c != 0 {
			t.Fatalf("Compare(%q, itself) = %d", s, c)
		}
	})
}

func FuzzParseGPUOperator(f *testing.F) {
	for _, s := range []string{"v26.3.4", "24.9.2", "v26.3.0-rc.1", "v26.3", "v26.3.4+build.1", "v01.2.3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseGPUOperator(s)
		v2, err2 := ParseGPUOperator(s)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("ParseGPUOperator(%q) not deterministic", s)
		}
		if err != nil {
			if v != nil {
				t.Fatalf("ParseGPUOperator(%q) returned a version with an error", s)
			}
			checkVersionError(t, err, ComponentGPUOperator, s)
			return
		}
		if v == nil || v2 == nil || !v.Equal(v2) || v.String() != v2.String() {
			t.Fatalf("ParseGPUOperator(%q) not deterministic", s)
		}
		if c := v.Compare(v); c != 0 {
			t.Fatalf("Compare(%q, itself) = %d", s, c)
		}
		if c, err := CompareComponent(ComponentGPUOperator, s, s); err != nil || c != 0 {
			t.Fatalf("CompareComponent(%q, itself) = %d, %v", s, c, err)
		}
	})
}

func FuzzParseDCGMExporter(f *testing.F) {
	for _, s := range []string{
		"4.5.3-4.8.2-distroless", "3.3.5-3.4.1-ubuntu22.04", "4.5.3-4.8.2",
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"4.5.3-4.8.2--x", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseDCGMExporter(s)
		v2, err2 := ParseDCGMExporter(s)
		if (err == nil) != (err2 == nil) || v.Digest != v2.Digest || v.Flavour != v2.Flavour ||
			cmpParts(v.DCGM, v2.DCGM) != 0 || cmpParts(v.Exporter, v2.Exporter) != 0 {
			t.Fatalf("ParseDCGMExporter(%q) not deterministic", s)
		}
		if err != nil {
			checkVersionError(t, err, ComponentDCGMExporter, s)
			return
		}
		if v.raw != s {
			t.Fatalf("ParseDCGMExporter(%q) lost the raw value", s)
		}
		if v.Digest != "" {
			if !isDigest(v.Digest) || v.DCGM != nil || v.Exporter != nil || !strings.HasSuffix(s, v.Digest) {
				t.Fatalf("ParseDCGMExporter(%q) = %+v", s, v)
			}
		} else if len(v.DCGM) < 2 || len(v.Exporter) < 2 {
			t.Fatalf("ParseDCGMExporter(%q) = %+v", s, v)
		}
		c, err := v.Compare(v)
		if err != nil || c != 0 {
			t.Fatalf("Compare(%q, itself) = %d, %v", s, c, err)
		}
		if !SameComponent(ComponentDCGMExporter, s, s) {
			t.Fatalf("SameComponent(%q, itself) = false", s)
		}
	})
}

func FuzzImageVersion(f *testing.F) {
	for _, s := range []string{
		"rancher/rke2-upgrade:v1.36.1-rke2r1",
		"registry:5000/ns/name:tag",
		"registry:5000/ns/name",
		"nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"docker.io/library/ubuntu",
		"name@",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ImageVersion(s)
		v2, ok2 := ImageVersion(s)
		if v != v2 || ok != ok2 {
			t.Fatalf("ImageVersion(%q) not deterministic", s)
		}
		if ok != (v != "") {
			t.Fatalf("ImageVersion(%q) = %q, %v", s, v, ok)
		}
		img, err := ParseImage(s)
		if err != nil {
			if ok {
				t.Fatalf("ImageVersion(%q) = %q from a reference that does not parse", s, v)
			}
			return
		}
		if i := strings.IndexByte(s, '@'); i >= 0 {
			if !ok || v != s[i+1:] || v != img.Digest {
				t.Fatalf("ImageVersion(%q) = %q, %v: the digest must win", s, v, ok)
			}
		} else if ok && (!strings.HasSuffix(s, ":"+v) || v != img.Tag) {
			t.Fatalf("ImageVersion(%q) = %q is not the tag of the reference", s, v)
		}
		if !strings.Contains(s, img.Path) {
			t.Fatalf("ParseImage(%q).Path = %q is not part of the reference", s, img.Path)
		}
	})
}
