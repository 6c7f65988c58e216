
# Synchronous streaming replication and failover.
#
# A primary with one synchronous standby (synchronous_standby_names =
# 'standby1', synchronous_commit = remote_apply).  Sessions write ledger
# transitions and ACK each acknowledged COMMIT; the primary is killed
# mid-run (pg_ctl stop -m immediate) and the standby promoted.  The promoted
# standby must hold every acknowledged transition, nothing half-written, and
# keep deciding (replay for succeeded ops, execute for new ones).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use OpLedgerTap qw(setup_ledger start_sessions finish_sessions check_acks check_consistency);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "fsync = on\nmax_connections = 40\n");
$primary->start;
setup_ledger($primary);
$primary->safe_psql('postgres', 'CREATE EXTENSION amcheck');
$primary->backup('bk');

# Make the standby synchronous only after the backup (until the standby runs, a commit
# would wait), and before the standby starts: a commit waits only once the checkpointer
# has read the new setting, and the standby's start gives it time to, after which
# nothing commits until the standby is synchronous.
$primary->safe_psql('postgres', q{
	ALTER SYSTEM SET synchronous_standby_names = 'standby1';
	ALTER SYSTEM SET synchronous_commit = 'remote_apply';
	SELECT pg_reload_conf();
});

my $standby = PostgreSQL::Test::Cluster->new('standby1');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->append_conf('postgresql.conf', "fsync = on\n");
$standby->start;

ok($primary->poll_query_until('postgres',
	q{SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby1'}),
	'standby1 is a synchronous standby');

# remote_apply: a transition acknowledged on the primary is visible on the standby at once
$primary->safe_psql('postgres', q{
	SELECT opledger.op_begin('probe-1', 'tap.charge', '{"probe": 1}');
	SELECT opledger.op_succeed('probe-1', '{"ok": true}', attempt => 1);
});
is($standby->safe_psql('postgres', q{SELECT status FROM opledger.operations WHERE operation_id = 'probe-1'}),
	'succeeded', 'remote_apply: an acknowledged transition is visible on the standby immediately');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM opledger.events WHERE operation_id = 'probe-1'}),
	$primary->safe_psql('postgres', q{SELECT count(*) FROM opledger.events WHERE operation_id = 'probe-1'}),
	'remote_apply: its audit trail is on the standby too');

my $s = start_sessions($primary, 1, 4, 3000);
$primary->poll_query_until('postgres', 'SELECT count(*) >= 600 FROM opledger.operations')
  or die 'sessions made no progress';
note 'killing the primary with writes in flight';
$primary->stop('immediate');
my ($acks, $cut) = finish_sessions($s);
ok($cut > 0, "the primary's crash cut $cut of 4 sessions mid-script");
ok(scalar(@$acks) > 0, scalar(@$acks) . ' transitions were acknowledged before the crash');

$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'), 'standby promoted');

my $bad = check_acks($standby, $acks);
is(scalar(@$bad), 0, 'the promoted standby holds every acknowledged transition (' . scalar(@$acks) . ' ACKs)')
  or diag(join("\n", @$bad[ 0 .. ($#$bad < 20 ? $#$bad : 20) ]));
check_consistency($standby, 'promoted standby');

# the new primary keeps deciding
is($standby->safe_psql('postgres', q{SELECT decision FROM opledger.op_begin('probe-1', 'tap.charge', '{"probe": 1}')}),
	'replay', 'promoted standby answers replay for an op that succeeded on the old primary');
is($standby->safe_psql('postgres', q{SELECT decision FROM opledger.op_begin('after-failover-1', 'tap.charge', '{"n": 1}')}),
	'execute', 'promoted standby accepts new operations');
is($standby->safe_psql('postgres', q{SELECT status FROM opledger.op_succeed('after-failover-1', '{"ok": 1}', attempt => 1)}),
	'succeeded', 'and records their outcome');

$standby->stop;
done_testing();
