package lab

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestParseGaleraStatus(t *testing.T) {
	vars := map[string]string{"wsrep_ready": "ON", "wsrep_cluster_status": "Primary",
		"wsrep_local_state_comment": "Synced", "wsrep_cluster_size": "3"}
	s, err := parseGaleraStatus(vars)
	if err != nil || !s.Synced() || s.Size != 3 {
		t.Fatalf("parseGaleraStatus(%v) = %+v, %v; want synced, size 3", vars, s, err)
	}
	cut := map[string]string{"wsrep_ready": "OFF", "wsrep_cluster_status": "non-Primary",
		"wsrep_local_state_comment": "Initialized", "wsrep_cluster_size": "1"}
	if s, err := parseGaleraStatus(cut); err != nil || s.Synced() {
		t.Errorf("parseGaleraStatus(%v) = %+v, %v; want not synced", cut, s, err)
	}
	for _, bad := range []map[string]string{{}, {"wsrep_ready": "ON"},
		{"wsrep_ready": "ON", "wsrep_cluster_status": "Primary", "wsrep_local_state_comment": "Synced", "wsrep_cluster_size": "x"}} {
		if s, err := parseGaleraStatus(bad); err == nil {
			t.Errorf("parseGaleraStatus(%v) = %+v, want an error", bad, s)
		}
	}
}

func TestFaketimeOffset(t *testing.T) {
	for d, want := range map[time.Duration]string{10 * time.Second: "+10s", -1500 * time.Millisecond: "-1.5s"} {
		if got := faketimeOffset(d); got != want {
			t.Errorf("faketimeOffset(%v) = %q, want %q", d, got, want)
		}
	}
}

// galeraSkew is how far member 2's clock runs ahead in TestGaleraCluster.
const galeraSkew = 10 * time.Second

