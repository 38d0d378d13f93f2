package layout

import (
	"strings"
	"testing"
)

func TestRedisKeyIsAHashTag(t *testing.T) {
	if got := RedisKey("lockproof:", "orders"); got != "lockproof:{orders}" {
		t.Fatalf("RedisKey = %q", got)
	}
}

func TestRedisRWKeysShareTheHashTag(t *testing.T) {
	r, w, q, f, c := RedisRWKeys("p:", "cfg")
	for _, k := range []string{r, w, q, f, c} {
		if !strings.HasPrefix(k, RedisKey("p:", "cfg")+":rw:") {
			t.Errorf("%q is not under %q", k, RedisKey("p:", "cfg"))
		}
	}
	if len(map[string]bool{r: true, w: true, q: true, f: true, c: true}) != 5 {
		t.Errorf("keys not distinct: %q %q %q %q %q", r, w, q, f, c)
	}
}

// TestEtcdKeyRangesDoNotNest: the queue-mode prefix of one lock never
// starts the prefix of another, whatever "/" and "%" the names hold.
func TestEtcdKeyRangesDoNotNest(t *testing.T) {
	names := []string{"a", "a/b", "a%2Fb", "a%", "%", "/", "a/"}
	for _, x := range names {
		for _, y := range names {
			kx, ky := EtcdKey("p/", x, false), EtcdKey("p/", y, false)
			if x != y && strings.HasPrefix(ky, kx) {
				t.Errorf("lock %q's range %q holds lock %q's %q", x, kx, y, ky)
			}
		}
	}
	if got := EtcdKey("p/", "a/b", true); got != "p/a%2Fb" {
		t.Errorf("naive EtcdKey = %q", got)
	}
}

func TestMySQLStatementsNameTheTable(t *testing.T) {
	for _, s := range []string{MySQLTable("t1"), MySQLExpire("t1")} {
		if !strings.Contains(s, "`t1`") {
			t.Errorf("%q does not name table t1", s)
		}
	}
}

func TestZKNode(t *testing.T) {
	cases := []struct{ prefix, name, want string }{
		{"/lockproof", "jobs", "/lockproof/jobs"},
		{"/lockproof/", "a/b%", "/lockproof/a%2Fb%25"},
		{"", "..", "/%2E%2E"},
		{"/p", "x\x00é\U0001F600", "/p/x%00é%F0%9F%98%80"},
	}
	for _, c := range cases {
		if got := ZKNode(c.prefix, c.name); got != c.want {
			t.Errorf("ZKNode(%q, %q) = %q, want %q", c.prefix, c.name, got, c.want)
		}
	}
}

func TestZKHolderIsTheLowestSequence(t *testing.T) {
	kids := []string{
		ZKProtected + strings.Repeat("b", 32) + "-" + ZKMarker + "0000000012",
		"not-a-contender",
		ZKProtected + strings.Repeat("a", 32) + "-" + ZKMarker + "0000000009",
		"x-" + ZKMarker + "0000000010",
	}
	if h, ok := ZKHolder(kids); !ok || h != kids[2] {
		t.Fatalf("ZKHolder = %q, %v; want %q", h, ok, kids[2])
	}
	if h, ok := ZKHolder([]string{"other"}); ok {
		t.Fatalf("ZKHolder of no contender = %q, true", h)
	}
}

// TestConsulRWKeysAreUnderTheKey: the writer's key is the lock's key, and
// the readers' and the queue's prefixes are distinct paths under it.
func TestConsulRWKeysAreUnderTheKey(t *testing.T) {
	w, r, q := ConsulRWKeys("p/", "cfg")
	if w != ConsulKey("p/", "cfg") || r != "p/cfg/.reader/" || q != "p/cfg/.queue/" {
		t.Fatalf("ConsulRWKeys = %q, %q, %q", w, r, q)
	}
	if q != ConsulQueue(w) || r == q {
		t.Fatalf("queue %q, ConsulQueue %q, readers %q", q, ConsulQueue(w), r)
	}
}

func TestZKRWSequenceTellsReadersFromWriters(t *testing.T) {
	g := ZKProtected + strings.Repeat("c", 32) + "-"
	cases := []struct {
		child     string
		seq       int64
		write, ok bool
	}{
		{g + ZKReadMarker + "0000000007", 7, false, true},
		{g + ZKWriteMarker + "0000000011", 11, true, true},
		{g + ZKMarker + "0000000003", 0, false, false},
		{g + ZKWriteMarker + "x", 0, true, false},
		{"other", 0, false, false},
	}
	for _, c := range cases {
		seq, write, ok := ZKRWSequence(c.child)
		if ok != c.ok || (ok && (seq != c.seq || write != c.write)) {
			t.Errorf("ZKRWSequence(%q) = %d, %v, %v; want %d, %v, %v", c.child, seq, write, ok, c.seq, c.write, c.ok)
		}
	}
	kids := []string{g + ZKWriteMarker + "0000000005", g + ZKReadMarker + "0000000004", "other"}
	if h, ok := ZKHolder(kids); !ok || h != kids[1] {
		t.Fatalf("ZKHolder of a read-write mutex's children = %q, %v; want %q", h, ok, kids[1])
	}
}
