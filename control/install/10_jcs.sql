-- Canonical JSON (RFC 8785), fingerprints and derived operation IDs.

CREATE FUNCTION opledger.jcs(text) RETURNS text
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_text';
COMMENT ON FUNCTION opledger.jcs(text) IS
    'RFC 8785 canonical form of strict JSON text (duplicates, bad UTF-8, lone surrogates: 22P02; inexact numbers: 22003)';

CREATE FUNCTION opledger.jcs(json) RETURNS text
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_text';
COMMENT ON FUNCTION opledger.jcs(json) IS
    'RFC 8785 canonical form of a json value, parsed strictly from its text';

CREATE FUNCTION opledger.jcs(jsonb) RETURNS text
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_jsonb';
COMMENT ON FUNCTION opledger.jcs(jsonb) IS
    'RFC 8785 canonical form of a jsonb value (inexact numbers: 22003)';

CREATE FUNCTION opledger.jcs_hash(text) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_hash_text';
COMMENT ON FUNCTION opledger.jcs_hash(text) IS
    'SHA-256 of the UTF-8 bytes of opledger.jcs(text)';

CREATE FUNCTION opledger.jcs_hash(json) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_hash_text';
COMMENT ON FUNCTION opledger.jcs_hash(json) IS
    'SHA-256 of the UTF-8 bytes of opledger.jcs(json)';

CREATE FUNCTION opledger.jcs_hash(jsonb) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_hash_jsonb';
COMMENT ON FUNCTION opledger.jcs_hash(jsonb) IS
    'SHA-256 of the UTF-8 bytes of opledger.jcs(jsonb)';

CREATE FUNCTION opledger.derive_operation_id(namespace text, parts jsonb) RETURNS uuid
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_derive_operation_id';
COMMENT ON FUNCTION opledger.derive_operation_id(text, jsonb) IS
    'Deterministic UUID version 8 (RFC 9562): SHA-256 of namespace, a NUL byte and jcs(parts); same inputs, same UUID everywhere';
