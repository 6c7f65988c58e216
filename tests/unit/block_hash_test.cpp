// Block-by-block SHA-256 of the canonical output (Sha256Blocks, the SHA-NI block
// function, OutputSink's block mode, write_plain hashing while it writes): every
// digest must equal OpenSSL's EVP SHA-256 (sha256()) of the same bytes, for every
// length around block and buffer boundaries, with and without SHA-NI.
#include <cstdint>
#include <string>
#include <vector>

#include "core/output_sink.hpp"
#include "core/sha256_blocks.hpp"
#include "core/sha256_ni.hpp"
#include "core/sha256_stream.hpp"
#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

using detail::OutputSink;
using detail::Sha256Blocks;
namespace sha_ni = detail::sha_ni;

// Deterministic bytes (64-bit LCG), all 256 values.
std::string random_bytes(std::size_t size, std::uint64_t seed) {
    std::string out(size, '\0');
    for (char& c : out) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        c = static_cast<char>(seed >> 56);
    }
    return out;
}

std::vector<std::size_t> test_lengths() {
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 300; ++n) lengths.push_back(n);
    for (std::size_t n : {511u, 512u, 513u, 4095u, 4096u, 4097u, 32767u, 32768u, 32769u, 65536u + 13u,
                          (1u << 20) + 7u})
        lengths.push_back(n);
    return lengths;
}

// Disables SHA-NI for its lifetime (and restores it even when an assertion fails).
class WithoutShaNi {
public:
    WithoutShaNi() { sha_ni::disable_for_testing(true); }
    ~WithoutShaNi() { sha_ni::disable_for_testing(false); }
};

TEST(Sha256Blocks, WholeBlocksThenTailMatchEvpOnAllLengths) {
    Sha256Blocks digest;
    for (std::size_t n : test_lengths()) {
        const std::string data = random_bytes(n, n);
        const std::size_t whole = n / Sha256Blocks::kBlockBytes;
        digest.start();
        digest.blocks(data.data(), whole);
        const std::size_t done = whole * Sha256Blocks::kBlockBytes;
        ASSERT_EQ(digest.finish(data.data() + done, n - done), sha256(data)) << n;
        // Any split through update() (partial blocks kept by OpenSSL), reusing the object.
        digest.start();
        const std::size_t cut = n / 3;
        digest.update(data.data(), cut);
        ASSERT_EQ(digest.finish(data.data() + cut, n - cut), sha256(data)) << n;
    }
}

TEST(Sha256Blocks, ImportStateRefusesAPendingPartialBlock) {
    Sha256Blocks digest;
    std::uint32_t h[8];
    digest.export_state(h);
    digest.update("abc", 3);
    EXPECT_THROW(digest.import_state(h, 1), std::logic_error);
}

// The SHA-NI block function on whole blocks, OpenSSL for the tail and the padding,
// with the state handed back and forth every few blocks (as the writer does).
TEST(ShaNi, CompressMatchesOpenSslOnAllLengths) {
    if (!sha_ni::available()) GTEST_SKIP() << "no SHA-NI on this CPU";
#if defined(OPLEDGER_HAVE_SHA_NI)
    Sha256Blocks digest;
    for (std::size_t n : test_lengths()) {
        const std::string data = random_bytes(n, n + 1000);
        const std::size_t whole = n / Sha256Blocks::kBlockBytes;
        for (std::size_t per_handover : {std::size_t{1}, std::size_t{3}, whole + 1}) {
            digest.start();
            std::size_t block = 0;
            while (block < whole) {
                std::uint32_t h[8];
                digest.export_state(h);
                sha_ni::State state = sha_ni::load_state(h);
                std::size_t added = 0;
                for (; added < per_handover && block < whole; ++added, ++block)
                    sha_ni::compress(state, data.data() + block * Sha256Blocks::kBlockBytes);
                sha_ni::store_state(state, h);
                digest.import_state(h, added);
            }
            const std::size_t done = whole * Sha256Blocks::kBlockBytes;
            ASSERT_EQ(digest.finish(data.data() + done, n - done), sha256(data)) << n << " " << per_handover;
        }
    }
#endif
}

// A message longer than 2^32 bits: the bit count that import_state keeps must carry
// into OpenSSL's high word (Nh) exactly as SHA256_Update's own counting does.
TEST(ShaNi, BitCountCarriesPast512MiB) {
    if (!sha_ni::available()) GTEST_SKIP() << "no SHA-NI on this CPU";
#if defined(OPLEDGER_HAVE_SHA_NI)
    const std::string chunk = random_bytes(1 << 20, 99);  // 1 MiB, repeated
    const std::string tail = "and 37 more bytes after all of that..";
    const std::size_t repeats = 513;                        // 513 MiB: 2^32 bits are 512 MiB
    detail::Sha256Stream reference;  // EVP, counting for itself
    Sha256Blocks digest;
    for (std::size_t r = 0; r < repeats; ++r) {
        reference.update(chunk.data(), chunk.size());
        std::uint32_t h[8];
        digest.export_state(h);
        sha_ni::State state = sha_ni::load_state(h);
        const std::size_t blocks = chunk.size() / Sha256Blocks::kBlockBytes;
        for (std::size_t b = 0; b < blocks; ++b) sha_ni::compress(state, chunk.data() + b * Sha256Blocks::kBlockBytes);
        sha_ni::store_state(state, h);
        digest.import_state(h, blocks);
    }
    reference.update(tail.data(), tail.size());
    EXPECT_EQ(digest.finish(tail.data(), tail.size()), reference.finish());
#endif
}

