package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Settings come from three places besides the defaults, each overriding the
// one before: a config file (--config FILE: one JSON object whose keys are
// the flag names, values as on the command line — strings, numbers,
// booleans, or arrays for list flags), environment variables
// (AURA_<COMMAND>_<FLAG>, the flag name upper-cased with '-' as '_', e.g.
// AURA_NODE_HEARTBEAT=50ms), then the command line. --print-config prints
// the effective settings as such a JSON object (secrets replaced by
// "<redacted>") and exits, so a printed configuration is a valid config
// file.

// maxConfigBytes bounds a config file.
const maxConfigBytes = 1 << 20

// configFlags are the flags a command gets for this.
type configFlags struct {
	file  string
	print bool
}

// secretFlags are never printed.
var secretFlags = []string{"auth-token", "mn-token", "gossip-key"}

// noConfigFlags are not settable from a file or the environment (they
// control the loading itself).
var noConfigFlags = []string{"config", "print-config", "help"}

// addConfigFlags registers --config and --print-config on cmd and makes
// its PreRunE apply the file and the environment.
func addConfigFlags(cmd *cobra.Command, c *configFlags) {
	fl := cmd.Flags()
	fl.StringVar(&c.file, "config", "", "read settings from this JSON file (keys: flag names; see --print-config), under AURA_"+strings.ToUpper(cmd.Name())+"_* environment variables and flags")
	fl.BoolVar(&c.print, "print-config", false, "print the effective settings as a config file and exit")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := applyConfig(cmd.Flags(), cmd.Name(), c.file, os.Getenv); err != nil {
			return err
		}
		if c.print {
			if err := printConfig(cmd.OutOrStdout(), cmd.Flags()); err != nil {
				return err
			}
			return errPrinted
		}
		return nil
	}
}

// errPrinted stops a command after --print-config (main exits 0 on it).
var errPrinted = errors.New("configuration printed")

// envName is the environment variable of flag name for command.
func envName(command, name string) string {
	return "AURA_" + strings.ToUpper(command) + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyConfig sets every flag not given on the command line from the
// environment, else from the file, and reports every problem at once.
func applyConfig(fl *pflag.FlagSet, command, file string, getenv func(string) string) error {
	var fromFile map[string]json.RawMessage
	var errs []error
	if file != "" {
		b, err := readBounded(file, maxConfigBytes)
		if err == nil {
			err = json.Unmarshal(b, &fromFile)
		}
		if err != nil {
			return fmt.Errorf("--config %s: %w", file, err)
		}
		for k := range fromFile {
			if fl.Lookup(k) == nil || slices.Contains(noConfigFlags, k) {
				errs = append(errs, fmt.Errorf("--config %s: %q is not a setting of aura %s", file, k, command))
			}
		}
	}
	fl.VisitAll(func(f *pflag.Flag) {
		if f.Changed || slices.Contains(noConfigFlags, f.Name) {
			return
		}
		if v := getenv(envName(command, f.Name)); v != "" {
			if err := fl.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(command, f.Name), err))
			} else if err := noEmptyElement(fl, f); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(command, f.Name), err))
			}
			return
		}
		raw, ok := fromFile[f.Name]
		if !ok {
			return
		}
		vals, err := configValues(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("--config %s: %s: %w", file, f.Name, err))
			return
		}
		for _, v := range vals {
			if err := fl.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("--config %s: %s: %w", file, f.Name, err))
			}
		}
		if err := noEmptyElement(fl, f); err != nil {
			errs = append(errs, fmt.Errorf("--config %s: %s: %w", file, f.Name, err))
		}
	})
	return errors.Join(errs...)
}

// noEmptyElement refuses a list setting with an empty element (",", "a,"
// or [""]): no list flag takes one, and a printed configuration could not
// say it (an empty list element reads back as no element).
func noEmptyElement(fl *pflag.FlagSet, f *pflag.Flag) error {
	if !strings.HasSuffix(f.Value.Type(), "Slice") {
		return nil
	}
	if s, err := fl.GetStringSlice(f.Name); err == nil && slices.Contains(s, "") {
		return errors.New("empty list element")
	}
	return nil
}

// configValues turns a JSON value into the strings a flag parses: a
// string, number or boolean as one, an array as one each.
func configValues(raw json.RawMessage) ([]string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	one := func(x any) (string, error) {
		switch t := x.(type) {
		case string:
			return t, nil
		case float64, bool:
			return fmt.Sprint(t), nil
		}
		return "", fmt.Errorf("want a string, number or boolean, got %s", raw)
	}
	if arr, ok := v.([]any); ok {
		out := make([]string, 0, len(arr))
		for _, x := range arr {
			s, err := one(x)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := one(v)
	return []string{s}, err
}

// printConfig writes the effective settings as a JSON config file.
func printConfig(w io.Writer, fl *pflag.FlagSet) error {
	out := map[string]any{}
	fl.VisitAll(func(f *pflag.Flag) {
		if slices.Contains(noConfigFlags, f.Name) {
			return
		}
		switch {
		case slices.Contains(secretFlags, f.Name) && f.Value.String() != "" && f.Value.String() != "[]":
			out[f.Name] = "<redacted>"
		case strings.HasSuffix(f.Value.Type(), "Slice"):
			s, _ := fl.GetStringSlice(f.Name)
			out[f.Name] = s
		default:
			out[f.Name] = f.Value.String()
		}
	})
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// readBounded reads a file of at most max bytes.
func readBounded(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return b, nil
}
