package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	headlessrun "github.com/aura-runtime/aura/internal/headless"
)

// cdp is a minimal client of the Chrome DevTools protocol over
// --remote-debugging-pipe: Chromium reads commands from its file
// descriptor 3 and writes replies and events to 4, each a JSON object
// ended by a NUL byte. Only what the dashboard test needs: open a page,
// evaluate JavaScript in it.
type cdp struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     *os.File // our end of Chromium's fd 3
	mu     sync.Mutex
	next   int
	wait   map[int]chan cdpReply
	done   chan struct{}
	cancel context.CancelFunc
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// cdpCallTimeout bounds one protocol call.
const cdpCallTimeout = 10 * time.Second

func startCDP(t *testing.T, bin string) *cdp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), headlessrun.Timeout+30*time.Second)
	cmdR, cmdW, err := os.Pipe() // we write commands, Chromium reads (fd 3)
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe() // Chromium writes replies (fd 4), we read
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,1800", "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	outW.Close()
	c := &cdp{t: t, cmd: cmd, in: cmdW, wait: map[int]chan cdpReply{}, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(c.done)
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			msg, err := r.ReadBytes(0)
			if err != nil {
				return
			}
			var m struct {
				ID int `json:"id"`
				cdpReply
			}
			if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
				continue // an event
			}
			c.mu.Lock()
			ch := c.wait[m.ID]
			delete(c.wait, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m.cdpReply
			}
		}
	}()
	t.Cleanup(func() {
		cmdW.Close() // Chromium exits when its command pipe closes
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
		}
		cancel()
		_ = cmd.Wait()
		outR.Close()
		if t.Failed() {
			t.Logf("chromium (devtools) stderr:\n%s", lastLines(stderr.String(), 20))
		}
	})
	return c
}

// call sends one command (to the page attached as target, if set) and
// decodes its result into out.
func (c *cdp) call(target, method string, params, out any) {
	c.t.Helper()
	c.mu.Lock()
	c.next++
	id := c.next
	ch := make(chan cdpReply, 1)
	c.wait[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if target != "" {
		msg["sessionId"] = target // the protocol's name for an attachment
	}
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.in.Write(append(b, 0)); err != nil {
		c.t.Fatalf("devtools %s: %v", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			c.t.Fatalf("devtools %s: %s", method, r.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(r.Result, out); err != nil {
				c.t.Fatalf("devtools %s: %v in %s", method, err, r.Result)
			}
		}
	case <-c.done:
		c.t.Fatalf("devtools %s: chromium exited", method)
	case <-time.After(cdpCallTimeout):
		c.t.Fatalf("devtools %s: no reply within %v", method, cdpCallTimeout)
	}
}

// open opens url in a new page and returns its attachment id.
func (c *cdp) open(url string) string {
	c.t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	c.call("", "Target.createTarget", map[string]any{"url": url}, &target)
	var att struct {
		Attached string `json:"sessionId"`
	}
	c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	return att.Attached
}

// eval evaluates a JavaScript expression in the page and returns its
// value as a string.
func (c *cdp) eval(target, expr string) string {
	c.t.Helper()
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	c.call(target, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r)
	if r.ExceptionDetails != nil {
		c.t.Fatalf("evaluate %q: %s", expr, r.ExceptionDetails.Text)
	}
	return fmt.Sprint(r.Result.Value)
}

// waitEval polls expr (every 50 ms, at most within) until it returns want;
// an exception (the page still loading) counts as not yet.
func (c *cdp) waitEval(target, expr, want string, within time.Duration) bool {
	c.t.Helper()
	safe := "(() => { try { return String(" + expr + "); } catch (e) { return 'exception: ' + e; } })()"
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		if c.eval(target, safe) == want {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// checkTokenFlow opens the dashboard of a node that requires token: the
// page must ask for it and show no data; once the token is typed into the
// page's form, the page must send it (the state renders: three members)
// without ever putting it into its URL, and the node must not log it.
func checkTokenFlow(t *testing.T, bin, base, token string, node *nodeProcess) {
	t.Helper()
	c := startCDP(t, bin)
	page := c.open(base + dashboardPath)
	if !c.waitEval(page, "document.body.dataset.status", "unauthorized", 10*time.Second) {
		t.Fatalf("token-protected page: status %q, want unauthorized", c.eval(page, "document.body.dataset.status"))
	}
	if got := c.eval(page, `document.getElementById("auth").hidden + "/" + document.body.dataset.members`); got != "false/0" {
		t.Errorf("token-protected page: form hidden/members %q, want the form shown and no members", got)
	}
	// A wrong token is refused and the form stays.
	c.eval(page, `document.getElementById("token").value = "not-the-token"; document.getElementById("auth").requestSubmit(); "ok"`)
	if !c.waitEval(page, `document.getElementById("autherr").textContent`, "the node refused this token", 10*time.Second) {
		t.Errorf("a wrong token was not reported")
	}
	c.eval(page, fmt.Sprintf(`document.getElementById("token").value = %q; document.getElementById("auth").requestSubmit(); "ok"`, token))
	if !c.waitEval(page, "document.body.dataset.members", "3", 10*time.Second) {
		t.Fatalf("with the token typed in, the page shows %q members, status %q", c.eval(page, "document.body.dataset.members"),
			c.eval(page, "document.body.dataset.status"))
	}
	if got := c.eval(page, `document.getElementById("auth").hidden + "/" + document.body.dataset.status`); got != "true/ready" {
		t.Errorf("with the token: form hidden/status %q, want true/ready", got)
	}
	if href := c.eval(page, "location.href"); strings.Contains(href, token) {
		t.Errorf("the token is in the page's URL %s", href)
	}
	if strings.Contains(node.stderr.String(), token) {
		t.Errorf("the node logged its token")
	}
}
