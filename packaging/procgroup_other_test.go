//go:build !unix

package packaging

import "os/exec"

func inOwnGroup(*exec.Cmd) {}

func killGroup(*exec.Cmd) {}
