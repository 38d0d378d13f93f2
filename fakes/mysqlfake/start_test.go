package mysqlfake_test

import (
	"context"
	"testing"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
)

func TestStartMySQLAt(t *testing.T) {
	_, err := mysqlfake.Start(mysqlfake.At("root@tcp(" + faketest.ClosedAddr + ")/named"))
	faketest.WantStartError(t, "Start(At(a DSN with a database))", err, "leave it out")
	_, err = mysqlfake.Start(mysqlfake.At("root@tcp(" + faketest.ClosedAddr + ")/"))
	faketest.WantStartError(t, "Start(At(closed))", err, "create database")
	s, err := mysqlfake.Start(mysqlfake.At("root@tcp("+faketest.ClosedAddr+")/"), mysqlfake.ForceEmbedded())
	if err != nil || s.Real() {
		t.Fatalf("Start(At, ForceEmbeddedMySQL): %v", err)
	}
	if err := s.DB().PingContext(context.Background()); err != nil {
		t.Errorf("ping: %v", err)
	}
	faketest.CloseOK(t, s)
}
