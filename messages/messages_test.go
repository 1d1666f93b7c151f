package messages

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

var updateCorpus = flag.Bool("update-corpus", false,
	"rewrite the seed corpus in testdata/fuzz/FuzzUnmarshal from the test cases")

const (
	protoPackage = "aura.v1"
	goPackage    = "github.com/aura-runtime/aura/messages"
	corpusDir    = "testdata/fuzz/FuzzUnmarshal"
	seedPrefix   = "seed_"
)

// files lists every file of the package. TestFilesListed fails when a .proto
// is added without being listed here. (A function: the File_* variables are
// set by the generated init functions, after package variables.)
func files() []protoreflect.FileDescriptor {
	return []protoreflect.FileDescriptor{
		File_aura_v1_common_proto,
		File_aura_v1_heartbeat_proto,
		File_aura_v1_owner_proto,
		File_aura_v1_ownermap_proto,
		File_aura_v1_migration_proto,
		File_aura_v1_txn_proto,
	}
}

type testCase struct {
	name string
	msg  proto.Message
}

func rec(table uint32, key uint64) *RecordRef { return &RecordRef{Table: table, Key: key} }

// testCases returns populated instances of every message type. Across the
// instances of one type, every field (and every member of every oneof) is
// set at least once; TestCoverage enforces that.
func testCases() []testCase {
	moved := &Moved{Owner: "cn-3", Epoch: 42, CohortId: 7}
	held := &HeldLock{Record: rec(3, 1_000_017), TxnId: 99, HolderNode: "cn-1"}
	counters := &TxnCounters{
		Reads: 23, Writes: 11, Inserts: 13, Deletes: 1,
		MnCas: 2, MnFaa: 1, MnCasFailed: 1,
		LocksLocal: 10, LocksOwnerRpc: 1, LocksMnCas: 2, LockRedirects: 3,
		RdmaReads: 40, RdmaWrites: 25,
	}
	base := func(body isTxnSubmit_Body) *TxnSubmit {
		return &TxnSubmit{TxnId: 1<<40 | 5, Client: "client-0", EpochSeen: 41,
			SubmittedUnixMicros: 1_700_000_000_000_000, Attempt: 2, Body: body}
	}
	result := func(out isTxnResult_Output) *TxnResult {
		return &TxnResult{TxnId: 1<<40 | 5, Outcome: TxnOutcome_TXN_OUTCOME_MOVED, Error: "cohort 7 moved",
			Counters: counters, LatencyMicros: 734, Attempts: 3, Moved: moved, Node: "cn-0", Epoch: 41,
			Replayed: true, Output: out}
	}
	kvRead := &KVReadResult{Record: rec(1, 17), Found: true, Value: []byte("v17"), Version: 9}
	newOrder := &TpccNewOrder{WId: 4, DId: 7, CId: 2871, Rollback: true, EntryUnixMicros: 1_700_000_000_000_123,
		Lines: []*TpccOrderLine{{IId: 1, SupplyWId: 4, Quantity: 5}, {IId: 100001, SupplyWId: 9, Quantity: 10}}}
	payment := &TpccPayment{WId: 4, DId: 3, CWId: 12, CDId: 9, CId: 17, CLast: "BARBARABLE",
		ByLastName: true, HAmountCents: 250_075, DateUnixMicros: 1_700_000_000_000_456}
	orderStatus := &TpccOrderStatus{WId: 2, DId: 10, CId: 3000, CLast: "OUGHTPRICALLY", ByLastName: true}
	delivery := &TpccDelivery{WId: 8, OCarrierId: 10, DeliveryUnixMicros: 1_700_000_000_000_789}
	stockLevel := &TpccStockLevel{WId: 1, DId: 5, Threshold: 15}
	kv := &KVTxn{Reads: []*RecordRef{rec(1, 17), rec(1, 18)},
		Writes: []*KVWrite{{Record: rec(1, 19), Value: []byte{0, 1, 2, 0xff}}, {Record: rec(2, 20), Delete: true}}}
	kvDelete := &KVWrite{Record: rec(2, 20), Value: []byte("ignored"), Delete: true}
	transfer := &BankTransfer{FromAccount: 12, ToAccount: 913, AmountCents: 12_345}
	audit := &BankAudit{FirstAccount: 100, AccountCount: 1000}
	auditOut := &BankAuditOutput{TotalCents: 1_000_000_000, Accounts: 1000}
	kvOut := &KVTxnOutput{Reads: []*KVReadResult{kvRead, {Record: rec(1, 18)}}}

	return []testCase{
		// common.proto
		{"RecordRef", rec(8, 1<<63|12345)},
		{"Moved", moved},

		// heartbeat.proto
		{"AccessSummary", sampleAccessSummary()},
		{"NodeWeight", &NodeWeight{Kg: 1 << 33, WriteWeight: 1234.5, ReadWeight: 0.25}},
		{"Edge", &Edge{A: 1, B: 2, Weight: 17.5}},
		{"TypedEdge", &TypedEdge{A: 3, B: 1 << 40, Ww: 99, Wr: 3.75}},
		{"LockStats", &LockStats{Local: 1000, OwnerRpc: 40, MnCas: 13, MnCasFailed: 2, Redirected: 1,
			FallbackCas: []*KgCount{{Kg: 5, Count: 10}, {Kg: 6, Count: 3}}}},
		{"KgCount", &KgCount{Kg: 77, Count: 12}},
		{"KgHome", &KgHome{Kg: 77, HomeCounts: []uint64{0, 12, 3, 0, 1}}},
		{"LeaseGrant", &LeaseGrant{Planner: "cn-0", Granted: true, LeaseMicros: 1_000_000, Epoch: 42, Reason: "-"}},
		{"RemoveNode", &RemoveNode{Node: "cn-2", Requester: "cn-1"}},
		{"RemoveNodeReply", &RemoveNodeReply{Planner: "cn-1", Removed: true, Reason: "-", Live: 1, Known: 1, Quorum: true}},

		// owner.proto
		{"LockRequest", &LockRequest{TxnId: 99, CohortId: 7, Epoch: 41, Records: []*RecordRef{rec(1, 2), rec(1, 3)},
			Requester: "cn-1", RequestId: 555, KeyGroups: []uint64{1 << 40, 1<<40 | 3}}},
		{"LockReply", &LockReply{Status: LockStatus_LOCK_STATUS_CONFLICT, Granted: []uint32{0, 1}, Moved: moved,
			Epoch: 41, Error: "held", RequestId: 555, ConflictIndex: 2, HolderTxnId: 98, RetryAfterMicros: 50,
			FenceAgeMicros: []uint64{0, 1_500_000}}},
		{"UnlockRequest", &UnlockRequest{TxnId: 99, CohortId: 7, Epoch: 41, Records: []*RecordRef{rec(1, 2)},
			Requester: "cn-1", RequestId: 556, All: true}},
		{"UnlockReply", &UnlockReply{Status: LockStatus_LOCK_STATUS_MOVED, Released: 2, Epoch: 42, Error: "moved",
			RequestId: 556, Moved: moved}},

		// ownermap.proto
		{"OwnerMapPush", &OwnerMapPush{Epoch: 42, BaseEpoch: 41, Manifest: []byte("AURA\x02\x00manifest-bytes"),
			ChunkIndex: 1, ChunkCount: 3, MembershipEpoch: 6, Planner: "planner-0", TotalBytes: 2_000_000,
			Crc32C: 0xdeadbeef, Roster: []string{"cn-1", "", "cn-3"}}},
		{"OwnerMapAck", &OwnerMapAck{Epoch: 42, Node: "cn-2", NeedFull: true, ChunkIndex: 1, InstalledEpoch: 40,
			Error: "no base epoch 41", InstalledPlanner: "planner-0"}},

		// migration.proto
		{"HeldLock", held},
		{"Freeze", &Freeze{MigrationId: 1001, CohortId: 7, Epoch: 41, NewOwner: "cn-3", NewEpoch: 42,
			MembershipEpoch: 6, Planner: "planner-0"}},
		{"FreezeAck", &FreezeAck{MigrationId: 1001, CohortId: 7, Epoch: 41, Node: "cn-1",
			Status: MigrationAckStatus_MIGRATION_ACK_STATUS_OK, Error: "-", HeldLocks: 3,
			FrozenAtUnixMicros: 1_700_000_000_001_000}},
		{"Drain", &Drain{MigrationId: 1001, CohortId: 7, Epoch: 41, DeadlineMicros: 10_000}},
		{"DrainAck", &DrainAck{MigrationId: 1001, CohortId: 7, Epoch: 41, Node: "cn-1",
			Status: MigrationAckStatus_MIGRATION_ACK_STATUS_OK, Error: "-", Released: 2, AbortedHolders: 1,
			DrainMicros: 9_876, Remaining: []*HeldLock{held}}},
		{"Handoff", &Handoff{MigrationId: 1001, CohortId: 7, Epoch: 41, NewEpoch: 42, KeyGroups: []uint64{5, 6, 1 << 50},
			Holders: []*HeldLock{held}, MembershipEpoch: 6, FromOwner: "cn-1", Planner: "planner-0"}},
		{"HandoffAck", &HandoffAck{MigrationId: 1001, CohortId: 7, Epoch: 41, Node: "cn-3",
			Status: MigrationAckStatus_MIGRATION_ACK_STATUS_STALE_EPOCH, Error: "epoch 43 installed",
			NewEpoch: 42, AdoptedLocks: 1}},
		{"Publish", &Publish{MigrationId: 1001, CohortId: 7, Epoch: 41, OwnermapEpoch: 42, NewOwner: "cn-3",
			NewEpoch: 42}},
		{"PublishAck", &PublishAck{MigrationId: 1001, CohortId: 7, Epoch: 41, Node: "cn-1",
			Status: MigrationAckStatus_MIGRATION_ACK_STATUS_NOT_OWNER, Error: "tombstoned", OwnermapEpoch: 42}},
		{"MigrationAbort", &MigrationAbort{MigrationId: 1001, CohortId: 7, Epoch: 41,
			Phase: MigrationPhase_MIGRATION_PHASE_DRAIN, Reason: "drain deadline", RestoreOwner: "cn-1",
			RestoreEpoch: 41, Planner: "planner-0"}},
		{"MigrationAbortAck", &MigrationAbortAck{MigrationId: 1001, CohortId: 7, Epoch: 41, Node: "cn-3",
			Status: MigrationAckStatus_MIGRATION_ACK_STATUS_ERROR, Error: "boom"}},

		// txn.proto
		{"TxnSubmit/new_order", base(&TxnSubmit_NewOrder{NewOrder: newOrder})},
		{"TxnSubmit/payment", base(&TxnSubmit_Payment{Payment: payment})},
		{"TxnSubmit/order_status", base(&TxnSubmit_OrderStatus{OrderStatus: orderStatus})},
		{"TxnSubmit/delivery", base(&TxnSubmit_Delivery{Delivery: delivery})},
		{"TxnSubmit/stock_level", base(&TxnSubmit_StockLevel{StockLevel: stockLevel})},
		{"TxnSubmit/kv", base(&TxnSubmit_Kv{Kv: kv})},
		{"TxnSubmit/bank_transfer", base(&TxnSubmit_BankTransfer{BankTransfer: transfer})},
		{"TxnSubmit/bank_audit", base(&TxnSubmit_BankAudit{BankAudit: audit})},
		{"TpccNewOrder", newOrder},
		{"TpccOrderLine", &TpccOrderLine{IId: 100000, SupplyWId: 3, Quantity: 10}},
		{"TpccPayment", payment},
		{"TpccOrderStatus", orderStatus},
		{"TpccDelivery", delivery},
		{"TpccStockLevel", stockLevel},
		{"KVTxn", kv},
		{"KVWrite", &KVWrite{Record: rec(1, 19), Value: []byte("x")}},
		{"KVWrite/delete", kvDelete},
		{"BankTransfer", transfer},
		{"BankAudit", audit},
		{"TxnResult/kv", result(&TxnResult_Kv{Kv: kvOut})},
		{"TxnResult/bank_audit", result(&TxnResult_BankAudit{BankAudit: auditOut})},
		{"TxnCounters", counters},
		{"KVTxnOutput", kvOut},
		{"KVReadResult", kvRead},
		{"BankAuditOutput", auditOut},
	}
}

