
# Secrets never reach the server log (issue 12 "Secrets leak through errors and logs",
# "Guessing a redacted secret through OL001 leaves no trace", "Any role can LISTEN";
# docs/security.md).
#
# A cluster set up the way docs/security.md recommends (opledger preloaded,
# opledger.require_attempt = on by ALTER SYSTEM, the shipped roles, tenants) and
# logging as much as it can: log_min_messages = info, log_min_error_statement =
# error (the default: every error's STATEMENT line would be logged),
# log_error_verbosity = verbose. Calls that fail with secrets in their arguments run
# as the agent, reconciler and approver roles, with the secrets as SQL literals (the
# worst case); then the log file is grepped for every secret: no hits, no STATEMENT
# line, no internal SQL in CONTEXT. Also: rejected reuses (OL001) are counted in
# opledger.rejected_reuses even when the caller rolls back; the NOTIFY payload a
# stranger receives carries no operation ID; the grants and tenant mappings survive
# pg_dump and restore.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;

my $node = PostgreSQL::Test::Cluster->new('secrets');
$node->init;
# (The test framework's init sets log_statement = all, which logs every statement
# before it runs: no extension can hide that. Production's default is none.)
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'opledger'
log_statement = none
log_min_messages = info
log_min_error_statement = error
log_error_verbosity = verbose
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION opledger;
	SELECT opledger.create_roles();
	CREATE ROLE agent_svc   LOGIN IN ROLE opledger_agent;
	CREATE ROLE agent_other LOGIN IN ROLE opledger_agent;
	CREATE ROLE recon_svc   LOGIN IN ROLE opledger_reconciler;
	CREATE ROLE appr_svc    LOGIN IN ROLE opledger_approver;
	CREATE ROLE dash_svc    LOGIN IN ROLE opledger_dashboard;
	CREATE ROLE dash_other  LOGIN IN ROLE opledger_dashboard;
	CREATE ROLE stranger    LOGIN;
	SELECT opledger.set_role_tenant(r::regrole, 't-log') FROM unnest(ARRAY['agent_svc', 'recon_svc', 'appr_svc', 'dash_svc']) AS r;
	SELECT opledger.set_role_tenant(r::regrole, 't-other') FROM unnest(ARRAY['agent_other', 'dash_other']) AS r;
	SELECT opledger.register_tool('log.pay', 'non_idempotent_write', redact => '{/card/cvv,/card/number,/token}',
	                              backoff_base => '0', backoff_max => '0');
	SELECT opledger.register_tool('log.wire', 'irreversible', redact => '{/card/number}');
	ALTER SYSTEM SET opledger.require_attempt = on;
	SELECT pg_reload_conf();
});

# The output of $sql run as the superuser in $db, or "ERROR: ..." (never dies)
sub value
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, $sql);
	return $ret == 0 ? $out : "ERROR: $err";
}

# Run $sql as $role; returns (exit code, stdout, stderr). Client errors in verbose form.
sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-U', $role, '-v', 'VERBOSITY=verbose' ]);
	return ($ret, $out, $err);
}

# The recommended setting, from ALTER SYSTEM, applies to every session
$node->poll_query_until('postgres', q{SELECT current_setting('opledger.require_attempt') = 'on'})
  or die "opledger.require_attempt did not come on";
my (undef, $ra) = as_role('agent_svc', 'SHOW opledger.require_attempt');
is($ra, 'on', 'recommended setup: ALTER SYSTEM SET opledger.require_attempt = on applies to the agent\'s sessions');
my (undef, undef, $seterr) = as_role('agent_svc', 'SET opledger.require_attempt = off');
like($seterr, qr/42501/, 'recommended setup: the agent cannot turn opledger.require_attempt off (42501)');

# Operations the failing calls refer to
my ($r, $o, $e) = as_role('agent_svc', q{SELECT decision FROM opledger.op_begin('log-1', 'log.pay',
	'{"card": {"cvv": "CVV7391", "number": "4929SECRET1234"}, "amount": 10}')});
is($o, 'execute', 'setup: log-1 executes');
($r, $o, $e) = as_role('agent_svc', q{SELECT decision FROM opledger.op_begin('log-4', 'log.pay', '{"n": 4}')});
as_role('agent_svc', q{SELECT status FROM opledger.op_mark_unknown('log-4', attempt => 1)});
($r, $o, $e) = as_role('agent_svc', q{SELECT decision FROM opledger.op_begin('log-w1', 'log.wire',
	'{"card": {"number": "5555SECRET0000"}}')});
