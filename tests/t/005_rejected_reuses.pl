
# The rejected-reuse monitor (docs/security.md, "Secrets").
#
# An agent that guesses a redacted secret (a CVV) by calling op_begin with the
# same operation ID and catching OL001 rolls every attempt back, so no event is
# written.  With opledger in shared_preload_libraries each rejection is still
# counted in shared memory (opledger.rejected_reuses), and every rejection, with
# or without preloading, is one LOG line that names the operation ID, the tool
# and the role but never a value of the arguments.
#
# Counts are since the server started: a restart empties the table, the server
# log keeps the history.  When the table is full the entry with the fewest
# rejections is folded into its tenant's overflow row (tool and operation_id
# NULL), so a flood of one-off rejections cannot push a guessing loop out.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $op     = 'tap-cvv-op';
my $secret = 'cvv_secret_731';
# Distinctive strings, so that finding one in the log is never a coincidence
# (a bare 3-digit CVV would match timestamps and PIDs).
my @guesses = map { sprintf('cvv_guess_%02d', $_) } 1 .. 20;

sub setup
{
	my ($node) = @_;
	$node->safe_psql('postgres', qq{
		CREATE EXTENSION opledger;
		SELECT opledger.register_tool('tap.card', 'non_idempotent_write', redact => '{/cvv}');
	});
	is($node->safe_psql('postgres',
			qq{SELECT decision FROM opledger.op_begin('$op', 'tap.card', '{"amount": 12.5, "cvv": "$secret"}')}),
		'execute', $node->name . ': the operation is created');
	return;
}

# One wrong guess per transaction, each rolled back.  Odd guesses: the client
# gets OL001 and sends ROLLBACK.  Even ones: a DO block catches OL001 (what a
# looping agent does inside the database), then the transaction rolls back.
# Returns how many OL001 the client saw or the block caught.
sub guess
{
	my ($node, @tries) = @_;
	my $sql = "\\set VERBOSITY verbose\n";
	my $i = 0;
	for my $cvv (@tries)
	{
		my $call = qq{opledger.op_begin('$op', 'tap.card', '{"amount": 12.5, "cvv": "$cvv"}')};
		if ($i++ % 2 == 0)
		{
			$sql .= "BEGIN;\nSELECT decision FROM $call;\nROLLBACK;\n";
		}
		else
		{
			$sql .= "BEGIN;\nDO \$\$ BEGIN PERFORM $call; "
			  . "EXCEPTION WHEN SQLSTATE 'OL001' THEN RAISE NOTICE 'caught a rejected reuse'; END \$\$;\nROLLBACK;\n";
		}
	}
	my ($out, $err) = ('', '');
	$node->psql('postgres', $sql, stdout => \$out, stderr => \$err, on_error_stop => 0);
	my $rejected = () = $err =~ /ERROR:  OL001:/g;
	my $caught   = () = $err =~ /NOTICE:  00000: caught a rejected reuse/g;
	return $rejected + $caught;
}

# The test framework logs every statement (log_statement = all), which writes any
# argument to the log whatever opledger does; test the defaults an operator has.
my $log_conf = "log_statement = none\n";

sub log_since
{
	my ($node, $offset) = @_;
	return slurp_file($node->logfile, $offset);
}

# ---- preloaded -------------------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('monitor');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'opledger'\n$log_conf");
$node->start;
setup($node);

my $ledger_before = $node->safe_psql('postgres', qq{
	SELECT o.status || '/' || o.attempt || '/' || (SELECT count(*) FROM opledger.events e WHERE e.operation_id = o.operation_id)
	FROM opledger.operations o WHERE o.operation_id = '$op'});

my $offset = -s $node->logfile;
is(guess($node, @guesses), 20, 'each of the 20 wrong CVVs got OL001 (10 seen by the client, 10 caught in a DO block)');

is($node->safe_psql('postgres', qq{
	SELECT o.status || '/' || o.attempt || '/' || (SELECT count(*) FROM opledger.events e WHERE e.operation_id = o.operation_id)
	FROM opledger.operations o WHERE o.operation_id = '$op'}),
	$ledger_before, 'the rolled-back guesses left the ledger as it was (status, attempt, no event)');

