package miniconsul

import (
	"errors"
	"fmt"
)

// The errors Consul's state store gives for a lock or an unlock it
// refuses, word for word. Through /v1/kv they come back from Raft with
// raftPrefix before them (the api client reports "Unexpected response
// code: 500 (<message>)"); in a /v1/txn result they stand alone.
var errMissingSession = errors.New("missing session")

func errInvalidSession(id string) error {
	return fmt.Errorf("invalid session %#v", id)
}

// raftPrefix is what the agent puts before a state store's error that
// comes back through Raft.
const raftPrefix = "raft apply failed: "
