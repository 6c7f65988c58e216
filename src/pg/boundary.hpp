// The one crossing between PostgreSQL's error world (ereport = siglongjmp, runs no
// destructors) and C++'s (exceptions, RAII). Every SQL-callable function uses it:
//
//   extern "C" PGDLLEXPORT Datum op_begin(PG_FUNCTION_ARGS)
//   { return opledger::pg::sql_entry(fcinfo, [&] { ... return datum; }); }
//
// The rules, and what enforces them:
//  * No C++ exception reaches PostgreSQL. sql_entry runs the body inside
//    try/catch(...); any exception becomes a pending error report (plain data in
//    ErrorContext, never a fixed-size buffer, so no text is cut short), and ereport
//    is raised only after the catch block has ended, so no exception object is alive
//    at the longjmp. sql_entry is noexcept.
//  * No ereport unwinds a C++ frame. A PostgreSQL call that may ereport is made
//    inside pg_call(), whose lambda runs through a noexcept trampoline inside one C++
//    function that holds the PG_TRY (detail::run_guarded): the longjmp of an ereport
//    lands there, so the only frames it skips are the lambda's and the trampoline's,
//    and every frame of pg_call's caller is left intact. pg_call copies the
//    ErrorData, flushes PostgreSQL's error state and throws PgError carrying it; the
//    C++ frames between unwind normally, and sql_entry re-raises the original error
//    with its SQLSTATE, DETAIL and HINT.
//  * The lambda given to pg_call must own no object with a destructor (an ereport
//    skips the rest of its frame) and cannot throw: the trampoline is noexcept, so
//    an exception escaping it ends the process (std::terminate) instead of
//    corrupting PostgreSQL's state. Its result must be trivially copyable.
//  * Destructors that run between FlushErrorState and the rethrow (while a PgError
//    unwinds the frames between pg_call and sql_entry) run with no PostgreSQL error
//    active. They may free memory (C++ heap, or pfree) but must not call anything
//    that can ereport: that ereport would longjmp out of the unwinder. None of the
//    destructors in this layer does; keep it so.
//  * Memory that outlives a call lives in a PostgreSQL memory context
//    (memory_resource.hpp); a PgError's ErrorData lives in the caller's context until
//    sql_entry re-raises it.
//  * One thing neither guard covers: CopyErrorData running out of memory inside
//    run_guarded ereports through PostgreSQL's handler and skips the frames above;
//    the transaction aborts as it must, and only C++ heap memory of those frames leaks.
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

namespace detail {
// Runs body(arg) under PG_TRY; returns the copied ErrorData of an ereport (error
// state flushed), or nullptr. The only place with PG_TRY in the C++ layer.
ErrorData* run_guarded(void (*body)(void*) noexcept, void* arg) noexcept;
}  // namespace detail

// Runs fn (PostgreSQL calls only) and turns an ereport into a PgError exception.
template <typename Fn>
auto pg_call(Fn&& fn) -> decltype(fn()) {
    using Callable = std::remove_reference_t<Fn>;
    using Result = decltype(fn());
    if constexpr (std::is_void_v<Result>) {
        void (*trampoline)(void*) noexcept = [](void* callable) noexcept { (*static_cast<Callable*>(callable))(); };
        if (ErrorData* error = detail::run_guarded(trampoline, &fn)) throw PgError(error);
    } else {
        static_assert(std::is_trivially_copyable_v<Result>, "pg_call returns plain values only");
        struct Call {
            Callable* fn;
            Result value;
        } call{&fn, Result{}};
        void (*trampoline)(void*) noexcept = [](void* state) noexcept {
            Call* c = static_cast<Call*>(state);
            c->value = (*c->fn)();
        };
        if (ErrorData* error = detail::run_guarded(trampoline, &call)) throw PgError(error);
        return call.value;
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
