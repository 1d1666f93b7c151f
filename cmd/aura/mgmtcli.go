package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aura-runtime/aura/client"
	"github.com/aura-runtime/aura/rules"
)

func init() { subcommands = append(subcommands, newTopologyCmd, newRouteCmd, newRemoveNodeCmd) }

// maxCLITimeout bounds --timeout of aura topology and aura route: a
// management API answers in milliseconds, so a minute only covers a
// congested or remote link.
const maxCLITimeout = time.Minute

// apiFlags are the flags aura topology and aura route share.
type apiFlags struct {
	httpAddr  string
	authToken string
	json      bool
	timeout   time.Duration
}

func (f *apiFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.httpAddr, "http-addr", "", "a node's management API, HOST:PORT (aura node --http) (required)")
	fl.StringVar(&f.authToken, "auth-token", "", "bearer token of the management API (aura node --auth-token); default: $"+authTokenEnv)
	fl.BoolVar(&f.json, "json", false, "print the API's JSON answer instead of a table")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Second, fmt.Sprintf("bound on the whole request, connect to last byte (at most %v)", maxCLITimeout))
}

// api checks the flags and returns the API caller.
func (f *apiFlags) api(getenv func(string) string) (*client.API, error) {
	var errs []error
	host, port, err := net.SplitHostPort(f.httpAddr)
	if f.httpAddr == "" {
		errs = append(errs, errors.New("--http-addr is required (HOST:PORT of aura node --http)"))
	} else if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		errs = append(errs, fmt.Errorf("--http-addr %q: want HOST:PORT with a port in 1..65535", f.httpAddr))
	}
	tok := f.authToken
	if tok == "" {
		tok = getenv(authTokenEnv)
	}
	if tok != "" {
		if err := client.CheckToken(tok); err != nil {
			errs = append(errs, fmt.Errorf("--auth-token: %w", err))
		}
	}
	if f.timeout <= 0 || f.timeout > maxCLITimeout {
		errs = append(errs, fmt.Errorf("--timeout %v: want above 0 and at most %v", f.timeout, maxCLITimeout))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &client.API{Addr: f.httpAddr, Token: tok, HTTP: &http.Client{Timeout: f.timeout}}, nil
}

// explain turns an API error into the CLI's message: the API's code first.
func explain(err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("%s (HTTP %d): %s", ae.Code, ae.Status, ae.Message)
	}
	return err
}

func newTopologyCmd() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "Show the cluster's workers and the cohorts each owns, from a node's management API",
		Long: `Read GET /management/topology from a node's management API (aura node
--http) and print the live compute nodes (workers): owner index, name,
remote address and the cohorts (partitions) each owns in the node's
installed OwnerMap, whose epoch heads the table. --json prints the API's
JSON document as is (worker_count, tcp_multi_port, tcp_base_listen_port,
epoch, workers[]).

Errors of the API are shown with their code (NotAuthorized, ...) and make
the command exit non-zero.`,
		Example: `  aura topology --http-addr 127.0.0.1:8081
  AURA_AUTH_TOKEN=s3cret aura topology --http-addr 127.0.0.1:8081 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.api(os.Getenv)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			t, err := api.Topology(ctx)
			if err != nil {
				return explain(err)
			}
			if f.json {
				return writeJSON(cmd.OutOrStdout(), t)
			}
			return printTopology(cmd.OutOrStdout(), t)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

func newRemoveNodeCmd() *cobra.Command {
	f := &apiFlags{}
	var down bool
	cmd := &cobra.Command{
		Use:   "remove-node NAME",
		Short: "Tell the planner that a compute node is down for good, so the survivors regain a majority",
		Long: `Ask the cluster's planner, through any node's management API (POST
/management/nodes/remove), to stop counting the compute node NAME among the
known nodes.

The planner publishes OwnerMaps and grants owner leases only while the live
compute nodes are a strict majority of the known ones (docs/migration.md).
A cluster that lost half of its compute nodes or more — one of two, two of
three — therefore publishes nothing until they return: the survivors keep
their own cohorts, and the lost nodes' key groups stay placed on them. Once
the lost nodes are removed, the survivors are a majority again; the planner
moves a removed node's cohorts once every owner lease it may hold has run
out, as after any crash, and frees its slot.

Remove only a node that is down for good (its process stopped, its machine
gone). A node that is only cut off by the network may be live on the other
side, with a planner of its own: removing it on one side can let both
sides believe they are the majority, and give one cohort two owners. That
is why the command wants --down, and the management API serves it only
when the nodes run with --auth-token. The planner refuses a node it sees
live (NodeLive). A removed node that starts again must join through a
survivor (--join), which counts it again; started where it cannot reach
the survivors, it and other removed nodes could form a second majority.