func sampleAccessSummary() *AccessSummary {
	return &AccessSummary{
		Version: 2, Node: "cn-1", MembershipEpoch: 6, Tick: 1234, WindowMicros: 100_000,
		SampledTxns: 97, TotalTxns: 6_208,
		Nodes:      []*NodeWeight{{Kg: 5, WriteWeight: 640, ReadWeight: 12.5}, {Kg: 6, WriteWeight: 320}},
		Edges:      []*Edge{{A: 5, B: 6, Weight: 300}},
		TypedEdges: []*TypedEdge{{A: 5, B: 6, Ww: 256, Wr: 64}, {A: 5, B: 9, Wr: 1.5}},
		Locks: &LockStats{Local: 5000, OwnerRpc: 120, MnCas: 30, MnCasFailed: 4, Redirected: 2,
			FallbackCas: []*KgCount{{Kg: 9, Count: 30}}},
		QueueDepth: 17, CpuLoad: 0.83,
		Homes:         []*KgHome{{Kg: 5, HomeCounts: []uint64{0, 640}}, {Kg: 9, HomeCounts: []uint64{3, 1, 0, 2}}},
		OwnermapEpoch: 41, NodeIndex: 1, Roster: []string{"cn-0", "", "cn-2"},
	}
}

// packageMessages returns every message type declared in the package's
// files, nested ones included (map entries excluded), by full name.
func packageMessages(t testing.TB) map[protoreflect.FullName]protoreflect.MessageDescriptor {
	t.Helper()
	out := map[protoreflect.FullName]protoreflect.MessageDescriptor{}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(mds protoreflect.MessageDescriptors) {
		for i := 0; i < mds.Len(); i++ {
			md := mds.Get(i)
			if md.IsMapEntry() {
				continue
			}
			out[md.FullName()] = md
			walk(md.Messages())
		}
	}
	for _, fd := range files() {
		walk(fd.Messages())
	}
	return out
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("marshal %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return b
}

func newLike(m proto.Message) proto.Message { return m.ProtoReflect().New().Interface() }

func TestFilesListed(t *testing.T) {
	listed := map[string]bool{}
	for _, fd := range files() {
		listed[fd.Path()] = true
		if fd.Package() != protoPackage {
			t.Errorf("%s: package %q, want %q", fd.Path(), fd.Package(), protoPackage)
		}
		if fd.Syntax() != protoreflect.Proto3 {
			t.Errorf("%s: syntax %v, want proto3", fd.Path(), fd.Syntax())
		}
		if !strings.HasPrefix(fd.Path(), "aura/v1/") {
			t.Errorf("%s: registered path must be aura/v1/NAME.proto (see scripts/genproto.sh)", fd.Path())
		}
		opts := protodesc.ToFileDescriptorProto(fd).GetOptions()
		if got := opts.GetGoPackage(); got != goPackage {
			t.Errorf("%s: go_package %q, want %q", fd.Path(), got, goPackage)
		}
	}
	n := 0
	protoregistry.GlobalFiles.RangeFilesByPackage(protoPackage, func(fd protoreflect.FileDescriptor) bool {
		n++
		if !listed[fd.Path()] {
			t.Errorf("%s is registered in package %s but missing from the files list in messages_test.go",
				fd.Path(), protoPackage)
		}
		return true
	})
	if n != len(files()) {
		t.Errorf("registry has %d files in %s, list has %d", n, protoPackage, len(files()))
	}
	// Every .proto in the directory is compiled into the package.
	protos, err := filepath.Glob("*.proto")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range protos {
		if !listed["aura/v1/"+p] {
			t.Errorf("%s has no generated code in the package; run scripts/genproto.sh", p)
		}
	}
}

// TestCoverage fails when a message type of the package has no test case, or
// a field (or oneof member) is never set by any case of its type.
func TestCoverage(t *testing.T) {
	byType := map[protoreflect.FullName][]protoreflect.Message{}
	for _, c := range testCases() {
		m := c.msg.ProtoReflect()
		byType[m.Descriptor().FullName()] = append(byType[m.Descriptor().FullName()], m)
	}
	all := packageMessages(t)
	for name, md := range all {
		cases := byType[name]
		if len(cases) == 0 {
			t.Errorf("message %s has no test case in testCases()", name)
			continue
		}
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			set := false
			for _, m := range cases {
				set = set || m.Has(fd)
			}
			if !set {
				t.Errorf("field %s is never set by a test case", fd.FullName())
			}
		}
	}
	for name := range byType {
		if _, ok := all[name]; !ok {
			t.Errorf("test case of %s, which is not a message of package %s", name, protoPackage)
		}
	}
	names := map[string]bool{}
	for _, c := range testCases() {
		if names[c.name] {
			t.Errorf("duplicate test case name %q", c.name)
		}
		names[c.name] = true
	}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range testCases() {
		t.Run(c.name, func(t *testing.T) {
			b := marshal(t, c.msg)
			if got := proto.Size(c.msg); got != len(b) {
				t.Errorf("proto.Size = %d, marshaled %d bytes", got, len(b))
			}
			got := newLike(c.msg)
			if err := proto.Unmarshal(b, got); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(c.msg, got) {
				t.Fatalf("round trip changed the message:\n in: %v\nout: %v", c.msg, got)
			}
			if b2 := marshal(t, got); !bytes.Equal(b, b2) {
				t.Errorf("deterministic re-marshal differs")
			}
			// JSON, for logs and debugging tools.
			j, err := protojson.Marshal(c.msg)
			if err != nil {
				t.Fatalf("protojson marshal: %v", err)
			}
			gotJSON := newLike(c.msg)
			if err := protojson.Unmarshal(j, gotJSON); err != nil {
				t.Fatalf("protojson unmarshal: %v", err)
			}
			if !proto.Equal(c.msg, gotJSON) {
				t.Fatalf("JSON round trip changed the message:\n in: %v\nout: %v", c.msg, gotJSON)
			}
		})
	}
}

