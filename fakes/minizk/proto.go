package minizk

import "fmt"

// Opcodes of the ZooKeeper client protocol (ZooDefs.OpCode).
const (
	opNotification    int32 = 0
	opCreate          int32 = 1
	opDelete          int32 = 2
	opExists          int32 = 3
	opGetData         int32 = 4
	opSetData         int32 = 5
	opGetACL          int32 = 6
	opSetACL          int32 = 7
	opGetChildren     int32 = 8
	opSync            int32 = 9
	opPing            int32 = 11
	opGetChildren2    int32 = 12
	opCheck           int32 = 13
	opMulti           int32 = 14
	opCreate2         int32 = 15
	opReconfig        int32 = 16
	opCheckWatches    int32 = 17
	opRemoveWatches   int32 = 18
	opCreateContainer int32 = 19
	opDeleteContainer int32 = 20
	opCreateTTL       int32 = 21
	opMultiRead       int32 = 22
	opAuth            int32 = 100
	opSetWatches      int32 = 101
	opSASL            int32 = 102
	opGetEphemerals   int32 = 103
	opGetAllChildren  int32 = 104
	opSetWatches2     int32 = 105
	opAddWatch        int32 = 106
	opWhoAmI          int32 = 107
	opCloseSession    int32 = -11
	opError           int32 = -1
)

// Special xids of replies that answer no request of the client's.
const (
	xidNotification int32 = -1
	xidPing         int32 = -2
)

// Code is a ZooKeeper error code (KeeperException.Code), as carried in a
// reply header or a multi's error result.
type Code int32

// The error codes minizk answers with.
const (
	CodeOK                   Code = 0
	CodeRuntimeInconsistency Code = -2
	CodeMarshallingError     Code = -5
	CodeUnimplemented        Code = -6
	CodeBadArguments         Code = -8
	CodeNoNode               Code = -101
	CodeNoAuth               Code = -102
	CodeBadVersion           Code = -103
	CodeNoChildrenForEphem   Code = -108
	CodeNodeExists           Code = -110
	CodeNotEmpty             Code = -111
	CodeSessionExpired       Code = -112
	CodeInvalidACL           Code = -114
	CodeAuthFailed           Code = -115
)

// codeNames are ZooKeeper's names of the codes.
var codeNames = map[Code]string{
	CodeOK: "OK", CodeRuntimeInconsistency: "RUNTIMEINCONSISTENCY", CodeMarshallingError: "MARSHALLINGERROR",
	CodeUnimplemented: "UNIMPLEMENTED", CodeBadArguments: "BADARGUMENTS", CodeNoNode: "NONODE",
	CodeNoAuth: "NOAUTH", CodeBadVersion: "BADVERSION", CodeNoChildrenForEphem: "NOCHILDRENFOREPHEMERALS",
	CodeNodeExists: "NODEEXISTS", CodeNotEmpty: "NOTEMPTY", CodeSessionExpired: "SESSIONEXPIRED",
	CodeInvalidACL: "INVALIDACL", CodeAuthFailed: "AUTHFAILED",
}

// Error makes a Code an error: "zk error -101 (NONODE)".
func (c Code) Error() string {
	name, ok := codeNames[c]
	if !ok {
		name = "UNKNOWN"
	}
	return fmt.Sprintf("zk error %d (%s)", int32(c), name)
}

// Create flags (CreateMode.toFlag).
const (
	flagEphemeral     int32 = 1
	flagSequential    int32 = 2
	flagContainer     int32 = 4
	flagTTL           int32 = 5
	flagTTLSequential int32 = 6
)

// EventType is the type of a watch notification (Watcher.Event.EventType).
type EventType int32

// The notifications a watch delivers.
const (
	EventNodeCreated         EventType = 1
	EventNodeDeleted         EventType = 2
	EventNodeDataChanged     EventType = 3
	EventNodeChildrenChanged EventType = 4
)

// stateSyncConnected is the keeper state every notification carries.
const stateSyncConnected int32 = 3

// ACL is one access control entry: permissions for an id of a scheme.
type ACL struct {
	Perms  int32
	Scheme string
	ID     string
}