Errors are shown with the API's code and exit non-zero: TokenRequired,
NotAuthorized, NodeLive, NoSuchNode, NoPlanner (no planner placed, or it did
not answer: retry), TooManyRemovals.`,
		Example: `  AURA_AUTH_TOKEN=s3cret aura remove-node cn-2 --down --http-addr 127.0.0.1:8081`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			api, err := f.api(os.Getenv)
			if err != nil {
				errs = append(errs, err)
			}
			if !down {
				errs = append(errs, errors.New("--down is required: remove only a node that is down for good (see --help)"))
			}
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			r, err := api.RemoveNode(ctx, args[0])
			if err != nil {
				return explain(err)
			}
			if f.json {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			majority := "a majority: its cohorts move to the live nodes once its owner lease has run out"
			if !r.Quorum {
				majority = "still no majority: remove the other lost nodes too, or bring them back"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "planner %s no longer counts %s: %d of %d known compute nodes live, %s\n",
				r.Planner, r.Node, r.Live, r.Known, majority)
			return err
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&down, "down", false, "confirm that the node is down for good, not only cut off (required)")
	return cmd
}

// maxListedCohorts is how many cohort ids a worker's row lists before
// eliding the rest: a row stays readable with thousands of cohorts.
const maxListedCohorts = 8

func printTopology(w io.Writer, t client.Topology) error {
	epoch := strconv.FormatUint(t.Epoch, 10)
	if t.Epoch == 0 {
		epoch = "0 (no OwnerMap installed yet)"
	}
	fmt.Fprintf(w, "OwnerMap epoch %s, %d workers, base port %d\n\n", epoch, t.WorkerCount, t.TCPBaseListenPort)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tWORKER\tADDRESS\tCOHORTS\tCOHORT IDS")
	for _, wk := range t.Workers {
		idx := strconv.Itoa(wk.WorkerIndex)
		if wk.WorkerIndex < 0 {
			idx = "-"
		}
		ids := make([]string, 0, maxListedCohorts+1)
		for i, p := range wk.PartitionIDs {
			if i == maxListedCohorts {
				ids = append(ids, fmt.Sprintf("… (%d more)", len(wk.PartitionIDs)-i))
				break
			}
			ids = append(ids, strconv.FormatUint(p, 10))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", idx, wk.WorkerID, wk.Address, len(wk.PartitionIDs), strings.Join(ids, " "))
	}
	return tw.Flush()
}

func newRouteCmd() *cobra.Command {
	f := &apiFlags{}
	var rule, key string
	var epoch uint64
	cmd := &cobra.Command{
		Use:   "route",
		Short: "Show which worker (compute node) a key tuple goes to under a named partition rule",
		Long: `Ask a node's management API (GET /management/partition-route) where a key
tuple goes: the rule (--rule-name) maps the tuple (--key, the values of
the rule's key columns in order) to a key group and a partition value;
the key group's cohort in the node's installed OwnerMap names the owner.
A key group in no cohort is routed by the fallback (the map's fallback
table, else the workload's static placement), and the answer says so.

Rules: the workload's own rule over (table_id,record_key) (tpcc_warehouse,
bank_range, ...), default_range over (table_id,record_key), the TPC-C
tables' rules over their primary keys (r_warehouse w; r_district w,d;
r_customer w,d,c; r_history w,d,seq; r_new_order and r_orders w,d,o;
r_order_line w,d,o,ol; r_item i; r_stock w,i) and those of aura node
--rules. An unknown rule lists the node's rules.

Errors are shown with the API's code and exit non-zero: BadRequest (a
malformed key or a wrong number of values), NoSuchRule, NoSuchPartition
(e.g. a warehouse the workload does not have), NotAuthorized (missing or
wrong --auth-token), StaleEpoch (the node's OwnerMap is older than
--epoch).`,
		Example: `  aura route --http-addr 127.0.0.1:8081 --rule-name r_orders --key 1,3,2101
  aura route --http-addr 127.0.0.1:8081 --rule-name r_stock --key 2,17 --json --epoch 12`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			api, err := f.api(os.Getenv)
			if err != nil {
				errs = append(errs, err)
			}
			if rule == "" {
				errs = append(errs, errors.New("--rule-name is required"))
			}
			k, err := rules.ParseKey(key)
			if err != nil {
				errs = append(errs, fmt.Errorf("--key %q: %w (want K1,K2,...)", clipText(key), err))
			}
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			r, err := api.PartitionRoute(ctx, rule, k, epoch)
			if err != nil {
				return explain(err)
			}
			if f.json {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			return printRoute(cmd.OutOrStdout(), r)
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&rule, "rule-name", "", "partition rule, e.g. r_orders (required)")
	fl.StringVar(&key, "key", "", "key tuple, the rule's key column values in order, comma separated, e.g. 1,3,2101 (required)")
	fl.Uint64Var(&epoch, "epoch", 0, "answer StaleEpoch unless the node's OwnerMap epoch is at least this (0: any)")
	return cmd
}

func printRoute(w io.Writer, r client.PartitionRoute) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	part := "none: the key group is in no cohort"
	if r.PartitionID != nil {
		part = "cohort " + strconv.FormatUint(*r.PartitionID, 10)
	}
	idx := strconv.Itoa(r.WorkerIndex)
	if r.WorkerIndex < 0 {
		idx = "-"
	}
	for _, row := range [][2]string{
		{"rule", r.Rule},
		{"key", rules.FormatKey(r.Key)},
		{"table", r.Table},
		{"key group", strconv.FormatUint(r.KeyGroup, 10)},
		{"partition value", strconv.FormatUint(r.PartitionValue, 10)},
		{"partition", part},
		{"routed by", r.Source},
		{"worker", fmt.Sprintf("%s (index %s) at %s", r.WorkerID, idx, r.Address)},
		{"OwnerMap epoch", strconv.FormatUint(r.Epoch, 10)},
		{"answered by", r.AnsweredBy},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
