// The caller: its login, its role and its tenant (see ledger_caller.hpp).
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

// opledger.role_tenants, read at most once per call and only when a tenant depends on it.
class Mappings {
public:
    // The one tenant mapped to `role` or to a role it is a member of ('' when none);
    // 42501 when they are several.
    std::string tenant_of(Oid role) {
        if (!read_) {
            execute(PlanId::role_tenants, nullptr, nullptr, 0);
            table_ = SPI_tuptable;
            rows_ = SPI_processed;
            read_ = true;
        }
        std::set<std::string> tenants;
        for (uint64 i = 0; i < rows_; ++i) {
            bool null = false;
            const Oid member = DatumGetObjectId(column(table_, i, 0, &null));
            const bool applies = member == role || pg_call([&] { return is_member_of_role(role, member); });
            if (applies) tenants.insert(text_to_string(column(table_, i, 1, &null)));
        }
        if (tenants.size() > 1)
            throw SqlError(ERRCODE_INSUFFICIENT_PRIVILEGE, "opledger: the calling role is mapped to more than one tenant",
                           "A role acts for one tenant; its memberships map it to several.",
                           "An admin fixes opledger.role_tenants with opledger.set_role_tenant.");
        return tenants.empty() ? std::string() : *tenants.begin();
    }

private:
    bool read_ = false;
    SPITupleTable* table_ = nullptr;
    uint64 rows_ = 0;
};

void set_tenant(Caller& c, std::string tenant) {
    c.tenant = std::move(tenant);
    c.all_tenants = c.tenant == kAllTenants;
}

}  // namespace

Caller current_caller() {
    Caller c;
    // The outer user: SET ROLE and SET SESSION AUTHORIZATION change it, a SECURITY
    // DEFINER function (like every op_*) does not.
    c.role = GetOuterUserId();
    c.login = GetSessionUserId();
    const Oid role = c.role, login = c.login;
    c.role_name = pg_call([&] { return GetUserNameFromId(role, false); });
    c.superuser = pg_call([&] { return superuser_arg(role); });
    if (login == role) {
        c.login_name = c.role_name;
        c.login_superuser = c.superuser;
    } else {
        c.login_name = pg_call([&] { return GetUserNameFromId(login, false); });
        c.login_superuser = pg_call([&] { return superuser_arg(login); });
    }
    const Oid admin = pg_call([] { return get_role_oid(kAdminRole, true); });
    Mappings mappings;

    // A login that could become opledger_admin sees every tenant: membership, not
    // inherited privileges, since SET ROLE reaches a NOINHERIT membership too.
    const bool login_all =
        c.login_superuser || (OidIsValid(admin) && pg_call([&] { return is_member_of_role(login, admin); }));
    if (!login_all) {
        // Any role the login can SET ROLE to is one it is a member of, so that role's
        // mappings (and those of its groups) are among the login's: the login's tenant
        // bounds every role the session can become, and is the session's.
        std::string tenant = mappings.tenant_of(login);
        if (tenant != kAllTenants) {
            set_tenant(c, std::move(tenant));
            return c;
        }
    }
    // The login sees every tenant: the session acts for its effective role's tenant,
    // which the role's own privileges decide (what SET ROLE made it).
    const bool role_admin =
        c.superuser || (OidIsValid(admin) && pg_call([&] { return has_privs_of_role(role, admin); }));
    set_tenant(c, role_admin ? std::string(kAllTenants) : mappings.tenant_of(role));
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

bool began_it(const Caller& caller, const std::optional<std::string>& created_role,
              const std::optional<std::string>& created_login) {
    if (caller.superuser) return false;
    auto began = [&](const std::string& name) {
        return (created_role && *created_role == name) || (created_login && *created_login == name);
    };
    return began(caller.role_name) || (!caller.login_superuser && began(caller.login_name));
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
