// mongosh's admin helpers against mongosim: each must run without error
// and read the fields mongod 8.0 answers with. Run by TestMongosh.
function check(cond, what) {
  if (!cond) throw new Error('mongosh interop: ' + what);
}

const conf = rs.conf();
check(conf._id === 'rs0' && conf.members.length === 1 && conf.members[0].votes === 1, 'rs.conf() ' + JSON.stringify(conf));

const repl = db.getReplicationInfo();
check(!repl.errmsg && repl.logSizeMB === 990 && repl.tFirst && repl.tLast, 'getReplicationInfo ' + JSON.stringify(repl));
rs.printReplicationInfo();

const status = rs.status();
check(status.members[0].stateStr === 'PRIMARY' && status.optimes.lastCommittedOpTime.ts, 'rs.status() ' + JSON.stringify(status));

const t = db.getSiblingDB('interop');
t.createUser({ user: 'bob', pwd: 'pw', roles: ['readWrite'] });
const users = t.getUsers();
check(users.users.length === 1 && users.users[0].user === 'bob', 'db.getUsers() ' + JSON.stringify(users));
check(t.auth('bob', 'pw').ok === 1, 'auth as a created user');

t.c.insertMany([{ a: 1 }, { a: 2 }, { a: 3 }]);
const stats = t.c.stats();
check(stats.count === 3 && stats.size > 0 && stats.nindexes === 1 && stats.indexSizes._id_ > 0, 'db.c.stats() ' + JSON.stringify(stats));
check(Number(t.stats().objects) === 3, 'db.stats() ' + JSON.stringify(t.stats()));

const ops = db.currentOp();
check(ops.inprog.length >= 1 && ops.inprog.some(op => op.opid !== undefined && op.active), 'db.currentOp() ' + JSON.stringify(ops));

const plan = t.c.find({ a: { $gt: 1 } }).explain();
check(plan.queryPlanner.winningPlan.stage === 'COLLSCAN' && plan.queryPlanner.namespace === 'interop.c', 'find().explain() ' + JSON.stringify(plan));
const exec = t.c.find({ a: { $gt: 1 } }).explain('executionStats').executionStats;
check(exec.nReturned === 2 && exec.totalDocsExamined === 3, 'explain("executionStats") ' + JSON.stringify(exec));
const agg = t.c.explain('executionStats').aggregate([{ $group: { _id: null, n: { $sum: 1 } } }]);
check(agg.stages.length === 2 && Number(agg.stages[1].nReturned) === 1, 'aggregate explain ' + JSON.stringify(agg));

const ss = db.serverStatus();
check(ss.opcounters.insert >= 3 && ss.connections.current >= 1 && ss.repl.setName === 'rs0' && ss.mem.bits === 64, 'serverStatus');
check(db.adminCommand({ getParameter: 1, featureCompatibilityVersion: 1 }).featureCompatibilityVersion.version === '8.0', 'FCV');
print('mongosh interop: ok');
