'use strict';
// Rows of Promises kept in flight, each row with the CPU time every thread of the process spent
// per op (by thread name, from /proc: Linux only) and cuv.stats()' deltas: which thread bounds
// the throughput, and what a slow row spends more on (bench/RESULTS.md of cuv).
//
//   node bench/threads.js [--op saxpy|nop] [--calls N] [--rows R] [--inflight K]
// Defaults: saxpy (n=1, the K lanes share one x), 100000 calls per row, 24 rows, K = 64.
// /proc counts in ticks of 10 ms: a row should last a second or so.
const fs = require('node:fs');
const { performance } = require('node:perf_hooks');
const { cuv } = require('./cuv.js');
const { numberOption, choiceOption } = require('./options.js');

const op = choiceOption('op', ['saxpy', 'nop']);
const calls = numberOption('calls', 100000);
const rows = numberOption('rows', 24);
const inflight = numberOption('inflight', 64);

// Seconds of CPU per thread name (a trailing number dropped: cuv-submit-0..3 add up).
function threadTimes() {
  const times = {};
  for (const tid of fs.readdirSync('/proc/self/task')) {
    let stat;
    try {
      stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/[0-9]+$/, '#');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    times[name] = (times[name] || 0) + (Number(fields[11]) + Number(fields[12])) / 100;
  }
  return times;
}

function perOp(before, after) {
  return Object.keys(after).map((name) => [name, (after[name] - (before[name] || 0)) * 1e6 / calls])
    .filter(([, us]) => us > 0.05).map(([name, us]) => `${name} ${us.toFixed(2)}`).join(', ');
}

function deltas(before, after) {
  const d = {};
  for (const key of Object.keys(after))
    if (after[key] !== before[key] && key !== 'submitted' && key !== 'completed')
      d[key] = after[key] - before[key];
  return JSON.stringify(d);
}

async function main() {
  if (cuv.driver() === null) {
    console.log('threads: no CUDA driver (CUV_DRIVER=sim runs on the simulator); skipped');
    return;
  }
  const x = await cuv.upload(Float32Array.of(1));
  const ys = [];
  for (let l = 0; l < inflight; l++) ys.push(await cuv.upload(Float32Array.of(0)));
  const one = op === 'nop' ? () => cuv.nop() : (l) => cuv.saxpy(0.5, x, ys[l]);
  console.log(`threads: ${op}, ${calls} calls per row, ${inflight} in flight; CPU us per op by ` +
    `thread | cuv.stats() deltas`);
  for (let r = 0; r < rows; r++) {
    let next = 0;
    const stats = cuv.stats(), times = threadTimes(), elu = performance.eventLoopUtilization();
    const start = process.hrtime.bigint();
    await Promise.all(Array.from({ length: inflight }, async (_, l) => {
      while (next++ < calls) await one(l);
    }));
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    const loop = performance.eventLoopUtilization(elu).active * 1e3 / calls;
    const rate = (calls / seconds).toFixed(0);
    console.log(`row ${r}: ${rate} ops/s, loop ${loop.toFixed(2)} us/op | ` +
      `${perOp(times, threadTimes())} | ${deltas(stats, cuv.stats())}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
