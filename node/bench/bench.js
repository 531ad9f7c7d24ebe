'use strict';
// cuv's Promises against what Node users pick today, the same op in one process (bench/RESULTS.md
// of cuv has the figures and the command; the comparison bindings come from the bench's addon,
// cuv.js):
//   round trip   saxpy n=1 (a one-element launch) and nop (an empty op: the machinery alone), each
//                as a cuv Promise, through the blocking binding (cuv_sync on the JavaScript
//                thread, baseline.saxpySync) and through napi_async_work whose pool thread blocks
//                until the GPU is done (baseline.saxpyWork, node-llama-cpp's pattern), at 1 and K
//                in flight (the rows at K R times, the bindings in turn): ops/s, p50 and p99
//                from call to settle, the loop thread's busy time and the process's CPU time
//                per call, and the ratios (at K, of the medians);
//   gpu time     the same comparison for ops the GPU takes a while over without filling it, where
//                a pool thread per op is what bounds async_work: a kernel that runs T us on one
//                thread (cuv.ptx.testing's cuv_node_gate, never opened: it times out), T = 5, 20
//                and 100, through Kernel.launch and baseline.launchWork; and the package's mlp
//                on one row of tcp-infer's model (64 -> 128 -> 16, a launch per layer). Only ops
//                on different streams overlap on the GPU: CUV_STREAMS sets how many the default
//                policy has (the package's default: CUDA_DEVICE_MAX_CONNECTIONS, how many queues
//                the GPU takes streams' work from, else the driver's 8);
//   event loop   perf_hooks.monitorEventLoopDelay while F saxpys are kept in flight (each
//                completion submits the next): the delay's p50, p99 and max, over the first
//                W x F completions (cold: V8's heap still growing) and over the next 10 x F
//                (steady). Its histogram holds the time between two ticks of a 1 ms timer, so
//                the delay beyond the timer is the figure less 1 ms; the same loop idle, measured
//                first, is the reference. Twice:
//                saxpy n=1, which the GPU ends at once (the loop thread is all the work there
//                is), and saxpy n=2^24 over 64 buffers (the GPU's work: what holding 10 000 ops in
//                flight costs the loop when the GPU is what they wait for);
//   pool         libuv's pool (4 threads) left free: fs.stat and dns.lookup('localhost'), which
//                run on the pool, measured alone and while K saxpys are kept in flight as cuv
//                Promises, then as napi_async_work; saxpy n=1 (the loop thread busy settling)
//                and n=2^24 (the GPU busy: what holding a pool thread per op costs).
//
//   node bench/bench.js [--calls N] [--rounds R] [--inflight K] [--flight F] [--warm W]
//                       [--parts LIST] [--smoke]
// --parts: a comma-separated subset of roundtrip,gputime,loop,pool (default: all).
// Defaults: 50000 calls per row, R = 3 rounds of the rows at K, K = 64, F = 10000, W = 5;
// --smoke: tiny counts (cuv's test on the simulator). CUV_DRIVER=sim runs on the simulator,
// whose figures mean nothing.
const fs = require('node:fs');
const dns = require('node:dns');
const { monitorEventLoopDelay, performance } = require('node:perf_hooks');
const { cuv, baseline } = require('./cuv.js');
const { numberOption: option } = require('./options.js');

const smoke = process.argv.includes('--smoke');
const calls = option('calls', smoke ? 200 : 50000);
const rounds = option('rounds', smoke ? 1 : 3);
const inflight = option('inflight', smoke ? 8 : 64);
const flight = option('flight', smoke ? 500 : 10000);
const warm = option('warm', smoke ? 1 : 5, 0);
const poolOps = smoke ? 200 : 20000;
const longN = smoke ? 1024 : 1 << 24; // 64 MiB per buffer: about 50 us of a current datacenter GPU per saxpy
const partsAt = process.argv.indexOf('--parts');
const allParts = ['roundtrip', 'gputime', 'loop', 'pool'];
const parts = partsAt >= 0 ? String(process.argv[partsAt + 1]).split(',') : allParts;
if (!parts.every((part) => allParts.includes(part))) {
  console.error(`bench: --parts takes a comma-separated subset of ${allParts.join(',')}`);
  process.exit(2);
}

const now = () => process.hrtime.bigint();
const micros = (t0) => Number(now() - t0) / 1e3;
const percentile = (sorted, p) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