// TestUnknownFieldsPreserved appends fields of every wire type with numbers no
// message uses (as a newer writer would) and checks each message type
// decodes, ignores them and re-encodes them unchanged.
func TestUnknownFieldsPreserved(t *testing.T) {
	var extra []byte
	extra = protowire.AppendTag(extra, 9001, protowire.VarintType)
	extra = protowire.AppendVarint(extra, 1<<60)
	extra = protowire.AppendTag(extra, 9002, protowire.Fixed64Type)
	extra = protowire.AppendFixed64(extra, 0x0123456789abcdef)
	extra = protowire.AppendTag(extra, 9003, protowire.BytesType)
	extra = protowire.AppendBytes(extra, []byte("from the future"))
	extra = protowire.AppendTag(extra, 9004, protowire.Fixed32Type)
	extra = protowire.AppendFixed32(extra, 7)
	for _, c := range testCases() {
		t.Run(c.name, func(t *testing.T) {
			b := append(marshal(t, c.msg), extra...)
			got := newLike(c.msg)
			if err := proto.Unmarshal(b, got); err != nil {
				t.Fatalf("unmarshal with unknown fields: %v", err)
			}
			if u := got.ProtoReflect().GetUnknown(); !bytes.Equal(u, extra) {
				t.Fatalf("unknown fields = %x, want %x", u, extra)
			}
			if again := marshal(t, got); !bytes.Contains(again, extra) {
				t.Fatalf("re-marshal dropped the unknown fields")
			}
			got.ProtoReflect().SetUnknown(nil)
			if !proto.Equal(c.msg, got) {
				t.Fatalf("known fields changed:\n in: %v\nout: %v", c.msg, got)
			}
		})
	}
}

