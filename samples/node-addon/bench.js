'use strict';
// The Promise round trip of a tiny op through the bridge on Node's loop, against a synchronous
// binding of the same work (cuv_sync on the JavaScript thread):
//   saxpy n=1      a one-element kernel launch
//   nop            an empty op (cuv_value): the bridge and Promise machinery alone
// Modes: `promise` awaits each call before the next (per-call latency); `sync` calls the blocking
// binding; `promise xK` keeps K calls in flight (throughput; p50 is submit-to-resolve).
//
//   node bench.js [calls (default 20000)] [in flight for the xK rows (default 64)]
// The addon comes from CUV_NODE_ADDON (see index.js); CUV_DRIVER=sim runs on the simulator.
const cuv = require('.');

const calls = Number(process.argv[2] || 20000);
const inflight = Number(process.argv[3] || 64);

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

// Runs `calls` calls of one(lane), `width` lanes at a time; returns {opsPerSec, p50, p99}
// (microseconds).
async function measure(one, width, isSync) {
  const times = new Float64Array(calls);
  const start = process.hrtime.bigint();
  if (isSync) {
    for (let i = 0; i < calls; i++) {
      const t0 = process.hrtime.bigint();
      one(0);
      times[i] = Number(process.hrtime.bigint() - t0) / 1e3;
    }
  } else {
    let next = 0;
    const lane = async (_, l) => {
      while (next < calls) {
        const i = next++;
        const t0 = process.hrtime.bigint();
        await one(l);
        times[i] = Number(process.hrtime.bigint() - t0) / 1e3;
      }
    };
    await Promise.all(Array.from({ length: width }, lane));
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  times.sort();
  return { opsPerSec: calls / seconds, p50: percentile(times, 0.5), p99: percentile(times, 0.99) };
}

async function main() {
  const driver = cuv.driver();
  if (driver === null) {
    console.log('cuv-node bench: no CUDA driver (CUV_DRIVER=sim runs on the simulator); skipped');
    process.exitCode = 77;
    return;
  }
  console.log(`cuv-node bench: driver ${driver}, device ${cuv.device()}, node ${process.version}, ` +
    `libuv ${cuv.uvVersion.runtime}, ${calls} calls per row`);
  // Each lane has its own buffers: lanes are independent work (no cross-stream ordering).
  const xs = [], ys = [];
  for (let l = 0; l < Math.max(1, inflight); l++) {
    xs.push(await cuv.upload(Float32Array.of(1)));
    ys.push(await cuv.upload(Float32Array.of(0)));
  }
  const ops = [
    ['saxpy n=1', (l) => cuv.saxpy(0.5, xs[l], ys[l]), (l) => cuv.saxpySync(0.5, xs[l], ys[l])],
    ['nop', () => cuv.nop(), () => cuv.nopSync()],
  ];
  const rows = [];
  for (const [name, promise, sync] of ops) {
    await measure(promise, 1, false); // warm-up: streams, reactor, JIT
    measure(sync, 1, true);
    const p = await measure(promise, 1, false);
    const s = await measure(sync, 1, true);
    const w = await measure(promise, inflight, false);
    rows.push([name, 'promise', p], [name, 'sync', s], [name, `promise x${inflight}`, w]);
    rows.push([name, 'promise/sync', { ratio: p.p50 / s.p50, thr: w.opsPerSec / s.opsPerSec }]);
  }
  console.log('op          mode            ops/s     p50 us    p99 us');
  for (const [name, mode, r] of rows) {
    const label = `${name.padEnd(11)} ${mode.padEnd(13)}`;
    if (r.ratio !== undefined) {
      console.log(`${label} p50 ratio ${r.ratio.toFixed(2)}x; x${inflight} throughput ${r.thr.toFixed(2)}x sync`);
    } else {
      console.log(`${label} ${r.opsPerSec.toFixed(0).padStart(8)} ${r.p50.toFixed(1).padStart(9)} ` +
        `${r.p99.toFixed(1).padStart(9)}`);
    }
  }
  const s = cuv.stats();
  console.log(`completions: spin ${s.completedSpin}, reactor ${s.completedReactor}, ` +
    `host callback ${s.completedHostfn}, sync ${s.completedSync}; fallbacks ${s.fallbacks}`);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
