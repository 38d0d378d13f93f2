package linearize

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// porcupineData is the test_data directory of porcupine's module, found
// through the build info (porcupine is a test dependency), or "" if the
// module cache does not hold it.
func porcupineData(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("GOMODCACHE")
	if dir == "" {
		if gp := os.Getenv("GOPATH"); gp != "" {
			dir = filepath.Join(strings.Split(gp, string(os.PathListSeparator))[0], "pkg", "mod")
		} else if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, "go", "pkg", "mod")
		}
	}
	version := "v1.3.1"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/anishathalye/porcupine" {
				version = d.Version
			}
		}
	}
	p := filepath.Join(dir, "github.com", "anishathalye", "porcupine@"+version, "test_data")
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("porcupine test data not found (%v); run go mod download github.com/anishathalye/porcupine", err)
	}
	return p
}

// readLines returns the lines of a file.
func readLines(tb testing.TB, path string) []string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}

// kvLine matches one entry of porcupine's Jepsen-style key-value logs.
var kvLine = regexp.MustCompile(`^\{:process (\d+), :type :(invoke|ok), :f :(get|put|append), :key "(.*)", :value (nil|"(.*)")\}$`)

// loadKV reads test_data/kv/<name>.txt. Times are line numbers. As in
// porcupine's own tests, calls still open at the end return after the last
// line with an empty output (for a get: it read "").
func loadKV(tb testing.TB, name string) []Operation[KVInput, KVOutput] {
	tb.Helper()
	lines := readLines(tb, filepath.Join(porcupineData(tb), "kv", name+".txt"))
	var h []Operation[KVInput, KVOutput]
	open := map[int]int{} // process -> index in h
	ops := map[string]KVOp{"get": Get, "put": Put, "append": Append}
	for t, line := range lines {
		m := kvLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		proc, _ := strconv.Atoi(m[1])
		if m[2] == "invoke" {
			open[proc] = len(h)
			h = append(h, Operation[KVInput, KVOutput]{
				ID: len(h), ClientID: proc, Call: int64(t),
				Input: KVInput{Op: ops[m[3]], Key: m[4], Value: m[6]},
			})
			continue
		}
		i, ok := open[proc]
		if !ok {
			tb.Fatalf("%s:%d: return without call", name, t+1)
		}
		delete(open, proc)
		h[i].Return = int64(t)
		if m[3] == "get" {
			h[i].Output.Value = m[6]
		}
	}
	for _, i := range open {
		h[i].Return = int64(len(lines))
	}
	return h
}

// etcdIn and etcdOut are the operations of Jepsen's etcd register test: a
// register that may be empty, with read, write and compare-and-set.
type etcdIn struct {
	Op       string // "read", "write", "cas"
	Arg, New int
}

type etcdOut struct {
	OK     bool // cas succeeded
	Exists bool // read found a value
	Value  int  // read value
}

// etcdState is the register: Set is false while it is empty.
type etcdState struct {
	Set   bool
	Value int
}

func etcdModel() Model[etcdState, etcdIn, etcdOut] {
	return Model[etcdState, etcdIn, etcdOut]{
		Init: func() etcdState { return etcdState{} },
		Step: func(dst []etcdState, s etcdState, op *Operation[etcdIn, etcdOut]) []etcdState {
			in, out := op.Input, op.Output
			switch in.Op {
			case "read":
				if op.Unknown || out.Exists == s.Set && (!s.Set || out.Value == s.Value) {
					return append(dst, s)
				}
			case "write":
				return append(dst, etcdState{Set: true, Value: in.Arg})
			case "cas":
				match := s.Set && s.Value == in.Arg
				if op.Unknown {
					if match {
						return append(dst, etcdState{Set: true, Value: in.New})
					}
					return append(dst, s)
				}
				if out.OK && match {
					return append(dst, etcdState{Set: true, Value: in.New})
				}
				if !out.OK && !match {
					return append(dst, s)
				}
			}
			return dst
		},
		ReadOnly: func(op *Operation[etcdIn, etcdOut]) bool {
			return op.Input.Op == "read" || !op.Unknown && op.Input.Op == "cas" && !op.Output.OK
		},
		ReadHash: func(op *Operation[etcdIn, etcdOut]) (uint64, bool) {
			return etcdHash(etcdState{Set: op.Output.Exists, Value: op.Output.Value}), op.Input.Op == "read"
		},
		Hash: etcdHash,
	}
}

func etcdHash(s etcdState) uint64 {
	if !s.Set {
		return 1
	}
	return uint64(s.Value) * 0x9e3779b97f4a7c15
}

