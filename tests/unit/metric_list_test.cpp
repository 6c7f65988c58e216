// The metric list (core/ledger/metrics.hpp, OPLEDGER_METRICS) is the one place a
// metric is named. The C++ side is built from it; the SQL install script cannot be,
// so this test reads control/install/ and fails when any SQL list of the counts names
// a metric the C++ list does not, misses one, or (where the order matters: the
// columns opledger._counts returns and json_populate_recordset fills) orders them
// differently. docs/architecture.md, "Adding a metric".
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/ledger/metrics.hpp"
#include "core/ledger/state_machine.hpp"

namespace {

using namespace opledger::core::ledger;

std::string read_install(const char* file) {
    const std::string path = std::string(OPLEDGER_SOURCE_DIR) + "/control/install/" + file;
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << "cannot read " << path;
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The text from `start` (which must occur once) to the first `end` after it.
std::string between(const std::string& text, const std::string& start, const std::string& end) {
    const auto a = text.find(start);
    EXPECT_NE(a, std::string::npos) << "not found: " << start;
    EXPECT_EQ(text.find(start, a + 1), std::string::npos) << "found twice: " << start;
    if (a == std::string::npos) return {};
    const auto b = text.find(end, a + start.size());
    EXPECT_NE(b, std::string::npos) << "no end after: " << start;
    return text.substr(a + start.size(), b == std::string::npos ? std::string::npos : b - a - start.size());
}

std::vector<std::string> matches(const std::string& text, const std::string& pattern) {
    std::vector<std::string> out;
    const std::regex re(pattern);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
        out.push_back((*it)[1]);
    return out;
}

std::vector<std::string> all_metrics() { return {kMetricNames.begin(), kMetricNames.end()}; }

std::vector<std::string> flow_metrics() {
    std::vector<std::string> out;
    for (int i = 0; i < kMetricCount; ++i)
        if (!kMetricIsStatus[i]) out.emplace_back(kMetricNames[i]);
    return out;
}

std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

// "name bigint" items of a column list (a RETURNS TABLE, a composite type), in order.
std::vector<std::string> bigint_items(const std::string& list) {
    return matches(list, R"(([a-z_]+)\s+bigint\b)");
}

// A table's bigint columns ("    name   bigint NOT NULL DEFAULT 0"), in order.
std::vector<std::string> bigint_columns(const std::string& table) {
    return matches(table, R"(\n\s+([a-z_]+)\s+bigint NOT NULL DEFAULT 0)");
}

std::vector<std::string> without(std::vector<std::string> v, const std::set<std::string>& drop) {
    std::vector<std::string> out;
    for (auto& s : v)
        if (!drop.count(s)) out.push_back(std::move(s));
    return out;
}

TEST(MetricList, NamesAreUniqueAndStatusMetricsFollowTheStatusEnum) {
    EXPECT_EQ(as_set(all_metrics()).size(), static_cast<size_t>(kMetricCount));
    int status_metrics = 0;
    for (int i = 0; i < kMetricCount; ++i) {
        if (!kMetricIsStatus[i]) continue;
        const std::string name(kMetricNames[i]);
        ASSERT_EQ(name.rfind("n_", 0), 0u) << name;
        EXPECT_TRUE(parse_status(name.substr(2)).has_value()) << name << " names no status";
        ++status_metrics;
    }
    EXPECT_EQ(status_metrics, kStatusCount) << "one metric per status";
}

TEST(MetricList, CountReadsEachMetricByName) {
    Metrics m;
    m.begins = 1;
    m.resolutions = 2;
    m.non_execute_answers = 3;
    m.in_status[static_cast<int>(Status::unknown)] = -4;
    EXPECT_EQ(m.count(Metric::begins), 1);
    EXPECT_EQ(m.count(Metric::resolutions), 2);
    EXPECT_EQ(m.count(Metric::non_execute_answers), 3);
    EXPECT_EQ(m.count(Metric::n_unknown), -4);
    EXPECT_EQ(m.count(Metric::n_pending), 0);
    Metrics twice = m;
    twice += m;
    for (int i = 0; i < kMetricCount; ++i)
        EXPECT_EQ(twice.count(static_cast<Metric>(i)), 2 * m.count(static_cast<Metric>(i))) << kMetricNames[i];
}

TEST(MetricList, StatusEnumOfTheSchemaMatches) {
    const std::string schema = read_install("20_ledger_schema.sql");
    const std::string labels = between(schema, "CREATE TYPE opledger.op_status AS ENUM (", ");");
    std::vector<std::string> expected;
    for (int i = 0; i < kMetricCount; ++i)
        if (kMetricIsStatus[i]) expected.push_back(std::string(kMetricNames[i]).substr(2));
    EXPECT_EQ(matches(labels, R"('([a-z_]+)')"), expected);
}

TEST(MetricList, CountsTablesHoldEveryMetric) {
    const std::string schema = read_install("20_ledger_schema.sql");
    EXPECT_EQ(bigint_columns(between(schema, "CREATE TABLE opledger.counters (", "\n);")), all_metrics());
    // A delta holds the counts in one array, in the order of the list, and no count column.
    const std::string deltas = between(schema, "CREATE TABLE opledger.counter_deltas (", "\n);");
    EXPECT_EQ(matches(deltas, R"(\n\s+([a-z_]+)\s+bigint\[\] NOT NULL)"), std::vector<std::string>{"counts"});
    EXPECT_TRUE(bigint_columns(deltas).empty());
}

TEST(MetricList, CountsFunctionAndRowTypeReturnEveryMetricInOrder) {
    const std::string views = read_install("40_ledger_views.sql");
    const std::string counts = between(views, "CREATE FUNCTION opledger._counts(", "\nEND\n$$;");
    EXPECT_EQ(bigint_items(between(counts, "RETURNS TABLE (", ")\n")), all_metrics());
    EXPECT_EQ(bigint_items(between(views, "CREATE TYPE opledger._counts_row AS (", ");")), all_metrics());
    // Both branches of its UNION ALL select tool, tenant, the metrics in order, hour.
    const std::set<std::string> keys = {"tool", "tenant", "hour"};
    EXPECT_EQ(without(matches(between(counts, "SELECT c.tool", "FROM opledger.counters"), R"(\bc\.([a-z_]+))"), keys),
              all_metrics());
    // The deltas' branch reads element i of the array as the i-th metric of the list.
    const std::string delta_branch = between(counts, "SELECT d.tool", "FROM opledger.counter_deltas");
    EXPECT_EQ(without(matches(delta_branch, R"(\bd\.([a-z_]+))"), keys), std::vector<std::string>(kMetricCount, "counts"));
    std::vector<std::string> by_position;
    for (const std::string& pair : matches(delta_branch, R"(\bd\.counts\[([0-9]+\], 0\) AS [a-z_]+))")) {
        const int position = std::stoi(pair);
        const std::string name = pair.substr(pair.rfind(' ') + 1);
        EXPECT_EQ(position, static_cast<int>(by_position.size()) + 1) << name;
        by_position.push_back(name);
    }
    EXPECT_EQ(by_position, all_metrics());
}

TEST(MetricList, ViewsSumEveryMetric) {
    const std::string views = read_install("40_ledger_views.sql");
    // opledger.metrics reads every count and sums each once.
    const std::string metrics = between(views, "CREATE VIEW opledger.metrics WITH", "\nCOMMENT ON VIEW opledger.metrics IS");
    EXPECT_EQ(without(matches(between(metrics, "WITH counts AS (", "FROM opledger._counts()"), R"(\b([a-z_]+)\b)"),
                      {"select", "SELECT", "tool"}),
              all_metrics());
    EXPECT_EQ(matches(between(metrics, "), c AS (", "FROM counts"), R"(sum\(([a-z_]+)\))"), all_metrics());
    // metrics_hourly sums every flow (the status counts are states, not events of an hour),
    // and metrics_since every column of metrics_hourly.
    const std::string hourly = between(views, "CREATE VIEW opledger.metrics_hourly", "\nCOMMENT ON VIEW");
    EXPECT_EQ(as_set(matches(hourly, R"(sum\(k\.([a-z_]+)\))")), as_set(flow_metrics()));
    EXPECT_EQ(matches(hourly, R"(sum\(k\.([a-z_]+)\))").size(), flow_metrics().size());
    const std::string since = between(views, "CREATE FUNCTION opledger.metrics_since(", "\n$$;");
    EXPECT_EQ(matches(since, R"(sum\(h\.([a-z_]+)\))").size(), flow_metrics().size());
    EXPECT_EQ(bigint_items(between(since, "RETURNS TABLE (", ")\n")).size(), flow_metrics().size());
}

}  // namespace