// `count` calls of one(lane), `width` lanes at a time: {opsPerSec, p50, p99, busy, cpu}
// (microseconds); busy: the loop thread's time outside its wait for events, per call (what the
// JavaScript thread spends on each op, whichever thread the GPU work is on); cpu: the whole
// process's CPU time per call (every thread: the loop, the pool's, cuv's, the driver's).
async function measure(one, width, isSync, count = calls) {
  const times = new Float64Array(count);
  const elu = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const start = now();
  if (isSync) {
    for (let i = 0; i < count; i++) {
      const t0 = now();
      one(0);
      times[i] = micros(t0);
    }
  } else {
    let next = 0;
    const lane = async (_, l) => {
      while (next < count) {
        const i = next++;
        const t0 = now();
        await one(l);
        times[i] = micros(t0);
      }
    };
    await Promise.all(Array.from({ length: width }, lane));
  }
  const seconds = Number(now() - start) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const busy = isSync ? seconds * 1e6 / count
    : performance.eventLoopUtilization(elu).active * 1e3 / count;
  times.sort();
  return {
    opsPerSec: count / seconds, p50: percentile(times, 0.5), p99: percentile(times, 0.99), busy,
    cpu: (cpu.user + cpu.system) / count,
  };
}

// Keeps `width` lanes of one(lane) running until stop(); stop() resolves with the count done.
function keepBusy(one, width) {
  let running = true, done = 0;
  const lanes = Array.from({ length: width }, async (_, l) => {
    while (running) {
      await one(l);
      done++;
    }
  });
  return async () => {
    running = false;
    await Promise.all(lanes);
    return done;
  };
}

// Buffers for `lanes` independent saxpys (no lane orders another's work), of n elements (their
// contents do not matter).
async function lanesOf(lanes, n = 1) {
  const xs = [], ys = [];
  for (let l = 0; l < lanes; l++) {
    xs.push(n === 1 ? await cuv.upload(Float32Array.of(1)) : cuv.alloc(Float32Array, n));
    ys.push(n === 1 ? await cuv.upload(Float32Array.of(0)) : cuv.alloc(Float32Array, n));
  }
  return { xs, ys };
}

function row(label, r) {
  console.log(`${label.padEnd(36)} ${r.opsPerSec.toFixed(0).padStart(9)} ${r.p50.toFixed(1)
    .padStart(9)} ${r.p99.toFixed(1).padStart(9)} ${r.busy.toFixed(2).padStart(9)} ${r.cpu
    .toFixed(2).padStart(9)}`);
}

// The bindings compared on each op of `ops` ({name, calls, promise, sync, work}): at 1 in
// flight, then R rounds of K in flight, the two bindings in turn.
async function compare(title, ops) {
  console.log(`\n== ${title}; ops/s, p50 and p99 in us, loop: the loop thread's busy us per ` +
    'call, cpu: the process\'s CPU us per call');
  console.log(`${'op / binding'.padEnd(36)} ${'ops/s'.padStart(9)} ${'p50'.padStart(9)} ` +
    `${'p99'.padStart(9)} ${'loop'.padStart(9)} ${'cpu'.padStart(9)}`);
  for (const { name, calls: count, promise, sync, work } of ops) {
    const run = (one, width, isSync) => measure(one, width, isSync, count);
    await run(promise, 1, false); // warm-up: streams, reactor, JIT
    await run(sync, 1, true);
    await run(work, inflight, false);
    const r = {
      promise: await run(promise, 1, false), sync: await run(sync, 1, true),
      work: await run(work, 1, false), promiseK: [], workK: [],
    };
    row(`${name} promise x1`, r.promise);
    row(`${name} sync (blocking)`, r.sync);
    row(`${name} async_work x1`, r.work);
    // In flight, the two bindings in turn: one row of either moves by up to 2x between rows (the
    // machine's threads, V8's collector), so the ratio is of their medians.
    for (let i = 0; i < rounds; i++) {
      r.promiseK.push(await run(promise, inflight, false));
      row(`${name} promise x${inflight}`, r.promiseK[i]);
      r.workK.push(await run(work, inflight, false));
      row(`${name} async_work x${inflight}`, r.workK[i]);
    }
    const median = (rows, key = 'opsPerSec') => rows.map((x) => x[key])
      .sort((a, b) => a - b)[rows.length >> 1];
    const ratios = r.promiseK.map((x, i) => (x.opsPerSec / r.workK[i].opsPerSec).toFixed(2));
    console.log(`${name}: promise x${inflight} throughput ${(median(r.promiseK) /
      r.sync.opsPerSec).toFixed(2)}x sync, ${(median(r.promiseK) / median(r.workK))
      .toFixed(2)}x async_work x${inflight} (medians of ${rounds}; by round ` +
      `${ratios.join(', ')}); ` +
      `p50 at 1: promise ${(r.promise.p50 / r.sync.p50).toFixed(2)}x sync, ${(r.promise.p50 /
        r.work.p50).toFixed(2)}x async_work; process CPU per op x${inflight}: promise ` +
      `${median(r.promiseK, 'cpu').toFixed(2)} us, async_work ${median(r.workK, 'cpu')
        .toFixed(2)} us (${(median(r.promiseK, 'cpu') / median(r.workK, 'cpu')).toFixed(2)}x)`);
  }
}