var etcdLine = regexp.MustCompile(`^INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(invoke|ok|fail|info)\s+:(read|write|cas)\s+(.*)$`)

// loadEtcd reads test_data/jepsen/etcd_NNN.log. Times are line numbers. A
// read that failed with :timed-out, and any call never answered (:info
// timeouts, calls open at the end), have unknown outcomes.
func loadEtcd(tb testing.TB, n int) []Operation[etcdIn, etcdOut] {
	tb.Helper()
	lines := readLines(tb, filepath.Join(porcupineData(tb), "jepsen", fmt.Sprintf("etcd_%03d.log", n)))
	var h []Operation[etcdIn, etcdOut]
	open := map[int]int{}
	for t, line := range lines {
		m := etcdLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		proc, _ := strconv.Atoi(m[1])
		kind, f, arg := m[2], m[3], strings.TrimSpace(m[4])
		if kind == "invoke" {
			in := etcdIn{Op: f}
			switch f {
			case "write":
				in.Arg, _ = strconv.Atoi(arg)
			case "cas":
				fmt.Sscanf(arg, "[%d %d]", &in.Arg, &in.New)
			}
			open[proc] = len(h)
			h = append(h, Operation[etcdIn, etcdOut]{ID: len(h), ClientID: proc, Call: int64(t), Input: in})
			continue
		}
		i, ok := open[proc]
		if !ok {
			continue
		}
		switch {
		case kind == "ok" && f == "read":
			delete(open, proc)
			h[i].Return = int64(t)
			if arg != "nil" {
				h[i].Output = etcdOut{Exists: true}
				h[i].Output.Value, _ = strconv.Atoi(arg)
			}
		case kind == "ok" && f == "write":
			delete(open, proc)
			h[i].Return = int64(t)
		case (kind == "ok" || kind == "fail") && f == "cas":
			delete(open, proc)
			h[i].Return = int64(t)
			h[i].Output.OK = kind == "ok"
		case kind == "fail" && f == "read" && arg == ":timed-out":
			delete(open, proc)
			h[i].Return, h[i].Unknown = int64(t), true
		}
	}
	for _, i := range open {
		h[i].Return, h[i].Unknown = int64(len(lines)), true
	}
	return h
}

// etcdLinearizable lists the etcd logs porcupine's tests expect to be
// linearizable; the other logs 0..102 are not (log 95 does not exist: that
// etcd cluster failed to start).
var etcdLinearizable = map[int]bool{
	2: true, 5: true, 7: true, 18: true, 25: true, 31: true, 38: true, 45: true,
	48: true, 49: true, 51: true, 53: true, 56: true, 67: true, 75: true, 76: true,
	80: true, 87: true, 92: true, 98: true, 100: true, 101: true, 102: true,
}

func etcdLogs() []int {
	var logs []int
	for n := 0; n <= 102; n++ {
		if n != 95 {
			logs = append(logs, n)
		}
	}
	return logs
}

var kvLogs = []struct {
	name string
	ok   bool
}{
	{"c01-ok", true}, {"c01-bad", false}, {"c10-ok", true}, {"c10-bad", false},
	{"c50-ok", true}, {"c50-bad", false},
}

func TestPublicKVHistories(t *testing.T) {
	for _, lg := range kvLogs {
		t.Run(lg.name, func(t *testing.T) {
			h := loadKV(t, lg.name)
			want := Illegal
			if lg.ok {
				want = Ok
			}
			res, err := Check(t.Context(), NewKVModel(), h, Options{NoMinimize: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != want {
				t.Fatalf("partitioned: verdict %v, porcupine's tests expect %v", res.Verdict, want)
			}
			if lg.name == "c50-ok" || lg.name == "c50-bad" {
				return // unpartitioned c50 does not finish in minutes (porcupine's neither)
			}
			res, err = Check(t.Context(), NewKVMapModel(), h, Options{NoMinimize: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != want {
				t.Fatalf("unpartitioned: verdict %v, porcupine's tests expect %v", res.Verdict, want)
			}
		})
	}
}

func TestPublicEtcdHistories(t *testing.T) {
	for _, n := range etcdLogs() {
		h := loadEtcd(t, n)
		res, err := Check(t.Context(), etcdModel(), h, Options{NoMinimize: true})
		if err != nil {
			t.Fatal(err)
		}
		want := Illegal
		if etcdLinearizable[n] {
			want = Ok
		}
		if res.Verdict != want {
			t.Errorf("etcd_%03d: verdict %v, porcupine's tests expect %v", n, res.Verdict, want)
		}
	}
}
