package mysqlfake_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
)

func TestConnsSeverMySQL(t *testing.T) {
	s := mysqlfake.New(t)
	pools := map[string]func(*fakes.Conns) *sql.DB{
		"through the fake": func(c *fakes.Conns) *sql.DB {
			db, err := s.OpenDBThrough(c)
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		"tcp": func(c *fakes.Conns) *sql.DB {
			cfg, err := mysql.ParseDSN(s.DSN())
			if err != nil {
				t.Fatal(err)
			}
			cfg.DialFunc = c.Dial(faketest.TCPDial(cfg.Addr))
			connector, err := mysql.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(connector)
			t.Cleanup(func() { _ = db.Close() })
			return db
		},
	}
	for name, open := range pools {
		t.Run(name, func(t *testing.T) {
			conns := fakes.NewConns()
			db := open(conns)
			var one int
			if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
				t.Fatal(err)
			}
			if conns.Open() == 0 {
				t.Fatal("the pool's connection is not tracked")
			}
			conns.Sever()
			for range 2 {
				if err := db.QueryRow("SELECT 1").Scan(&one); !errors.Is(err, fakes.ErrSevered) {
					t.Fatalf("a statement after Sever: %v, want ErrSevered", err)
				}
			}
			if err := s.DB().QueryRow("SELECT 1").Scan(&one); err != nil {
				t.Fatalf("another pool after Sever: %v", err)
			}
		})
	}
}