is($o, 'needs_approval', 'setup: log-w1 waits for approval');
as_role('agent_svc', q{SELECT decision FROM opledger.op_begin('log-5', 'log.pay', '{"n": 5}')});
as_role('agent_svc', q{SELECT decision FROM opledger.op_begin('log-6', 'log.pay', '{"card": {"cvv": "CVV0606"}}')});
# A transaction that holds log-5's row lock while the calls below run: a call on it
# waits and is cancelled by statement_timeout, an error PostgreSQL raises, not opledger.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT 1 FROM opledger.operations WHERE operation_id = 'log-5' FOR UPDATE});

my $log_start = -s $node->logfile;

# Each failing call: role, SQL, the SQLSTATE it must raise, the secrets it carries.
my $worker   = 'sk_live_' . ('Q7' x 200);
my $pref     = 'pref_SECRET_' . ('Z9' x 300);
my $resolver = 'resolver_SECRET_' . ('K3' x 200);
my $approver = 'approver_SECRET_' . ('M5' x 200);
my $conv     = 'conv_SECRET_' . join('', map { sprintf('%08x', $_ * 2654435761 % 4294967296) } 1 .. 400);
my @calls = (
	[ 'OL001 with a redacted CVV', 'agent_svc', 'OL001', [ 'CVV7391', 'CVV8462', '4929SECRET1234' ],
		q{SELECT opledger.op_begin('log-1', 'log.pay', '{"card": {"cvv": "CVV8462", "number": "4929SECRET1234"}, "amount": 10}')} ],
	[ '22003 with a redacted card number', 'agent_svc', '22003', [ '6212345678901234567', 'CVV5555' ],
		q{SELECT opledger.op_begin('log-2', 'log.pay', '{"card": {"number": 6212345678901234567, "cvv": "CVV5555"}}')} ],
	[ '22003 for a tool without redact paths', 'agent_svc', '22003', [ '9007199254740993' ],
		q{SELECT opledger.op_begin('log-2b', 'log.plain', '{"amount": 9007199254740993}')} ],
	[ '22023 for a secret-looking over-long worker', 'agent_svc', '22023', [ 'sk_live_Q7Q7', 'CVV6666' ],
		qq{SELECT opledger.op_begin('log-3', 'log.pay', '{"card": {"cvv": "CVV6666"}}', worker => '$worker')} ],
	[ '22023 for a 3 KB conversation_id', 'agent_svc', '22023', [ 'conv_SECRET_', 'CVV6767' ],
		qq{SELECT opledger.op_begin('log-3b', 'log.pay', '{"card": {"cvv": "CVV6767"}}', '$conv')} ],
	[ '22023 for an over-long provider_ref', 'agent_svc', '22023', [ 'pref_SECRET_Z9', 'RCPT-SECRET-77' ],
		qq{SELECT opledger.op_succeed('log-1', '{"receipt": "RCPT-SECRET-77"}', attempt => 1, provider_ref => '$pref')} ],
	[ 'OL002 with a secret in the result', 'agent_svc', 'OL002', [ 'TOKEN-SECRET-88' ],
		q{SELECT opledger.op_succeed('log-nonexistent', '{"token": "TOKEN-SECRET-88"}', attempt => 1)} ],
	[ '22004 without attempt under require_attempt', 'agent_svc', '22004', [ 'TOKEN-SECRET-99' ],
		q{SELECT opledger.op_fail('log-1', '{"token": "TOKEN-SECRET-99"}')} ],
	[ '42501 for another tenant\'s operation', 'agent_other', '42501', [ 'TOKEN-SECRET-42', 'CVV7391' ],
		q{SELECT opledger.op_mark_unknown('log-1', '{"token": "TOKEN-SECRET-42"}', attempt => 1)} ],
	[ '22023 for an over-long resolver', 'recon_svc', '22023', [ 'resolver_SECRET_K3', 'RESULT-SECRET-31' ],
		qq{SELECT opledger.op_resolve('log-4', 'applied', '{"token": "RESULT-SECRET-31"}', resolver => '$resolver')} ],
	[ '22023 for an over-long approver', 'appr_svc', '22023', [ 'approver_SECRET_M5', 'NOTE-SECRET-12' ],
		qq{SELECT opledger.op_approve('log-w1', '$approver', 'NOTE-SECRET-12')} ],
	[ 'OL001 raised inside a PL/pgSQL caller (its CONTEXT would quote the call)', 'agent_svc', 'OL001', [ 'CVV4242', 'CVV0606' ],
		q{DO $$ BEGIN PERFORM opledger.op_begin('log-6', 'log.pay', '{"card": {"cvv": "CVV4242"}}'); END $$} ],
	[ '22003 raised inside a PL/pgSQL caller', 'agent_svc', '22003', [ '6212345678901234999' ],
		q{DO $$ BEGIN PERFORM opledger.op_begin('log-7', 'log.pay', '{"card": {"number": 6212345678901234999}}'); END $$} ],
	[ '57014 (statement_timeout while waiting for the row lock)', 'agent_svc', '57014', [ 'RESULT-SECRET-57' ],
		qq{SET statement_timeout = '300ms';\nSELECT opledger.op_succeed('log-5', '{"token": "RESULT-SECRET-57"}', attempt => 1)} ],
);
for my $c (@calls)
{
	my ($name, $role, $state, $secrets, $sql) = @$c;
	my ($ret, $out, $err) = as_role($role, $sql);
	like($err, qr/ERROR:\s+$state:/, "$name: the call fails with $state");
	for my $s (@$secrets)
	{
		unlike($err, qr/\Q$s\E/, "$name: the error the client sees does not carry $s");
	}
}

