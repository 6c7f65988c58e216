
# Helpers shared by the opledger TAP tests: concurrent psql sessions that
# write ledger transitions and print an "ACK" line only after the server
# acknowledged the COMMIT, and checks that every acknowledged transition is
# in the ledger and nothing is half-written.

package OpLedgerTap;

use strict;
use warnings;
use IPC::Run ();
use Test::More;
use PostgreSQL::Test::Utils;

our @EXPORT_OK = qw(setup_ledger start_sessions finish_sessions check_acks check_consistency);
use Exporter 'import';

# Create the extension and the tools the sessions use.
sub setup_ledger
{
	my ($node) = @_;
	$node->safe_psql('postgres', q{
		CREATE EXTENSION opledger;
		SELECT opledger.register_tool('tap.charge', 'idempotent_write', lease => '1 hour', max_attempts => 10,
		                              backoff_base => '0 seconds', backoff_max => '0 seconds');
		SELECT opledger.register_tool('tap.ticket', 'non_idempotent_write', lease => '1 hour', max_attempts => 10,
		                              backoff_base => '0 seconds', backoff_max => '0 seconds');
	});
	return;
}

# One psql script per session.  Three shapes of work, each followed by an
# \echo that psql only reaches after the statement (= its autocommit or the
# explicit COMMIT) returned successfully:
#   a) op_begin, op_succeed in two autocommit statements
#   b) BEGIN; op_begin; op_succeed; COMMIT  (must be all or nothing)
#   c) op_begin, op_fail(retryable), op_begin (attempt 2), op_mark_unknown
sub _script
{
	my ($prefix, $nops) = @_;
	my $s = "\\set ON_ERROR_STOP 1\n\\o /dev/null\n";
	for my $i (1 .. $nops)
	{
		my $id = "$prefix-$i";
		my $shape = $i % 3;
		if ($shape == 0)
		{
			$s .= "SELECT decision FROM opledger.op_begin('$id', 'tap.charge', '{\"n\": $i, \"cur\": \"EUR\"}', worker => '$prefix');\n"
			  . "\\echo ACK begin1 $id\n"
			  . "SELECT status FROM opledger.op_succeed('$id', '{\"ok\": $i}', attempt => 1, provider_ref => 'ref-$id');\n"
			  . "\\echo ACK succeeded $id\n";
		}
		elsif ($shape == 1)
		{
			$s .= "BEGIN;\n"
			  . "SELECT decision FROM opledger.op_begin('$id', 'tap.charge', '{\"n\": $i}', worker => '$prefix');\n"
			  . "SELECT status FROM opledger.op_succeed('$id', '{\"ok\": $i}', attempt => 1);\n"
			  . "COMMIT;\n"
			  . "\\echo ACK txsucceeded $id\n";
		}
		else
		{
			$s .= "SELECT decision FROM opledger.op_begin('$id', 'tap.ticket', '{\"ref\": \"$id\"}', worker => '$prefix');\n"
			  . "\\echo ACK begin1 $id\n"
			  . "SELECT status FROM opledger.op_fail('$id', '{\"http\": 503}', retryable => true, attempt => 1);\n"
			  . "\\echo ACK retryable $id\n"
			  . "SELECT decision FROM opledger.op_begin('$id', 'tap.ticket', '{\"ref\": \"$id\"}', worker => '$prefix');\n"
			  . "\\echo ACK begin2 $id\n"
			  . "SELECT status FROM opledger.op_mark_unknown('$id', '{\"timeout\": true}', attempt => 2);\n"
			  . "\\echo ACK unknown $id\n";
		}
	}
	return $s;
}

