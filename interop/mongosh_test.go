package interop

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sturdy-go/sturdy/mongosim"
)

// TestMongosh runs mongosh's admin helpers (rs.conf(),
// rs.printReplicationInfo(), db.currentOp(), db.getUsers(), db.c.stats(),
// explain()) against mongosim. mongosh is not a dependency of this module
// (its npm package is about 150 MB): the test runs when mongosh is on PATH
// or MONGOSH names it, and is skipped otherwise.
func TestMongosh(t *testing.T) {
	bin := os.Getenv("MONGOSH")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("mongosh"); err != nil {
			t.Skip("interop: mongosh is not on PATH and MONGOSH is not set")
		}
	}
	c, err := mongosim.Launch(mongosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := command(ctx, bin, "--quiet", "--norc", c.Members()[0].URI(), "--file", "mongosh/admin.js")
	out, err := cmd.CombinedOutput()
	killGroup(cmd)
	if err != nil || !strings.Contains(string(out), "mongosh interop: ok") {
		t.Fatalf("mongosh: %v\n%s", err, out)
	}
	t.Logf("mongosh:\n%s", out)
}
