// The error side of the boundary: turns a caught C++ exception into a pending
// error report held in static storage, then raises it with ereport once no C++
// frame with destructors is left between here and PostgreSQL.
#include "pg/boundary.hpp"

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <new>

#include "core/json_error.hpp"

namespace opledger::pg {
namespace {

// The error waiting to be raised once the C++ frames are gone. Its texts are
// allocated in ErrorContext with MCXT_ALLOC_NO_OOM, so filling it never ereports
// (it runs inside a catch block) and never cuts a text short; ErrorContext is
// emptied by PostgreSQL's error recovery, after the ereport has copied them.
struct PendingError {
    ErrorData* pg_error = nullptr;  // a PostgreSQL error caught by pg_call, re-raised as is
    int sqlstate = 0;
    const char* message = "";
    const char* detail = "";
    const char* hint = "";
};

PendingError pending;

// The concatenation of the parts in ErrorContext; on out of memory a fixed text.
const char* copy_text(std::initializer_list<const char*> parts) noexcept {
    std::size_t length = 0;
    for (const char* part : parts) length += part != nullptr ? strlen(part) : 0;
    char* out = static_cast<char*>(
        MemoryContextAllocExtended(ErrorContext, length + 1, MCXT_ALLOC_NO_OOM | MCXT_ALLOC_HUGE));
    if (out == nullptr) return "(text lost: out of memory)";
    char* cursor = out;
    for (const char* part : parts) {
        if (part == nullptr) continue;
        const std::size_t n = strlen(part);
        memcpy(cursor, part, n);
        cursor += n;
    }
    *cursor = '\0';
    return out;
}

void set_pending(int sqlstate, const char* message, const char* detail, const char* hint) noexcept {
    pending.pg_error = nullptr;
    pending.sqlstate = sqlstate;
    pending.message = copy_text({message});
    pending.detail = copy_text({detail});
    pending.hint = copy_text({hint});
}

int sqlstate_of(core::JsonErrorKind kind) noexcept {
    switch (kind) {
        case core::JsonErrorKind::inexact_number:
            return ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;  // 22003
        case core::JsonErrorKind::too_deep:
            return ERRCODE_STATEMENT_TOO_COMPLEX;  // 54001
        case core::JsonErrorKind::invalid_text:
        case core::JsonErrorKind::invalid_pointer:
            break;
    }
    return ERRCODE_INVALID_TEXT_REPRESENTATION;  // 22P02
}

const char* message_prefix(core::JsonErrorKind kind) noexcept {
    switch (kind) {
        case core::JsonErrorKind::invalid_text:
            return "invalid JSON text: ";
        case core::JsonErrorKind::invalid_pointer:
            return "invalid JSON pointer: ";
        case core::JsonErrorKind::inexact_number:
        case core::JsonErrorKind::too_deep:
            break;
    }
    return "JSON ";
}

void set_pending_json_error(const core::JsonError& error) noexcept {
    char detail[128] = {};  // fits: a fixed sentence and one number
    if (error.byte_offset()) {
        snprintf(detail, sizeof detail, "The problem is at byte offset %zu of the input.", *error.byte_offset());
    }
    const char* hint = error.hint().c_str();
    if (hint[0] == '\0' && error.kind() == core::JsonErrorKind::too_deep) {
        hint = "The limit grows with the max_stack_depth setting.";
    }
    set_pending(sqlstate_of(error.kind()), "", detail, hint);
    pending.message = copy_text({message_prefix(error.kind()), error.what()});
}

}  // namespace

namespace detail {

void capture_current_exception() noexcept {
    try {
        throw;
    } catch (const PgError& error) {
        set_pending(0, "", "", "");
        pending.pg_error = error.data;
    } catch (const SqlError& error) {
        set_pending(error.sqlstate, error.message.c_str(), error.detail.c_str(), error.hint.c_str());
    } catch (const core::JsonError& error) {
        set_pending_json_error(error);
    } catch (const std::bad_alloc&) {
        set_pending(ERRCODE_OUT_OF_MEMORY, "out of memory", "", "");
    } catch (const std::exception& error) {
        set_pending(ERRCODE_INTERNAL_ERROR, "opledger internal error", error.what(), "");
    } catch (...) {
        set_pending(ERRCODE_INTERNAL_ERROR, "opledger internal error", "An unknown C++ exception was caught.", "");
    }
}

ErrorData* run_guarded(void (*body)(void*) noexcept, void* arg) noexcept {
    MemoryContext caller_context = CurrentMemoryContext;
    ErrorData* volatile error = nullptr;
    PG_TRY();
    { body(arg); }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller_context);
        error = CopyErrorData();
        FlushErrorState();
    }
    PG_END_TRY();
    return error;
}

}  // namespace detail

// Every error leaves the extension without its statement in the server log
// (errhidestmt: the statement holds the call's arguments, secrets included) and
// without the extension's own SQL (the CONTEXT and QUERY of an error raised inside
// one of its statements would show internal statement texts and their positions).
// (docs/security.md: no value of a call in an error message or a log line.)
// The CONTEXT goes too when the caller is PL/pgSQL: its frames quote the calling
// statement, literal arguments included. So even the extension's own errors are
// built first (ereport collects the context), then stripped and thrown on.
void raise_pending_error() {
    ErrorData* error = pending.pg_error;
    pending.pg_error = nullptr;
    if (error == nullptr) {
        MemoryContext caller_context = CurrentMemoryContext;
        PG_TRY();
        {
            ereport(ERROR, (errcode(pending.sqlstate), errmsg_internal("%s", pending.message),
                            pending.detail[0] != '\0' ? errdetail_internal("%s", pending.detail) : 0,
                            pending.hint[0] != '\0' ? errhint("%s", pending.hint) : 0));
        }
        PG_CATCH();
        {
            MemoryContextSwitchTo(caller_context);
            error = CopyErrorData();
            FlushErrorState();
        }
        PG_END_TRY();
    }
    error->hide_stmt = true;
    error->hide_ctx = false;
    error->context = nullptr;
    error->internalquery = nullptr;
    error->internalpos = 0;
    ReThrowError(error);
}

}  // namespace opledger::pg