$holder->query_safe('COMMIT');
$holder->quit;

my $log = slurp_file($node->logfile, $log_start);
for my $c (@calls)
{
	my ($name, $role, $state, $secrets) = @$c;
	like($log, qr/ERROR:\s+$state:/, "$name: the error is in the server log");
	for my $s (@$secrets)
	{
		unlike($log, qr/\Q$s\E/, "$name: the server log does not carry $s");
	}
}
unlike($log, qr/STATEMENT:/, 'errors raised out of op_* functions, PostgreSQL\'s own included, are logged without their STATEMENT line (errhidestmt)');
unlike($log, qr/(?:CONTEXT|QUERY):[^\n]*(?:FROM|INTO|UPDATE|JOIN)\s+opledger\.\w+/,
	'no logged error shows the extension\'s internal SQL in CONTEXT');
note "server log of the failing calls:\n$log";

# "Guessing a redacted secret through OL001 leaves no trace."
$log_start = -s $node->logfile;
($r, $o, $e) = as_role('agent_svc', q{
DO $$
BEGIN
    FOR i IN 100..129 LOOP
        BEGIN
            PERFORM opledger.op_begin('log-1', 'log.pay',
                format('{"card": {"cvv": "CVVG%s", "number": "4929SECRET1234"}, "amount": 10}', i)::jsonb);
        EXCEPTION WHEN SQLSTATE 'OL001' THEN NULL;
        END;
    END LOOP;
END
$$;
});
is($r, 0, 'guessing: a loop of 30 op_begin calls catching OL001 runs');
($r, $o, $e) = as_role('agent_svc', q{
BEGIN;
DO $$
BEGIN
    FOR i IN 200..204 LOOP
        BEGIN
            PERFORM opledger.op_begin('log-1', 'log.pay',
                format('{"card": {"cvv": "CVVG%s", "number": "4929SECRET1234"}, "amount": 10}', i)::jsonb);
        EXCEPTION WHEN SQLSTATE 'OL001' THEN NULL;
        END;
    END LOOP;
END
$$;
ROLLBACK;
});
is($r, 0, 'guessing: 5 more inside a transaction the caller rolls back');
is(value('postgres', q{SELECT rejections || '/' || tool || '/' || tenant || '/' || last_role
	FROM opledger.rejected_reuses WHERE operation_id = 'log-1'}),
	'36/log.pay/t-log/agent_svc',
	'guessing: opledger.rejected_reuses counts all 36 rejected reuses of log-1 (1 + 30 + 5, rollback included), with tool, tenant and role');
my (undef, $seen) = as_role('dash_svc', q{SELECT rejections FROM opledger.rejected_reuses WHERE operation_id = 'log-1'});
is($seen, '36', 'guessing: the tenant\'s dashboard sees the rejections');
(undef, $seen) = as_role('dash_other', q{SELECT count(*) FROM opledger.rejected_reuses WHERE operation_id = 'log-1'});
is($seen, '0', 'guessing: another tenant\'s dashboard does not');
is(value('postgres', q{SELECT count(*) FROM opledger.events WHERE operation_id = 'log-1'}), '1',
	'guessing: the rejected calls wrote no event (the audit trail holds only the first op_begin)');
$log = slurp_file($node->logfile, $log_start);
my $lines = () = $log =~ /LOG:\s+(?:\w{5}:\s+)?opledger: rejected reuse/g;
is($lines, 35, 'guessing: each rejected reuse is logged at LOG level, caught or rolled back (35 lines)');
like($log, qr/LOG:\s+(?:\w{5}:\s+)?opledger: rejected reuse[^\n]*(?:\n[^\n]*DETAIL:)?[^\n]*agent_svc/,
	'guessing: the log line names the role that tried');
unlike($log, qr/rejected reuse[^\n]*\n[^\n]*DETAIL:[^\n]*log-1/,
	'guessing: and not the operation ID, a value of the call (opledger.rejected_reuses names it)');