// accessSummaryV1 builds, at run time, the AccessSummary schema of a v1 build:
// the current heartbeat.proto without typed_edges (field 10), the fields that
// came after it, and TypedEdge. Dynamic messages of it play the old code.
func accessSummaryV1(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	fdp := protodesc.ToFileDescriptorProto(File_aura_v1_heartbeat_proto)
	fdp.Name = proto.String("aura/v1/heartbeat_v1_compat_test.proto")
	var keptMsgs = fdp.MessageType[:0]
	for _, m := range fdp.MessageType {
		if m.GetName() == "TypedEdge" {
			continue
		}
		if m.GetName() == "AccessSummary" {
			kept := m.Field[:0]
			for _, f := range m.Field {
				if f.GetNumber() < 10 {
					kept = append(kept, f)
				}
			}
			m.Field = kept
		}
		keptMsgs = append(keptMsgs, m)
	}
	fdp.MessageType = keptMsgs
	fd, err := protodesc.NewFile(fdp, new(protoregistry.Files))
	if err != nil {
		t.Fatalf("building the v1 schema: %v", err)
	}
	md := fd.Messages().ByName("AccessSummary")
	if md.Fields().ByName("typed_edges") != nil || md.Fields().ByName("version") == nil {
		t.Fatal("v1 schema is not what the test expects")
	}
	return md
}

