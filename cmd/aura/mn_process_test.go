package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aura-runtime/aura/rdma"
	"github.com/aura-runtime/aura/rdma/tcp"
)

var (
	buildOnce sync.Once
	auraBin   string
	buildErr  error
	buildDir  string
)

// buildAura builds the aura binary once per test run, with `go build`.
func buildAura(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH; cannot build the aura binary")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "aura-mn-test-")
		if buildErr != nil {
			return
		}
		auraBin = filepath.Join(buildDir, "aura")
		out, err := exec.Command(goBin, "build", "-o", auraBin, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return auraBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// mnProcess is a running `aura mn`.
type mnProcess struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startMN(t *testing.T, args ...string) *mnProcess {
	t.Helper()
	p := &mnProcess{}
	p.cmd, p.stderr, p.exited, p.addr = launch(t, "mn", mnListeningPrefix, args...)
	return p
}

// launch starts `aura SUB ARGS…`, waits (60 s at most) for the stdout line
// starting with ready and returns the process, its stderr, a channel that
// receives its exit, and the rest of that line. The process is killed when
// the test ends; its stderr is logged if the test failed.
func launch(t *testing.T, sub, ready string, args ...string) (*exec.Cmd, *syncBuffer, chan error, string) {
	t.Helper()
	bin := buildAura(t)
	cmd := exec.Command(bin, append([]string{sub}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, exited := &syncBuffer{}, make(chan error, 1)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), ready); ok {
				lines <- rest
			}
		}
	}()
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-exited
		exited <- err
		if t.Failed() {
			t.Logf("aura %s %v stderr:\n%s", sub, args, stderr.String())
		}
	})
	select {
	case rest := <-lines:
		return cmd, stderr, exited, rest
	case err := <-exited:
		exited <- err // for the cleanup, which waits for the exit
		t.Fatalf("aura %s exited before it was ready: %v\n%s", sub, err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("aura %s did not print its ready line within 60 s\n%s", sub, stderr.String())
	}
	return nil, nil, nil, ""
}

func (p *mnProcess) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(within):
		t.Fatalf("aura mn still running after %v", within)
		return nil
	}
}

func TestMNProcess(t *testing.T) {
	p := startMN(t, "--listen", "127.0.0.1:0", "--size", "64MiB")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := tcp.Dial(ctx, p.addr, tcp.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	r, err := dev.RegisterRegion(ctx, "records", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.RegisterRegion(ctx, "too-big", 65<<20); !errors.Is(err, rdma.ErrOutOfMemory) {
		t.Fatalf("a region over --size: %v, want ErrOutOfMemory", err)
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	exec := func(wrs ...rdma.WorkRequest) []rdma.Completion {
		t.Helper()
		cs, err := rdma.Exec(ctx, qp, wrs...)
		if err != nil {
			t.Fatal(err)
		}
		if err := rdma.FirstError(cs); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	rec := []byte("a record in another process")
	exec(rdma.WorkRequest{Op: rdma.OpWrite, RKey: r.RKey, RemoteAddr: r.Addr + 64, Local: rec})
	got := make([]byte, len(rec))
	exec(rdma.WorkRequest{Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: r.Addr + 64, Local: got})
	if !bytes.Equal(got, rec) {
		t.Fatalf("READ %q, want %q", got, rec)
	}
	lock := r.Addr + 4096
	if c := exec(rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: lock, Compare: 0, Swap: 7})[0]; c.Value != 0 {
		t.Fatalf("CAS success returned %d", c.Value)
	}
	if c := exec(rdma.WorkRequest{Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: lock, Compare: 0, Swap: 9})[0]; c.Value != 7 {
		t.Fatalf("CAS failure returned %d, want 7", c.Value)
	}
	if c := exec(rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: lock, Add: 3})[0]; c.Value != 7 {
		t.Fatalf("FAA returned %d, want 7", c.Value)
	}
	word := make([]byte, 8)
	cs := exec(
		rdma.WorkRequest{ID: 1, Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: lock, Add: 1},
		rdma.WorkRequest{ID: 2, Op: rdma.OpCompareAndSwap, RKey: r.RKey, RemoteAddr: lock, Compare: 11, Swap: 100},
		rdma.WorkRequest{ID: 3, Op: rdma.OpRead, RKey: r.RKey, RemoteAddr: lock, Local: word},
	)
	if cs[0].Value != 10 || cs[1].Value != 11 || word[0] != 100 || cs[2].ID != 3 {
		t.Fatalf("batch: %+v, word %v", cs, word)
	}
	bad, err := rdma.Exec(ctx, qp, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: lock + 4, Add: 1})
	if err != nil || !errors.Is(bad[0].Err(), rdma.ErrInvalidRequest) {
		t.Fatalf("misaligned FAA: %+v %v", bad, err)
	}
	if s := dev.Stats(); s.Doorbells != 7 || s.CAS != 3 || s.CASFailed != 1 || s.FAA != 3 {
		t.Fatalf("stats %+v", s)
	}

	// SIGTERM: graceful shutdown, exit status 0.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Fatalf("aura mn exited with %v after SIGTERM\n%s", err, p.stderr.String())
	}
	if log := p.stderr.String(); !strings.Contains(log, "memory node stopped") {
		t.Fatalf("no shutdown log:\n%s", log)
	}
}

