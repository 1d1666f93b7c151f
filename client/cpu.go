package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// MetricsPath is the management API's Prometheus text page.
const MetricsPath = "/metrics"

// processCPUSeries is the series of the process's user + system CPU
// seconds that every node's and the memory node's /metrics carries.
const processCPUSeries = "process_cpu_seconds_total"

// maxMetricsBytes bounds one /metrics page read for ProcessCPUSeconds: a
// node's page is tens of kilobytes; 8 MiB leaves room for many cohorts'
// series without letting a wrong address stream forever.
const maxMetricsBytes = 8 << 20

// ProcessCPUSeconds reads the node's process_cpu_seconds_total from its
// /metrics page: the CPU time (user + system) its process has used.
func (a *API) ProcessCPUSeconds(ctx context.Context) (float64, error) {
	body, _, err := a.get(ctx, MetricsPath, maxMetricsBytes)
	if err != nil {
		return 0, err
	}
	return parseProcessCPU(body)
}

// parseProcessCPU finds the unlabelled process_cpu_seconds_total sample in
// a Prometheus text page.
func parseProcessCPU(page []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, " ")
		if !ok || name != processCPUSeries {
			continue
		}
		// A sample line may carry a timestamp after the value.
		val, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("client: metrics: %s has value %q", processCPUSeries, val)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("client: metrics: %w", err)
	}
	return 0, fmt.Errorf("client: metrics: no %s series", processCPUSeries)
}