# Start $n psql sessions against $node, each running its own script.
sub start_sessions
{
	my ($node, $round, $n, $nops) = @_;
	my @s;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	for my $k (1 .. $n)
	{
		my $prefix = "r$round-s$k";
		my $file = "$dir/$prefix.sql";
		open(my $fh, '>', $file) or die "cannot write $file: $!";
		print $fh _script($prefix, $nops);
		close($fh);
		my %sess = (prefix => $prefix, out => '', err => '');
		$sess{h} = IPC::Run::start(
			[ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'), '-f', $file ],
			'<', \undef, '>', \$sess{out}, '2>', \$sess{err},
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		push @s, \%sess;
	}
	return \@s;
}

# Wait for the sessions to end (they end by themselves when the server goes
# away, or when their script is done).  Returns (\@acks, $cut) where $cut is
# the number of sessions that did not finish their script.
sub finish_sessions
{
	my ($sessions) = @_;
	my (@acks, $cut);
	$cut = 0;
	for my $s (@$sessions)
	{
		eval { $s->{h}->finish; 1 } or do { diag("session $s->{prefix}: $@"); $s->{h}->kill_kill; };
		my $rc = $s->{h}->result(0);
		$cut++ if defined($rc) && $rc != 0;
		for my $line (split /\n/, $s->{out})
		{
			push @acks, [ $1, $2 ] if $line =~ /^ACK (\S+) (\S+)$/;
		}
	}
	return (\@acks, $cut);
}

# Every acknowledged transition must be in the ledger.  Returns the list of
# violations (empty when all is well).
sub check_acks
{
	my ($node, $acks) = @_;
	my %want;    # id -> {kind => 1}
	$want{ $_->[1] }{ $_->[0] } = 1 for @$acks;
	return [] unless %want;
	# one round trip: every op's row status plus the (status_after, attempt) pairs of its events
	my $rows = $node->safe_psql('postgres', q{
		SELECT o.operation_id, o.status, o.attempt,
		       coalesce(string_agg(e.status_after::text || ':' || coalesce(e.attempt, 0), ',' ORDER BY e.event_id), '')
		  FROM opledger.operations o LEFT JOIN opledger.events e USING (operation_id)
		 GROUP BY o.operation_id, o.status, o.attempt});
	my %have;
	for my $line (split /\n/, $rows)
	{
		my ($id, $status, $attempt, $ev) = split /\|/, $line, 4;
		$have{$id} = { status => $status, attempt => $attempt, ev => { map { $_ => 1 } split /,/, ($ev // '') } };
	}
	my @bad;
	for my $id (sort keys %want)
	{
		my $h = $have{$id};
		if (!$h) { push @bad, "$id: acknowledged (" . join(',', sort keys %{ $want{$id} }) . ") but no row"; next; }
		for my $k (sort keys %{ $want{$id} })
		{
			my $ok =
			    $k eq 'begin1'      ? $h->{ev}{'pending:1'}
			  : $k eq 'begin2'      ? $h->{ev}{'pending:2'}
			  : $k eq 'retryable'   ? $h->{ev}{'retryable:1'}
			  : $k eq 'unknown'     ? $h->{status} eq 'unknown'
			  : $k eq 'succeeded'   ? $h->{status} eq 'succeeded'
			  : $k eq 'txsucceeded' ? $h->{status} eq 'succeeded'
			  :                       0;
			push @bad, "$id: acknowledged '$k' lost (row status $h->{status}, attempt $h->{attempt})" unless $ok;
		}
	}
	return \@bad;
}

# Nothing half-written: each row's status is its last event's status_after,
# every row has events and every event a row, explicit transactions are all
# or nothing, the status counters behind opledger.metrics match the rows, and
# the btree indexes of the ledger pass amcheck.
sub check_consistency
{
	my ($node, $label) = @_;
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM opledger.operations o
		 WHERE o.status IS DISTINCT FROM (SELECT e.status_after FROM opledger.events e
		                                   WHERE e.operation_id = o.operation_id ORDER BY e.event_id DESC LIMIT 1)}),
		'0', "$label: every operation row's status equals its last event's status_after");
	is($node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM opledger.events e WHERE NOT EXISTS (SELECT 1 FROM opledger.operations o WHERE o.operation_id = e.operation_id))
		     + (SELECT count(*) FROM opledger.operations o WHERE NOT EXISTS (SELECT 1 FROM opledger.events e WHERE e.operation_id = o.operation_id))}),
		'0', "$label: no event without its operation, no operation without events");
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM (
		  SELECT operation_id, event_id, status_before,
		         lag(status_after) OVER (PARTITION BY operation_id ORDER BY event_id) AS prev_after,
		         row_number() OVER (PARTITION BY operation_id ORDER BY event_id) AS rn
		    FROM opledger.events) x
		 WHERE rn > 1 AND status_before IS DISTINCT FROM prev_after}),
		'0', "$label: each event's status_before equals the previous event's status_after");
	# shape (b): op_begin + op_succeed in one transaction -> never a pending row left
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM opledger.operations
		 WHERE tool = 'tap.charge' AND status = 'pending'
		   AND (regexp_match(operation_id, '-(\d+)$'))[1]::int % 3 = 1}),
		'0', "$label: explicit transactions (op_begin+op_succeed) are all or nothing");
	is($node->safe_psql('postgres', q{
		SELECT (SELECT ops_total FROM opledger.metrics) = (SELECT count(*) FROM opledger.operations)
		   AND (SELECT ops_by_status FROM opledger.metrics)
		       = (SELECT jsonb_object_agg(s::text, (SELECT count(*) FROM opledger.operations o WHERE o.status = s))
		            FROM unnest(enum_range(NULL::opledger.op_status)) AS s)}),
		't', "$label: opledger.metrics status counts match the rows");
	my ($ret, $out, $err) = $node->psql('postgres', q{
		SELECT count(bt_index_check(c.oid, true))
		  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		  JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_am am ON am.oid = c.relam
		 WHERE n.nspname = 'opledger' AND am.amname = 'btree'});
	ok($ret == 0 && $out > 0, "$label: amcheck bt_index_check(heapallindexed) passes on all $out ledger btree indexes")
	  or diag("amcheck: $err");
	return;
}

1;
