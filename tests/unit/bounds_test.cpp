// The bounds and SQLSTATEs of core/ledger/bounds.hpp are their one definition: every
// copy a reader or another language needs (the SQL CHECK constraints and messages,
// docs/security.md's table, docs/sql-reference.md's summary, the clients' error maps)
// is checked here against it, so changing a bound in one place fails this test until
// the copies follow.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "core/ledger/bounds.hpp"

namespace opledger::core::ledger {
namespace {

std::string read_source(const std::string& relative) {
    std::ifstream in(std::string(OPLEDGER_SOURCE_DIR) + "/" + relative, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    if (!in) ADD_FAILURE() << "cannot read " << relative;
    return out.str();
}

// The numbers a pattern's first group captures, every match.
std::vector<std::size_t> captured(const std::string& text, const std::string& pattern) {
    std::vector<std::size_t> out;
    const std::regex re(pattern);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
        out.push_back(std::stoul((*it)[1].str()));
    return out;
}

void expect_all(const std::vector<std::size_t>& found, std::size_t want, const std::string& what, std::size_t at_least) {
    EXPECT_GE(found.size(), at_least) << what << ": the pattern no longer matches; update this test with the file";
    for (std::size_t n : found) EXPECT_EQ(n, want) << what;
}

TEST(Bounds, TheDocumentedTableStatesEveryBound) {
    const std::string doc = read_source("docs/security.md");
    for (const TextBound& b : kTextBounds) {
        // A row "| `argument` ... | 1 to N bytes |" or "| `argument` ... | at most N bytes |".
        const std::string row = "\\n\\| `" + std::string(b.argument) + "`[^|\\n]*\\| ";
        const std::string bound = b.min_bytes > 0 ? std::to_string(b.min_bytes) + " to ([0-9]+) bytes \\|"
                                                   : std::string("at most ([0-9]+) bytes \\|");
        expect_all(captured(doc, row + bound), b.max_bytes, "docs/security.md, " + std::string(b.argument), 1);
    }
}

TEST(Bounds, TheSqlReferenceSummaryStatesEveryBound) {
    std::string doc = read_source("docs/sql-reference.md");
    doc = std::regex_replace(doc, std::regex("\\s+"), " ");
    auto summary = [&](const std::string& pattern) { return captured(doc, pattern); };
    expect_all(summary("`operation_id` 1–([0-9]+)"), kMaxOperationIdBytes, "sql-reference operation_id", 1);
    expect_all(summary("`tool` 1–([0-9]+)"), kMaxToolBytes, "sql-reference tool", 1);
    expect_all(summary("`conversation_id` ([0-9]+)"), kMaxConversationIdBytes, "sql-reference conversation_id", 1);
    expect_all(summary("`approver` ([0-9]+)"), kMaxWorkerBytes, "sql-reference worker, resolver, approver", 1);
    expect_all(summary("`provider_ref` ([0-9]+)"), kMaxProviderRefBytes, "sql-reference provider_ref", 1);
    expect_all(summary("`note` ([0-9]+)"), kMaxNoteBytes, "sql-reference note", 1);
    expect_all(summary("a tenant name 1–([0-9]+)"), kMaxTenantBytes, "sql-reference tenant", 1);
}

TEST(Bounds, TheSchemaChecksTheSameBounds) {
    const std::string schema = read_source("control/install/20_ledger_schema.sql");
    expect_all(captured(schema, "octet_length\\(operation_id\\) <= ([0-9]+)"), kMaxOperationIdBytes,
               "operations.operation_id CHECK", 1);
    expect_all(captured(schema, "octet_length\\(tool\\) <= ([0-9]+)"), kMaxToolBytes, "tools.tool CHECK", 1);
    expect_all(captured(schema, "octet_length\\(tenant\\) <= ([0-9]+)"), kMaxTenantBytes, "role_tenants.tenant CHECK", 1);
    expect_all(captured(schema, "octet_length\\(secret\\) = ([0-9]+)"), kHmacKeyBytes, "hmac_key.secret CHECK", 1);
    const std::string tenants = read_source("control/install/35_ledger_tenants.sql");
    expect_all(captured(tenants, "octet_length\\(tenant\\) > ([0-9]+)"), kMaxTenantBytes, "set_role_tenant's check", 1);
    expect_all(captured(tenants, "tenant must be 1 to ([0-9]+) bytes"), kMaxTenantBytes, "set_role_tenant's message", 1);
}

TEST(Bounds, NoOtherPostgresqlLayerFileRestatesASqlstate) {
    // src/pg/sqlstates.hpp builds the error codes from these strings; a second
    // MAKE_SQLSTATE('O', 'L', ...) anywhere would be a second definition.
    for (const char* file : {"src/pg/ledger/ledger_args.hpp", "src/pg/security/reuse_monitor.cpp",
                             "src/pg/ledger/ledger_args.cpp", "src/pg/ledger/ledger_policy.cpp"})
        EXPECT_EQ(read_source(file).find("MAKE_SQLSTATE('O'"), std::string::npos) << file;
    EXPECT_NE(read_source("src/pg/sqlstates.hpp").find("sqlstate_code(core::ledger::kSqlstateReuse)"), std::string::npos);
}

TEST(Bounds, TheClientsMapTheSameSqlstates) {
    const std::string ts = read_source("clients/typescript/src/errors.ts");
    const std::string py = read_source("clients/python/opledger_client/errors.py");
    for (const auto& [code, ts_class, py_class] :
         {std::tuple{kSqlstateReuse, "ArgumentMismatchError", "ArgumentMismatch"},
          std::tuple{kSqlstateTransition, "InvalidTransitionError", "InvalidTransition"},
          std::tuple{kSqlstateUnregistered, "UnregisteredToolError", "UnregisteredTool"}}) {
        EXPECT_NE(ts.find(std::string(code) + ": " + ts_class + ","), std::string::npos) << "errors.ts, " << code;
        EXPECT_NE(py.find("\"" + std::string(code) + "\": " + py_class), std::string::npos) << "errors.py, " << code;
    }
}

}  // namespace
}  // namespace opledger::core::ledger
