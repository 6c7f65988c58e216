#include "core/ledger/event_chain.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "core/canonical_stream.hpp"
#include "core/jcs.hpp"
#include "core/openssl_util.hpp"

namespace opledger::core::ledger {
namespace {

void optional_string(CanonicalStream& out, const std::optional<std::string_view>& value) {
    if (value)
        out.string(*value);
    else
        out.null();
}

struct PkeyDeleter {
    void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
struct PkeyContextDeleter {
    void operator()(EVP_PKEY_CTX* context) const { EVP_PKEY_CTX_free(context); }
};

}  // namespace

// The members are written in RFC 8785 order by hand (all names are ASCII, so UTF-16
// order is byte order); the detail, already canonical, is spliced in as it is.
std::string event_canonical(const ChainEvent& e, std::optional<std::string_view> prev_hex) {
    std::string out;
    out.reserve(256 + e.detail_canonical.size());
    {
        CanonicalStream s(out);
        s.begin_object();
        s.name("at");
        s.number(std::to_string(e.at));
        s.name("attempt");
        if (e.attempt)
            s.number(std::to_string(*e.attempt));
        else
            s.null();
        s.name("decision");
        optional_string(s, e.decision);
        s.name("detail");
        s.finish();
    }
    if (e.detail_canonical.empty())
        out += "null";
    else
        out.append(e.detail_canonical.data(), e.detail_canonical.size());
    out.push_back(',');
    {
        CanonicalStream s(out);
        s.name("kind");
        s.string(e.kind);
        s.name("login");
        optional_string(s, e.login);
        s.name("operation_id");
        s.string(e.operation_id);
        s.name("prev");
        optional_string(s, prev_hex);
        s.name("provider_ref");
        optional_string(s, e.provider_ref);
        s.name("role");
        optional_string(s, e.role);
        s.name("seq");
        s.number(std::to_string(e.seq));
        s.name("status_after");
        s.string(e.status_after);
        s.name("status_before");
        optional_string(s, e.status_before);
        s.name("tenant");
        s.string(e.tenant);
        s.name("worker");
        optional_string(s, e.worker);
        s.end_object();
        s.finish();
    }
    return out;
}

std::string event_hash(const ChainEvent& event, std::optional<std::string_view> prev_hex) {
    const Sha256Digest digest = sha256(event_canonical(event, prev_hex));
    return to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

std::string to_hex(std::string_view bytes) {
    static const char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out.push_back(kDigits[c >> 4]);
        out.push_back(kDigits[c & 15]);
    }
    return out;
}

std::optional<std::string> from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0) return std::nullopt;
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out.push_back(static_cast<char>(hi * 16 + lo));
    }
    return out;
}

std::string canonical_string(std::string_view utf8) {
    std::string out;
    CanonicalStream s(out);
    s.string(utf8);
    s.finish();
    return out;
}

std::string receipt_canonical(ReceiptMembers members) {
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 1; i < members.size(); ++i)
        if (members[i].first == members[i - 1].first)
            throw std::invalid_argument("receipt_canonical: a member name appears twice");
    std::string out = "{";
    for (std::size_t i = 0; i < members.size(); ++i) {
        if (i > 0) out.push_back(',');
        out += canonical_string(members[i].first);
        out.push_back(':');
        out += members[i].second;
    }
    out.push_back('}');
    return out;
}

std::string utc_time(long long unix_micros) {
    // Days to a civil date (proleptic Gregorian), after H. Hinnant's public-domain algorithm.
    long long seconds = unix_micros / 1000000;
    long long micros = unix_micros % 1000000;
    if (micros < 0) {
        micros += 1000000;
        seconds -= 1;
    }
    long long days = seconds / 86400;
    long long rest = seconds % 86400;
    if (rest < 0) {
        rest += 86400;
        days -= 1;
    }
    const long long z = days + 719468;
    const long long era = (z >= 0 ? z : z - 146096) / 146097;
    const long long doe = z - era * 146097;
    const long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const long long mp = (5 * doy + 2) / 153;
    const long long day = doy - (153 * mp + 2) / 5 + 1;
    const long long month = mp < 10 ? mp + 3 : mp - 9;
    const long long year = yoe + era * 400 + (month <= 2 ? 1 : 0);
    if (year < 1 || year > 9999) throw std::out_of_range("utc_time: the year is outside 0001 to 9999");
    char out[40];
    std::snprintf(out, sizeof out, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06lldZ", year, month, day, rest / 3600,
                  rest / 60 % 60, rest % 60, micros);
    return out;
}

