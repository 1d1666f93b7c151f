package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFileEnvAndFlags: a setting comes from the command line, else
// the environment, else the config file, else the default; a printed
// configuration read back as a file prints the same; secrets are redacted;
// unknown keys and bad values are all reported.
func TestConfigFileEnvAndFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "node.json")
	if err := os.WriteFile(file, []byte(`{"name":"from-file","heartbeat":"70ms","tick":"80ms","coordinators":3,
		"join":["127.0.0.1:1","127.0.0.1:2"],"planner":false,"mn-token":"secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AURA_NODE_TICK", "60ms")
	t.Setenv(authTokenEnv, "")
	out, err := runAura("node", "--config", file, "--coordinators", "5", "--print-config")
	if !errors.Is(err, errPrinted) {
		t.Fatalf("%v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	for k, want := range map[string]any{
		"name": "from-file", "heartbeat": "70ms", // file
		"tick":         "60ms",       // environment over file
		"coordinators": "5",          // flag over file
		"planner":      "false",      // file
		"mn-token":     "<redacted>", // never printed
		"settle":       "1s",         // default
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if j, _ := got["join"].([]any); len(j) != 2 {
		t.Errorf("join = %v", got["join"])
	}
	if strings.Contains(out, "secret") {
		t.Error("a secret was printed")
	}

	// A printed configuration is a config file (secrets aside).
	delete(got, "mn-token")
	b, _ := json.Marshal(got)
	again := filepath.Join(dir, "again.json")
	if err := os.WriteFile(again, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AURA_NODE_TICK", "")
	out2, err := runAura("node", "--config", again, "--print-config")
	if !errors.Is(err, errPrinted) {
		t.Fatalf("%v\n%s", err, out2)
	}
	var got2 map[string]any
	if err := json.Unmarshal([]byte(out2), &got2); err != nil {
		t.Fatal(err)
	}
	for k, v := range got {
		if k != "mn-token" && got2[k] != nil && strings.TrimSpace(jsonOf(got2[k])) != strings.TrimSpace(jsonOf(v)) {
			t.Errorf("%s: %v after a round trip, was %v", k, got2[k], v)
		}
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"nmae":"x","heartbeat":"soon","config":"loop"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = runAura("mn", "--config", bad)
	if err == nil {
		t.Fatal("a bad config file was accepted")
	}
	for _, want := range []string{`"nmae"`, `"heartbeat"`, `"config"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s not reported: %v", want, err)
		}
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }
