package main

import (
	"bytes"
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"golang.org/x/term"
)

// liveProgress returns the writer a run's progress goes to, and a function
// that ends its output (call it before printing anything else to the same
// terminal; calling it again does nothing). On a terminal the periodic
// progress lines — those starting with '[': elapsed time, committed,
// atomics/txn, LOCAL hit — rewrite one live line in place, and every other
// line (loading, checking, a mode's end) prints below it, leaving the last
// progress line of each phase on screen. Anywhere else (a file, a pipe, a
// test) w gets the plain lines unchanged. A nil w (quiet) stays nil.
func liveProgress(w io.Writer) (io.Writer, func()) {
	f, ok := w.(*os.File)
	if w == nil || !ok || !term.IsTerminal(int(f.Fd())) {
		return w, func() {}
	}
	l := &liveLine{w: w, width: func() int {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil {
			return cols
		}
		return 0
	}}
	return l, l.end
}

// liveLine rewrites progress lines in place (see liveProgress).
type liveLine struct {
	mu    sync.Mutex
	w     io.Writer
	width func() int // the terminal's columns, 0 if unknown
	buf   []byte     // an unfinished line
	live  bool       // the cursor is at the end of a live line
}

func (l *liveLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := l.buf[:i]
		if err := l.line(line); err != nil {
			return len(p), err
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// line prints one complete line (without its newline).
func (l *liveLine) line(line []byte) error {
	if len(line) > 0 && line[0] == '[' {
		// A line wider than the terminal would wrap, and the carriage
		// return would then rewrite only its last row.
		if n := l.width(); n > 1 && utf8.RuneCount(line) >= n {
			line = truncateRunes(line, n-1)
		}
		l.live = true
		_, err := io.WriteString(l.w, "\r"+string(line)+"\x1b[K")
		return err
	}
	prefix := ""
	if l.live {
		prefix, l.live = "\n", false
	}
	_, err := io.WriteString(l.w, prefix+string(line)+"\n")
	return err
}

// end finishes the live line and prints an unfinished one.
func (l *liveLine) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.buf = append(l.buf, '\n')
		l.line(l.buf[:len(l.buf)-1])
		l.buf = nil
	}
	if l.live {
		io.WriteString(l.w, "\n")
		l.live = false
	}
}

func truncateRunes(b []byte, n int) []byte {
	for i := range string(b) {
		if n == 0 {
			return b[:i]
		}
		n--
	}
	return b
}
