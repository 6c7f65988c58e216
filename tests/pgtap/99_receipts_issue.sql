-- Signed receipts (docs/receipts.md): which tools get them, what a receipt states,
-- and opledger.verify_receipt finding each kind of tampering: a changed event
-- detail, a deleted event, two events reordered, a replaced result, a receipt forged
-- with another key, a receipt of another operation. Runs in one transaction that
-- rolls back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();

SELECT ok((SELECT count(*) FROM opledger.receipt_keys WHERE retired_at IS NULL) = 1,
          'CREATE EXTENSION made a signing key in use');

SELECT opledger.register_tool('rx_irrev', 'irreversible');
SELECT opledger.register_tool('rx_irrev_off', 'irreversible', receipts => false);
SELECT opledger.register_tool('rx_plain', 'non_idempotent_write');
SELECT opledger.register_tool('rx_on', 'non_idempotent_write', receipts => true);
SELECT results_eq($$ SELECT tool, receipts FROM opledger.tools WHERE tool LIKE 'rx\_%' ORDER BY tool $$,
                  $$ VALUES ('rx_irrev'::text, true), ('rx_irrev_off', false), ('rx_on', true), ('rx_plain', false) $$,
                  'receipts default on for irreversible tools only, and each tool can say otherwise');
SELECT is((SELECT receipts FROM opledger.register_tool('rx_on', 'non_idempotent_write')), false,
          're-registering without receipts => turns them off for a reversible tool');
SELECT opledger.register_tool('rx_on', 'non_idempotent_write', receipts => true);

-- A tool without receipts: none issued.
SELECT opledger.op_begin('ry-plain', 'rx_plain', '{"n":0}');
SELECT opledger.op_succeed('ry-plain', '{"ok":true}');
SELECT is((SELECT count(*) FROM opledger.receipts WHERE operation_id = 'ry-plain'), 0::bigint,
          'a tool without receipts gets none');

-- A success.
SELECT opledger.op_begin('ry1', 'rx_on', '{"n":1}');
SELECT opledger.op_succeed('ry1', '{"ok":true,"s":"é"}', provider_ref => 'p1');
SELECT opledger.op_begin('ry1', 'rx_on', '{"n":1}');  -- a replay: no receipt
SELECT results_eq($$ SELECT seq, kind FROM opledger.receipts WHERE operation_id = 'ry1' $$,
                  $$ VALUES (2, 'succeeded'::text) $$, 'a success gets one receipt, covering its event');
SELECT is((SELECT receipt ->> 'chain_head' FROM opledger.receipts WHERE operation_id = 'ry1'),
          (SELECT hash FROM opledger.events WHERE operation_id = 'ry1' AND seq = 2), 'it quotes that event''s hash');
SELECT results_eq(
    $$ SELECT r.receipt ->> 'v', r.receipt ->> 'operation_id', r.receipt ->> 'tool', r.receipt ->> 'status',
              r.receipt ->> 'attempt', r.receipt ->> 'args_fingerprint', r.receipt ->> 'outcome_fingerprint',
              r.receipt ->> 'key_id'
         FROM opledger.receipts AS r WHERE r.operation_id = 'ry1' $$,
    $$ SELECT '1', 'ry1', 'rx_on', 'succeeded', '1', encode(o.args_hash, 'hex'),
              encode(sha256(convert_to(opledger.jcs(o.result), 'UTF8')), 'hex'),
              (SELECT key_id FROM opledger.receipt_keys WHERE retired_at IS NULL)
         FROM opledger.operations AS o WHERE o.operation_id = 'ry1' $$,
    'the receipt states the operation, tool, status, attempt, argument and outcome fingerprints and key');
SELECT ok((SELECT receipt ->> 'signature' ~ '^[A-Za-z0-9_-]{86}$' FROM opledger.receipts WHERE operation_id = 'ry1'),
          'its signature is 64 bytes in base64url');
SELECT results_eq($$ SELECT seq, receipt = opledger.jcs(receipt::jsonb) FROM opledger.events
                      WHERE operation_id = 'ry1' AND receipt IS NOT NULL $$,
                  $$ VALUES (2, true) $$,
                  'the receipt is stored in the row of the event it covers, in canonical form (the bytes signed)');
SELECT results_eq($$ SELECT valid, reason FROM opledger.verify_receipt((SELECT receipt FROM opledger.receipts WHERE operation_id = 'ry1')) $$,
                  $$ VALUES (true, 'valid: signed with a published key, and the ledger''s history matches it'::text) $$,
                  'an untouched receipt is valid');
SELECT is((SELECT valid FROM opledger.verify_receipt((SELECT receipt FROM opledger.receipts WHERE operation_id = 'ry1'), 'ry1')),
          true, 'and valid for the operation it is of');