// TestGaleraCluster starts 3 MariaDB Galera nodes, member 2 with its clock
// 10 s ahead, then sets it 5 s behind without a restart; writes on one
// node and reads on another; isolates a node and
// waits until it refuses queries while the majority still takes writes;
// heals and waits until it rejoins with the write it missed; kills and
// restarts the bootstrap node without its data and waits until it rejoins.
func TestGaleraCluster(t *testing.T) {
	needLab(t)
	if reason := GaleraUnavailable(); reason != "" {
		t.Skip(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	began := time.Now()
	g, err := StartGalera(ctx, GaleraOptions{Options: Options{Logf: t.Logf}, Skew: map[int]time.Duration{2: galeraSkew}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("closing the cluster: %v", err)
		}
	})
	t.Logf("galera: 3 nodes synced in %v, %d MiB resident", time.Since(began).Round(time.Millisecond), residentMiB(t, g.Lab))
	dbs := make([]*sql.DB, 3)
	for i := range dbs {
		if dbs[i], err = g.DB(i); err != nil {
			t.Fatal(err)
		}
		defer dbs[i].Close()
	}

	mustExec(t, dbs[0], "CREATE DATABASE lab")
	mustExec(t, dbs[0], "CREATE TABLE lab.kv (k INT PRIMARY KEY, v INT)")
	mustExec(t, dbs[0], "INSERT INTO lab.kv VALUES (1, 10)")
	if v := readKey(ctx, t, dbs[1], 1); v != 10 {
		t.Fatalf("member 1 read %d for key 1, written as 10 on member 0", v)
	}

	// The skewed member's NOW() runs ahead; an unskewed one's does not.
	wantOffsets(ctx, t, g, map[int]time.Duration{0: 0, 2: galeraSkew})
	// The skewed member's clock moves while it runs; the others cannot.
	reskewed := time.Now()
	if err := g.SetSkew(ctx, 2, -galeraSkew/2); err != nil {
		t.Fatal(err)
	}
	t.Logf("galera: member 2's skew changed in %v", time.Since(reskewed).Round(time.Millisecond))
	wantOffsets(ctx, t, g, map[int]time.Duration{0: 0, 2: -galeraSkew / 2})
	if err := g.SetSkew(ctx, 1, time.Second); err == nil {
		t.Error("member 1, started without libfaketime, took a skew")
	}

	alone, err := Isolate(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	if err := g.Apply(ctx, alone); err != nil {
		t.Fatal(err)
	}
	refused := awaitRefusal(ctx, t, dbs[1])
	t.Logf("galera: isolated member 1 refused queries %v after the partition", refused.Round(time.Millisecond))
	if s, err := g.Status(ctx, 1); err != nil || s.Synced() || s.Cluster == "Primary" {
		t.Errorf("isolated member 1's status: %+v, %v; want out of the primary component", s, err)
	}
	mustExec(t, dbs[2], "INSERT INTO lab.kv VALUES (2, 20)")

	healed := time.Now()
	if err := g.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.AwaitSynced(ctx, 1); err != nil {
		t.Fatalf("member 1 did not rejoin: %v\n%s", err, g.Member(1).LogTail(15))
	}
	t.Logf("galera: member 1 synced again %v after the heal", time.Since(healed).Round(time.Millisecond))
	if v := readKey(ctx, t, dbs[1], 2); v != 20 {
		t.Errorf("rejoined member 1 read %d for key 2, written as 20 during its isolation", v)
	}
	t.Logf("galera: partition to rejoin: %v", time.Since(cut).Round(time.Millisecond))

	// Member 0 bootstrapped the cluster; killed and restarted without its
	// data (from the template, so an incremental transfer), it must
	// join the others again, not bootstrap a cluster of its own.
	if err := g.Member(0).Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The survivors stall writes until they evict the dead member.
	for {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := dbs[1].ExecContext(wctx, "REPLACE INTO lab.kv VALUES (3, 30)")
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no write went through after member 0's kill: %v", err)
		}
	}
	t.Logf("galera: a write went through %v after member 0's kill", time.Since(killed).Round(time.Millisecond))
	restarted := time.Now()
	if err := g.Member(0).Restart(true); err != nil {
		t.Fatal(err)
	}
	if err := g.AwaitSynced(ctx, 0); err != nil {
		t.Fatalf("member 0 did not rejoin after its restart: %v\n%s", err, g.Member(0).LogTail(15))
	}
	t.Logf("galera: killed member 0 synced again %v after its restart", time.Since(restarted).Round(time.Millisecond))
	for i := range 3 {
		if s, err := g.Status(ctx, i); err != nil || s.Size != 3 {
			t.Errorf("member %d after member 0's restart: %+v, %v; want a component of 3", i, s, err)
		}
	}
	if v := readKey(ctx, t, dbs[0], 3); v != 30 {
		t.Errorf("restarted member 0 read %d for key 3, written as 30 while it was down", v)
	}
	for _, db := range dbs {
		db.Close()
	}
	wantNothingLeft(t, g.Lab)
}

// wantOffsets checks that member i's NOW() runs want[i] ahead of this
// machine's clock, within 2 s.
func wantOffsets(ctx context.Context, t *testing.T, g *Galera, want map[int]time.Duration) {
	t.Helper()
	for i, w := range want {
		off, err := g.ClockOffset(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if off < w-2*time.Second || off > w+2*time.Second {
			t.Errorf("member %d's NOW() is %v ahead, want %v", i, off, w)
		}
		t.Logf("galera: member %d's NOW() runs %v ahead", i, off.Round(time.Millisecond))
	}
}

// mustExec runs a statement or fails t.
func mustExec(t *testing.T, db *sql.DB, query string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// readKey reads key k's value, waiting for the node to apply what the
// cluster committed before (wsrep_sync_wait) on the same connection.
func readKey(ctx context.Context, t *testing.T, db *sql.DB, k int) int {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRowContext(ctx, "SELECT v FROM lab.kv WHERE k = ?", k).Scan(&v); err != nil {
		t.Fatalf("reading key %d: %v", k, err)
	}
	return v
}

// errUnknownCommand is MySQL's ER_UNKNOWN_COM_ERROR, Galera's answer to a
// query on a node outside the primary component.
const errUnknownCommand = 1047

// awaitRefusal waits until db's node refuses a read as a node outside the
// primary component does (not ready), and returns how long that took.
func awaitRefusal(ctx context.Context, t *testing.T, db *sql.DB) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var v int
		err := db.QueryRowContext(qctx, "SELECT v FROM lab.kv WHERE k = 1").Scan(&v)
		cancel()
		var me *mysql.MySQLError
		switch {
		case errors.As(err, &me) && me.Number == errUnknownCommand:
			return time.Since(began)
		case err != nil && ctx.Err() != nil:
			t.Fatalf("no refusal: %v", err)
		case err != nil:
			t.Logf("galera: while awaiting the refusal: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the isolated node never refused a query: %v", ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// residentMiB is the resident memory of the lab's member processes, as
// /proc tells it.
func residentMiB(t *testing.T, l *Lab) int {
	t.Helper()
	total := 0
	for _, m := range l.Members() {
		var kib int
		status, err := readProcStatus(m.Pid())
		if err != nil {
			t.Logf("reading member %d's memory: %v", m.Index(), err)
			continue
		}
		if _, err := fmt.Sscanf(status["VmRSS"], "%d kB", &kib); err != nil {
			t.Logf("member %d's VmRSS %q: %v", m.Index(), status["VmRSS"], err)
		}
		total += kib
	}
	return total / 1024
}
