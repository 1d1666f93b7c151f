// Package bank is the bank workload: transfers between accounts plus audits
// that read accounts and sum their balances. Money is conserved by every
// transfer, so the sum of all balances is an invariant the Check verifies
// ("bank.total") and a full audit observes.
//
// # Data
//
// One table, "account" (table id 1): account a (0 ≤ a < Accounts) has key a
// and a 16-byte value, little-endian: the balance in cents (int64) then the
// account number (uint64, so a value stored under the wrong key is
// detected). Every account starts with InitialCents.
//
// # Transactions
//
//   - BankTransfer{from, to, amount}: locks both accounts with one
//     GetForUpdateMany in ascending account order (a fixed lock order), then
//     debits from and credits to. Overdrafts: by default a transfer of more
//     than the debited balance is a user rollback (txn.ErrRollback wrapped,
//     outcome ROLLED_BACK, not retried); with AllowOverdraft balances may go
//     negative. Amounts are uniform in [1, MaxTransferCents].
//   - BankAudit{first, count}: reads accounts first..first+count-1 (count 0 =
//     to the last account) with GetMany in batches of at most AuditBatch (≤
//     100) records, to keep each doorbell batch bounded, sums them and sets
//     TxnResult.output to BankAuditOutput{total_cents, accounts}. Generated
//     audits read every account unless AuditAccounts is set, in which case
//     they read a uniformly placed range of that many accounts.
//
// The mix is AuditFraction audits (default 5%) and transfers otherwise.
// Accounts are uniform by default; HotTheta > 0 draws both accounts of a
// transfer from YCSB's scrambled Zipfian (hot accounts scattered over the
// key space).
//
// # Branches and drift
//
// With BranchKGs > 0 (branch locality) the key groups, taken in the order
// of the current epoch's permutation, form branches of BranchKGs key groups
// (the last may be shorter). A transfer draws a branch (uniformly, or by a
// Zipfian with skew BranchTheta over branch numbers: branch 0 is the
// hottest), its debited account as a uniform account of a uniform key group
// of the branch, and, with probability LocalFraction (default 0.9), its
// credited account the same way in the same branch; otherwise any other
// account, uniformly. So the key groups of a branch are written together:
// they are the co-access groups a planner should learn and co-locate.
//
// Drift(e) (workload.Drifter) switches every generator, from its next
// transaction on, to epoch e's permutation. Epoch 0 is the identity —
// branch b is key groups b×BranchKGs … (b+1)×BranchKGs−1, which a static
// rule with KeyGroupsPerPartition = BranchKGs captures exactly; epoch e ≥ 1
// is a Fisher–Yates shuffle of all key groups with a PCG seeded by
// (LayoutSeed, e), independent of earlier epochs. A drift therefore changes
// both which key groups transfer to each other (every branch is re-dealt)
// and which accounts are hot (branch 0's key groups are new), so the learned
// placement must move. Epochs are bounded by MaxDriftEpoch. A drift touches
// neither the data nor the rule nor the programs: a transfer still moves
// money between two accounts, so money is conserved and the checks hold
// across drifts. Without branches Drift fails (ErrNoBranches), and HotTheta
// must be 0 with branches.
//
// # Rule "bank_range"
//
// Key group = account / AccountsPerKG (default 64); partition = key group /
// KeyGroupsPerPartition (default 1). A transfer's home partition is its
// debited account's, an audit's its first account's.
//
// # Checks
//
//   - "bank.accounts": every account is present and well formed.
//   - "bank.total": the balances sum to Accounts × InitialCents.
package bank