func TestAccessSummaryAcrossVersions(t *testing.T) {
	v1 := accessSummaryV1(t)
	v2msg := sampleAccessSummary()
	v2bytes := marshal(t, v2msg)

	// A v1 planner reads a v2 heartbeat: it sees the v1 fields, ignores the
	// rest without error and keeps them as unknown fields.
	old := dynamicpb.NewMessage(v1)
	if err := proto.Unmarshal(v2bytes, old); err != nil {
		t.Fatalf("v1 reader rejected a v2 summary: %v", err)
	}
	fields := v1.Fields()
	if got := old.Get(fields.ByName("version")).Uint(); got != 2 {
		t.Errorf("v1 reader: version = %d, want 2", got)
	}
	if got := old.Get(fields.ByName("node")).String(); got != "cn-1" {
		t.Errorf("v1 reader: node = %q", got)
	}
	if got := old.Get(fields.ByName("nodes")).List().Len(); got != len(v2msg.Nodes) {
		t.Errorf("v1 reader: %d nodes, want %d", got, len(v2msg.Nodes))
	}
	if got := old.Get(fields.ByName("edges")).List().Len(); got != len(v2msg.Edges) {
		t.Errorf("v1 reader: %d edges, want %d", got, len(v2msg.Edges))
	}
	w := old.Get(fields.ByName("nodes")).List().Get(0).Message()
	if got := w.Get(w.Descriptor().Fields().ByName("write_weight")).Float(); got != 640 {
		t.Errorf("v1 reader: write_weight = %v, want 640", got)
	}
	unknown := map[protowire.Number]int{}
	for u := old.GetUnknown(); len(u) > 0; {
		num, typ, n := protowire.ConsumeField(u)
		if n < 0 {
			t.Fatalf("unknown fields unparsable: %v", protowire.ParseError(n))
		}
		_ = typ
		unknown[num]++
		u = u[n:]
	}
	if unknown[10] != len(v2msg.TypedEdges) {
		t.Errorf("v1 reader kept %d typed_edges as unknown fields, want %d", unknown[10], len(v2msg.TypedEdges))
	}

	// A v1 node relays the summary: nothing the v2 writer sent is lost.
	relayed := marshal(t, old)
	back := &AccessSummary{}
	if err := proto.Unmarshal(relayed, back); err != nil {
		t.Fatalf("v2 reader rejected a relayed summary: %v", err)
	}
	if !proto.Equal(v2msg, back) {
		t.Fatalf("relay through a v1 node changed the summary:\n in: %v\nout: %v", v2msg, back)
	}

	// A v2 planner reads a v1 heartbeat: no typed edges, version 1, and the
	// untyped edges are there.
	oldMsg := dynamicpb.NewMessage(v1)
	oldMsg.Set(fields.ByName("version"), protoreflect.ValueOfUint32(1))
	oldMsg.Set(fields.ByName("node"), protoreflect.ValueOfString("cn-9"))
	edges := oldMsg.Mutable(fields.ByName("edges")).List()
	e := edges.NewElement()
	ef := e.Message().Descriptor().Fields()
	e.Message().Set(ef.ByName("a"), protoreflect.ValueOfUint64(1))
	e.Message().Set(ef.ByName("b"), protoreflect.ValueOfUint64(2))
	e.Message().Set(ef.ByName("weight"), protoreflect.ValueOfFloat64(3.5))
	edges.Append(e)
	fromOld := &AccessSummary{}
	if err := proto.Unmarshal(marshal(t, oldMsg), fromOld); err != nil {
		t.Fatalf("v2 reader rejected a v1 summary: %v", err)
	}
	want := &AccessSummary{Version: 1, Node: "cn-9", Edges: []*Edge{{A: 1, B: 2, Weight: 3.5}}}
	if !proto.Equal(fromOld, want) {
		t.Fatalf("v2 reader of a v1 summary: got %v, want %v", fromOld, want)
	}
}

