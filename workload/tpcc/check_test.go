package tpcc

import (
	"context"
	"testing"

	"github.com/aura-runtime/aura/txn"
	"github.com/aura-runtime/aura/txn/memtx"
	"github.com/aura-runtime/aura/workload"
)

// mutate rewrites one record in place through memtx's loader.
func mutate(t *testing.T, s *memtx.Store, r txn.Ref, f func(b []byte)) {
	t.Helper()
	b, ok, err := s.Get(context.Background(), r)
	if err != nil || !ok {
		t.Fatalf("%s %#x: ok=%v err=%v", TableName(r.Table), r.Key, ok, err)
	}
	f(b)
	if err := s.Load(r, b); err != nil {
		t.Fatal(err)
	}
}

// remove deletes one record in a transaction.
func remove(t *testing.T, s *memtx.Store, r txn.Ref) {
	t.Helper()
	err := s.Run(func(tx txn.Tx) error {
		if _, err := tx.GetForUpdate(r); err != nil {
			return err
		}
		return tx.Delete(r)
	})
	if err != nil {
		t.Fatalf("delete %s %#x: %v", TableName(r.Table), r.Key, err)
	}
}

func addI64(off int, d int64) func([]byte) {
	return func(b []byte) { le.PutUint64(b[off:], uint64(int64(le.Uint64(b[off:]))+d)) }
}

func nextOID(t *testing.T, s *memtx.Store, w, d uint32) uint64 {
	b, _, _ := s.Get(context.Background(), ref(TableDistrict, DistrictKey(w, d)))
	var ds district
	if err := ds.decode(b); err != nil {
		t.Fatal(err)
	}
	return uint64(ds.nextOID)
}

func TestChecksDetectCorruption(t *testing.T) {
	cases := []struct {
		name      string
		want      string
		afterLoad bool // corrupt a freshly loaded store and run CheckAfterLoad
		corrupt   func(t *testing.T, s *memtx.Store)
	}{
		{"district YTD bumped", CheckC1, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableDistrict, DistrictKey(1, 3)), addI64(0, 1))
		}},
		{"D_NEXT_O_ID bumped", CheckC2, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableDistrict, DistrictKey(2, 1)), func(b []byte) { le.PutUint32(b[12:], le.Uint32(b[12:])+1) })
		}},
		{"middle new-order deleted", CheckC3, false, func(t *testing.T, s *memtx.Store) {
			remove(t, s, ref(TableNewOrder, OrderKey(2, 5, nextOID(t, s, 2, 5)-3)))
		}},
		{"order line deleted", CheckC4, false, func(t *testing.T, s *memtx.Store) {
			remove(t, s, ref(TableOrderLine, OrderLineKey(1, 2, 10, 1)))
		}},
		{"undelivered order gets a carrier", CheckC5, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableOrder, OrderKey(1, 6, nextOID(t, s, 1, 6)-2)), func(b []byte) { b[12] = 3 })
		}},
		{"O_OL_CNT changed", CheckC6, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableOrder, OrderKey(2, 2, 5)), func(b []byte) { b[13]-- })
		}},
		{"undelivered line gets a delivery date", CheckC7, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableOrderLine, OrderLineKey(1, 9, nextOID(t, s, 1, 9)-1, 1)), func(b []byte) { le.PutUint64(b[8:], 77) })
		}},
		{"H_AMOUNT bumped", CheckC8, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableHistory, HistoryKey(1, 1, 1)), addI64(0, 5))
		}},
		{"history moved to another district", CheckC9, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableHistory, HistoryKey(2, 4, 7)), func(b []byte) { b[29] = 5 })
		}},
		{"C_BALANCE bumped", CheckC10, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableCustomer, CustomerKey(2, 8, 100)), addI64(0, -1))
		}},
		{"oldest new-order deleted after load", CheckC11, true, func(t *testing.T, s *memtx.Store) {
			remove(t, s, ref(TableNewOrder, OrderKey(1, 1, uint64(newWorkload(t, smallConfig()).firstUndelivered()))))
		}},
		{"C_YTD_PAYMENT bumped", CheckC12, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableCustomer, CustomerKey(1, 10, 300)), addI64(8, 1))
		}},
		{"delivery cursor skips an order", CheckAux, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableDeliveryCursor, DistrictKey(1, 4)), addI64(0, 1))
		}},
		{"last order forgotten", CheckAux, false, func(t *testing.T, s *memtx.Store) {
			mutate(t, s, ref(TableCustomerLastOrder, CustomerKey(2, 2, 2)), addI64(0, -1))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.want+" "+tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := smallConfig()
			cfg.ItemCount = 200
			wl := newWorkload(t, cfg)
			s := loadStore(t, wl)
			check := wl.Check
			if tc.afterLoad {
				check = wl.CheckAfterLoad
			} else {
				runTxns(t, wl, s, 5, 4, 400)
			}
			requireChecksPass(t, check(context.Background(), s))
			tc.corrupt(t, s)
			res := check(context.Background(), s)
			err, ok := checkErr(res, tc.want)
			if !ok {
				t.Fatalf("check %s not run", tc.want)
			}
			if err == nil {
				t.Fatalf("%s passed on a corrupted store", tc.want)
			}
			t.Logf("%v", err)
			for _, r := range res {
				if r.Err != nil && r.Name != tc.want {
					t.Logf("also failed: %s", r.Name)
				}
			}
		})
	}
}

type failingReader struct{}

func (failingReader) Get(context.Context, txn.Ref) ([]byte, bool, error) {
	return nil, false, context.DeadlineExceeded
}

func TestCheckReportsReadErrors(t *testing.T) {
	wl := newWorkload(t, smallConfig())
	res := wl.Check(context.Background(), failingReader{})
	if len(res) == 0 {
		t.Fatal("no results")
	}
	for _, r := range res {
		if r.Err == nil {
			t.Errorf("%s passed without data", r.Name)
		}
	}
	var _ workload.Reader = failingReader{}
}

func TestCheckHonoursCancel(t *testing.T) {
	wl := newWorkload(t, smallConfig())
	s := loadStore(t, wl)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range wl.Check(ctx, s) {
		if r.Err == nil {
			t.Errorf("%s passed after cancel", r.Name)
		}
	}
	if err := wl.Load(ctx, s); err == nil {
		t.Error("Load ignored a cancelled context")
	}
}
