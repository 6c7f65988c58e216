// The calling role and its tenant (see ledger_caller.hpp).
#include "pg/ledger/ledger_caller.hpp"

#include <set>

#include "pg/boundary.hpp"

extern "C" {
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
}

namespace opledger::pg::ledger {
namespace {

constexpr const char* kAdminRole = "opledger_admin";
constexpr const char* kAllTenants = "*";

}  // namespace

Caller current_caller() {
    Caller c;
    // The outer user: SET ROLE and SET SESSION AUTHORIZATION change it, a SECURITY
    // DEFINER function (like every op_*) does not.
    c.role = GetOuterUserId();
    const Oid role = c.role;
    c.role_name = pg_call([&] { return GetUserNameFromId(role, false); });
    c.superuser = pg_call([&] { return superuser_arg(role); });
    c.all_tenants = c.superuser || pg_call([&] {
        const Oid admin = get_role_oid(kAdminRole, true);
        return OidIsValid(admin) && has_privs_of_role(role, admin);
    });
    if (c.all_tenants) {
        c.tenant = kAllTenants;
        return c;
    }
    execute(PlanId::role_tenants, nullptr, nullptr, 0);
    SPITupleTable* table = SPI_tuptable;
    std::set<std::string> tenants;
    for (uint64 i = 0; i < SPI_processed; ++i) {
        bool null = false;
        const Oid member = DatumGetObjectId(column(table, i, 0, &null));
        const bool applies = member == role || pg_call([&] { return is_member_of_role(role, member); });
        if (applies) tenants.insert(text_to_string(column(table, i, 1, &null)));
    }
    if (tenants.size() > 1)
        throw SqlError(ERRCODE_INSUFFICIENT_PRIVILEGE, "opledger: the calling role is mapped to more than one tenant",
                       "A role acts for one tenant; its memberships map it to several.",
                       "An admin fixes opledger.role_tenants with opledger.set_role_tenant.");
    if (!tenants.empty()) c.tenant = *tenants.begin();
    c.all_tenants = c.tenant == kAllTenants;
    return c;
}

bool may_touch(const Caller& caller, const std::string& row_tenant) {
    return caller.all_tenants || caller.tenant == row_tenant;
}

void require_tenant(const Caller& caller, const std::string& row_tenant, const char* function) {
    if (may_touch(caller, row_tenant)) return;
    throw SqlError(ERRCODE_INSUFFICIENT_PRIVILEGE,
                   std::string(function) + ": the operation belongs to another tenant",
                   "A role may only touch the operations of the tenant it acts for; nothing was changed.",
                   "Use operation IDs derived within your own tenant (opledger.derive_operation_id).");
}

namespace {

Datum current_tenant(FunctionCallInfo) {
    SpiConnection spi;
    const std::string tenant = current_caller().tenant;
    spi.finish();
    return string_to_text(tenant);  // after SPI_finish, in the caller's memory context
}

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_current_tenant, ledger::current_tenant)
