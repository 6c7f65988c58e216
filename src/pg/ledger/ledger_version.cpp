// The installed extension's version against the library's (ledger_version.hpp).
#include "pg/ledger/ledger_version.hpp"

#include <cstdlib>
#include <optional>
#include <string>

#include "pg/boundary.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wregister"
extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}
#pragma GCC diagnostic pop

#ifndef OPLEDGER_EXTVERSION
#error "OPLEDGER_EXTVERSION must be defined (the Makefile passes its EXTVERSION)"
#endif

namespace opledger::pg::ledger {

namespace detail {
bool installed_version_confirmed = false;
}

namespace {

bool callback_registered = false;

void forget_confirmation(Datum, int, uint32) { detail::installed_version_confirmed = false; }

// pg_extension.extversion of opledger in this database, palloc'd; nullptr if absent.
char* read_installed_version() {
    Relation rel = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum("opledger"));
    SysScanDesc scan = systable_beginscan(rel, ExtensionNameIndexId, true, nullptr, 1, &key);
    char* version = nullptr;
    HeapTuple tuple = systable_getnext(scan);
    if (HeapTupleIsValid(tuple)) {
        bool is_null = false;
        Datum value = heap_getattr(tuple, Anum_pg_extension_extversion, RelationGetDescr(rel), &is_null);
        if (!is_null) version = text_to_cstring(DatumGetTextPP(value));
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return version;
}

// Whether dotted version a is older than b, comparing the numbers of each part in
// turn (a part that is missing counts as 0; text after a part's digits is ignored).
bool older(const std::string& a, const std::string& b) {
    const char* p = a.c_str();
    const char* q = b.c_str();
    while (*p != '\0' || *q != '\0') {
        char* p_end = nullptr;
        char* q_end = nullptr;
        const unsigned long x = std::strtoul(p, &p_end, 10);
        const unsigned long y = std::strtoul(q, &q_end, 10);
        if (x != y) return x < y;
        p = p_end;
        q = q_end;
        while (*p != '\0' && *p != '.') ++p;
        while (*q != '\0' && *q != '.') ++q;
        if (*p == '.') ++p;
        if (*q == '.') ++q;
    }
    return false;
}

}  // namespace

const char* library_version() { return OPLEDGER_EXTVERSION; }

void detail::check_installed_version() {
    // CREATE EXTENSION and ALTER EXTENSION ... UPDATE scripts (and so a restore)
    // pass through other versions on purpose.
    if (creating_extension) return;
    if (!callback_registered) {
        pg_call([] { CacheRegisterSyscacheCallback(PROCOID, forget_confirmation, (Datum)0); });
        callback_registered = true;
    }
    char* found = pg_call([] { return read_installed_version(); });
    const std::string library = library_version();
    if (found == nullptr)
        throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                       "opledger: the extension is not installed in this database (the loaded library is version " +
                           library + ")",
                       "", "Run CREATE EXTENSION opledger.");
    const std::string installed = found;
    if (installed == library) {
        installed_version_confirmed = true;
        return;
    }
    const std::string message = "opledger: the installed extension is version " + installed +
                                " but the loaded library is version " + library;
    if (older(installed, library))
        throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message,
                       "The library was upgraded and the extension's tables are still those of " + installed +
                           ": the ledger refuses every call until the extension is updated.",
                       "Run ALTER EXTENSION opledger UPDATE in every database that has the extension.");
    throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message,
                   "The extension was updated after this session loaded its library: the ledger refuses every call "
                   "of this session's older library.",
                   "Reconnect: a new session loads the library installed on the server (install the package of "
                   "version " + installed + " if the server's is older).");
}

}  // namespace opledger::pg::ledger