async function roundTrip({ xs, ys }) {
  await compare(`round trip: ${calls} calls per row`, [
    { name: 'saxpy n=1', calls, promise: (l) => cuv.saxpy(0.5, xs[l], ys[l]),
      sync: (l) => baseline.saxpySync(0.5, xs[l], ys[l]),
      work: (l) => baseline.saxpyWork(0.5, xs[l], ys[l]) },
    { name: 'nop', calls, promise: () => cuv.nop(), sync: () => baseline.nopSync(),
      work: () => baseline.nopWork() },
  ]);
}

// A random float32 DeviceBuffer of n elements in [-scale, scale).
const randomBuffer = (n, scale) =>
  cuv.upload(Float32Array.from({ length: n }, () => (Math.random() * 2 - 1) * scale));

async function gpuTime() {
  const gate = cuv.loadModule(cuv.ptx.testing).kernel('cuv_node_gate', ['u64', 'read', 'rw']);
  const closed = await cuv.upload(new Uint32Array(1)); // never opened: each gate times out
  const states = Array.from({ length: inflight }, () => cuv.alloc(Uint32Array, 1));
  const dims = [64, 128, 16]; // tcp-infer's model (kernels/mlp.h)
  const layers = [];
  for (let l = 0; l + 1 < dims.length; l++) {
    const scale = 1 / Math.sqrt(dims[l]);
    layers.push({ weights: await randomBuffer(dims[l + 1] * dims[l], scale),
      bias: await randomBuffer(dims[l + 1], scale) });
  }
  const inputs = [];
  for (let l = 0; l < inflight; l++) inputs.push(await randomBuffer(dims[0], 1));
  const count = Math.max(1, Math.round(calls / 5));
  const ops = [5, 20, 100].map((us) => {
    const args = (l) => [BigInt(us * 1000), closed, states[l]];
    return { name: `kernel ${us} us`, calls: count, promise: (l) => gate.launch(1, 1, args(l)),
      sync: (l) => baseline.launchSync(gate, 1, 1, args(l)),
      work: (l) => baseline.launchWork(gate, 1, 1, args(l)) };
  });
  ops.push({ name: 'mlp 64-128-16, 1 row', calls: count,
    promise: (l) => cuv.mlp(inputs[l], 1, layers),
    sync: (l) => baseline.mlpSync(inputs[l], 1, layers),
    work: (l) => baseline.mlpWork(inputs[l], 1, layers) });
  await compare(`gpu time: ${count} calls per row`, ops);
}

// Keeps `flight` saxpys in flight (each completion submits the next): first `warm` x flight of
// them once all are in flight (the cold part: V8's young generation still grows, its scavenges
// come often, the JIT is still at work), then 10 x flight more (steady state), each part with its
// own histogram of the loop's delay.
async function eventLoop(n) {
  const idle = await idleDelay();
  const total = flight * (warm + 10);
  const x = cuv.alloc(Float32Array, n);
  const ys = Array.from({ length: 64 }, () => cuv.alloc(Float32Array, n));
  const cold = monitorEventLoopDelay({ resolution: 1 });
  const steady = monitorEventLoopDelay({ resolution: 1 });
  let submitted = 0, completed = 0, peak = 0, steadyStart = 0n;
  const start = now();
  await new Promise((resolve, reject) => {
    const submit = () => {
      const y = ys[submitted++ % ys.length];
      cuv.saxpy(1, x, y).then(() => {
        if (++completed === flight * warm) {
          cold.disable();
          steady.enable();
          steadyStart = now();
        }
        if (submitted < total) submit();
        else if (completed === total) resolve();
      }, reject);
      peak = Math.max(peak, submitted - completed);
    };
    // Filled in steps, so that the filling is not one long task of the loop (completions
    // meanwhile submit their successors: only the fill's own count towards `flight`).
    let filled = 0;
    const fill = () => {
      for (let i = 0; i < 500 && filled < flight; i++, filled++) submit();
      if (filled < flight) setImmediate(fill);
      else if (warm > 0) cold.enable();
      else {
        steady.enable();
        steadyStart = now();
      }
    };
    fill();
  });
  steady.disable();
  const rate = (count, t0) => (count / (Number(now() - t0) / 1e9)).toFixed(0);
  const ms = (v) => (v / 1e6).toFixed(3);
  const beyond = (v) => (Math.max(0, v - 1e6) / 1e6).toFixed(3);
  const line = (label, h) => `${label}: p50 ${ms(h.percentile(50))} ms, p99 ` +
    `${ms(h.percentile(99))} ms, max ${ms(h.max)} ms; beyond the timer: p50 ` +
    `${beyond(h.percentile(50))} ms, p99 ${beyond(h.percentile(99))} ms (${h.count} ticks)`;
  console.log(`\n== event loop: ${flight} saxpys n=${n} kept in flight (peak ${peak}), ` +
    `${total} in all, ${rate(total, start)} ops/s (steady part ` +
    `${rate(flight * 10, steadyStart)}); the 1 ms timer's ticks`);
  if (warm > 0) console.log(line(`cold, the first ${flight * warm}`, cold));
  console.log(line(`steady, the last ${flight * 10}`, steady));
  console.log(`the loop idle: p50 ${beyond(idle.percentile(50))} ms, p99 ` +
    `${beyond(idle.percentile(99))} ms beyond the timer`);
}