namespace {

// The receipt's members but its signature, in canonical order (by name; the names
// are ASCII, where UTF-16 order is byte order), each handed to the visitor as a name
// and a value: a string, a whole number or null. The one list of what a receipt
// states; `signature` says where the signature member goes (between "seq" and
// "status"). The unit tests check that receipt_canonical, which sorts, gives the same
// bytes.
template <class Visitor>
void visit_receipt(const ReceiptFacts& f, Visitor&& v) {
    auto time = [&](std::string_view name, const std::optional<long long>& micros) {
        if (micros) v.text(name, utc_time(*micros));
        else v.null(name);
    };
    auto optional = [&](std::string_view name, const std::optional<std::string>& text) {
        if (text) v.text(name, *text);
        else v.null(name);
    };
    time("approved_at", f.approved_at);
    optional("approved_by", f.approved_by);
    v.text("args_fingerprint", f.args_fingerprint);
    v.text("at", utc_time(f.at));
    if (f.attempt) v.integer("attempt", *f.attempt);
    else v.null("attempt");
    v.text("chain_head", f.chain_head);
    v.text("fingerprint_alg", f.fingerprint_alg);
    time("finished_at", f.finished_at);
    v.text("key_id", f.key_id);
    v.text("kind", f.kind);
    v.text("operation_id", f.operation_id);
    optional("outcome_fingerprint", f.outcome_fingerprint);
    optional("resolved_by", f.resolved_by);
    v.integer("seq", f.seq);
    v.signature();
    v.text("status", f.status);
    v.text("tenant", f.tenant);
    v.text("tool", f.tool);
    v.integer("v", kReceiptVersion);
}

// Collects the members as receipt_canonical takes them.
struct MemberList {
    ReceiptMembers members;
    void text(std::string_view name, std::string_view value) { members.emplace_back(name, canonical_string(value)); }
    void integer(std::string_view name, long long value) { members.emplace_back(name, std::to_string(value)); }
    void null(std::string_view name) { members.emplace_back(name, "null"); }
    void signature() {}
};

// Writes the canonical text straight into one stream, with the signature member
// (base64url) when given.
struct ReceiptWriter {
    CanonicalStream& stream;
    const std::string* signature_text;
    void text(std::string_view name, std::string_view value) {
        stream.name(name);
        stream.string(value);
    }
    void integer(std::string_view name, long long value) {
        stream.name(name);
        stream.number(std::to_string(value));
    }
    void null(std::string_view name) {
        stream.name(name);
        stream.null();
    }
    void signature() {
        if (signature_text) text("signature", *signature_text);
    }
};

std::string receipt_text(const ReceiptFacts& facts, const std::string* signature) {
    std::string out;
    CanonicalStream stream(out);
    stream.begin_object();
    visit_receipt(facts, ReceiptWriter{stream, signature});
    stream.end_object();
    stream.finish();
    return out;
}

}  // namespace

ReceiptMembers receipt_members(const ReceiptFacts& f) {
    MemberList list;
    list.members.reserve(18);
    visit_receipt(f, list);
    return std::move(list.members);
}

std::string signed_receipt(const ReceiptFacts& facts, std::string_view private_key) {
    const std::string signature = base64url_encode(ed25519_sign(private_key, receipt_text(facts, nullptr)));
    return receipt_text(facts, &signature);
}

Ed25519KeyPair ed25519_generate() {
    const std::unique_ptr<EVP_PKEY_CTX, PkeyContextDeleter> context(
        EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
    if (!context || EVP_PKEY_keygen_init(context.get()) != 1) detail::throw_openssl_error("EVP_PKEY_keygen_init");
    EVP_PKEY* raw = nullptr;
    if (EVP_PKEY_keygen(context.get(), &raw) != 1) detail::throw_openssl_error("EVP_PKEY_keygen");
    const Pkey key(raw);
    Ed25519KeyPair pair;
    pair.private_key.resize(32);
    pair.public_key.resize(32);
    std::size_t length = 32;
    if (EVP_PKEY_get_raw_private_key(key.get(), reinterpret_cast<unsigned char*>(pair.private_key.data()),
                                     &length) != 1 || length != 32)
        detail::throw_openssl_error("EVP_PKEY_get_raw_private_key");
    length = 32;
    if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(pair.public_key.data()),
                                    &length) != 1 || length != 32)
        detail::throw_openssl_error("EVP_PKEY_get_raw_public_key");
    return pair;
}

