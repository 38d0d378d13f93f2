package redisfake

import (
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// ErrMiniredisNoKeyspaceNotifications is the text of the error with which
// miniredis answers CONFIG SET notify-keyspace-events with a non-empty
// value (see Server).
//
// miniredis v2.40.0 has no CONFIG command and publishes no keyspace or
// keyevent notifications (__keyspace@<db>__:<key>, __keyevent@<db>__:<event>):
// a key deleted or expired there tells nobody. Publishing them from the
// fake would take a hook on every deletion and expiry, which miniredis
// does not offer (it expires keys lazily, inside its commands). A lock
// that waits for a key's del or expired event would never wake on the
// fake and be reported as a deadlock, so the fake refuses to turn the
// notifications on, and the lock's first CONFIG SET fails with this text.
const ErrMiniredisNoKeyspaceNotifications = "ERR fakes: miniredis does not publish keyspace notifications: " +
	"a lock that waits on them never wakes on the fake; test it against real Redis with " + EnvAddr

// registerMiniredisConfig gives miniredis a CONFIG command that answers
// for notify-keyspace-events only: SET to "" is accepted (nothing is
// published, as asked), SET to anything else fails with
// ErrMiniredisNoKeyspaceNotifications, GET answers "". Every other
// parameter and subcommand fails, naming what miniredis lacks.
func registerMiniredisConfig(m *miniredis.Miniredis) error {
	const param = "notify-keyspace-events"
	return m.Server().Register("CONFIG", func(c *server.Peer, _ string, args []string) {
		if len(args) == 0 {
			c.WriteError("ERR wrong number of arguments for 'config' command")
			return
		}
		switch sub := strings.ToUpper(args[0]); {
		case sub == "SET" && len(args) >= 3 && len(args)%2 == 1:
			for i := 1; i < len(args); i += 2 {
				switch {
				case !strings.EqualFold(args[i], param):
					c.WriteError("ERR fakes: miniredis has no CONFIG parameter '" + args[i] + "'")
					return
				case args[i+1] != "":
					c.WriteError(ErrMiniredisNoKeyspaceNotifications)
					return
				}
			}
			c.WriteOK()
		case sub == "GET" && len(args) >= 2:
			for _, pattern := range args[1:] {
				if pattern == "*" || strings.EqualFold(pattern, param) {
					c.WriteMapLen(1)
					c.WriteBulk(param)
					c.WriteBulk("")
					return
				}
			}
			c.WriteMapLen(0)
		case sub == "SET" || sub == "GET":
			c.WriteError("ERR wrong number of arguments for 'config|" + strings.ToLower(sub) + "' command")
		default:
			c.WriteError("ERR fakes: miniredis has no CONFIG " + sub)
		}
	})
}