// malformed are encodings no message accepts.
var malformed = []struct {
	name string
	b    []byte
}{
	{"tag without value", []byte{0x08}},
	{"length past the end", []byte{0x0a, 0x05, 0x01}},
	{"huge length", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}},
	{"field number 0", []byte{0x00, 0x01}},
	{"field number too large", protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3)},
	{"wire type 7", []byte{0x0f, 0x01}},
	{"unterminated group", []byte{0x0b}},
	{"end group without start", []byte{0x0c}},
	{"overlong varint", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	{"truncated fixed32", []byte{0x0d, 0x01, 0x02}},
	{"truncated fixed64", []byte{0x09, 0x01, 0x02, 0x03}},
}

func TestGarbageIsAnError(t *testing.T) {
	types := packageMessages(t)
	for name, md := range types {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
		if err != nil {
			t.Fatalf("%s not registered: %v", name, err)
		}
		for _, g := range malformed {
			if err := proto.Unmarshal(g.b, mt.New().Interface()); err == nil {
				t.Errorf("%s accepted %s (%x)", name, g.name, g.b)
			}
		}
		// Invalid UTF-8 in every string field is rejected (proto3).
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if fd.Kind() != protoreflect.StringKind {
				continue
			}
			b := protowire.AppendTag(nil, fd.Number(), protowire.BytesType)
			b = protowire.AppendBytes(b, []byte{'o', 'k', 0xff, 0xfe})
			if err := proto.Unmarshal(b, mt.New().Interface()); err == nil {
				t.Errorf("%s accepted invalid UTF-8 in %s", name, fd.Name())
			}
		}
	}
	// Cutting the last byte off a valid encoding always cuts a field short;
	// every shorter prefix must decode or fail, never panic.
	for _, c := range testCases() {
		b := marshal(t, c.msg)
		if len(b) == 0 {
			continue
		}
		if err := proto.Unmarshal(b[:len(b)-1], newLike(c.msg)); err == nil {
			t.Errorf("%s: truncated encoding accepted", c.name)
		}
		for i := range b {
			_ = proto.Unmarshal(b[:i], newLike(c.msg))
		}
	}
	// Random bytes and random corruptions of valid encodings: no panics.
	rng := rand.New(rand.NewSource(1))
	cases := testCases()
	for i := 0; i < 3000; i++ {
		var b []byte
		if i%2 == 0 {
			b = make([]byte, rng.Intn(64))
			rng.Read(b)
		} else {
			b = marshal(t, cases[rng.Intn(len(cases))].msg)
			for j := 0; j < 1+rng.Intn(4) && len(b) > 0; j++ {
				b[rng.Intn(len(b))] = byte(rng.Intn(256))
			}
		}
		for _, md := range types {
			_ = proto.Unmarshal(b, dynamicpb.NewMessage(md))
			mt, _ := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			_ = proto.Unmarshal(b, mt.New().Interface())
		}
	}
}