-- A failure, and an irreversible tool's approval then success.
SELECT opledger.op_begin('ry2', 'rx_on', '{"n":2}');
SELECT opledger.op_fail('ry2', '{"code":"E"}', retryable => false);
SELECT results_eq($$ SELECT kind, receipt ->> 'outcome_fingerprint' FROM opledger.receipts WHERE operation_id = 'ry2' $$,
                  $$ SELECT 'failed'::text, encode(sha256(convert_to(opledger.jcs('{"code":"E"}'::jsonb), 'UTF8')), 'hex') $$,
                  'a failure gets a receipt with its error''s fingerprint');
SELECT opledger.op_begin('ry3', 'rx_irrev', '{"n":3}');
SELECT opledger.op_approve('ry3', 'alice');
SELECT opledger.op_begin('ry3', 'rx_irrev', '{"n":3}');
SELECT opledger.op_succeed('ry3', '{"done":1}');
SELECT results_eq($$ SELECT kind, receipt ->> 'approved_by' IS NOT NULL, receipt ->> 'approved_at' IS NOT NULL
                       FROM opledger.receipts WHERE operation_id = 'ry3' ORDER BY seq $$,
                  $$ VALUES ('approved'::text, true, true), ('succeeded', true, true) $$,
                  'an irreversible tool: a receipt of the approval and of the outcome, naming the approver''s role');
SELECT opledger.op_begin('ry4', 'rx_irrev_off', '{"n":4}');
SELECT opledger.op_approve('ry4', 'alice');
SELECT is((SELECT count(*) FROM opledger.receipts WHERE operation_id = 'ry4'), 0::bigint,
          'an irreversible tool registered with receipts => false gets none');
-- An unknown outcome resolved by a reconciler.
SELECT opledger.op_begin('ry5', 'rx_on', '{"n":5}');
SELECT opledger.op_mark_unknown('ry5', '{"reason":"timeout"}');
SELECT opledger.op_resolve('ry5', 'applied', '{"ok":1}', resolver => 'rec-1');
SELECT results_eq($$ SELECT kind, receipt ->> 'status', receipt ->> 'resolved_by' IS NOT NULL FROM opledger.receipts WHERE operation_id = 'ry5' $$,
                  $$ VALUES ('resolved'::text, 'succeeded'::text, true) $$, 'a resolution gets a receipt naming the resolver''s role');
SELECT is((SELECT bool_and(v.valid) FROM opledger.receipts AS r, opledger.verify_receipt(r.receipt, r.operation_id) AS v
            WHERE r.operation_id LIKE 'ry%'), true, 'every receipt issued verifies');

