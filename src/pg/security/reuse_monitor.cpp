// The rejected-reuse monitor (see reuse_monitor.hpp): shared-memory counts of OL001
// rejections, the LOG line of each, and the SQL functions rejected_reuses() and
// reset_rejected_reuses().
//
// Lock discipline: one LWLock guards the header and the hash table. Under it the code
// only reads and writes shared memory: no palloc, no ereport, no catalog access, no
// call that can fail (dynahash on a fixed-size shared table with HASH_ENTER_NULL
// returns NULL instead of raising; its allocator is ShmemAllocNoError). Everything
// that can fail (role name, LOG line, tuplestore) runs before or after the lock.
#include "pg/security/reuse_monitor.hpp"

#include "pg/sqlstates.hpp"

#include <cstdio>
#include <cstring>

#include "pg/boundary.hpp"
#include "pg/ledger/ledger_caller.hpp"

// funcapi.h and storage/lwlock.h reach s_lock.h, whose C code uses `register` (not C++17).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wregister"
extern "C" {
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}
#pragma GCC diagnostic pop

namespace opledger::pg {
namespace {

constexpr const char* kTranche = "opledger_reuse_monitor";

// The ledger's bounds (core/ledger/bounds.hpp). Longer texts (never passed by a
// ledger that enforces them) are cut at a character boundary, and then share an
// entry with others of the same prefix.
constexpr std::size_t kTenantBytes = core::ledger::kMaxTenantBytes;
constexpr std::size_t kToolBytes = core::ledger::kMaxToolBytes;
constexpr std::size_t kOperationIdBytes = core::ledger::kMaxOperationIdBytes;

// The hash key: exact copies, zero-padded, compared and hashed as bytes (HASH_BLOBS).
// An empty operation_id marks a tenant's overflow entry (the ledger never passes one),
// one per tenant and kind.
struct MonitorKey {
    char tenant[kTenantBytes + 1];
    char tool[kToolBytes + 1];
    char operation_id[kOperationIdBytes + 1];
    char kind;  // MonitorKind
};

struct MonitorEntry {
    MonitorKey key;  // first: dynahash's requirement
    int64 rejections;
    TimestampTz first_at;
    TimestampTz last_at;
    NameData last_role;
};
static_assert(sizeof(MonitorKey) == kTenantBytes + kToolBytes + kOperationIdBytes + 4,
              "no padding in the key: every byte of it is set, so equal keys hash alike");
static_assert(offsetof(MonitorEntry, key) == 0, "dynahash expects the key at the start of the entry");
static_assert(std::is_trivially_copyable_v<MonitorEntry>, "entries are copied with memcpy");

struct MonitorShared {
    LWLock* lock;
    int capacity;  // entries, fixed at server start
};

// Set in every process by the startup hook (inherited through fork); nullptr when
// not preloaded, which turns recording off and makes rejected_reuses() empty.
MonitorShared* monitor = nullptr;
HTAB* entries = nullptr;

int capacity_setting = 4096;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

Size shared_size(int capacity) {
    return add_size(MAXALIGN(sizeof(MonitorShared)), hash_estimate_size(capacity, sizeof(MonitorEntry)));
}

// The hooks run in the postmaster (and each backend under EXEC_BACKEND). They own no
// C++ object, so an ereport (out of shared memory) unwinds nothing with a destructor.
void request_shared_memory() {
    if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
    RequestAddinShmemSpace(shared_size(capacity_setting));
    RequestNamedLWLockTranche(kTranche, 1);
}

void start_shared_memory() {
    if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
    monitor = nullptr;
    entries = nullptr;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    auto* shared = static_cast<MonitorShared*>(ShmemInitStruct("opledger reuse monitor", sizeof(MonitorShared), &found));
    if (!found) {
        shared->lock = &(GetNamedLWLockTranche(kTranche))->lock;
        shared->capacity = capacity_setting;
    }
    HASHCTL info;
    memset(&info, 0, sizeof info);
    info.keysize = sizeof(MonitorKey);
    info.entrysize = sizeof(MonitorEntry);
    // init_size == max_size and HASH_FIXED_SIZE: every entry is allocated now, and
    // the table never asks for more (an insert beyond them returns NULL).
    HTAB* table = ShmemInitHash("opledger reuse monitor entries", shared->capacity, shared->capacity, &info,
                                HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
    LWLockRelease(AddinShmemInitLock);
    monitor = shared;
    entries = table;
}

// Copies src into dst (size cap + 1), cut to at most cap bytes at a character
// boundary of the database encoding; dst is zero-padded (part of a hash key).
void bounded_copy(char* dst, std::size_t cap, const char* src) noexcept {
    memset(dst, 0, cap + 1);
    if (src == nullptr) return;
    std::size_t n = strnlen(src, cap + 1);
    // pg_mbcliplen only computes (no allocation, no error); the text is verified
    // input of the database encoding, so each character's length is within it.
    if (n > cap) n = static_cast<std::size_t>(pg_mbcliplen(src, static_cast<int>(n), static_cast<int>(cap)));
    memcpy(dst, src, n);
}

// One rejection being recorded: everything prepared before the lock is taken.
struct Rejection {
    MonitorKey key;
    NameData role;
    TimestampTz now;
    Oid role_oid;
    // The outcome, for the LOG line.
    bool tracked = false;   // counted in the shared table
    bool uncounted = false; // preloaded, but no room (see make_room)
    int64 rejections = 0;   // this entry's count after this rejection
};

void set_role(MonitorEntry* e, const NameData& role) { memcpy(&e->last_role, &role, sizeof(NameData)); }

bool is_overflow(const MonitorEntry* e) { return e->key.operation_id[0] == '\0'; }

// Under the exclusive lock. Evicts entries until one is free; returns false only if
// no entry can be evicted (every entry is an overflow entry: more tenants than
// capacity). The victim has the fewest rejections, of those the oldest last_at: a
// guessing loop's entry (many rejections, recent) is the last to go, so an attacker
// cannot flush it with a burst of other rejected IDs without making that burst loud.
// Its counts move to its tenant's overflow entry; creating that entry may take the
// freed slot, in which case the loop evicts again (at most once per tenant).
bool make_room() {
    while (hash_get_num_entries(entries) >= monitor->capacity) {
        MonitorEntry* victim = nullptr;
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, entries);  // runs to the end: the scan deregisters itself
        while (auto* e = static_cast<MonitorEntry*>(hash_seq_search(&scan))) {
            if (is_overflow(e)) continue;
            if (victim == nullptr || e->rejections < victim->rejections ||
                (e->rejections == victim->rejections && e->last_at < victim->last_at))
                victim = e;
        }
        if (victim == nullptr) return false;
        MonitorEntry gone;
        memcpy(&gone, victim, sizeof gone);
        hash_search(entries, &gone.key, HASH_REMOVE, nullptr);

        MonitorKey overflow_key;
        memset(&overflow_key, 0, sizeof overflow_key);
        memcpy(overflow_key.tenant, gone.key.tenant, sizeof overflow_key.tenant);
        overflow_key.kind = gone.key.kind;
        bool found = false;
        auto* overflow = static_cast<MonitorEntry*>(hash_search(entries, &overflow_key, HASH_ENTER_NULL, &found));
        if (overflow == nullptr) return false;  // cannot happen: a slot was just freed
        if (!found) {
            overflow->rejections = gone.rejections;
            overflow->first_at = gone.first_at;
            overflow->last_at = gone.last_at;
            set_role(overflow, gone.last_role);
            continue;  // the overflow entry took the freed slot
        }
        overflow->rejections += gone.rejections;
        if (gone.first_at < overflow->first_at) overflow->first_at = gone.first_at;
        if (gone.last_at >= overflow->last_at) {
            overflow->last_at = gone.last_at;
            set_role(overflow, gone.last_role);
        }
    }
    return true;
}

// Under the exclusive lock: counts the rejection.
void count_rejection(Rejection& r) {
    auto* e = static_cast<MonitorEntry*>(hash_search(entries, &r.key, HASH_FIND, nullptr));
    if (e == nullptr) {
        bool found = false;
        if (make_room()) e = static_cast<MonitorEntry*>(hash_search(entries, &r.key, HASH_ENTER_NULL, &found));
        if (e == nullptr) {
            r.uncounted = true;
            return;
        }
        if (!found) {
            e->rejections = 0;
            e->first_at = r.now;
            e->last_at = r.now;
        }
    }
    e->rejections++;
    if (r.now < e->first_at) e->first_at = r.now;
    if (r.now >= e->last_at) {  // clocks of concurrent callers may cross
        e->last_at = r.now;
        set_role(e, r.role);
    }
    r.tracked = true;
    r.rejections = e->rejections;
}

// The guarded steps: each runs through detail::run_guarded (PG_TRY), owns no object
// with a destructor, and works on the Rejection only.
void lookup_role(void* arg) noexcept {
    auto* r = static_cast<Rejection*>(arg);
    const char* name = GetUserNameFromId(r->role_oid, true);
    if (name != nullptr) strlcpy(NameStr(r->role), name, NAMEDATALEN);
}

void count_guarded(void* arg) noexcept {
    auto* r = static_cast<Rejection*>(arg);
    // LWLockAcquire raises only before it takes the lock (too many LWLocks held);
    // between acquire and release nothing can raise.
    LWLockAcquire(monitor->lock, LW_EXCLUSIVE);
    count_rejection(*r);
    LWLockRelease(monitor->lock);
}

// Copies text into out (size out_size) for a log line: control characters, quotes
// and backslashes escaped, so a crafted ID cannot forge log lines. out_size >= 4 *
// strlen(text) + 1 never truncates.
void log_escape(char* out, std::size_t out_size, const char* text) noexcept {
    static const char digits[] = "0123456789abcdef";
    std::size_t o = 0;
    for (const unsigned char* p = reinterpret_cast<const unsigned char*>(text); *p != '\0'; ++p) {
        const unsigned char c = *p;
        if (c < 0x20 || c == 0x7f) {
            if (o + 4 >= out_size) break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = digits[c >> 4];
            out[o++] = digits[c & 15];
        } else if (c == '"' || c == '\\') {
            if (o + 2 >= out_size) break;
            out[o++] = '\\';
            out[o++] = static_cast<char>(c);
        } else {
            if (o + 1 >= out_size) break;
            out[o++] = static_cast<char>(c);
        }
    }
    out[o] = '\0';
}

const char* kind_name(char kind) {
    return kind == static_cast<char>(MonitorKind::result_mismatch) ? "result_mismatch" : "reuse";
}

// The line names the tenant and the database role, never the operation ID or the
// tool: they are values of the call's arguments (no log line carries one).
// opledger.rejected_reuses names the operation, for the roles that may see it.
void log_guarded(void* arg) noexcept {
    auto* r = static_cast<Rejection*>(arg);
    const bool mismatch = r->key.kind == static_cast<char>(MonitorKind::result_mismatch);
    char tenant[4 * kTenantBytes + 1];
    char role[4 * NAMEDATALEN + 1];
    log_escape(tenant, sizeof tenant, r->key.tenant);
    log_escape(role, sizeof role, NameStr(r->role));
    char count_text[160] = "";
    if (r->tracked)
        snprintf(count_text, sizeof count_text, " It is %s %lld of this operation ID since the server started.",
                 mismatch ? "mismatch" : "rejection", static_cast<long long>(r->rejections));
    else if (r->uncounted)
        snprintf(count_text, sizeof count_text, " The rejected-reuse monitor is full; this %s is not counted.",
                 mismatch ? "mismatch" : "rejection");
    // LOG_SERVER_ONLY: the line is for operators, never sent to the client whatever
    // client_min_messages says. No STATEMENT or CONTEXT: both can carry the call's
    // literal arguments, and so the very secret being guessed.
    if (mismatch)
        ereport(LOG_SERVER_ONLY,
                (errmsg("opledger: a success report differs from the stored redacted result"),
                 errdetail("Tenant \"%s\", role \"%s\".%s See opledger.rejected_reuses (kind result_mismatch) "
                           "for the operation.",
                           tenant, role, count_text),
                 errhidestmt(true), errhidecontext(true)));
    else
        ereport(LOG_SERVER_ONLY,
                (errcode(kOL001), errmsg("opledger: rejected reuse of an operation ID"),
                 errdetail("Tenant \"%s\", role \"%s\".%s See opledger.rejected_reuses for the operation.", tenant,
                           role, count_text),
                 errhidestmt(true), errhidecontext(true)));
}

void run_dropping_errors(void (*step)(void*) noexcept, Rejection* r) noexcept {
    if (ErrorData* error = detail::run_guarded(step, r)) FreeErrorData(error);
}

Datum rejected_reuses(FunctionCallInfo fcinfo) {
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (monitor == nullptr || entries == nullptr) return (Datum)0;
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    Tuplestorestate* out = rsinfo->setResult;
    TupleDesc desc = rsinfo->setDesc;

    // Copy under the shared lock into memory allocated before it, then build the
    // rows with the lock released: recorders wait only for the memcpy. The table may
    // grow between sizing and copying; then size again (it grows only to capacity).
    MonitorEntry* copy = nullptr;
    int n = 0;
    for (long room = 0;;) {
        const long wanted = pg_call([&]() -> long {
            LWLockAcquire(monitor->lock, LW_SHARED);
            const long held = hash_get_num_entries(entries);
            if (held <= room) {
                HASH_SEQ_STATUS scan;
                hash_seq_init(&scan, entries);
                while (auto* e = static_cast<MonitorEntry*>(hash_seq_search(&scan)))
                    memcpy(&copy[n++], e, sizeof(MonitorEntry));  // n <= held <= room
            }
            LWLockRelease(monitor->lock);
            return held;
        });
        if (wanted <= room) break;
        room = wanted;
        pg_call([&] {
            if (copy != nullptr) pfree(copy);
            copy = static_cast<MonitorEntry*>(
                MemoryContextAllocHuge(CurrentMemoryContext, sizeof(MonitorEntry) * static_cast<Size>(room)));
        });
    }
    if (n == 0) return (Datum)0;

    // The calling role sees the rows of its own tenant only, by the ledger's rule
    // (ledger_caller.hpp; the function is SECURITY DEFINER so that it may read
    // opledger.role_tenants, and asks about the role outside it).
    ledger::SpiConnection spi;
    const ledger::Caller caller = ledger::current_caller();
    spi.finish();
    for (int i = 0; i < n; ++i) {
        const MonitorEntry* e = &copy[i];
        if (!ledger::may_touch(caller, e->key.tenant)) continue;
        const bool overflow = is_overflow(e);
        pg_call([&] {
            Datum values[8];
            bool nulls[8] = {false, overflow, overflow, false, false, false, false, false};
            values[0] = CStringGetTextDatum(e->key.tenant);
            values[1] = overflow ? (Datum)0 : CStringGetTextDatum(e->key.tool);
            values[2] = overflow ? (Datum)0 : CStringGetTextDatum(e->key.operation_id);
            values[3] = Int64GetDatum(e->rejections);
            values[4] = TimestampTzGetDatum(e->first_at);
            values[5] = TimestampTzGetDatum(e->last_at);
            values[6] = CStringGetTextDatum(NameStr(e->last_role));
            values[7] = CStringGetTextDatum(kind_name(e->key.kind));
            tuplestore_putvalues(out, desc, values, nulls);
        });
    }
    pg_call([&] { if (copy != nullptr) pfree(copy); });
    return (Datum)0;
}

Datum reset_rejected_reuses(FunctionCallInfo fcinfo) {
    (void)fcinfo;
    if (monitor == nullptr || entries == nullptr) return Int64GetDatum(0);
    const int64 cleared = pg_call([&]() -> int64 {
        int64 removed = 0;
        LWLockAcquire(monitor->lock, LW_EXCLUSIVE);
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, entries);
        // Removing the entry just returned is allowed during a scan.
        while (auto* e = static_cast<MonitorEntry*>(hash_seq_search(&scan))) {
            hash_search(entries, &e->key, HASH_REMOVE, nullptr);
            ++removed;
        }
        LWLockRelease(monitor->lock);
        return removed;
    });
    return Int64GetDatum(cleared);
}

}  // namespace

