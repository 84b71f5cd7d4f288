package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and commit are stamped by scripts/release with
// -ldflags "-X main.version=... -X main.commit=...". A binary built by
// `go install` or `go build` reports what the Go toolchain recorded instead.
var (
	version string
	commit  string
)

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy version", flag.ContinueOnError)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	v, c := buildVersion()
	fmt.Fprintf(stdout, "sturdy %s (commit %s, %s, %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// buildVersion returns the module version and commit: the stamped values,
// else the build info's (a `go install ...@v1.2.3` records the version, a
// build from a checkout records the VCS revision), else "unknown".
func buildVersion() (v, c string) {
	v, c = version, commit
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" {
			v = info.Main.Version
		}
		rev, dirty := "", false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if c == "" && rev != "" {
			c = rev
			if dirty {
				c += "-dirty"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	}
	return v, c
}
