// The ledger runs only against the schema it was built for (docs/operations.md,
// "Upgrading"). A package upgrade replaces the library on disk before anyone runs
// ALTER EXTENSION opledger UPDATE; a long-lived session keeps the library it loaded
// while another session updates the extension. In both windows the library's
// statements would meet tables of another version, so every ledger call refuses with
// one error (55000) naming both versions and what fixes it, until they agree.
//
// The answer is cached per backend once the versions agree, so a ledger call pays
// one test of a flag. The cache is dropped by any change to pg_proc (a syscache
// callback): every update script from 0.4.0 on replaces a function
// (tests/suites/33-upgrade.sh checks that), and DROP EXTENSION drops them, so no
// other session can move the extension to another version without this backend
// hearing of it before its next transaction. While the versions disagree, each
// call reads pg_extension again (by its name index, no SPI), so the first call
// after the update is served.
//
// Scripts run by CREATE EXTENSION and ALTER EXTENSION ... UPDATE are never refused:
// they pass through intermediate versions by design.
#pragma once

namespace opledger::pg::ledger {

// The version this library was built as (the Makefile's EXTVERSION).
const char* library_version();

namespace detail {
extern bool installed_version_confirmed;
void check_installed_version();
}  // namespace detail

// Throws SqlError 55000 unless the database's opledger is this library's version.
inline void require_installed_version() {
    if (!detail::installed_version_confirmed) detail::check_installed_version();
}

}  // namespace opledger::pg::ledger
