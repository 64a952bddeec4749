'use strict';
// test_ioredis.js - the virtual verbs through ioredis, an unmodified Node.js client.
//
// The same stories as test_redis_py.py (a conveyor, a job queue with leases, a
// lock, versioned writes, a rate limiter), told with `redis.call('VERB', ...)`,
// plus a pipeline, a MULTI, auto-pipelining and several connections popping
// one queue. It starts its own redis-server (free port, temp dir, no
// persistence) and the real verbproxy binary (VP_BINARY) in front of it.
//
//     VP_BINARY=build/verbproxy node --test tests/clients/test_ioredis.js
//
// In the cluster variant (ctest's clients-cluster/ioredis: tests/support/
// cluster_run.py starts a 3 + 3 Redis Cluster and sets VP_TEST_UPSTREAM_MODE=
// cluster and VP_TEST_CLUSTER_NODES) no redis-server is started: the proxy
// runs with --upstream-mode cluster in front of that cluster, every primary is
// flushed before each test, the stories over keys of one slot run, those
// over several slots skip (`standalone`), and the cluster's own run
// (`clusterOnly`).
//
// (run_ioredis.sh installs ioredis first when tests/clients/node_modules is
// missing). VP_TEST_VERBOSE=1 prints verbproxy's stderr at the end. Every
// wait polls a condition until a deadline; nothing sleeps a fixed time.

const { describe, it, before, after, beforeEach } = require('node:test');
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const Redis = require('ioredis');

const REDIS_SERVER = process.env.VP_TEST_REDIS_SERVER || '/usr/bin/redis-server';
const START_DEADLINE_MS = 10000;
const STOP_DEADLINE_MS = 10000;
const START_ATTEMPTS = 3; // a free port can be taken between probing and binding

// The servers die with this process: on a normal exit or a signal here, and,
// through setpriv's parent-death signal, when it is killed outright.
const children = new Set();
process.on('exit', () => {
    for (const c of children) c.kill('SIGKILL');
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(1));
const SETPRIV = ['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--'];

function freePort() {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.on('error', reject);
        srv.listen(0, '127.0.0.1', () => {
            const { port } = srv.address();
            srv.close(() => resolve(port));
        });
    });
}

// True when something on port replies +PONG to a PING (raw socket, no client retries).
function answersPing(port) {
    return new Promise((resolve) => {
        const s = net.connect({ port, host: '127.0.0.1' });
        let got = '';
        const done = (ok) => {
            s.destroy();
            resolve(ok);
        };
        s.setTimeout(500, () => done(false));
        s.on('error', () => done(false));
        s.on('connect', () => s.write('PING\r\n'));
        s.on('data', (d) => {
            got += d.toString();
            if (got.includes('\r\n')) done(got.startsWith('+PONG'));
        });
        s.on('close', () => done(false));
    });
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 10));

async function waitUntil(cond, deadlineMs, what) {
    const end = Date.now() + deadlineMs;
    while (Date.now() < end) {
        if (await cond()) return;
        await tick();
    }
    throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
}

// One child process (redis-server or verbproxy) with its log in a temp dir.
// `prepare` (optional) runs before each attempt (a tls-port picked anew).
class Server {
    constructor(name, argvForPort, dir, prepare = async () => {}) {
        this.name = name;
        this.argvForPort = argvForPort;
        this.prepare = prepare;
        this.dir = dir;
        this.logPath = path.join(dir, `${name}.log`);
        this.child = null;
        this.exited = null; // {code, signal} once it exited
    }

    async start() {
        let last = '';
        for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
            this.port = await freePort();
            await this.prepare();
            const [cmd, ...args] = [...SETPRIV, ...this.argvForPort(this.port)];
            const log = fs.openSync(this.logPath, 'a');
            const child = childProcess.spawn(cmd, args, { cwd: this.dir, stdio: ['ignore', log, log] });
            fs.closeSync(log);
            this.child = child;
            this.exited = null;
            children.add(child);
            child.on('exit', (code, signal) => {
                this.exited = { code, signal };
                children.delete(child);
            });
            child.on('error', (e) => {
                this.exited = { code: null, signal: null, error: e };
                children.delete(child);
            });
            try {
                await waitUntil(async () => this.exited !== null || (await answersPing(this.port)),
                    START_DEADLINE_MS, `${this.name} to answer PING on port ${this.port}`);
                if (this.exited === null) return;
                last = `${this.name} exited at start: ${JSON.stringify(this.exited)}`;
            } catch (e) {
                last = e.message;
                this.kill();
            }
        }
        throw new Error(`${this.name} did not start: ${last}\n${this.log()}`);
    }

    // SIGTERM, wait for the exit; true when the process stopped cleanly.
    async stop() {
        const child = this.child;
        if (!child) return true;
        this.child = null;
        if (this.exited !== null) {
            console.error(`${this.name} had exited by itself: ${JSON.stringify(this.exited)}`);
            return false;
        }
        child.kill('SIGTERM');
        try {
            await waitUntil(() => this.exited !== null, STOP_DEADLINE_MS, `${this.name} to exit`);
        } catch (e) {
            child.kill('SIGKILL');
            console.error(`${this.name} ignored SIGTERM: killed`);
            return false;
        }
        const { code, signal } = this.exited;
        if (code === 0 || signal === 'SIGTERM') return true;
        console.error(`${this.name} stopped badly: ${JSON.stringify(this.exited)}`);
        return false;
    }

    kill() {
        if (this.child && this.exited === null) this.child.kill('SIGKILL');
        this.child = null;
    }

    log() {
        try {
            return `---- ${this.name} log ----\n${fs.readFileSync(this.logPath, 'utf8')}---- end ----`;
        } catch (e) {
            return `(no ${this.name} log)`;
        }
    }
}

