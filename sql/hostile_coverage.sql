-- Every function and view of the extension is called by some hostile case
-- (sql/hostile_NN_name.sql): the names below are those the groups of calls in
-- sql/include/hostile/ reach. A new function or view is listed here once a group calls it.
SELECT p.oid::regprocedure AS function_not_called FROM pg_proc AS p
 WHERE p.pronamespace = 'opledger'::regnamespace
   AND p.proname NOT IN ('register_tool', 'op_begin', 'op_succeed', 'op_fail', 'op_mark_unknown', 'op_resolve',
                         'op_approve', 'op_sweep', 'op_claim_reconciliation', 'op_purge', 'jcs', 'jcs_hash',
                         'derive_operation_id', '_check_pointers', '_random_secret', 'current_tenant',
                         'notify_token', 'set_role_tenant', '_rejected_reuses', 'reset_rejected_reuses',
                         'create_roles', 'op_reject', 'metrics_since', '_counts', 'create_hmac_key',
                         '_sees_tenant', 'verify_chain', 'verify_chains', 'create_receipt_key',
                         'retire_receipt_key', 'receipt_public_keys', '_ed25519_keypair', '_ed25519_verify',
                         '_grant_receipts', 'verify_receipt', 'receipt_evidence')
 ORDER BY 1;
SELECT c.oid::regclass AS view_not_read FROM pg_class AS c
 WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind IN ('v', 'm')
   AND c.relname NOT IN ('metrics', 'tool_stats', 'unknown_operations', 'rejected_reuses', 'metrics_hourly', 'receipts')
 ORDER BY 1;
