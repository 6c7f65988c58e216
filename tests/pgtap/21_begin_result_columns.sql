-- opledger.begin_result is defined once, by its SQL declaration: op_begin places each
-- value by the installed type's attribute names (src/pg/ledger/ledger_results.cpp) and
-- refuses a type whose columns are not the ones it fills, so the SQL type and the
-- library's list cannot drift apart unnoticed. Run as a superuser (ALTER TYPE on the
-- extension's own type, all rolled back).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(9);

SELECT opledger.register_tool('brc_t', 'non_idempotent_write');

SELECT is((SELECT row_to_json(b)::jsonb - 'lease_expires_at' - 'args_hash' - 'fingerprint_alg'
             FROM opledger.op_begin('brc-1', 'brc_t', '{"a":1}', worker => 'w1') b),
          '{"decision": "execute", "next_action": "call_tool", "operation_id": "brc-1", "status": "pending",
            "attempt": 1, "result": null, "error": null, "provider_ref": null, "retry_after": null,
            "finished_at": null, "purged": false, "lease_owner": "w1"}'::jsonb,
          'every column of begin_result is filled from its name');

-- A column moved to another position is still filled by name.
SAVEPOINT moved;
ALTER TYPE opledger.begin_result DROP ATTRIBUTE decision;
ALTER TYPE opledger.begin_result ADD ATTRIBUTE decision text;
SELECT is((SELECT decision || '/' || next_action || '/' || operation_id FROM opledger.op_begin('brc-1', 'brc_t', '{"a":1}')),
          'in_progress/wait/brc-1', 'a column moved to the end (the old one dropped) is still filled by its name');
SELECT is((SELECT attnum FROM pg_attribute WHERE attrelid = 'opledger.begin_result'::regclass AND attname = 'decision'),
          (SELECT max(attnum) FROM pg_attribute WHERE attrelid = 'opledger.begin_result'::regclass),
          'the moved column is now the last one');
ROLLBACK TO SAVEPOINT moved;

-- A column the library does not fill: refused, nothing written.
SAVEPOINT extra;
ALTER TYPE opledger.begin_result ADD ATTRIBUTE surplus integer;
SELECT throws_ok($$SELECT * FROM opledger.op_begin('brc-2', 'brc_t', '{}')$$, '42804',
                 'opledger: opledger.begin_result does not have the columns op_begin fills',
                 'a begin_result column the library does not know is refused');
ROLLBACK TO SAVEPOINT extra;
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE operation_id = 'brc-2'), 0,
          'the refused call left no operation');

-- A column the library fills that the type lacks: refused.
SAVEPOINT missing;
ALTER TYPE opledger.begin_result DROP ATTRIBUTE next_action;
SELECT throws_ok($$SELECT * FROM opledger.op_begin('brc-3', 'brc_t', '{}')$$, '42804',
                 'opledger: opledger.begin_result does not have the columns op_begin fills',
                 'a begin_result lacking a column the library fills is refused');
ROLLBACK TO SAVEPOINT missing;

-- A renamed column (same count, another name): refused.
SAVEPOINT renamed;
ALTER TYPE opledger.begin_result RENAME ATTRIBUTE next_action TO next_step;
SELECT throws_ok($$SELECT * FROM opledger.op_begin('brc-4', 'brc_t', '{}')$$, '42804',
                 'opledger: opledger.begin_result does not have the columns op_begin fills',
                 'a renamed begin_result column is refused');
ROLLBACK TO SAVEPOINT renamed;

-- Back to the declared type: the same backend fills it again (the layout is worked out anew).
SELECT is((SELECT decision || '/' || next_action FROM opledger.op_begin('brc-1', 'brc_t', '{"a":1}')),
          'in_progress/wait', 'the declared type works again in the same session');
SELECT is((SELECT decision || '/' || next_action FROM opledger.op_begin('brc-5', 'brc_t', '{}')),
          'execute/call_tool', 'a new operation after the refusals');

SELECT * FROM finish();
ROLLBACK;