// The cluster variant's nodes [{host, port}], primaries first; null outside it.
const CLUSTER = process.env.VP_TEST_UPSTREAM_MODE === 'cluster'
    ? process.env.VP_TEST_CLUSTER_NODES.split(',').map((a) => {
        const i = a.lastIndexOf(':');
        return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
    })
    : null;
const binary = process.env.VP_BINARY && path.resolve(process.env.VP_BINARY); // servers run in their temp dir
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vt-clients-'));
const redisServer = new Server('redis-server', (port) => [REDIS_SERVER, '--port', String(port), '--bind',
    '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no'], dir);

// Certificates for the proxy's tls-port (make_certs.sh: a CA, the proxy's
// certificate from it, another CA).
const certs = path.join(dir, 'certs');
fs.mkdirSync(certs);
childProcess.execFileSync('bash', [path.join(__dirname, 'make_certs.sh'), certs], { stdio: ['ignore', 'pipe', 'pipe'] });

let tlsPort = 0; // the proxy's tls-port, picked before each start attempt
const proxy = new Server('verbproxy', (port) => [binary, '--port', String(port), '--bind', '127.0.0.1',
    '--upstream', CLUSTER ? `${CLUSTER[0].host}:${CLUSTER[0].port}` : `127.0.0.1:${redisServer.port}`,
    ...(CLUSTER ? ['--upstream-mode', 'cluster'] : []), '--loglevel', 'warning', '--shutdown-timeout', '0',
    '--conveyor', 'cv:*', // conveyor keys (the ZTICK story on them); no other story names such keys
    '--tls-port', String(tlsPort),
    '--tls-cert-file', path.join(certs, 'server.crt'), '--tls-key-file', path.join(certs, 'server.key'),
    '--tls-auth-clients', 'no'], dir, async () => {
    tlsPort = await freePort();
});

const clients = [];
function client(opts = {}) {
    const c = new Redis({
        host: '127.0.0.1',
        port: proxy.port,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null, // a lost connection is a failure, not something to hide
        ...opts,
    });
    c.on('error', () => {}); // the failing command reports it
    clients.push(c);
    return c;
}

// A client on the proxy's tls-port, checking its certificate against `ca`.
function tlsClient(ca = 'ca.crt', opts = {}) {
    return client({ port: tlsPort, tls: { ca: fs.readFileSync(path.join(certs, ca)) }, ...opts });
}

async function stat(r, name) {
    const line = (await r.call('VERBPROXY', 'STATS')).split(/\r?\n/).find((l) => l.startsWith(`${name}:`));
    assert.ok(line, `no ${name} in VERBPROXY STATS`);
    return Number(line.slice(name.length + 1));
}

