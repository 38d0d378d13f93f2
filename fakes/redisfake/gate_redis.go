package redisfake

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/internal/gatehook"
)

// GateHook returns a go-redis hook that passes every command and
// pipeline the client sends through the locks.Gate of the command's context
// (see locks.GateRequest), naming it label + ": " + the command in upper
// case ("redis node 0: EVALSHA"), or the commands of a pipeline joined by
// ", " ("redis node 0: SET, PEXPIRE"). A command whose context carries no
// Gate goes as before.
//
// label should name the server the client talks to in a way that does not
// change from run to run, such as "redis node 2" for the third node of a
// group; never its address. Every client the fakes hand out has the hook,
// labelled "redis node <i>" with i the node's index in its RedisCluster (0
// for a single Redis). Use Gate for a client built elsewhere.
//
// A command or pipeline whose context ended while the gate held it is not
// sent: it fails with the context's error (see gateSend).
//
// Dials are not gated: a new connection is dialed, and greeted with HELLO,
// inside the window of the command that needed it.
func GateHook(label string) redis.Hook { return redisGate{label: label} }

// Gate adds GateHook(label) to c, for a client the fakes did not
// build (one on a chaos.Proxy's address, say): label as for the node the
// client reaches in the end, "redis node 0".
func Gate(c redis.UniversalClient, label string) { c.AddHook(GateHook(label)) }

// redisGate is the hook of GateHook.
type redisGate struct{ label string }

// DialHook leaves dials alone; see GateHook.
func (redisGate) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook gates one command.
func (g redisGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !gatehook.Gated(ctx) {
			return next(ctx, cmd) // no gate, or inside a gated request: as before, unnamed
		}
		ctx, done, err := gatehook.Send(ctx, g.label+": "+redisCmdName(cmd))
		defer done()
		if err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook gates a pipeline (or a MULTI/EXEC transaction) as one
// request: it is one round trip.
func (g redisGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !gatehook.Gated(ctx) {
			return next(ctx, cmds)
		}
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = redisCmdName(c)
		}
		ctx, done, err := gatehook.Send(ctx, g.label+": "+strings.Join(names, ", "))
		defer done()
		if err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// redisCmdName is the command's name in upper case, with the subcommand of
// the commands that have one ("SCRIPT LOAD", "CLIENT SETNAME"). Keys and
// values are left out: they may hold a fake's random prefix.
func redisCmdName(cmd redis.Cmder) string {
	name := strings.ToUpper(cmd.Name())
	switch name {
	case "SCRIPT", "CLIENT", "CONFIG", "CLUSTER", "COMMAND", "FUNCTION", "OBJECT", "MEMORY", "XINFO", "XGROUP", "ACL":
		if args := cmd.Args(); len(args) > 1 {
			if sub, ok := args[1].(string); ok {
				name += " " + strings.ToUpper(sub)
			}
		}
	}
	if name == "" {
		return "?"
	}
	return name
}
