package mysqlfake_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/locks"
)

// ManualTime starts the server on a manual clock: NOW(6) stands still
// until Advance, Clock and LockOptions hand that clock out, and Close lets
// another server follow a clock again.
func TestManualTime(t *testing.T) {
	ctx := context.Background()
	s := mysqlfake.New(t, mysqlfake.ManualTime(faketest.Epoch), mysqlfake.ForceEmbedded())
	now := func() time.Time {
		t.Helper()
		var at time.Time
		if err := s.DB().QueryRowContext(ctx, "SELECT NOW(6)").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	if got := now(); !got.Equal(faketest.Epoch) {
		t.Fatalf("NOW(6) = %v, want the start %v", got, faketest.Epoch)
	}
	s.Advance(2 * time.Second)
	if got, want := now(), faketest.Epoch.Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("NOW(6) after Advance = %v, want %v", got, want)
	}
	if _, ok := s.Clock().(*fakes.Clock); !ok {
		t.Fatalf("Clock() = %T, want the manual clock", s.Clock())
	}
	var opts locks.Options
	for _, o := range s.LockOptions() {
		o(&opts)
	}
	if opts.Clock != s.Clock() {
		t.Fatalf("LockOptions' clock %v is not the server's", opts.Clock)
	}
}

// Without ManualTime the clock is the system's, and Advance fails the
// test; on a real server ManualTime is an error, not a silent real clock.
func TestManualTimeRefused(t *testing.T) {
	s := mysqlfake.New(t, mysqlfake.ForceEmbedded())
	if _, ok := s.Clock().(locks.SystemClock); !ok {
		t.Fatalf("Clock() = %T, want locks.SystemClock", s.Clock())
	}
	msg := faketest.FatalMessage(t, func(tb testing.TB) {
		mysqlfake.New(tb, mysqlfake.ForceEmbedded()).Advance(time.Second)
	})
	if !strings.Contains(msg, "mysqlfake.ManualTime") {
		t.Errorf("Advance in real time failed with %q", msg)
	}
	_, err := mysqlfake.Start(mysqlfake.At("root@tcp("+faketest.ClosedAddr+")/"), mysqlfake.ManualTime(faketest.Epoch))
	faketest.WantStartError(t, "Start(At, ManualTime)", err, "in-process")
}

// Addr is the host:port of the DSN.
func TestAddr(t *testing.T) {
	s := mysqlfake.New(t, mysqlfake.ForceEmbedded())
	cfg, err := mysql.ParseDSN(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr() != cfg.Addr || !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q, DSN's address %q", s.Addr(), cfg.Addr)
	}
}
