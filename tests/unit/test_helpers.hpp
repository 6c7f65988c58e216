// Shared helpers for the core unit tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/jcs.hpp"

namespace opledger::core::test {

inline std::string canon(std::string_view text, std::size_t max_depth = 1000) {
    ParseLimits limits;
    limits.max_depth = max_depth;
    return canonicalize_text(text, limits);
}

// Runs body, which must throw JsonError of this kind at this offset (nullopt:
// no offset); returns the message for further checks.
inline std::string expect_json_error(const std::function<void()>& body, JsonErrorKind kind,
                                     std::optional<std::size_t> offset) {
    try {
        body();
    } catch (const JsonError& error) {
        EXPECT_EQ(static_cast<int>(error.kind()), static_cast<int>(kind)) << error.what();
        EXPECT_EQ(error.byte_offset(), offset) << error.what();
        return error.what();
    }
    ADD_FAILURE() << "no JsonError thrown";
    return {};
}

inline std::string text_error(std::string_view text, std::size_t offset,
                              JsonErrorKind kind = JsonErrorKind::invalid_text) {
    return expect_json_error([&] { canon(text); }, kind, offset);
}

}  // namespace opledger::core::test
