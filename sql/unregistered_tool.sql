-- A typo'd, unregistered tool is not silent: the first op_begin of a session that uses
-- it gets a NOTICE naming the default policy (once per tool and session); a
-- registered tool never does.
SELECT tool, effect FROM opledger.register_tool('mail.send', 'idempotent_write');
SELECT decision FROM opledger.op_begin('unreg-1', 'emial.send', '{"to": "a@example.com"}');
SELECT decision FROM opledger.op_begin('unreg-2', 'emial.send', '{"to": "b@example.com"}');
SELECT decision FROM opledger.op_begin('unreg-3', 'mail.send', '{"to": "c@example.com"}');
SELECT tool, registered, effect FROM opledger.tool_stats WHERE tool IN ('emial.send', 'mail.send') ORDER BY tool;
-- opledger.require_registered_tools = on refuses it instead.
SET opledger.require_registered_tools = on;
SELECT decision FROM opledger.op_begin('unreg-4', 'emial.send', '{"to": "d@example.com"}');
RESET opledger.require_registered_tools;
DELETE FROM opledger.events WHERE operation_id LIKE 'unreg-%';
DELETE FROM opledger.operations WHERE operation_id LIKE 'unreg-%';
DELETE FROM opledger.tools WHERE tool = 'mail.send';
