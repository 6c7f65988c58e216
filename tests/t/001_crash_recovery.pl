
# Crash recovery with ledger writes in flight.
#
# Several psql sessions drive op_begin / op_succeed / op_fail / op_mark_unknown
# (autocommit and explicit transactions) and print an ACK line only after the
# server acknowledged each COMMIT.  Mid-run the server is crashed - first with
# `pg_ctl stop -m immediate`, then by SIGKILL of the postmaster - and
# restarted.  After recovery every acknowledged transition must be there and
# nothing may be half-written.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use OpLedgerTap qw(setup_ledger start_sessions finish_sessions check_acks check_consistency);

my $sessions = 6;
my $nops     = 3000;    # per session: far more than can finish before the crash

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
# durability as in production (the test framework turns fsync off)
$node->append_conf('postgresql.conf', "fsync = on\nsynchronous_commit = on\nmax_connections = 40\n");
$node->start;
setup_ledger($node);
$node->safe_psql('postgres', 'CREATE EXTENSION amcheck');

my $total_acks = 0;
for my $round (1 .. 2)
{
	my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM opledger.operations');
	my $s = start_sessions($node, $round, $sessions, $nops);

	# let the sessions get well into their scripts, then crash
	$node->poll_query_until('postgres',
		"SELECT count(*) >= $before + 900 FROM opledger.operations")
	  or die "sessions made no progress";
	if ($round == 1)
	{
		note "round 1: pg_ctl stop -m immediate with writes in flight";
		$node->stop('immediate');
	}
	else
	{
		note "round 2: SIGKILL of the postmaster with writes in flight";
		my $pm = $node->{_pid};
		$node->kill9;
		# wait (bounded) until the postmaster is really gone; its backends
		# notice its death and exit by themselves
		for (1 .. 100)
		{
			last unless kill(0, $pm);
			select(undef, undef, undef, 0.1);
		}
	}
	my ($acks, $cut) = finish_sessions($s);
	$total_acks += scalar(@$acks);
	ok($cut > 0, "round $round: the crash cut $cut of $sessions sessions mid-script (writes were in flight)");
	ok(scalar(@$acks) > 0, "round $round: " . scalar(@$acks) . " acknowledged transitions before the crash");

	# restart (after SIGKILL the old shared memory may linger a moment)
	my $started = 0;
	for (1 .. 30)
	{
		last if ($started = $node->start(fail_ok => 1));
		# a failed start leaves the node believing the stale pid file; forget it and retry
		$node->{_pid} = undef;
		sleep 1;
	}
	ok($started, "round $round: server restarted and recovered");

	my $bad = check_acks($node, $acks);
	is(scalar(@$bad), 0, "round $round: every acknowledged transition survived the crash (" . scalar(@$acks) . " ACKs)")
	  or diag(join("\n", @$bad[ 0 .. ($#$bad < 20 ? $#$bad : 20) ]));
	check_consistency($node, "round $round");
}

# The recovered ledger keeps deciding correctly.
my ($succ) = grep { length } split /\n/, $node->safe_psql('postgres',
	q{SELECT operation_id FROM opledger.operations WHERE status = 'succeeded' ORDER BY operation_id LIMIT 1});
my $args = $node->safe_psql('postgres', "SELECT args::text FROM opledger.operations WHERE operation_id = '$succ'");
is($node->safe_psql('postgres', "SELECT decision FROM opledger.op_begin('$succ', 'tap.charge', '$args')"),
	'replay', 'after recovery a succeeded operation is answered replay (never executed again)');
my ($pend) = grep { length } split /\n/, $node->safe_psql('postgres',
	q{SELECT operation_id FROM opledger.operations WHERE status = 'pending' AND tool = 'tap.charge' ORDER BY operation_id LIMIT 1});
SKIP:
{
	skip 'no pending op left by the crash', 1 unless $pend;
	my $pargs = $node->safe_psql('postgres', "SELECT args::text FROM opledger.operations WHERE operation_id = '$pend'");
	is($node->safe_psql('postgres', "SELECT decision FROM opledger.op_begin('$pend', 'tap.charge', '$pargs')"),
		'in_progress', 'after recovery an op left pending by the crash is still leased (in_progress), not re-executed');
}
note "total acknowledged transitions checked: $total_acks";

$node->stop;
done_testing();
