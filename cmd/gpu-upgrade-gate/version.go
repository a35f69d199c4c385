package main

import (
	"fmt"
	"io"
	"runtime"
)

// Set at build time:
//
//	go build -ldflags "-X main.version=v0.1.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/gpu-upgrade-gate
var (
	version = "dev"
	commit  = "dev"
)

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("version")
	if help, err := parseFlags(fs, args, false, stdout); help || err != nil {
		if err != nil {
			return fail(stderr, "version", err)
		}
		return exitAllowed
	}
	fmt.Fprintf(stdout, "gpu-upgrade-gate %s\ncommit: %s\ngo: %s\n", version, commit, runtime.Version())
	return exitAllowed
}
