// The error side of the boundary: turns a caught C++ exception into a pending
// error report held in static storage, then raises it with ereport once no C++
// frame with destructors is left between here and PostgreSQL.
#include "pg/boundary.hpp"

#include <cstdio>
#include <cstring>
#include <new>

#include "core/json_error.hpp"

namespace opledger::pg {
namespace {

// Static, not palloc'd: filling it must never fail or ereport while an exception
// is being handled. Messages longer than these buffers are truncated.
struct PendingError {
    ErrorData* pg_error = nullptr;  // a PostgreSQL error caught by pg_call, re-thrown as is
    int sqlstate = 0;
    char message[1024] = {};
    char detail[4096] = {};
    char hint[1024] = {};
};

PendingError pending;

void copy_text(char* target, std::size_t size, const char* text) noexcept {
    snprintf(target, size, "%s", text != nullptr ? text : "");
}

void set_pending(int sqlstate, const char* message, const char* detail, const char* hint) noexcept {
    pending.pg_error = nullptr;
    pending.sqlstate = sqlstate;
    copy_text(pending.message, sizeof pending.message, message);
    copy_text(pending.detail, sizeof pending.detail, detail);
    copy_text(pending.hint, sizeof pending.hint, hint);
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
    char detail[128] = {};
    if (error.byte_offset()) {
        snprintf(detail, sizeof detail, "The problem is at byte offset %zu of the input.", *error.byte_offset());
    }
    char message[sizeof pending.message];
    snprintf(message, sizeof message, "%s%s", message_prefix(error.kind()), error.what());
    const char* hint = error.hint().c_str();
    if (hint[0] == '\0' && error.kind() == core::JsonErrorKind::too_deep) {
        hint = "The limit grows with the max_stack_depth setting.";
    }
    set_pending(sqlstate_of(error.kind()), message, detail, hint);
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

}  // namespace detail

void raise_pending_error() {
    if (pending.pg_error != nullptr) {
        ErrorData* error = pending.pg_error;
        pending.pg_error = nullptr;
        ReThrowError(error);
    }
    ereport(ERROR, (errcode(pending.sqlstate), errmsg_internal("%s", pending.message),
                    pending.detail[0] != '\0' ? errdetail_internal("%s", pending.detail) : 0,
                    pending.hint[0] != '\0' ? errhint("%s", pending.hint) : 0));
    pg_unreachable();
}

}  // namespace opledger::pg