// Stat is a znode's metadata, field for field ZooKeeper's Stat record.
type Stat struct {
	Czxid          int64 // zxid of the create
	Mzxid          int64 // zxid of the last setData (or the create)
	Ctime          int64 // create time, ms since the epoch
	Mtime          int64 // last setData time, ms since the epoch
	Version        int32 // number of setData
	Cversion       int32 // changes to the children, creates and deletes
	Aversion       int32 // number of setACL
	EphemeralOwner int64 // owning session of an ephemeral, else 0
	DataLength     int32
	NumChildren    int32
	Pzxid          int64 // zxid of the last change to the children
}

// header is a request header: the client's xid and the opcode.
type header struct {
	xid    int32
	opcode int32
}

// connectRequest is the first packet of a connection.
type connectRequest struct {
	protocolVersion int32
	lastZxidSeen    int64
	timeout         int32
	sessionID       int64
	passwd          []byte
	readOnlySent    bool // the client sent its (optional) read-only flag
}

func decodeConnect(b []byte) (connectRequest, error) {
	r := reader{b: b}
	c := connectRequest{protocolVersion: r.int32(), lastZxidSeen: r.int64(), timeout: r.int32(),
		sessionID: r.int64(), passwd: r.buffer()}
	if r.err == nil && len(r.b) > 0 {
		r.bool() // the client's read-only flag: optional, as ZooKeeper reads it
		c.readOnlySent = true
	}
	return c, r.err
}

// op is one decoded request body.
type op struct {
	opcode  int32
	path    string
	data    []byte
	acl     []ACL
	flags   int32
	version int32
	watch   bool
	ops     []op // multi
	// setWatches
	relZxid               int64
	dataW, existW, childW []string
	authType              int32
	ttl                   int64 // createTTL's (the other creates carry none)
	authScheme            string
}

// decodeOp decodes the body of a request with opcode code. An unknown
// opcode gives ok false; a body that does not decode gives an error (the
// server answers it with MARSHALLINGERROR).
func decodeOp(code int32, b []byte) (o op, known bool, err error) {
	r := reader{b: b}
	o.opcode = code
	switch code {
	case opPing, opCloseSession:
	case opCreate, opCreate2, opCreateContainer:
		o.path, o.data, o.acl, o.flags = r.string(), r.buffer(), r.acls(), r.int32()
	case opCreateTTL:
		o.path, o.data, o.acl, o.flags, o.ttl = r.string(), r.buffer(), r.acls(), r.int32(), r.int64()
	case opDelete, opCheck:
		o.path, o.version = r.string(), r.int32()
	case opExists, opGetData, opGetChildren, opGetChildren2:
		o.path, o.watch = r.string(), r.bool()
	case opSetData:
		o.path, o.data, o.version = r.string(), r.buffer(), r.int32()
	case opGetACL, opSync:
		o.path = r.string()
	case opSetACL:
		o.path, o.acl, o.version = r.string(), r.acls(), r.int32()
	case opSetWatches:
		o.relZxid, o.dataW, o.existW, o.childW = r.int64(), r.strings(), r.strings(), r.strings()
	case opAuth:
		o.authType, o.authScheme, o.data = r.int32(), r.string(), r.buffer()
	case opMulti:
		o.ops, err = decodeMulti(&r)
		if err != nil {
			return o, true, err
		}
	default:
		return o, false, nil
	}
	return o, true, r.err
}

// maxMultiOps bounds the ops of one multi; each takes at least 9 bytes of
// header, so a 1 MB packet holds fewer.
const maxMultiOps = maxPacket / 9

// decodeMulti decodes a multi's ops up to its done header. An op type a
// multi may not hold is a decoding error, as in ZooKeeper's
// MultiOperationRecord.
func decodeMulti(r *reader) ([]op, error) {
	var ops []op
	for r.err == nil {
		typ, done, _ := r.int32(), r.bool(), r.int32()
		if r.err != nil || done {
			break
		}
		if len(ops) >= maxMultiOps {
			return nil, fmt.Errorf("minizk: multi of more than %d ops", maxMultiOps)
		}
		o := op{opcode: typ}
		switch typ {
		case opCreate, opCreate2, opCreateContainer:
			o.opcode = opCreate // ZooKeeper answers a multi's create2 as a create: the path alone
			o.path, o.data, o.acl, o.flags = r.string(), r.buffer(), r.acls(), r.int32()
		case opDelete, opCheck:
			o.path, o.version = r.string(), r.int32()
		case opSetData:
			o.path, o.data, o.version = r.string(), r.buffer(), r.int32()
		default:
			return nil, fmt.Errorf("minizk: invalid type of op %d in multi", typ)
		}
		ops = append(ops, o)
	}
	return ops, r.err
}
