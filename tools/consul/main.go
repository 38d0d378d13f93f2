// Command consul is a real Consul agent built from Go modules: it registers
// only the agent and version commands of github.com/hashicorp/consul v1.21.0,
// which is all the lockproof tests need (sdk/testutil runs `consul agent
// -dev`-like configurations and `consul version`).
//
// Build it from this directory; the binary lands next to this file:
//
//	go build -o consul .
//
// This is a separate module so that Consul's large dependency graph never
// reaches lockproof's own go.mod.
package main

import (
	"fmt"
	"io"
	"log"
	"os"

	mcli "github.com/mitchellh/cli"

	"github.com/hashicorp/consul/command/agent"
	"github.com/hashicorp/consul/command/cli"
	"github.com/hashicorp/consul/command/version"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes one command line and returns the exit code.
func run(args []string) int {
	// Consul's packages log through the standard logger before the agent
	// configures its own; the upstream main discards that output too.
	log.SetOutput(io.Discard)

	ui := &cli.BasicUI{BasicUi: mcli.BasicUi{Writer: os.Stdout, ErrorWriter: os.Stderr}}
	commands := map[string]mcli.CommandFactory{
		"agent":   func() (mcli.Command, error) { return agent.New(ui), nil },
		"version": func() (mcli.Command, error) { return version.New(ui), nil },
	}
	c := &mcli.CLI{
		Args:        args,
		Commands:    commands,
		Name:        "consul",
		HelpFunc:    mcli.BasicHelpFunc("consul"),
		HelpWriter:  os.Stdout,
		ErrorWriter: os.Stderr,
	}
	if c.IsVersion() {
		return version.New(ui).Run(nil)
	}
	code, err := c.Run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error executing CLI: %v\n", err)
		return 1
	}
	return code
}