// The same histogram over an idle second: what the loop's own timer jitter gives.
async function idleDelay() {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  await new Promise((resolve) => setTimeout(resolve, smoke ? 50 : 1000));
  h.disable();
  return h;
}

// ops/s of `poolOps` calls of job(), 16 at a time.
async function poolRate(job) {
  let next = 0;
  const start = now();
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next++ < poolOps) await job();
  }));
  return poolOps / (Number(now() - start) / 1e9);
}

async function pool({ xs, ys }) {
  const jobs = [['fs.stat', () => fs.promises.stat(__filename)],
    ['dns.lookup', () => dns.promises.lookup('localhost')]];
  const long = await lanesOf(inflight, longN);
  const loads = [
    ['alone', null],
    [`cuv promise x${inflight}`, (l) => cuv.saxpy(0.5, xs[l], ys[l])],
    [`async_work x${inflight}`, (l) => baseline.saxpyWork(0.5, xs[l], ys[l])],
    [`cuv promise x${inflight} long`, (l) => cuv.saxpy(0.5, long.xs[l], long.ys[l])],
    [`async_work x${inflight} long`, (l) => baseline.saxpyWork(0.5, long.xs[l], long.ys[l])],
  ];
  console.log(`\n== pool: ${poolOps} calls of each, 16 at a time, while saxpys are kept in ` +
    `flight (n=1; long: n=${longN})`);
  for (const [jobName, job] of jobs) {
    await poolRate(job); // warm-up
    let alone = 0;
    for (const [loadName, load] of loads) {
      const stop = load ? keepBusy(load, inflight) : null;
      const rate = await poolRate(job);
      const gpuOps = stop ? await stop() : 0;
      alone ||= rate;
      const meanwhile = stop ? `, ${gpuOps} saxpys meanwhile` : '';
      console.log(`${jobName.padEnd(11)} ${loadName.padEnd(25)} ${rate.toFixed(0).padStart(9)} ` +
        `ops/s (${(rate / alone).toFixed(2)}x alone)${meanwhile}`);
    }
  }
}

async function main() {
  const driver = cuv.driver();
  if (driver === null) {
    console.log('cuv-node bench: no CUDA driver (CUV_DRIVER=sim runs on the simulator); skipped');
    process.exitCode = 77;
    return;
  }
  console.log(`cuv-node bench: driver ${driver}, device ${cuv.device()}, ` +
    `node ${process.version}, libuv ${cuv.uvVersion.runtime}, ` +
    `pool ${process.env.UV_THREADPOOL_SIZE || 4} threads, default policy ` +
    `${cuv.config().streams} streams (CUDA_DEVICE_MAX_CONNECTIONS ` +
    `${process.env.CUDA_DEVICE_MAX_CONNECTIONS || 'unset: 8'}), ` +
    `K = ${inflight}${smoke ? ' (smoke run: the figures mean nothing)' : ''}`);
  const lanes = await lanesOf(inflight);
  if (parts.includes('roundtrip')) await roundTrip(lanes);
  if (parts.includes('gputime')) await gpuTime();
  if (parts.includes('loop')) {
    await eventLoop(1);
    await eventLoop(longN);
  }
  if (parts.includes('pool')) await pool(lanes);
  const s = cuv.stats();
  console.log(`\ncompletions: spin ${s.completedSpin}, reactor ${s.completedReactor} (polled ` +
    `${s.completedPolled}), host callback ${s.completedHostfn}, sync ${s.completedSync}; ` +
    `fallbacks ${s.fallbacks}`);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