is($node->safe_psql('postgres', qq{
	SELECT tenant || '|' || tool || '|' || rejections || '|' || (first_at <= last_at) || '|' || (last_role = current_user)
	FROM opledger.rejected_reuses WHERE operation_id = '$op'}),
	'|tap.card|20|true|true',
	'opledger.rejected_reuses counts 20 rejections of the operation, in spite of the rollbacks');
is($node->safe_psql('postgres', 'SELECT count(*) FROM opledger.rejected_reuses'),
	'1', 'one row: nothing but the guessed operation');

my $log = log_since($node, $offset);
my $lines = () = $log =~ /LOG:  opledger: rejected reuse of an operation ID/g;
is($lines, 20, 'the server log has one LOG line per rejection');
like($log, qr/rejected reuse of an operation ID\n.*DETAIL:  Tenant "[^"]*", role "[^"]+"\./,
	'the LOG line names the tenant and the role');
unlike($log, qr/rejected reuse of an operation ID\n.*DETAIL:  [^\n]*(?:\Q$op\E|tap\.card)/,
	'and not the operation ID or the tool, values of the call');
my @leaked = grep { index($log, $_) >= 0 } (@guesses, $secret);
is_deeply(\@leaked, [], 'no tried CVV (and not the stored one) appears anywhere in the server log')
  or diag("leaked: @leaked");

is($node->safe_psql('postgres', "SELECT kind FROM opledger.rejected_reuses WHERE operation_id = '$op'"),
	'reuse', 'its kind is reuse');

# ---- a redacted result, guessed by success reports in savepoints ----------
#
# A tool that redacts /pin in its results stores "[REDACTED]" and compares later
# success reports by a keyed fingerprint.  Reporting guesses for the operation that
# already succeeded, each in a savepoint rolled back, leaves no event; every report
# that differs from the stored result is still counted (kind result_mismatch) and
# logged, the one that matches is not.

my $pin_op = 'tap-pin-op';
my $pin    = 'pin_secret_4821';
my @pin_guesses = map { sprintf('pin_guess_%02d', $_) } 1 .. 12;
$node->safe_psql('postgres', qq{
	SELECT opledger.register_tool('tap.pin', 'non_idempotent_write', redact => '{/pin}');
	SELECT decision FROM opledger.op_begin('$pin_op', 'tap.pin', '{"card": 1}');
	SELECT status FROM opledger.op_succeed('$pin_op', '{"pin": "$pin", "ok": true}', attempt => 1);
});
my $pin_state = qq{
	SELECT o.status || '/' || o.duplicate_effects || '/' || (SELECT count(*) FROM opledger.events e WHERE e.operation_id = o.operation_id)
	FROM opledger.operations o WHERE o.operation_id = '$pin_op'};
my $pin_before = $node->safe_psql('postgres', $pin_state);
$offset = -s $node->logfile;
my $pin_sql = '';
for my $g (@pin_guesses[ 0 .. 5 ], $pin, @pin_guesses[ 6 .. 11 ])
{
	$pin_sql .= "BEGIN;\nSAVEPOINT guess;\n"
	  . "SELECT status FROM opledger.op_succeed('$pin_op', '{\"pin\": \"$g\", \"ok\": true}', attempt => 1);\n"
	  . "ROLLBACK TO SAVEPOINT guess;\nROLLBACK;\n";
}
$node->safe_psql('postgres', $pin_sql);
is($node->safe_psql('postgres', $pin_state), $pin_before,
	'result guesses: the rolled-back reports left the operation as it was (status, no duplicate effect, no event)');
is($node->safe_psql('postgres', qq{
	SELECT kind || '|' || tool || '|' || rejections || '|' || (last_role = current_user)
	FROM opledger.rejected_reuses WHERE operation_id = '$pin_op'}),
	'result_mismatch|tap.pin|12|true',
	'result guesses: opledger.rejected_reuses counts the 12 mismatching reports (kind result_mismatch), in spite of the rollbacks; the matching one is not counted');
is($node->safe_psql('postgres', "SELECT count(*) FROM opledger.rejected_reuses WHERE operation_id = '$op' AND kind = 'reuse'"),
	'1', 'result guesses: the rejected reuses keep their own row');