func seedFileName(c testCase) string {
	return seedPrefix + strings.NewReplacer("/", "_", ".", "_").Replace(c.name)
}

func seedFileContent(b []byte) string {
	return fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
}

// TestSeedCorpus checks that the committed seed corpus of FuzzUnmarshal holds
// one file per test case with its current encoding. Regenerate it with
// go test ./messages -run TestSeedCorpus -update-corpus.
func TestSeedCorpus(t *testing.T) {
	want := map[string]string{}
	for _, c := range testCases() {
		want[seedFileName(c)] = seedFileContent(marshal(t, c.msg))
	}
	if *updateCorpus {
		if err := os.MkdirAll(corpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(corpusDir, seedPrefix+"*"))
		for _, p := range old {
			if _, ok := want[filepath.Base(p)]; !ok {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, content := range want {
			if err := os.WriteFile(filepath.Join(corpusDir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	const hint = "; regenerate with: go test ./messages -run TestSeedCorpus -update-corpus"
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(corpusDir, name))
		if err != nil {
			t.Errorf("seed %s: %v%s", name, err, hint)
			continue
		}
		if string(got) != want[name] {
			t.Errorf("seed %s is out of date%s", name, hint)
		}
	}
	existing, _ := filepath.Glob(filepath.Join(corpusDir, seedPrefix+"*"))
	for _, p := range existing {
		if _, ok := want[filepath.Base(p)]; !ok {
			t.Errorf("stale seed %s has no test case%s", p, hint)
		}
	}
}

// FuzzUnmarshal feeds arbitrary bytes to proto.Unmarshal for every message
// type of the package. Decoding may fail but must not panic; whatever decodes
// must re-encode and decode again to an equal message.
func FuzzUnmarshal(f *testing.F) {
	for _, g := range malformed {
		f.Add(g.b)
	}
	f.Add([]byte{})
	var types []protoreflect.MessageType
	names := make([]string, 0)
	for name := range packageMessages(f) {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
		if err != nil {
			f.Fatalf("%s not registered: %v", name, err)
		}
		types = append(types, mt)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mt := range types {
			m := mt.New().Interface()
			if err := proto.Unmarshal(data, m); err != nil {
				continue
			}
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatalf("%s: decoded but cannot re-encode: %v", mt.Descriptor().FullName(), err)
			}
			m2 := mt.New().Interface()
			if err := proto.Unmarshal(b, m2); err != nil {
				t.Fatalf("%s: re-encoding does not decode: %v", mt.Descriptor().FullName(), err)
			}
			if !proto.Equal(m, m2) {
				t.Fatalf("%s: re-encoding changed the message:\n%v\n%v", mt.Descriptor().FullName(), m, m2)
			}
		}
	})
}
