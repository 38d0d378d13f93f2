package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The files the README's commands write into the repository are ignored by
// git: check's default report, and the binary go build leaves.
func TestGitignoreCoversWhatTheREADMEWrites(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{defaultReport, "cmd/lockproof/" + defaultReport, "lockproof"} {
		cmd := exec.Command(git, "check-ignore", "--no-index", "-q", name)
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			out, _ := exec.Command(git, "-C", root, "check-ignore", "--no-index", "-v", name).CombinedOutput()
			t.Errorf("%s is not ignored by .gitignore (git check-ignore: %v %s)", name, err, strings.TrimSpace(string(out)))
		}
	}
}