async function serverMs(r) {
    const [sec, usec] = await r.time();
    return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

// Poll Redis's clock (TIME through the proxy) until it reads at least ms.
async function waitServerTime(r, ms) {
    await waitUntil(async () => (await serverMs(r)) >= ms, 10000, `server time ${ms}`);
}

// The verb is refused with exactly this error line (ioredis keeps the 'ERR ' prefix).
async function assertError(r, text, ...args) {
    await assert.rejects(r.call(...args), (e) => {
        assert.equal(e.name, 'ReplyError', `${args.join(' ')}: ${e}`);
        assert.equal(e.message, text, `reply to ${args.join(' ')}`);
        return true;
    });
}

// A story told only outside the cluster variant (why: its reason there), and
// one told only in it.
const standalone = (why) => (name, fn) => it(name, CLUSTER ? { skip: `not in the cluster variant: ${why}` } : {}, fn);
const clusterOnly = (name, fn) => it(name, CLUSTER ? {} : { skip: 'the cluster variant\'s (clients-cluster/ioredis)' }, fn);
const SEVERAL_SLOTS = 'keys in several slots (a queue and its lease set)';

describe('verbproxy through ioredis', () => {
    let r;

    before(async () => {
        assert.ok(binary, 'set VP_BINARY to the verbproxy binary');
        try {
            if (!CLUSTER) await redisServer.start();
            await proxy.start();
        } catch (e) {
            proxy.kill();
            redisServer.kill();
            console.error(proxy.log());
            throw e;
        }
        r = client();
    });

    after(async () => {
        await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
        const clean = await proxy.stop();
        if (!clean || process.env.VP_TEST_VERBOSE) console.error(proxy.log());
        if (!CLUSTER) await redisServer.stop();
        fs.rmSync(dir, { recursive: true, force: true });
        assert.ok(clean, 'verbproxy did not stop cleanly (its log is above)');
    });

    beforeEach(async () => {
        // straight to Redis (every primary of a cluster), so a broken proxy cannot hide leftovers
        for (const node of CLUSTER || [{ host: '127.0.0.1', port: redisServer.port }]) {
            const direct = new Redis({ ...node, maxRetriesPerRequest: 0 });
            if (!CLUSTER || (await direct.call('ROLE'))[0] === 'master') await direct.flushall();
            await direct.quit();
        }
    });

    // The ZTICK story, on keys named p + ...: with p = 'cv:' they are conveyor
    // keys (the proxy runs with `conveyor cv:*`, docs/conveyor.md), where
    // ZTICK moves an offset instead of every member, with the same replies.
    const conveyorStory = (p) => async () => {
        await r.zadd(p + 'conveyor:positions', 0, 'crate-1', 10, 'crate-2', 90, 'crate-3');
        assert.deepEqual(await r.call('ZTICK', p + 'conveyor:positions', 15, 100), ['crate-3']);
        assert.deepEqual(await r.zrange(p + 'conveyor:positions', 0, -1, 'WITHSCORES'),
            ['crate-1', '15', 'crate-2', '25']);
        assert.deepEqual(await r.call('ZTICK', p + 'conveyor:positions', 80, 100, 'WITHSCORES'), ['crate-2', '105']);
        assert.deepEqual(await r.call('ZTICK', p + 'conveyor:positions', 10, 100, 'withscores'), ['crate-1', '105']);
        assert.equal(await r.exists(p + 'conveyor:positions'), 0);
        assert.deepEqual(await r.call('ZTICK', p + 'conveyor:none', 15, 100), []);

        await r.zadd(p + 'belt', 5, 'b', 5, 'a', 1, 'c', 0, 'z');
        assert.deepEqual(await r.call('ZTICK', p + 'belt', 5, 6, 'WITHSCORES'), ['c', '6', 'a', '10', 'b', '10']);
        await r.zadd(p + 'cooling', 50, 'ingot-1', 70, 'ingot-2');
        assert.deepEqual(await r.call('ZTICK', p + 'cooling', -20, 40, 'WITHSCORES'), ['ingot-2', '50']);
        await r.zadd(p + 'drift', 0, 'speck');
        assert.deepEqual(await r.call('ZTICK', p + 'drift', '0.1', '0.1', 'WITHSCORES'), ['speck', '0.10000000000000001']);

        await r.zadd(p + 'space', 'inf', 'probe', 1, 'rock');
        await assertError(r, 'ERR resulting score is not a number (NaN)', 'ZTICK', p + 'space', '-inf', 0);
        assert.deepEqual(await r.zrange(p + 'space', 0, -1, 'WITHSCORES'), ['rock', '1', 'probe', 'inf']);
        assert.deepEqual(await r.call('ZTICK', p + 'space', 1, '+inf', 'WITHSCORES'), ['probe', 'inf']);

        await assertError(r, 'ERR value is not a valid float', 'ZTICK', p + 'cooling', 'fast', 100);
        await assertError(r, 'ERR syntax error', 'ZTICK', p + 'cooling', 1, 100, 'WITHSCORE');
        await assertError(r, "ERR wrong number of arguments for 'ztick' command", 'ZTICK', p + 'cooling', 1);
        await r.set(p + 'not-a-zset', 'x');
        await assertError(r, 'WRONGTYPE Operation against a key holding the wrong kind of value',
            'ZTICK', p + 'not-a-zset', 1, 100);
        assert.equal(await r.zscore(p + 'cooling', 'ingot-1'), '30');
    };
    it('ZTICK: crates past the end of the conveyor fall off, the rest move on', conveyorStory(''));
    it('ZTICK on conveyor keys: the same story, an offset moving instead of the members', async () => {
        await conveyorStory('cv:')();
        await r.zadd('cv:line', 0, 'm0', 10, 'm10');
        assert.deepEqual(await r.call('ZTICK', 'cv:line', 5, 100), []);
        const info = await r.call('VERBPROXY', 'CONVEYOR', 'INFO', 'cv:line');
        assert.deepEqual([info[1], info[5]], [1, '5'], `INFO: ${info}`);
        assert.equal(await r.zscore('cv:line', 'm10'), '15');
    });

    standalone(SEVERAL_SLOTS)('QPOP/QACK/QEXTEND/QRECLAIM: workers lease jobs, finish some, a crashed one is reclaimed', async () => {
        await r.zadd('jobs', 2, 'send-invoice', 1, 'resize-image', 2, 'send-email', 3, 'job-c', 4, 'job-d');
        assert.deepEqual(await r.call('QPOP', 'jobs'), ['resize-image', '1']);
        let t0 = await serverMs(r);
        assert.deepEqual(await r.call('QPOP', 'jobs', 'COUNT', 2, 'LEASE', 'jobs:lease', 30000),
            ['send-email', '2', 'send-invoice', '2']);
        let t1 = await serverMs(r);
        for (const job of ['send-email', 'send-invoice']) {
            const deadline = Number(await r.zscore('jobs:lease', job));
            assert.ok(t0 + 30000 <= deadline && deadline <= t1 + 30000, `${job}: ${t0} ${deadline} ${t1}`);
        }
        assert.equal(await r.call('QACK', 'jobs:lease', 'send-email', 'never-leased'), 1);
        t0 = await serverMs(r);
        assert.equal(await r.call('QEXTEND', 'jobs:lease', 'send-invoice', 60000), 1);
        t1 = await serverMs(r);
        const deadline = Number(await r.zscore('jobs:lease', 'send-invoice'));
        assert.ok(t0 + 60000 <= deadline && deadline <= t1 + 60000, `${t0} ${deadline} ${t1}`);
        assert.equal(await r.call('QEXTEND', 'jobs:lease', 'send-email', 60000), 0);
        assert.deepEqual(await r.call('QPOP', 'jobs', 'COUNT', 0), []);

        // a worker takes job-c with a 1 ms lease and dies
        assert.deepEqual(await r.call('QPOP', 'jobs', 'LEASE', 'jobs:lease', 1), ['job-c', '3']);
        await waitServerTime(r, Number(await r.zscore('jobs:lease', 'job-c')));
        t0 = await serverMs(r);
        assert.deepEqual(await r.call('QRECLAIM', 'jobs:lease', 'jobs', 'NOW', 'COUNT', 10), ['job-c']);
        t1 = await serverMs(r);
        const back = Number(await r.zscore('jobs', 'job-c'));
        assert.ok(t0 <= back && back <= t1, `${t0} ${back} ${t1}`);
        assert.deepEqual(await r.call('QRECLAIM', 'jobs:lease', 'jobs', 0), []);
        assert.deepEqual(await r.zrange('jobs:lease', 0, -1), ['send-invoice']);
        assert.equal(await r.call('QACK', 'jobs:lease', 'send-invoice', 'job-c'), 1);

        // delayed jobs: only what is due
        const now = await serverMs(r);
        await r.del('jobs');
        await r.zadd('delayed', now + 3600000, 'later', now - 1000, 'due', 5, 'old');
        assert.deepEqual(await r.call('QPOP', 'delayed', 'MAXSCORE', 'NOW', 'COUNT', 10),
            ['old', '5', 'due', String(now - 1000)]);
        assert.equal(await r.call('QPOP', 'delayed', 'MAXSCORE', 'now'), null);
        assert.equal(await r.call('QPOP', 'jobs'), null);

        await assertError(r, 'ERR value is out of range, must be positive', 'QPOP', 'delayed', 'COUNT', -1);
        await assertError(r, 'ERR value is not an integer or out of range', 'QPOP', 'delayed', 'COUNT', '01');
        await assertError(r, 'ERR syntax error', 'QPOP', 'delayed', 'COUNT');
        await assertError(r, 'ERR value is not a valid float', 'QPOP', 'delayed', 'MAXSCORE', 'soon');
        await assertError(r, "ERR invalid expire time in 'qpop' command", 'QPOP', 'delayed', 'LEASE', 'l', 0);
        await assertError(r, "ERR invalid expire time in 'qextend' command", 'QEXTEND', 'l', 'job', -5);
        await assertError(r, 'ERR value is not a valid float', 'QRECLAIM', 'l', 'delayed', 'later');
        await assertError(r, "ERR wrong number of arguments for 'qack' command", 'QACK', 'l');
        await assertError(r, "ERR wrong number of arguments for 'qreclaim' command", 'QRECLAIM', 'l', 'delayed');
        assert.deepEqual(await r.zrange('delayed', 0, -1), ['later']);
    });

    it('LOCKRELEASE/LOCKRENEW/LOCKHANDOVER: only the holder of the token touches the lock', async () => {
        assert.equal(await r.set('lock:report', 'tok-A', 'PX', 30000, 'NX'), 'OK');
        assert.equal(await r.call('LOCKRELEASE', 'lock:report', 'tok-B'), 0);
        assert.equal(await r.call('LOCKRENEW', 'lock:report', 'tok-B', 90000), 0);
        assert.equal(await r.call('LOCKHANDOVER', 'lock:report', 'tok-B', 'tok-C', 90000), 0);
        assert.equal(await r.get('lock:report'), 'tok-A');
        assert.equal(await r.call('LOCKRENEW', 'lock:report', 'tok-A', 60000), 1);
        let pttl = await r.pttl('lock:report');
        assert.ok(pttl > 30000 && pttl <= 60000, String(pttl));
        assert.equal(await r.call('LOCKHANDOVER', 'lock:report', 'tok-A', 'tok-B', 45000), 1);
        assert.equal(await r.get('lock:report'), 'tok-B');
        pttl = await r.pttl('lock:report');
        assert.ok(pttl > 0 && pttl <= 45000, String(pttl));
        assert.equal(await r.call('LOCKRELEASE', 'lock:report', 'tok-A'), 0);
        assert.equal(await r.call('LOCKRELEASE', 'lock:report', 'tok-B'), 1);
        assert.equal(await r.exists('lock:report'), 0);
        assert.equal(await r.call('LOCKRENEW', 'lock:report', 'tok-B', 1000), 0);
        assert.equal(await r.call('LOCKHANDOVER', 'lock:report', 'tok-B', 'tok-C', 1000), 0);
        assert.equal(await r.exists('lock:report'), 0);

        await r.set('lock:job', 'tok', 'PX', 30000);
        await assertError(r, "ERR invalid expire time in 'lockrenew' command", 'LOCKRENEW', 'lock:job', 'tok', 0);
        await assertError(r, "ERR invalid expire time in 'lockhandover' command",
            'LOCKHANDOVER', 'lock:job', 'tok', 't2', -1);
        await assertError(r, 'ERR value is not an integer or out of range', 'LOCKRENEW', 'lock:job', 'tok', 'soon');
        await assertError(r, "ERR wrong number of arguments for 'lockrelease' command", 'LOCKRELEASE', 'lock:job');
        assert.equal(await r.get('lock:job'), 'tok');
    });

    it('HSETVER: an older version never overwrites a newer one', async () => {
        assert.equal(await r.call('HSETVER', 'doc:42', 3, 'title', 'Draft', 'body', 'hello'), 1);
        assert.deepEqual(await r.hgetall('doc:42'), { title: 'Draft', body: 'hello', version: '3' });
        assert.equal(await r.call('HSETVER', 'doc:42', 2, 'title', 'Stale'), 0);
        assert.equal(await r.hget('doc:42', 'title'), 'Draft');
        assert.equal(await r.call('HSETVER', 'doc:42', 3, 'title', 'Draft 2'), 1);
        assert.equal(await r.call('HSETVER', 'doc:42', 4, 'version', '99', 'title', 'Final'), 1);
        assert.deepEqual(await r.hgetall('doc:42'), { title: 'Final', body: 'hello', version: '4' });
        // equal as doubles, smaller as 64-bit integers
        assert.equal(await r.call('HSETVER', 'doc:big', '9007199254740993', 'f', 'a'), 1);
        assert.equal(await r.call('HSETVER', 'doc:big', '9007199254740992', 'f', 'b'), 0);
        assert.equal(await r.hget('doc:big', 'f'), 'a');

        await assertError(r, 'ERR value is not an integer or out of range', 'HSETVER', 'doc', 'v1', 'f', 'x');
        await assertError(r, "ERR wrong number of arguments for 'hsetver' command", 'HSETVER', 'doc', 1, 'f');
        await r.hset('doc:legacy', 'version', 'abc', 'f', 'old');
        await assertError(r, 'ERR hash value is not an integer', 'HSETVER', 'doc:legacy', 1, 'f', 'new');
        assert.equal(await r.hget('doc:legacy', 'f'), 'old');
        await r.set('doc:string', 'x');
        await assertError(r, 'WRONGTYPE Operation against a key holding the wrong kind of value',
            'HSETVER', 'doc:string', 1, 'f', 'v');
    });

    it('ZWINDOW: three requests a minute, and old ones leave the window', async () => {
        const t0 = await serverMs(r);
        assert.deepEqual(await r.call('ZWINDOW', 'rl:user:7', 60000, 'req-1', 'LIMIT', 3), [1, 1]);
        assert.deepEqual(await r.call('ZWINDOW', 'rl:user:7', 60000, 'req-2', 'LIMIT', 3), [1, 2]);
        assert.deepEqual(await r.call('ZWINDOW', 'rl:user:7', 60000, 'req-3', 'limit', 3), [1, 3]);
        assert.deepEqual(await r.call('ZWINDOW', 'rl:user:7', 60000, 'req-4', 'LIMIT', 3), [0, 3]);
        const t1 = await serverMs(r);
        const log = await r.zrange('rl:user:7', 0, -1, 'WITHSCORES');
        assert.deepEqual(log.filter((_, i) => i % 2 === 0), ['req-1', 'req-2', 'req-3']);
        for (const s of log.filter((_, i) => i % 2 === 1)) assert.ok(t0 <= Number(s) && Number(s) <= t1, s);
        const pttl = await r.pttl('rl:user:7');
        assert.ok(pttl > 0 && pttl <= 60000, String(pttl));
        assert.deepEqual(await r.call('ZWINDOW', 'rl:user:7', 60000, 'req-5'), [1, 4]);
        assert.deepEqual(await r.call('ZWINDOW', 'rl:user:8', 60000, 'req-1', 'LIMIT', 0), [0, 0]);

        assert.deepEqual(await r.call('ZWINDOW', 'rl:burst', 50, 'req-1', 'LIMIT', 1), [1, 1]);
        assert.deepEqual(await r.call('ZWINDOW', 'rl:burst', 50, 'req-2', 'LIMIT', 1), [0, 1]);
        await waitServerTime(r, Number(await r.zscore('rl:burst', 'req-1')) + 50);
        assert.deepEqual(await r.call('ZWINDOW', 'rl:burst', 50, 'req-3', 'LIMIT', 1), [1, 1]);
        assert.deepEqual(await r.zrange('rl:burst', 0, -1), ['req-3']);

        await assertError(r, "ERR invalid expire time in 'zwindow' command", 'ZWINDOW', 'rl', 0, 'req');
        await assertError(r, 'ERR syntax error', 'ZWINDOW', 'rl', 1000, 'req', 'LIMIT');
        await assertError(r, "ERR wrong number of arguments for 'zwindow' command", 'ZWINDOW', 'rl', 1000);
        assert.equal(await r.exists('rl'), 0);
    });

    standalone('it counts the connections of one redis-server')('ioredis connections share the upstream connection, names and all', async () => {
        // ioredis names itself as it connects (CLIENT SETNAME, CLIENT SETINFO):
        // that must not cost a client its place on the shared connection.
        const stat = async (name) => {
            const text = await r.call('VERBPROXY', 'STATS');
            const line = text.split('\r\n').find((l) => l.startsWith(`${name}:`));
            assert.ok(line, `no ${name} in VERBPROXY STATS`);
            return Number(line.split(':')[1]);
        };
        const direct = new Redis({ host: '127.0.0.1', port: redisServer.port, maxRetriesPerRequest: 0 });
        const connected = async () => Number((await direct.info('clients')).match(/connected_clients:(\d+)/)[1]);
        const pinned = await stat('clients_pinned');
        const before = await connected();
        const cs = Array.from({ length: 10 }, (_, i) => client({ connectionName: `svc-${i}` }));
        await Promise.all(cs.map(async (c, i) => {
            assert.equal(await c.set(`shared:${i}`, i), 'OK');
            assert.equal(await c.get(`shared:${i}`), String(i));
            assert.equal(await c.call('QPOP', `shared:q:${i}`), null);
        }));
        assert.equal(await stat('clients_pinned'), pinned, 'an ioredis client moved to its own connection');
        assert.equal(await connected(), before, 'Redis sees more connections for ten ioredis clients');
        // the name is there for the client that asks
        assert.equal(await cs[3].client('GETNAME'), 'svc-3');
        assert.equal(await stat('clients_pinned'), pinned + 1);
        await direct.quit();
    });

    it('ordinary commands still work', async () => {
        assert.equal(await r.set('greeting', 'hello'), 'OK');
        assert.equal(await r.get('greeting'), 'hello');
        assert.equal(await r.incrby('visits', 5), 5);
        assert.equal(await r.hset('user:1', 'name', 'Ada', 'lang', 'en'), 2);
        assert.deepEqual(await r.hgetall('user:1'), { name: 'Ada', lang: 'en' });
        assert.equal(await r.rpush('list', 'a', 'b', 'c'), 3);
        assert.deepEqual(await r.lrange('list', 0, -1), ['a', 'b', 'c']);
        assert.equal(await r.eval("return redis.call('GET', KEYS[1])", 1, 'greeting'), 'hello');
        assert.equal(await r.ping(), 'PONG');
        assert.equal(await r.dbsize(), 4);
    });

    standalone(SEVERAL_SLOTS)('a pipeline mixes verbs and plain commands, in order', async () => {
        await r.zadd('conveyor', 0, 'crate-1', 90, 'crate-2');
        await r.zadd('jobs', 1, 'job-1');
        const res = await r.pipeline()
            .set('lock:p', 'tok', 'PX', 30000)
            .call('ZTICK', 'conveyor', 15, 100)
            .get('lock:p')
            .call('QPOP', 'jobs', 'LEASE', 'jobs:lease', 30000)
            .call('LOCKRELEASE', 'lock:p', 'tok')
            .call('HSETVER', 'doc', 1, 'f', 'v')
            .incr('counter')
            .call('ZTICK', 'conveyor', 'fast', 100)
            .call('ZWINDOW', 'rl', 60000, 'req', 'LIMIT', 5)
            .call('QACK', 'jobs:lease', 'job-1')
            .exists('lock:p')
            .exec();
        const errors = res.map(([e]) => (e ? e.message : null));
        assert.deepEqual(errors, [null, null, null, null, null, null, null, 'ERR value is not a valid float',
            null, null, null]);
        assert.deepEqual(res.map(([, v]) => v), ['OK', ['crate-2'], 'tok', ['job-1', '1'], 1, 1, 1, undefined,
            [1, 1], 1, 0]);
    });

    standalone('a MULTI over keys in several slots')('a MULTI returns the verbs\' real replies', async () => {
        await r.zadd('conveyor', 0, 'crate-1', 90, 'crate-2');
        await r.zadd('jobs', 1, 'job-1', 2, 'job-2');
        await r.set('lock:t', 'tok-A', 'PX', 30000);
        const res = await r.multi()
            .call('ZTICK', 'conveyor', 15, 100, 'WITHSCORES')
            .call('QPOP', 'jobs', 'COUNT', 1, 'LEASE', 'jobs:lease', 30000)
            .call('QEXTEND', 'jobs:lease', 'job-1', 60000)
            .call('QACK', 'jobs:lease', 'job-1')
            .call('LOCKHANDOVER', 'lock:t', 'tok-A', 'tok-B', 30000)
            .call('LOCKRENEW', 'lock:t', 'tok-B', 40000)
            .get('lock:t')
            .call('HSETVER', 'doc', 7, 'title', 'T')
            .hget('doc', 'version')
            .call('ZWINDOW', 'rl', 60000, 'req', 'LIMIT', 1)
            .call('QRECLAIM', 'jobs:lease', 'jobs', 'NOW')
            .call('LOCKRELEASE', 'lock:t', 'tok-B')
            .exec();
        assert.deepEqual(res, [[null, ['crate-2', '105']], [null, ['job-1', '1']], [null, 1], [null, 1], [null, 1],
            [null, 1], [null, 'tok-B'], [null, 1], [null, '7'], [null, [1, 1]], [null, []], [null, 1]]);
        assert.deepEqual(await r.zrange('jobs', 0, -1), ['job-2']);
        assert.equal(await r.exists('lock:t', 'jobs:lease'), 0);
        assert.deepEqual(await r.call('QPOP', 'jobs'), ['job-2', '2']);
    });

    standalone('a MULTI over keys in several slots')('in a MULTI a verb with a bad argument fails alone at EXEC, as Redis\'s own commands do', async () => {
        // MULTI; SET a 1; ZADD z fast m; EXEC on Redis: [OK, -ERR value is not a valid float]
        await r.set('lock:t', 'tok', 'PX', 30000);
        const res = await r.multi()
            .set('a', '1')
            .call('ZTICK', 'conveyor', 'fast', 100)
            .call('LOCKRELEASE', 'lock:t', 'tok')
            .exec();
        assert.deepEqual(res.map(([e, v]) => (e ? e.message : v)), ['OK', 'ERR value is not a valid float', 1]);
        assert.equal(await r.get('a'), '1');
    });

    standalone('a MULTI over keys in several slots')('a MULTI with a malformed verb is discarded, as Redis does', async () => {
        await assert.rejects(r.multi().set('a', '1').call('LOCKRELEASE', 'lock:t').incr('b').exec(), (e) => {
            assert.match(e.message, /^EXECABORT /);
            assert.deepEqual(e.previousErrors.map((x) => x.message),
                ["ERR wrong number of arguments for 'lockrelease' command"]);
            return true;
        });
        assert.equal(await r.exists('a', 'b'), 0);
        assert.equal(await r.set('a', '2'), 'OK');
    });

    standalone(SEVERAL_SLOTS)('several connections and an auto-pipelining one pop every job exactly once', async () => {
        const jobs = Array.from({ length: 600 }, (_, i) => `job-${String(i).padStart(4, '0')}`);
        await r.zadd('work', ...jobs.flatMap((j, i) => [i % 7, j]));
        const taken = [];

        async function leasingWorker(c, count) {
            for (;;) {
                const got = await c.call('QPOP', 'work', 'COUNT', count, 'LEASE', 'work:lease', 60000);
                const members = got.filter((_, i) => i % 2 === 0);
                if (members.length === 0) return;
                assert.equal(await c.call('QACK', 'work:lease', ...members), members.length);
                taken.push(...members);
            }
        }
        async function burstWorker(c) {
            // ten QPOPs in one tick: ioredis sends them as one pipeline
            for (;;) {
                const replies = await Promise.all(Array.from({ length: 10 }, () => c.call('QPOP', 'work')));
                const members = replies.filter((x) => x !== null).map(([m]) => m);
                taken.push(...members);
                if (members.length < replies.length) return;
            }
        }

        const workers = [1, 2, 3, 4].map((n) => leasingWorker(client(), n));
        workers.push(burstWorker(client({ enableAutoPipelining: true })));
        workers.push(burstWorker(client({ enableAutoPipelining: true })));
        await Promise.all(workers);
        assert.equal(taken.length, jobs.length);
        assert.deepEqual([...taken].sort(), jobs);
        assert.equal(await r.exists('work', 'work:lease'), 0);
    });
    clusterOnly('a pipeline over every slot gets its replies in order, and the keys reach every primary', async () => {
        const p = r.pipeline();
        for (let i = 0; i < 600; i++) p.set(`key:${i}`, `value-${i}`).incr(`counter:${i % 50}`).get(`key:${i}`);
        const replies = await p.exec();
        for (let i = 0; i < 600; i++) {
            assert.deepEqual(replies[3 * i], [null, 'OK']);
            assert.deepEqual(replies[3 * i + 1], [null, Math.floor(i / 50) + 1]);
            assert.deepEqual(replies[3 * i + 2], [null, `value-${i}`]);
        }
        let holding = 0;
        for (const node of CLUSTER) {
            const direct = new Redis({ ...node, maxRetriesPerRequest: 0 });
            if ((await direct.call('ROLE'))[0] === 'master' && (await direct.dbsize()) > 0) holding++;
            await direct.quit();
        }
        assert.equal(holding, 3, 'the keys did not reach every primary');
    });

    clusterOnly('a MULTI on one hash tag, then every node again; one over two slots is refused', async () => {
        const res = await r.multi().set('{order:7}:state', 'paid').incrby('{order:7}:items', 3)
            .call('QPOP', '{order:7}:queue').get('{order:7}:state').exec();
        assert.deepEqual(res, [[null, 'OK'], [null, 3], [null, null], [null, 'paid']]);
        for (let i = 0; i < 30; i++) assert.equal(await r.set(`after:${i}`, i), 'OK');
        await assert.rejects(r.multi().set('{a}x', 1).set('{b}x', 2).exec(), /EXECABORT/);
        assert.equal(await r.exists('{a}x'), 0, 'EXEC ran half a transaction');
    });

    clusterOnly('a hash-tagged job queue: several connections and an auto-pipelining one pop every job once', async () => {
        const jobs = [];
        for (let i = 0; i < 300; i++) jobs.push(i % 7, `job-${String(i).padStart(4, '0')}`);
        await r.zadd('{work}', ...jobs);
        const workers = [client(), client(), client({ enableAutoPipelining: true })];
        const taken = await Promise.all(workers.map(async (w, n) => {
            const mine = [];
            for (;;) {
                const got = await w.call('QPOP', '{work}', 'COUNT', 1 + n, 'LEASE', '{work}:lease', 60000);
                const members = got.filter((_, i) => i % 2 === 0);
                if (members.length === 0) return mine;
                assert.equal(await w.call('QACK', '{work}:lease', ...members), members.length);
                await w.set(`done:${members[0]}`, n); // keys of every slot meanwhile
                mine.push(...members);
            }
        }));
        assert.equal(taken.flat().length, 300);
        assert.equal(new Set(taken.flat()).size, 300);
        assert.equal(await r.exists('{work}', '{work}:lease'), 0);
        await assertError(r, "CROSSSLOT Keys in request don't hash to the same slot",
            'QPOP', 'elsewhere', 'LEASE', '{work}:lease', 1000);
    });

    clusterOnly('pub/sub through the proxy', async () => {
        const sub = client();
        let message = null;
        sub.on('message', (ch, msg) => { message = [ch, msg]; });
        await sub.subscribe('news');
        // PUBLISH reaches whichever node the proxy sends it to, the cluster
        // bus carries it to the subscriber's node (its count is that node's
        // subscribers only): published until it arrives
        const end = Date.now() + 10000;
        while (message === null) {
            assert.ok(Date.now() < end, 'no message arrived');
            await r.publish('news', 'hello');
            await new Promise((res) => setTimeout(res, 20));
        }
        assert.deepEqual(message, ['news', 'hello']);
    });

    it('over TLS on the tls-port: commands, a pipeline and a verb', async () => {
        const t = tlsClient();
        assert.equal(await t.set('greeting', 'hello over TLS'), 'OK');
        assert.equal(await t.get('greeting'), 'hello over TLS');
        assert.equal(await t.incrby('visits', 3), 3);
        const big = 'v'.repeat(100000); // several TLS records each way
        assert.equal(await t.set('big', big), 'OK');
        assert.equal(await t.get('big'), big);
        const p = t.pipeline();
        for (let i = 0; i < 200; i++) p.rpush('tls:list', i);
        p.lrange('tls:list', 0, -1);
        const replies = await p.exec();
        assert.deepEqual(replies.slice(0, 200), Array.from({ length: 200 }, (_, i) => [null, i + 1]));
        assert.deepEqual(replies[200], [null, Array.from({ length: 200 }, (_, i) => String(i))]);
        await t.zadd('belt', 0, 'crate-1', 90, 'crate-2');
        assert.deepEqual(await t.call('ZTICK', 'belt', 15, 100, 'WITHSCORES'), ['crate-2', '105']);
        assert.deepEqual(await t.zrange('belt', 0, -1, 'WITHSCORES'), ['crate-1', '15']);
        assert.equal(await r.get('greeting'), 'hello over TLS'); // the same data on the plain port
    });

    it('over TLS, a client that trusts another CA is refused', async () => {
        const before = await stat(r, 'tls_client_handshake_failures');
        const t = tlsClient('other-ca.crt', { lazyConnect: true });
        let refused = null; // ioredis tells why on 'error'; connect() only says the connection closed
        t.on('error', (e) => {
            refused = refused || e;
        });
        await assert.rejects(t.connect());
        await waitUntil(() => refused !== null, 10000, 'the TLS error');
        assert.equal(refused.code, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', String(refused));
        // the proxy counts the handshake its client broke off (its alert
        // may arrive after the client's error: polled)
        await waitUntil(async () => (await stat(r, 'tls_client_handshake_failures')) > before, 10000,
            'tls_client_handshake_failures to count the refused handshake');
        assert.equal(await tlsClient().ping(), 'PONG'); // and the next TLS client is served
    });
});
