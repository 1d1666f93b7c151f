package main

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

var (
	soakDuration = flag.Duration("soak.duration", 20*time.Second, "TestFaultSoak: how long the soak's load runs (e.g. 5m for a real soak)")
	soakRestart  = flag.Duration("soak.restart-every", 8*time.Second, "TestFaultSoak: period of the kill -9 and restart of a non-planner node")
)

// Soak bounds: a node's goroutines and heap at the end of the soak against
// the start (same node name, both under load after a warm-up). Tolerant of
// a noisy machine, strict enough for a goroutine leaked per transaction (a
// node runs thousands in the short soak) or a per-transaction allocation
// kept forever.
const (
	soakGoroutineSlack = 100 // goroutines above 1.5× the start
	soakHeapFactor     = 3   // end heap in use ≤ soakHeapFactor × start + soakHeapSlack
	soakHeapSlack      = 64 << 20
)

type soakSample struct {
	goroutines, heapInuse, rss float64
	txns                       float64
}

func sampleNode(fn *faultNode) (soakSample, error) {
	m, err := metricsOf(fn)
	if err != nil {
		return soakSample{}, err
	}
	txns := 0.0
	for k, v := range m {
		if len(k) > len("aura_txn_total") && k[:len("aura_txn_total{")] == "aura_txn_total{" {
			txns += v
		}
	}
	return soakSample{goroutines: m["go_goroutines"], heapInuse: m["go_memstats_heap_inuse_bytes"],
		rss: m["process_resident_memory_bytes"], txns: txns}, nil
}

// TestFaultSoak runs the cluster under drifting load for -soak.duration,
// kills -9 and restarts a non-planner node every -soak.restart-every
// (cn-2, cn-3, cn-2, …), and checks, besides the fault suite's checks,
// that every node's goroutines and heap stay flat: it samples them from
// /metrics after a warm-up and at the end, prints them, and bounds the
// growth.
func TestFaultSoak(t *testing.T) {
	skipFaults(t, false)
	start := time.Now()
	const warmup = 5 * time.Second
	c := newFaultCluster(t, 3)
	stopDrift := c.drift(time.Second)
	lc := c.startLoad(faultClients)
	time.Sleep(warmup)
	before := map[string]soakSample{}
	for _, fn := range c.live() {
		s, err := sampleNode(fn)
		if err != nil {
			t.Fatalf("%s: %v", fn.name, err)
		}
		before[fn.name] = s
	}
	lc.phase.Store(1)
	restarts := map[string]int{}
	victims := []string{"cn-2", "cn-3"}
	end := time.Now().Add(*soakDuration)
	next := time.Now().Add(*soakRestart)
	for i := 0; time.Now().Before(end); {
		if time.Now().Before(next) {
			time.Sleep(min(time.Until(next), time.Until(end), 200*time.Millisecond))
			continue
		}
		fn := c.node(victims[i%len(victims)])
		i++
		c.kill9(fn)
		lc.route()
		time.Sleep(time.Second)
		c.start(fn)
		lc.route()
		restarts[fn.name]++
		next = time.Now().Add(*soakRestart)
	}
	c.inject("drift every 1s for %v; kill -9 and restart every %v: %v", *soakDuration, *soakRestart, restarts)
	// The restarted node's process is a new one: give it the warm-up the
	// first sample had before the end sample.
	lc.phase.Store(2)
	if since := time.Since(next.Add(-*soakRestart)); since < warmup {
		time.Sleep(warmup - since)
	}
	after := map[string]soakSample{}
	for _, fn := range c.live() {
		s, err := sampleNode(fn)
		if err != nil {
			t.Fatalf("%s: %v", fn.name, err)
		}
		after[fn.name] = s
	}
	stopDrift()
	for _, fn := range c.nodes {
		b, a := before[fn.name], after[fn.name]
		line := fmt.Sprintf("soak node=%s restarts=%d goroutines %.0f→%.0f heap_inuse %.1f→%.1f MiB rss %.1f→%.1f MiB txns(this process) %.0f→%.0f",
			fn.name, restarts[fn.name], b.goroutines, a.goroutines, b.heapInuse/(1<<20), a.heapInuse/(1<<20), b.rss/(1<<20), a.rss/(1<<20), b.txns, a.txns)
		fmt.Println(line)
		if a.goroutines > 1.5*b.goroutines+soakGoroutineSlack {
			t.Errorf("%s: goroutines grew from %.0f to %.0f (bound 1.5× + %d)", fn.name, b.goroutines, a.goroutines, soakGoroutineSlack)
		}
		if a.heapInuse > soakHeapFactor*b.heapInuse+soakHeapSlack {
			t.Errorf("%s: heap in use grew from %.1f to %.1f MiB (bound %d× + %d MiB)", fn.name, b.heapInuse/(1<<20), a.heapInuse/(1<<20),
				soakHeapFactor, soakHeapSlack>>20)
		}
	}
	c.verify("soak", lc, start)
}