-- Tampering, each in a savepoint that is rolled back. The receipts as their holders
-- keep them: a receipt lives in the row of the event it covers, so deleting that event
-- deletes the ledger's copy, and the holder's copy is then the one checked.
CREATE TEMP TABLE held AS SELECT operation_id, seq, receipt FROM opledger.receipts;
GRANT SELECT ON held TO PUBLIC;  -- the role tests at the end check as other roles
CREATE FUNCTION pg_temp.check(id text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN v.valid THEN 'valid' ELSE v.reason END
      FROM (SELECT r.operation_id, r.seq, r.receipt FROM opledger.receipts AS r WHERE r.operation_id = id
            UNION ALL
            SELECT h.operation_id, h.seq, h.receipt FROM held AS h
             WHERE h.operation_id = id
               AND NOT EXISTS (SELECT FROM opledger.receipts AS s WHERE s.operation_id = id AND s.seq = h.seq)) AS r,
           opledger.verify_receipt(r.receipt, r.operation_id) AS v
     ORDER BY r.seq DESC LIMIT 1
$$;
SAVEPOINT t;

UPDATE opledger.events SET detail = jsonb_set(detail, '{result,ok}', 'false') WHERE operation_id = 'ry1' AND seq = 2;
SELECT ok(pg_temp.check('ry1') LIKE 'the operation''s event chain is broken at seq 2:%', 'a changed event detail is found');
ROLLBACK TO SAVEPOINT t;
UPDATE opledger.events SET detail = jsonb_set(detail, '{result,ok}', 'false'), hash = repeat('0', 64)
 WHERE operation_id = 'ry1' AND seq = 2;
SELECT is(pg_temp.check('ry1'), 'the event the receipt covers has another hash (the history was changed)',
          'a changed event detail with a new hash is found');
ROLLBACK TO SAVEPOINT t;
UPDATE opledger.events SET detail = '{"x":1}' WHERE operation_id = 'ry3' AND seq = 1;
SELECT ok(pg_temp.check('ry3') LIKE 'the operation''s event chain is broken at seq 1:%',
          'a changed detail of an earlier event breaks the chain the receipt stands on');
ROLLBACK TO SAVEPOINT t;

DELETE FROM opledger.events WHERE operation_id = 'ry3' AND seq = 2;
SELECT ok(pg_temp.check('ry3') LIKE 'the operation''s event chain is broken at seq 3:%', 'a deleted event is found');
ROLLBACK TO SAVEPOINT t;
DELETE FROM opledger.events WHERE operation_id = 'ry1' AND seq = 2;
SELECT is(pg_temp.check('ry1'), 'the event the receipt covers is missing (an event was deleted)',
          'a deleted covered event is found');
ROLLBACK TO SAVEPOINT t;

UPDATE opledger.events SET seq = -seq WHERE operation_id = 'ry3' AND seq IN (1, 2);
UPDATE opledger.events SET seq = CASE seq WHEN -1 THEN 2 ELSE 1 END WHERE operation_id = 'ry3' AND seq < 0;
SELECT ok(pg_temp.check('ry3') LIKE 'the operation''s event chain is broken at seq 1:%', 'two reordered events are found');
ROLLBACK TO SAVEPOINT t;

UPDATE opledger.operations SET result = '{"ok":false}' WHERE operation_id = 'ry1';
SELECT is(pg_temp.check('ry1'), 'the operation''s result or error is not the one the receipt states',
          'a replaced result is found');
ROLLBACK TO SAVEPOINT t;

-- Forged: a receipt changed after signing, and one signed with another key than the
-- one it names (a second key's signature under the first key's ID).
SELECT is((SELECT v.reason FROM opledger.verify_receipt(
              (SELECT receipt || jsonb_build_object('status', 'failed') FROM opledger.receipts WHERE operation_id = 'ry1')) AS v),
          'the signature does not match the receipt and the published key (the receipt was altered, or signed with another key)',
          'a receipt changed after signing is refused');
CREATE TEMP TABLE first_key AS SELECT key_id FROM opledger.receipt_keys WHERE retired_at IS NULL;
SELECT opledger.create_receipt_key();
SELECT opledger.op_begin('ry-forged', 'rx_on', '{"n":9}');
SELECT opledger.op_succeed('ry-forged', '{}');
UPDATE opledger.events SET receipt = (receipt::jsonb || jsonb_build_object('key_id', (SELECT key_id FROM first_key)))::text
 WHERE operation_id = 'ry-forged' AND receipt IS NOT NULL;
SELECT is(pg_temp.check('ry-forged'),
          'the signature does not match the receipt and the published key (the receipt was altered, or signed with another key)',
          'a receipt signed with another key than the one it names is refused');
UPDATE opledger.events SET receipt = (receipt::jsonb || '{"key_id":"ed25519-0000000000000000"}')::text
 WHERE operation_id = 'ry-forged' AND receipt IS NOT NULL;
SELECT is(pg_temp.check('ry-forged'), 'signed with a key the ledger does not publish', 'an unknown key is refused');
ROLLBACK TO SAVEPOINT t;

-- Replay: ry1's receipt presented as ry2's.
SELECT is((SELECT v.reason FROM opledger.verify_receipt((SELECT receipt FROM opledger.receipts WHERE operation_id = 'ry1'), 'ry2') AS v),
          'the receipt is of another operation', 'a receipt of another operation is refused');
UPDATE opledger.events SET receipt = (SELECT receipt FROM opledger.events WHERE operation_id = 'ry1' AND receipt IS NOT NULL)
 WHERE operation_id = 'ry2' AND receipt IS NOT NULL;
SELECT is(pg_temp.check('ry2'), 'the receipt is of another operation', 'and found when stored in another operation''s place');
ROLLBACK TO SAVEPOINT t;

-- Rotation: receipts signed before stay valid; new ones name the new key.
SELECT opledger.create_receipt_key();
SELECT is(pg_temp.check('ry1'), 'valid', 'a receipt signed with a retired key stays valid');
SELECT opledger.op_begin('ry6', 'rx_on', '{"n":6}');
SELECT opledger.op_succeed('ry6', '{}');
SELECT is((SELECT receipt ->> 'key_id' FROM opledger.receipts WHERE operation_id = 'ry6'),
          (SELECT key_id FROM opledger.receipt_keys WHERE retired_at IS NULL), 'new receipts are signed with the new key');
SELECT is(pg_temp.check('ry6'), 'valid', 'and verify (this backend had kept the retired key: the call signed again)');
-- The backend keeps the key it signed with last; a key retired since (here by this
-- session, in ledger_receipt_key_rotation.spec by another one) is found retired and
-- replaced by the key in use.
SELECT opledger.create_receipt_key();
SELECT opledger.op_begin('ry6b', 'rx_irrev', '{"n":61}');
SELECT opledger.op_approve('ry6b', 'alice');
SELECT opledger.op_begin('ry6b', 'rx_irrev', '{"n":61}');
SELECT opledger.op_fail('ry6b', '{"code":"X"}', retryable => false);
SELECT results_eq($$ SELECT r.kind, r.receipt ->> 'key_id' = k.key_id, v.valid
                       FROM opledger.receipts AS r, opledger.verify_receipt(r.receipt, r.operation_id) AS v,
                            opledger.receipt_keys AS k
                      WHERE r.operation_id = 'ry6b' AND k.retired_at IS NULL ORDER BY r.seq $$,
                  $$ VALUES ('approved'::text, true, true), ('failed', true, true) $$,
                  'after another rotation, the approval and the failure are signed with the key in use');
-- No key in use: the call that is due a receipt is refused and records nothing.
SELECT opledger.retire_receipt_key();
SELECT opledger.op_begin('ry7', 'rx_on', '{"n":7}');
SELECT throws_ok($$ SELECT opledger.op_succeed('ry7', '{}') $$, '55000', 'opledger: no receipt signing key is in use',
                 'with every key retired, an outcome due a receipt is refused');
SELECT is((SELECT status::text FROM opledger.operations WHERE operation_id = 'ry7'), 'pending', 'and nothing was recorded');
SELECT opledger.op_begin('ry8', 'rx_plain', '{"n":8}');
SELECT is((SELECT status::text FROM opledger.op_succeed('ry8', '{}')), 'succeeded', 'a tool without receipts needs no key');
ROLLBACK TO SAVEPOINT t;

-- A purged operation's receipt stays verifiable: the tombstone and the kept receipt.
CREATE TEMP TABLE last_hash AS SELECT hash FROM opledger.events WHERE operation_id = 'ry1' ORDER BY seq DESC LIMIT 1;
SELECT opledger.op_purge('0 seconds');
SELECT ok((SELECT purged FROM opledger.operations WHERE operation_id = 'ry1'), 'ry1 is purged');
SELECT is(pg_temp.check('ry1'), 'valid', 'its receipt is still valid');
SELECT is((SELECT v.reason FROM opledger.verify_receipt((SELECT receipt FROM opledger.receipts WHERE operation_id = 'ry1')) AS v),
          'the operation was purged (its events are gone); the receipt is the one the ledger issued', 'and says why');
SELECT is((SELECT chain_head FROM opledger.operations WHERE operation_id = 'ry1'), (SELECT hash FROM last_hash),
          'the tombstone keeps the chain head (the last event''s hash; the receipt quotes the event it covers)');
SELECT is((SELECT count(*) FROM opledger.receipts WHERE operation_id = 'ry1'), 1::bigint, 'the purge keeps the receipt');
ROLLBACK TO SAVEPOINT t;

-- Malformed input.
SELECT is((SELECT valid FROM opledger.verify_receipt('{"v":2}')), false, 'another version is not a receipt');
SELECT is((SELECT valid FROM opledger.verify_receipt('[1]')), false, 'nor is an array');
SELECT is((SELECT valid FROM opledger.verify_receipt((SELECT receipt || '{"seq": 1e20}' FROM opledger.receipts WHERE operation_id = 'ry1'))),
          false, 'a seq that is no event''s is refused, not an error');
SELECT throws_ok($$ SELECT * FROM opledger.verify_receipt(jsonb_build_object('x', repeat('a', 70000))) $$, '22023', NULL,
                 'the receipt is bounded');
SELECT throws_ok($$ SELECT * FROM opledger.verify_receipt('{}', repeat('x', 2000)) $$, '22023', NULL,
                 'the operation ID is bounded');

-- The evidence a command-line verifier checks: every event as hashed.
SELECT is((SELECT jsonb_array_length(opledger.receipt_evidence('ry1') -> 'events')), 3, 'the evidence holds every event');
SELECT is((SELECT (opledger.receipt_evidence('ry1') -> 'events' -> 1 ->> 'hash')),
          (SELECT hash FROM opledger.events WHERE operation_id = 'ry1' AND seq = 2), 'with its stored hash');

-- Who may verify: the roles that read receipts.
SELECT opledger.create_roles();
SET LOCAL ROLE opledger_dashboard;
SELECT is(pg_temp.check('ry1'), 'valid', 'the dashboard verifies receipts');
RESET ROLE;
SET LOCAL ROLE opledger_agent;
SELECT throws_ok($$ SELECT * FROM opledger.verify_receipt('{}') $$, '42501', NULL, 'an agent may not');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
