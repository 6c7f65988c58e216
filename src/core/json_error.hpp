// Errors raised by the PostgreSQL-free core. The PostgreSQL layer maps each kind
// to its SQLSTATE (docs/sql-reference.md, "Errors"); the core itself knows nothing of SQLSTATEs.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

namespace opledger::core {

enum class JsonErrorKind {
    invalid_text,     // malformed JSON, duplicate names, bad UTF-8, lone surrogates  (SQL: 22P02)
    inexact_number,   // a number that canonicalisation would change                  (SQL: 22003)
    too_deep,         // nesting deeper than the configured limit                     (SQL: 54001)
    invalid_pointer,  // a malformed RFC 6901 JSON Pointer                            (SQL: 22P02)
};

class JsonError : public std::runtime_error {
public:
    JsonError(JsonErrorKind kind, const std::string& message,
              std::optional<std::size_t> byte_offset = std::nullopt, std::string hint = {})
        : std::runtime_error(message), kind_(kind), byte_offset_(byte_offset), hint_(std::move(hint)) {}

    JsonErrorKind kind() const noexcept { return kind_; }
    // 0-based offset into the input text where the problem was found (text input only).
    std::optional<std::size_t> byte_offset() const noexcept { return byte_offset_; }
    const std::string& hint() const noexcept { return hint_; }

private:
    JsonErrorKind kind_;
    std::optional<std::size_t> byte_offset_;
    std::string hint_;
};

}  // namespace opledger::core