TEST(ShaNi, StateLayoutRoundTrips) {
#if defined(OPLEDGER_HAVE_SHA_NI)
    const std::uint32_t h[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    std::uint32_t back[8] = {};
    sha_ni::store_state(sha_ni::load_state(h), back);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], h[i]);
#else
    GTEST_SKIP() << "not x86-64";
#endif
}

// OutputSink in block mode: writes of every size through ensure/put and write (also
// larger than the buffer), flushed whenever full, with the smallest buffer allowed
// and a larger one whose size is not a multiple of 64.
TEST(OutputSinkBlockMode, DigestEqualsSha256OfEverythingWritten) {
    const std::string data = random_bytes(300000, 7);
    for (std::size_t capacity : {OutputSink::kMinBlockCapacity, std::size_t{1000}}) {
        std::vector<char> buffer(capacity);
        for (std::size_t total : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65},
                                  std::size_t{capacity - 1}, capacity, std::size_t{capacity + 1}, data.size()}) {
            Sha256Blocks digest;
            OutputSink sink(buffer.data(), capacity, digest);
            std::size_t at = 0, step = 0;
            while (at < total) {
                std::size_t size = (step * 37 + 1) % 97;  // short runs, as the writer makes
                if (step % 50 == 49) size = 5000;          // and now and then one longer than the buffer
                size = std::min(size, total - at);
                if (step % 2 == 0 && size <= OutputSink::kMinCapacity) {
                    sink.ensure(size);
                    sink.put(data.data() + at, size);
                } else {
                    sink.write(data.data() + at, size);
                }
                at += size;
                ++step;
                if (step % 13 == 0) sink.flush();  // a flush keeps the partial last block
            }
            ASSERT_EQ(sink.finish_blocks(), sha256(std::string_view(data.data(), total))) << capacity << " " << total;
        }
    }
}

// canonical_sha256_text (write_plain hashing each block while it writes, one block
// behind) against sha256 of the materialised canonical text: outputs of every length
// 1..400, around the 32 KB staging buffer, with members that take the writer's
// out-of-line paths (strings that need escaping, values that do not fit the room
// left) and strings longer than the buffer; with SHA-NI and without.
void check_streamed_hashes(Workspace& workspace) {
    std::vector<std::string> texts;
    for (std::size_t n = 1; n <= 400; ++n) {
        texts.push_back(n == 1 ? "7" : "\"" + std::string(n - 2, 'a') + "\"");  // output of n bytes
        std::string array = "[";  // short members: the per-member hashing check at every offset
        for (std::size_t i = 0; array.size() + 8 < n + 2; ++i) array += (i ? ", " : "") + std::to_string(i * 7);
        texts.push_back(array + "]");
        texts.push_back("{\"k\": \"" + std::string(n, 'b') + "\", \"a\": [1, \"\\u0001x\", {\"z\": null}]}");
    }
    for (std::size_t pad = 0; pad < 300; pad += 7) {
        // Numbers up to about 32 KB, then a string whose length moves the end across it.
        std::string text = "[";
        for (int i = 0; text.size() < 32768 - 200; ++i) text += std::to_string(100000 + i) + ",";
        texts.push_back(text + "\"" + std::string(pad, 'p') + "\",\"\\u0002" + std::string(pad, 'q') + "\",1]");
    }
    std::string big = "{\"z\":\"" + std::string(100000, 'x') + "\",\"b\":[";
    for (int i = 0; i < 30000; ++i) big += (i ? "," : "") + std::string(i % 3 == 0 ? "\"\\u0003\"" : "12.5");
    texts.push_back(big + "],\"a\":\"" + std::string(40000, 'y') + "\\u0007\"}");

    for (const std::string& text : texts) {
        const std::string expected = canonicalize_text(text, ParseLimits{});
        ASSERT_EQ(canonical_sha256_text(text, ParseLimits{}, workspace), sha256(expected)) << text.substr(0, 200);
    }
}

TEST(Workspace, StreamedHashOnEveryOutputLengthAndAroundTheBuffer) {
    Workspace workspace;
    check_streamed_hashes(workspace);
    WithoutShaNi portable;  // block mode hashing at flushes only (OpenSSL)
    check_streamed_hashes(workspace);
}

}  // namespace
}  // namespace opledger::core::test
