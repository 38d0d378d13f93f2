package mysqlfake_test

import (
	"context"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"testing"
)

func TestStartMySQLAt(t *testing.T) {
	_, err := mysqlfake.Start(mysqlfake.At("root@tcp(" + faketest.ClosedAddr + ")/named"))
	faketest.WantStartError(t, "StartMySQL(MySQLAt(a DSN with a database))", err, "leave it out")
	_, err = mysqlfake.Start(mysqlfake.At("root@tcp(" + faketest.ClosedAddr + ")/"))
	faketest.WantStartError(t, "StartMySQL(MySQLAt(closed))", err, "create database")
	s, err := mysqlfake.Start(mysqlfake.At("root@tcp("+faketest.ClosedAddr+")/"), mysqlfake.ForceEmbedded())
	if err != nil || s.Real() {
		t.Fatalf("StartMySQL(MySQLAt, ForceEmbeddedMySQL): %v", err)
	}
	if err := s.DB().PingContext(context.Background()); err != nil {
		t.Errorf("ping: %v", err)
	}
	faketest.CloseOK(t, s)
}