namespace {

// The last signing key, kept by the process: OpenSSL derives the public half from the
// private one when it loads a key (a scalar multiplication as costly as the signature
// itself), and a backend signs its receipts with the same key until it is rotated.
// Compared by its bytes on every call, so a rotated key is loaded at its first use.
// With it, a signing context set up for it once: setting one up looks the algorithm
// up among OpenSSL's providers, and a copy of the prepared one skips that.
struct CachedSigningKey {
    std::string private_key;
    Pkey key;
    detail::DigestContext prepared;
};

const CachedSigningKey& signing_key(std::string_view private_key) {
    static CachedSigningKey cached;
    if (cached.key && cached.private_key == private_key) return cached;
    cached = CachedSigningKey{};
    Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr,
                                          reinterpret_cast<const unsigned char*>(private_key.data()), 32));
    if (!key) detail::throw_openssl_error("EVP_PKEY_new_raw_private_key");
    detail::DigestContext prepared(EVP_MD_CTX_new());
    if (!prepared || EVP_DigestSignInit(prepared.get(), nullptr, nullptr, nullptr, key.get()) != 1)
        detail::throw_openssl_error("EVP_DigestSignInit");
    cached.key = std::move(key);
    cached.prepared = std::move(prepared);
    cached.private_key.assign(private_key.data(), private_key.size());
    return cached;
}

}  // namespace

std::string ed25519_sign(std::string_view private_key, std::string_view message) {
    if (private_key.size() != 32) throw std::runtime_error("an Ed25519 private key has 32 bytes");
    const CachedSigningKey& key = signing_key(private_key);
    const detail::DigestContext context(EVP_MD_CTX_new());
    if (!context || EVP_MD_CTX_copy_ex(context.get(), key.prepared.get()) != 1)
        detail::throw_openssl_error("EVP_MD_CTX_copy_ex");
    std::string signature(64, '\0');
    std::size_t length = signature.size();
    if (EVP_DigestSign(context.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
        length != 64)
        detail::throw_openssl_error("EVP_DigestSign");
    return signature;
}

bool ed25519_verify(std::string_view public_key, std::string_view message, std::string_view signature) {
    if (public_key.size() != 32 || signature.size() != 64) return false;
    const Pkey key(EVP_PKEY_new_raw_public_key(
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(public_key.data()), 32));
    if (!key) {
        ERR_clear_error();
        return false;
    }
    const detail::DigestContext context(EVP_MD_CTX_new());
    if (!context || EVP_DigestVerifyInit(context.get(), nullptr, nullptr, nullptr, key.get()) != 1)
        detail::throw_openssl_error("EVP_DigestVerifyInit");
    const int ok = EVP_DigestVerify(context.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                                    signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                                    message.size());
    ERR_clear_error();
    return ok == 1;
}

std::string base64url_encode(std::string_view bytes) {
    static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) |
                           (static_cast<unsigned char>(bytes[i + 1]) << 8) | static_cast<unsigned char>(bytes[i + 2]);
        out.push_back(kAlphabet[(v >> 18) & 63]);
        out.push_back(kAlphabet[(v >> 12) & 63]);
        out.push_back(kAlphabet[(v >> 6) & 63]);
        out.push_back(kAlphabet[v & 63]);
    }
    const std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
        if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
        out.push_back(kAlphabet[(v >> 18) & 63]);
        out.push_back(kAlphabet[(v >> 12) & 63]);
        if (rest == 2) out.push_back(kAlphabet[(v >> 6) & 63]);
    }
    return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
    if (text.size() % 4 == 1) return std::nullopt;
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '-') return 62;
        if (c == '_') return 63;
        return -1;
    };
    std::string out;
    unsigned buffer = 0;
    int bits = 0;
    for (char c : text) {
        const int v = value(c);
        if (v < 0) return std::nullopt;
        buffer = (buffer << 6) | static_cast<unsigned>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((buffer >> bits) & 0xff));
        }
    }
    // Leftover bits must be zero, so that each byte string has exactly one encoding.
    if ((buffer & ((1u << bits) - 1)) != 0) return std::nullopt;
    return out;
}

}  // namespace opledger::core::ledger
