package miniconsul_test

import (
	"fmt"
	"net/http"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/miniconsul"
)

func Example() {
	srv, err := miniconsul.Start() // in a test, use consulfake.New(t)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client, err := api.NewClient(&api.Config{Address: srv.Addr(), HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		panic(err)
	}

	id, _, err := client.Session().Create(&api.SessionEntry{TTL: "10s"}, nil)
	if err != nil {
		panic(err)
	}
	ok, _, err := client.KV().Acquire(&api.KVPair{Key: "leader", Value: []byte("me"), Session: id}, nil)
	if err != nil {
		panic(err)
	}
	pair, _, err := client.KV().Get("leader", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("acquired:", ok, "value:", string(pair.Value), "lock index:", pair.LockIndex)

	srv.InvalidateSession(id) // as if its TTL had run out
	pair, _, err = client.KV().Get("leader", nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("holder after expiry: %q\n", pair.Session)
	// Output:
	// acquired: true value: me lock index: 1
	// holder after expiry: ""
}
