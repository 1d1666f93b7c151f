package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

// FuzzConfigFile reads arbitrary bytes as the config file of aura node and
// aura mn (--config). Reading may fail, with an error and never a panic;
// what is accepted prints (--print-config) as a config file that reads
// back to the same settings, so an operator can save and reuse it.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		`{"name":"cn-1","heartbeat":"70ms","join":["127.0.0.1:1","127.0.0.1:2"],"planner":false}`,
		`{"listen":"127.0.0.1:7070","max-regions":4,"auth-token":"secret"}`,
		`{"coordinators":3.5}`, `{"join":"a,b"}`, `{"join":[1,true,"x"]}`, `{"tick":{}}`,
		`{"nope":1}`, `[]`, `null`, `{"name":"\"quoted"}`, `{"join":["a\nb"]}`, `{`,
	} {
		f.Add([]byte(s))
	}
	noEnv := func(string) string { return "" }
	commands := []func() *cobra.Command{newNodeCmd, newMNCmd}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "in.json")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, newCmd := range commands {
			cmd := newCmd()
			if applyConfig(cmd.Flags(), cmd.Name(), file, noEnv) != nil {
				continue
			}
			var printed bytes.Buffer
			if err := printConfig(&printed, cmd.Flags()); err != nil {
				t.Fatalf("%s: print: %v", cmd.Name(), err)
			}
			again := filepath.Join(dir, "printed.json")
			if err := os.WriteFile(again, printed.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd2 := newCmd()
			if err := applyConfig(cmd2.Flags(), cmd2.Name(), again, noEnv); err != nil {
				t.Fatalf("%s: the printed configuration does not read back: %v\n%s", cmd.Name(), err, printed.Bytes())
			}
			var reprinted bytes.Buffer
			if err := printConfig(&reprinted, cmd2.Flags()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(printed.Bytes(), reprinted.Bytes()) {
				t.Fatalf("%s: read back differently:\n%s\nthen\n%s", cmd.Name(), printed.Bytes(), reprinted.Bytes())
			}
		}
	})
}
