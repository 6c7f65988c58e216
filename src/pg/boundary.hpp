// The one crossing between PostgreSQL's error world (ereport = siglongjmp, runs no
// destructors) and C++'s (exceptions, RAII). Every SQL-callable function uses it:
//
//   extern "C" PGDLLEXPORT Datum op_begin(PG_FUNCTION_ARGS)
//   { return opledger::pg::sql_entry(fcinfo, [&] { ... return datum; }); }
//
// Rules, kept by these two guards:
//  * Into C++: sql_entry runs the body inside try/catch(...). Any exception is turned
//    into an ErrorReport (plain data, palloc'd strings), and ereport is raised only
//    after the catch block has ended, so no exception object is alive at the longjmp.
//  * Out to PostgreSQL: a PostgreSQL call that may ereport is made inside pg_call(),
//    which sets its own sigsetjmp, copies the ErrorData, flushes the error state and
//    throws PgError carrying it; the C++ frames between unwind normally, and
//    sql_entry re-throws the original error with its SQLSTATE, DETAIL and HINT.
//  * The lambda given to pg_call must own no object with a destructor and must not
//    throw a C++ exception (it is compiled between PG_TRY and PG_END_TRY).
#pragma once

#include <string>
#include <utility>

#include "pg/pg_headers.hpp"

namespace opledger::pg {

// An error that must reach the client with this SQLSTATE. Thrown by C++ code in the
// PostgreSQL layer (validation failures, ledger rule violations).
class SqlError {
public:
    SqlError(int sqlstate, std::string message, std::string detail = {}, std::string hint = {})
        : sqlstate(sqlstate), message(std::move(message)), detail(std::move(detail)), hint(std::move(hint)) {}
    int sqlstate;
    std::string message;
    std::string detail;
    std::string hint;
};

// A PostgreSQL error caught by pg_call, carried across C++ frames unchanged.
class PgError {
public:
    explicit PgError(ErrorData* data) : data(data) {}
    ErrorData* data;  // palloc'd in the caller's memory context by CopyErrorData
};

// Raised by sql_entry after all C++ frames are gone. Never returns.
[[noreturn]] void raise_pending_error();

namespace detail {
// Converts the active exception (inside a catch block) into the pending error report.
void capture_current_exception() noexcept;
}  // namespace detail

template <typename Body>
Datum sql_entry(FunctionCallInfo fcinfo, Body&& body) noexcept {
    (void)fcinfo;
    {
        bool failed = false;
        Datum result = (Datum)0;
        try {
            result = body();
        } catch (...) {
            detail::capture_current_exception();
            failed = true;
        }
        if (!failed) return result;
    }
    raise_pending_error();
}

// Runs fn (PostgreSQL calls only) and turns an ereport into a PgError exception.
// (-Wclobbered may warn about `value` and `error` under -Wextra: `value` is read only
// when no longjmp happened, and `error` is written only after it, so neither can
// hold a clobbered register copy.)
template <typename Fn>
auto pg_call(Fn&& fn) -> decltype(fn()) {
    MemoryContext caller_context = CurrentMemoryContext;
    ErrorData* error = nullptr;
    if constexpr (std::is_void_v<decltype(fn())>) {
        PG_TRY();
        { fn(); }
        PG_CATCH();
        {
            MemoryContextSwitchTo(caller_context);
            error = CopyErrorData();
            FlushErrorState();
        }
        PG_END_TRY();
        if (error != nullptr) throw PgError(error);
    } else {
        decltype(fn()) value{};
        PG_TRY();
        { value = fn(); }
        PG_CATCH();
        {
            MemoryContextSwitchTo(caller_context);
            error = CopyErrorData();
            FlushErrorState();
        }
        PG_END_TRY();
        if (error != nullptr) throw PgError(error);
        return value;
    }
}

}  // namespace opledger::pg

// Defines the SQL-callable C function `sql_name` (C linkage, exported, V1 calling
// convention) whose body is the C++ function `body(FunctionCallInfo) -> Datum`,
// run under sql_entry. Use it at file scope, outside any namespace.
#define OPLEDGER_SQL_FUNCTION(sql_name, body)                                                \
    extern "C" PGDLLEXPORT Datum sql_name(PG_FUNCTION_ARGS);                                 \
    extern "C" {                                                                             \
    PG_FUNCTION_INFO_V1(sql_name);                                                           \
    }                                                                                        \
    Datum sql_name(PG_FUNCTION_ARGS) {                                                       \
        return opledger::pg::sql_entry(fcinfo, [&]() -> Datum { return body(fcinfo); });    \
    }
