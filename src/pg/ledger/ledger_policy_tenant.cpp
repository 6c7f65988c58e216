// opledger._sees_tenant(tenant): the test of the row-level security policy
// tenant_scope on opledger.operations and opledger.events.
//
// The policy cannot hold a subquery: Citus refuses to distribute a table whose
// policy has one. A call of opledger.current_tenant() in each row's test would
// work out the caller's tenant again for every row (an SPI read of
// opledger.role_tenants under a SECURITY DEFINER call with its own settings).
// This function asks opledger.current_tenant() once per query and call site (the
// answer is kept in the call site's fn_extra, which the executor makes afresh for
// each execution), then only compares each row's tenant with it: the same answer
// for every row of one query, as the scalar subquery gave. It is neither SECURITY
// DEFINER nor has settings of its own, so each row's call is a plain function call.
#include "pg/boundary.hpp"

#include <cstring>

extern "C" {
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
}

namespace opledger::pg::ledger {
namespace {

constexpr const char* kAllTenants = "*";

// The caller's tenant, kept for one call site of one query (palloc'd in fn_mcxt).
struct SeenTenant {
    bool all;     // the caller sees every tenant
    int length;   // bytes of data
    char data[1];  // the tenant (not NUL-terminated)
};

const SeenTenant* seen_tenant(FunctionCallInfo fcinfo) {
    FmgrInfo* flinfo = fcinfo->flinfo;
    if (flinfo->fn_extra != nullptr) return static_cast<const SeenTenant*>(flinfo->fn_extra);
    const Oid collation = fcinfo->fncollation;
    SeenTenant* seen = pg_call([&]() -> SeenTenant* {
        List* name = list_make2(makeString(pstrdup("opledger")), makeString(pstrdup("current_tenant")));
        const Oid function = LookupFuncName(name, 0, nullptr, false);
        // opledger.current_tenant() through fmgr: its SECURITY DEFINER and settings apply.
        text* tenant = DatumGetTextPP(OidFunctionCall0Coll(function, collation));
        const int length = static_cast<int>(VARSIZE_ANY_EXHDR(tenant));
        auto* out = static_cast<SeenTenant*>(MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(SeenTenant) + length));
        memcpy(out->data, VARDATA_ANY(tenant), length);
        out->length = length;
        out->all = length == 1 && out->data[0] == kAllTenants[0];
        return out;
    });
    flinfo->fn_extra = seen;
    return seen;
}

Datum sees_tenant(FunctionCallInfo fcinfo) {
    const SeenTenant* seen = seen_tenant(fcinfo);
    if (seen->all) return BoolGetDatum(true);
    Datum arg = PG_GETARG_DATUM(0);
    struct varlena* row = reinterpret_cast<struct varlena*>(DatumGetPointer(arg));
    if (VARATT_IS_EXTENDED(row) && !VARATT_IS_SHORT(row))
        row = pg_call([&] { return pg_detoast_datum_packed(row); });
    const int length = static_cast<int>(VARSIZE_ANY_EXHDR(row));
    return BoolGetDatum(length == seen->length && memcmp(VARDATA_ANY(row), seen->data, length) == 0);
}

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_sees_tenant, ledger::sees_tenant)
