package miniconsul

import (
	"errors"
	"fmt"
)

// The error messages Consul's server gives for writes its state store
// refuses, word for word (they come back through Raft, hence the prefix):
// the api client reports them as "Unexpected response code: 500 (<message>)".
var errMissingSession = errors.New("raft apply failed: missing session")

func errInvalidSession(id string) error {
	return fmt.Errorf("raft apply failed: invalid session %#v", id)
}
