// The interrupt check (jcs.hpp, set_interrupt_check): long parses and writes call it
// every 65536 values; an exception it throws leaves the call like a JsonError does,
// and the workspace it ran in stays usable.
#include <memory_resource>
#include <stdexcept>
#include <string>

#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

int checks = 0;
int throw_at = 0;  // the check that throws (0: none)

struct Cancelled : std::runtime_error {
    Cancelled() : std::runtime_error("cancelled") {}
};

void counting_check() {
    if (++checks == throw_at) throw Cancelled();
}

// An array of n small numbers, as JSON text.
std::string array_of(int n) {
    std::string text = "[";
    for (int i = 0; i < n; ++i) text += i == 0 ? "1.5" : ",1.5";
    return text + "]";
}

class InterruptCheckTest : public ::testing::Test {
protected:
    void SetUp() override {
        checks = 0;
        throw_at = 0;
        set_interrupt_check(&counting_check);
    }
    void TearDown() override { set_interrupt_check(nullptr); }
};

TEST_F(InterruptCheckTest, LongWorkIsChecked) {
    const std::string text = array_of(300000);
    Workspace workspace;
    std::string out;
    canonicalize_text(text, ParseLimits{}, workspace, out);
    EXPECT_EQ(out, text);
    EXPECT_GE(checks, 8);  // 300000 values parsed, then written: about 9 checks
    checks = 0;
    (void)canonical_sha256_text(text, ParseLimits{}, workspace);
    EXPECT_GE(checks, 8);
}

TEST_F(InterruptCheckTest, SmallWorkIsNotChecked) {
    Workspace workspace;
    std::string out;
    canonicalize_text(array_of(1000), ParseLimits{}, workspace, out);
    EXPECT_EQ(checks, 0);
}

TEST_F(InterruptCheckTest, AThrowStopsTheCallAndTheWorkspaceStaysUsable) {
    const std::string text = array_of(300000);
    Workspace workspace;
    std::string out;
    throw_at = 2;  // while parsing
    EXPECT_THROW(canonicalize_text(text, ParseLimits{}, workspace, out), Cancelled);
    EXPECT_EQ(checks, 2);
    throw_at = 8;  // while writing
    checks = 0;
    EXPECT_THROW(canonicalize_text(text, ParseLimits{}, workspace, out), Cancelled);
    checks = 0;
    EXPECT_THROW((void)canonical_sha256_text(text, ParseLimits{}, workspace), Cancelled);
    throw_at = 0;
    canonicalize_text(text, ParseLimits{}, workspace, out);
    EXPECT_EQ(out, text);
    EXPECT_EQ(canonical_sha256_text(text, ParseLimits{}, workspace), sha256(text));
}

TEST_F(InterruptCheckTest, DocumentsAreCheckedToo) {
    const Document document = parse_json_text(array_of(300000), ParseLimits{});
    checks = 0;
    throw_at = 3;
    EXPECT_THROW((void)document.canonical(), Cancelled);
    throw_at = 0;
    EXPECT_EQ(document.canonical(), array_of(300000));
}

}  // namespace
}  // namespace opledger::core::test
