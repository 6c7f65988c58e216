// What the op_* functions hand back to SQL: opledger.begin_result for op_begin, an
// opledger.operations row for the reports and op_claim_reconciliation.
#pragma once

#include <array>

#include "pg/ledger/ledger_store.hpp"

namespace opledger::pg::ledger {

// The function's declared composite result type, blessed (call before SPI_connect).
TupleDesc result_descriptor(FunctionCallInfo fcinfo);

// Values of a written operations row laid out for `target` (the operations row
// type, possibly with dropped columns).
void operations_values(const WrittenRow& w, TupleDesc target, Datum* values, bool* nulls);
// Which payload columns of opledger.operations a role may read (SELECT on the table
// or on the column); the others are handed back as NULL (an untrusted caller's report returns
// nothing the caller couldn't read). Besides the call's payloads: the keyed
// fingerprint of the result, and the count of duplicate effects, which is the outcome
// of comparing a repeated success with the stored result. Handed to a caller that may
// not read them, either would tell it whether a guessed value equals a redacted
// stored one (docs/security.md, "Secrets in results").
struct ReadablePayloads {
    bool args = true, result = true, error = true, approval_note = true;
    bool result_fingerprint = true, duplicate_effects = true;
    bool all() const {
        return args && result && error && approval_note && result_fingerprint && duplicate_effects;
    }
};
ReadablePayloads readable_payloads(Oid role);

// Values of a written operations row laid out for `target` (the operations row
// type, possibly with dropped columns), with the unreadable payloads NULL.
void operations_values(const WrittenRow& w, TupleDesc target, Datum* values, bool* nulls,
                       const ReadablePayloads& readable);
// The written row as the function's result (call before SPI_finish).
Datum return_operations_row(const WrittenRow& w, TupleDesc desc, const ReadablePayloads& readable);

// The columns of opledger.begin_result that op_begin fills, by name. The SQL type
// (control/install/30_ledger_functions.sql) is the definition; op_begin places each
// value by the installed type's attribute names and refuses a type whose columns are
// not exactly these (tests/pgtap/21_begin_result_columns.sql checks both directions).
inline constexpr int kBeginResultColumnCount = 15;
const std::array<const char*, kBeginResultColumnCount>& begin_result_columns();

// op_begin's answer for the operation as it is after the call, to the calling role
// (a keyed args_hash only if it may read that column).
Datum begin_result(TupleDesc desc, const OperationRow& row, core::ledger::Decision decision,
                   const std::optional<core::ledger::Micros>& retry_after, Oid role);

}  // namespace opledger::pg::ledger
