// Who is calling (docs/security.md): the login behind the session, the
// database role it acts as outside the extension's SECURITY DEFINER functions, and
// the tenant it acts for.
#pragma once

#include <optional>
#include <string>

#include "pg/ledger/ledger_sql.hpp"

namespace opledger::pg::ledger {

struct Caller {
    // The effective role: what the login or SET ROLE made the session (the outer user;
    // a SECURITY DEFINER function does not change it).
    Oid role = InvalidOid;
    std::string role_name;
    // The login: the session user. SET ROLE does not change it, and SET SESSION
    // AUTHORIZATION is open only to a session a superuser authenticated.
    Oid login = InvalidOid;
    std::string login_name;
    std::string tenant;        // '' unscoped, or a tenant name ("*" when all_tenants)
    bool all_tenants = false;  // superuser, member of opledger_admin, or mapped to '*'
    bool superuser = false;    // the effective role: bypasses separation of duties too, as every check
    bool login_superuser = false;
};

// The caller; needs an SPI connection (reads role_tenants once).
// The tenant: a login that sees every tenant (a superuser, a member of opledger_admin,
// or mapped to '*') acts for the tenant of its effective role, so it may narrow itself
// with SET ROLE; any other login acts for its own tenant whatever role it became.
// Raises 42501 when the role whose tenant applies is mapped to two different tenants.
Caller current_caller();

// Whether the caller may touch an operation of row_tenant.
bool may_touch(const Caller& caller, const std::string& row_tenant);
// 42501 unless may_touch. Names no operation, tenant or value.
void require_tenant(const Caller& caller, const std::string& row_tenant, const char* function);

// Separation of duties: whether the caller is whoever began an operation, i.e. its login
// or its effective role is the login or the role recorded when the operation began
// (NULL when not recorded). A superuser effective role never is (it may do anything);
// a superuser login counts only through its effective role (a superuser session that
// SET ROLEs acts as that role, as a test or an administrator's script does).
bool began_it(const Caller& caller, const std::optional<std::string>& created_role,
              const std::optional<std::string>& created_login);

}  // namespace opledger::pg::ledger