void reuse_monitor_init() {
    // A PGC_POSTMASTER setting may only be defined while preloading (later is FATAL),
    // and shared memory can only be requested then.
    if (!process_shared_preload_libraries_in_progress) return;
    DefineCustomIntVariable(
        "opledger.reuse_monitor_entries",
        "Capacity of the rejected-reuse monitor (opledger.rejected_reuses), in entries.",
        "Each entry counts the rejected reuses (SQLSTATE OL001) of one operation ID and takes about "
        "1.7 kB of shared memory. When the table is full, the entry with the fewest rejections is "
        "folded into its tenant's overflow row. Takes effect at server start; requires opledger in "
        "shared_preload_libraries.",
        &capacity_setting, 4096, 16, 262144, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shared_memory;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = start_shared_memory;
}

void reuse_monitor_record(MonitorKind kind, const char* tenant, const char* tool, const char* operation_id,
                          Oid role) noexcept {
    Rejection r;
    r.key.kind = static_cast<char>(kind);
    bounded_copy(r.key.tenant, kTenantBytes, tenant);
    bounded_copy(r.key.tool, kToolBytes, tool);
    bounded_copy(r.key.operation_id, kOperationIdBytes, operation_id);
    r.role_oid = role;
    snprintf(NameStr(r.role), NAMEDATALEN, "oid %u", role);  // replaced by the name when it is found
    r.now = GetCurrentTimestamp();
    run_dropping_errors(lookup_role, &r);
    if (monitor != nullptr && entries != nullptr) run_dropping_errors(count_guarded, &r);
    run_dropping_errors(log_guarded, &r);
}

}  // namespace opledger::pg

namespace pg = opledger::pg;

OPLEDGER_SQL_FUNCTION(opledger_rejected_reuses, pg::rejected_reuses)
OPLEDGER_SQL_FUNCTION(opledger_reset_rejected_reuses, pg::reset_rejected_reuses)