// TestMNProcessKilled: a client sees a typed connection-lost error after the
// memory node is killed with SIGKILL.
func TestMNProcessKilled(t *testing.T) {
	p := startMN(t, "--listen", "127.0.0.1:0", "--size", "1MiB")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := tcp.Dial(ctx, p.addr, tcp.ClientConfig{RedialAttempts: 2, RedialBaseDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	r, err := dev.RegisterRegion(ctx, "locks", 64)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	faa := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, RKey: r.RKey, RemoteAddr: r.Addr, Add: 1}
	if _, err := rdma.Exec(ctx, qp, faa); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 5*time.Second)
	// Whether the client notices the loss before posting (Post fails after
	// its redial attempts) or after (the work request completes with
	// StatusTransportError, or StatusFlushed when the queue pair went into
	// the error state as the connection dropped: not applied), the error
	// is typed.
	cs, err := rdma.Exec(ctx, qp, faa)
	if err == nil {
		err = cs[0].Err()
	}
	if !errors.Is(err, rdma.ErrConnectionLost) && !errors.Is(err, rdma.ErrFlushed) {
		t.Fatalf("after SIGKILL: %v (%+v), want rdma.ErrConnectionLost or rdma.ErrFlushed", err, cs)
	}
	if _, err := dev.Regions(ctx); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Fatalf("Regions after SIGKILL: %v", err)
	}
}

func TestMNHelpExplainsEveryFlag(t *testing.T) {
	assertHelp(t, newMNCmd(), nil, "--listen", "--size", "--cost-model", "--max-conns", "--max-in-flight", "--max-queued-bytes",
		"--read-timeout", "--write-timeout", "--idle-timeout", "--handshake-timeout", "--shutdown-timeout", mnListeningPrefix)
}

// assertHelp checks that every flag of cmd not in shared (flags whose help
// another command owns) has a real explanation, and that --help mentions
// each of want.
func assertHelp(t *testing.T, cmd *cobra.Command, shared *pflag.FlagSet, want ...string) {
	t.Helper()
	var missing []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if (shared == nil || shared.Lookup(f.Name) == nil) && len(strings.TrimSpace(f.Usage)) < 20 {
			missing = append(missing, f.Name)
		}
	})
	if len(missing) > 0 {
		t.Fatalf("flags without a real explanation: %v", missing)
	}
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("--help does not mention %s", w)
		}
	}
}

// TestRunMNInProcess runs the command's body with port 0 and stops it with
// its context, as a signal would.
func TestRunMNInProcess(t *testing.T) {
	cmd := newMNCmd()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--size", "8MiB", "--cost-model", "--log-level", "debug"})
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.SetOut(pw)
	var stderr syncBuffer
	cmd.SetErr(&stderr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), mnListeningPrefix)
	if !ok || strings.HasSuffix(addr, ":0") {
		t.Fatalf("listen line %q", line)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	dev, err := tcp.Dial(dctx, addr, tcp.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.RegisterRegion(dctx, "r", 4096); err != nil {
		t.Fatal(err)
	}
	dev.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runMN did not return after its context ended")
	}
	if !strings.Contains(stderr.String(), "cost_model=true") {
		t.Fatalf("log:\n%s", stderr.String())
	}
	// Bad flags are refused with a clear error.
	for _, args := range [][]string{{"--size", "lots"}, {"--size", "0"}, {"--log-level", "loud"}, {"--listen", "nonsense"}} {
		c := newMNCmd()
		c.SetArgs(args)
		c.SetOut(&bytes.Buffer{})
		c.SetErr(&bytes.Buffer{})
		if err := c.Execute(); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
