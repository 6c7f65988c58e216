// Who is calling (SPEC §8, docs/security.md): the database role outside the
// extension's SECURITY DEFINER functions, and the tenant it acts for.
#pragma once

#include <string>

#include "pg/ledger/ledger_sql.hpp"

namespace opledger::pg::ledger {

struct Caller {
    Oid role = InvalidOid;
    std::string role_name;
    std::string tenant;        // '' unscoped, or a tenant name ("*" when all_tenants)
    bool all_tenants = false;  // superuser, member of opledger_admin, or mapped to '*'
    bool superuser = false;    // bypasses separation of duties too, as it bypasses every check
};

// The calling role and its tenant; needs an SPI connection (reads role_tenants).
// Raises 42501 when the role is mapped to two different tenants.
Caller current_caller();

// Whether the caller may touch an operation of row_tenant.
bool may_touch(const Caller& caller, const std::string& row_tenant);
// 42501 unless may_touch. Names no operation, tenant or value.
void require_tenant(const Caller& caller, const std::string& row_tenant, const char* function);

}  // namespace opledger::pg::ledger