unlike($log, qr/STATEMENT:/, 'guessing: the log lines carry no STATEMENT (the caller\'s SQL may hold the guesses)');
unlike($log, qr/CONTEXT:\s+SQL statement/, 'guessing: nor a CONTEXT with the caller\'s SQL');
unlike($log, qr/CVVG/, 'guessing: no guessed CVV reaches the log');
unlike($log, qr/4929SECRET/, 'guessing: nor the card number');

# "Any role can LISTEN." A stranger LISTENs; the payload carries a token, not the ID.
my $bg = $node->background_psql('postgres', extra_params => [ '-U', 'stranger' ]);
$bg->query_safe('LISTEN opledger');
($r, $o, $e) = as_role('agent_svc', q{
SET opledger.notify = on;
SELECT decision FROM opledger.op_begin('log-n1', 'log.pay', '{"card": {"cvv": "CVV1212"}}');
SELECT status FROM opledger.op_succeed('log-n1', '{"ok": true}', attempt => 1);
});
is($r, 0, 'LISTEN: the agent runs an operation with opledger.notify = on');
my $heard = '';
for (1 .. 20)
{
	$heard .= $bg->query_safe('SELECT pg_sleep(0.1)');
	last if $heard =~ /Asynchronous notification/;
}
$bg->quit;
like($heard, qr/Asynchronous notification "opledger" with payload/, 'LISTEN: a role without grants receives the notification');
my ($payload) = $heard =~ /with payload "(.*)" received from server process/;
$payload //= '';
unlike($payload, qr/log-n1/, 'LISTEN: the payload does not carry the operation ID');
unlike($payload, qr/CVV1212/, 'LISTEN: nor any argument');
my $p = eval { decode_json($payload) } // {};
is(join(',', sort keys %$p), 'status,token', 'LISTEN: the payload is {"token": ..., "status": ...}');
is($p->{status} // '', 'succeeded', 'LISTEN: with the new status');
like($p->{token} // '', qr/^[0-9a-f]{32}$/, 'LISTEN: the token is 32 hex digits');
is($p->{token} // '', value('postgres', q{SELECT opledger.notify_token('log-n1')}),
	'LISTEN: the token is opledger.notify_token(operation_id), so the agent that knows the ID recognises it');
(undef, undef, $e) = as_role('stranger', q{SELECT opledger.notify_token('log-n1')});
like($e, qr/42501/, 'LISTEN: the stranger cannot compute tokens to confirm a guessed ID');

# Roles ship with the extension and survive dump and restore: grants on its objects and the
# tenant mappings come with pg_dump (the roles themselves with pg_dumpall --globals-only).
my $dump = $node->basedir . '/ledger.sql';
$node->command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', $dump ], 'dump: pg_dump of the ledger database');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('restored'), '-f', $dump ],
	'dump: restore into another database');
is(value('restored', q{SELECT
	has_function_privilege('opledger_agent', 'opledger.op_begin(text,text,jsonb,text,text,interval)', 'EXECUTE') || '/' ||
	has_function_privilege('opledger_agent', 'opledger.op_resolve(text,text,jsonb,integer,text,text,boolean)', 'EXECUTE') || '/' ||
	has_function_privilege('opledger_reconciler', 'opledger.op_resolve(text,text,jsonb,integer,text,text,boolean)', 'EXECUTE') || '/' ||
	has_table_privilege('opledger_dashboard', 'opledger.metrics', 'SELECT') || '/' ||
	has_column_privilege('opledger_dashboard', 'opledger.operations', 'args', 'SELECT')}),
	'true/false/true/true/false', 'dump: the shipped roles\' grants are restored');
is(value('restored', q{SELECT string_agg(member::text || '=' || tenant, ',' ORDER BY member::text) FROM opledger.role_tenants}),
	'agent_other=t-other,agent_svc=t-log,appr_svc=t-log,dash_other=t-other,dash_svc=t-log,recon_svc=t-log',
	'dump: the tenant mappings are restored');
my $restored = $node->psql('restored', q{SELECT decision FROM opledger.op_begin('log-1', 'log.pay',
	'{"card": {"cvv": "CVV7391", "number": "4929SECRET1234"}, "amount": 10}')},
	extra_params => [ '-U', 'agent_svc' ], stdout => \my $rout);
is($rout, 'in_progress', 'dump: in the restored ledger, the agent\'s own operation answers as before (same fingerprint key)');
my ($rr, $rout2, $rerr2) = $node->psql('restored', q{SELECT opledger.op_mark_unknown('log-1', attempt => 1)},
	extra_params => [ '-U', 'agent_other' ]);
like($rerr2, qr/42501|another tenant/, 'dump: and another tenant still cannot touch it');

$node->stop;
done_testing();
