// Package rules holds the named partition rules a node serves (SPEC §2): a
// rule maps a table's key tuple — the values of its key columns, such as
// (w_id, d_id, o_id) for TPC-C's ORDER — to the record's key group (the
// unit of ownership, which the OwnerMap places in cohorts) and its
// partition value (the unit of static routing, e.g. a warehouse).
//
// A Registry holds the rules by name. ForWorkload gives the rules of a
// workload:
//
//   - the workload's own rule by its name (tpcc_warehouse, bank_range,
//     ycsb_range, …) over the key tuple (table_id, record_key);
//   - DefaultRangeRule, "default_range": the trace workload's default
//     ranges of 64 keys per table, over (table_id, record_key);
//   - for TPC-C, one rule per table over the table's primary key columns
//     (r_warehouse, r_district, r_customer, r_history, r_new_order,
//     r_orders, r_order_line, r_item, r_stock), giving exactly the key
//     groups and warehouses the workload's rule gives the same records.
//
// User-defined rules come from a JSON file (Load, Parse; format in
// config.go and docs in FileConfig), checked against the node's schema.
//
// What it promises:
//
//   - Validation reports every problem of a file at once, each naming the
//     file, the rule (index and name) and the field.
//   - Sizes are bounded: MaxConfigBytes per file, MaxRules rules,
//     MaxArity key columns per rule, MaxNameBytes per name, MaxKeyBytes
//     per textual key tuple.
//   - Resolve never panics on any key tuple: a wrong arity or a value
//     outside a column's bounds is an error wrapping ErrBadKey; a tuple
//     naming a partition the workload does not have (a TPC-C warehouse
//     above the configured count) wraps ErrNoSuchPartition.
//   - Rules are immutable once built and safe for concurrent use; a
//     Registry is read-only after construction.
package rules