$log = log_since($node, $offset);
$lines = () = $log =~ /LOG:  opledger: a success report differs from the stored redacted result/g;
is($lines, 12, 'result guesses: one LOG line per mismatching report');
like($log, qr/differs from the stored redacted result\n.*DETAIL:  Tenant "[^"]*", role "[^"]+"\./,
	'result guesses: the LOG line names the tenant and the role');
unlike($log, qr/differs from the stored redacted result\n.*DETAIL:  [^\n]*(?:\Q$pin_op\E|tap\.pin)/,
	'result guesses: and not the operation ID or the tool');
@leaked = grep { index($log, $_) >= 0 } (@pin_guesses, $pin);
is_deeply(\@leaked, [], 'result guesses: no guessed PIN (and not the stored one) appears in the server log')
  or diag("leaked: @leaked");

# A restart empties the table (counts are since the server started).
$node->restart;
is($node->safe_psql('postgres', 'SELECT count(*) FROM opledger.rejected_reuses'),
	'0', 'after a restart the table is empty');
is(guess($node, 'cvv_guess_after_restart'), 1, 'a guess after the restart is rejected');
is($node->safe_psql('postgres', "SELECT rejections FROM opledger.rejected_reuses WHERE operation_id = '$op'"),
	'1', 'and counted from 1 again');
is($node->safe_psql('postgres', 'SELECT opledger.reset_rejected_reuses()'),
	'1', 'reset_rejected_reuses() returns the number of rows cleared');
is($node->safe_psql('postgres', 'SELECT count(*) FROM opledger.rejected_reuses'),
	'0', 'after the reset the table is empty');

# A full table: the guessing loop's row survives a flood of one-off rejections,
# and the evicted counts are kept in the tenant's overflow row.
$node->append_conf('postgresql.conf', "opledger.reuse_monitor_entries = 16\n");
$node->restart;
is(guess($node, map { "cvv_flood_$_" } 1 .. 5), 5, 'five more guesses');
my $flood = '';
for my $i (1 .. 40)
{
	$flood .= "SELECT decision FROM opledger.op_begin('tap-flood-$i', 'tap.card', '{\"amount\": 1}');\n"
	  . "SELECT decision FROM opledger.op_begin('tap-flood-$i', 'tap.card', '{\"amount\": 2}');\n";
}
$node->psql('postgres', $flood, on_error_stop => 0);
is($node->safe_psql('postgres', qq{
	SELECT count(*) <= 16, sum(rejections), count(*) FILTER (WHERE operation_id IS NULL AND tool IS NULL)
	FROM opledger.rejected_reuses}),
	't|45|1', 'full table: at most 16 rows, no rejection lost from the total, one overflow row');
is($node->safe_psql('postgres', "SELECT rejections FROM opledger.rejected_reuses WHERE operation_id = '$op'"),
	'5', 'the guessing loop (the most rejections) is never the entry evicted');
$node->stop;

# ---- not preloaded ---------------------------------------------------------

my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->append_conf('postgresql.conf', $log_conf);
$plain->start;
setup($plain);
$offset = -s $plain->logfile;
is(guess($plain, @guesses[ 0 .. 2 ]), 3, 'without preloading a reuse is still OL001');
is($plain->safe_psql('postgres', 'SELECT count(*) FROM opledger.rejected_reuses'),
	'0', 'without preloading opledger.rejected_reuses is empty');
is($plain->safe_psql('postgres', 'SELECT opledger.reset_rejected_reuses()'),
	'0', 'and reset_rejected_reuses() clears nothing');
$log = log_since($plain, $offset);
$lines = () = $log =~ /LOG:  opledger: rejected reuse of an operation ID/g;
is($lines, 3, 'without preloading each rejection is still logged');
@leaked = grep { index($log, $_) >= 0 } (@guesses, $secret);
is_deeply(\@leaked, [], 'and no CVV appears in the server log') or diag("leaked: @leaked");
is($plain->safe_psql('postgres', 'SELECT 1'), '1', 'the server is alive');
$plain->stop;

done_testing();
