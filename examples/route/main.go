// Command route shows how an application finds where its data lives with
// the client library: it reads the cluster's topology from a node's
// management API and asks which worker (compute node) a key tuple goes to
// under a named partition rule.
//
//	go run ./examples/route -url 'aura://127.0.0.1:8001/tpcc?http_addr=127.0.0.1:8081' -rule r_orders -key 1,3,2101
//
// Add &token=TOKEN to the URL when the nodes run with --auth-token, or set
// AURA_AUTH_TOKEN.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/rules"
)

func main() {
	raw := flag.String("url", "aura://127.0.0.1:8001/tpcc?http_addr=127.0.0.1:8081", "connection string aura://HOST:PORT/DB?http_addr=HOST:PORT[&token=T]")
	rule := flag.String("rule", "r_orders", "partition rule")
	key := flag.String("key", "1,3,2101", "key tuple K1,K2,...")
	flag.Parse()
	if err := run(*raw, *rule, *key); err != nil {
		fmt.Fprintln(os.Stderr, "route:", err)
		os.Exit(1)
	}
}

func run(raw, rule, key string) error {
	u, err := client.ParseURL(raw)
	if err != nil {
		return err // the error redacts the token
	}
	if u.Token == "" {
		u.Token = os.Getenv("AURA_AUTH_TOKEN")
	}
	k, err := rules.ParseKey(key)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	topo, err := client.FetchTopology(ctx, u)
	if err != nil {
		return err
	}
	fmt.Printf("OwnerMap epoch %d, %d workers\n", topo.Epoch, topo.WorkerCount)
	for _, w := range topo.Workers {
		fmt.Printf("  %d %s %s owns %d cohorts\n", w.WorkerIndex, w.WorkerID, w.Address, len(w.PartitionIDs))
	}

	// Asking with the epoch just seen makes a lagging node answer
	// StaleEpoch instead of an older route.
	r, err := client.NewAPI(u).PartitionRoute(ctx, rule, k, topo.Epoch)
	switch {
	case client.IsCode(err, client.CodeNoSuchRule):
		return fmt.Errorf("the node has no rule %q: %w", rule, err)
	case client.IsCode(err, client.CodeStaleEpoch):
		return errors.New("the node's OwnerMap is behind; retry in a moment")
	case err != nil:
		return err
	}
	where := "no cohort, " + r.Source
	if r.PartitionID != nil {
		where = fmt.Sprintf("cohort %d", *r.PartitionID)
	}
	fmt.Printf("%s %s -> key group %d (%s) -> %s at %s\n", rule, key, r.KeyGroup, where, r.WorkerID, r.Address)
	return nil
}
