// Compiled by types.test.js with tsc (--strict, --noEmit) against index.d.ts: the README's uses
// type-check, and each misuse marked @ts-expect-error must be an error (tsc fails on an unused
// one).
import * as cuv from '../..';

export async function example(signal: cuv.CuvAbortSignal): Promise<number> {
  const x: cuv.DeviceBuffer = await cuv.upload(Float32Array.of(1, 2));
  const y = await cuv.upload(Float32Array.of(3, 4), { signal });
  const same: cuv.DeviceBuffer = await cuv.saxpy(2, x, y);
  const out = await cuv.download(same, { signal });
  await cuv.write(y, Float32Array.of(5), { byteOffset: 4 });
  const layer: cuv.DenseLayer = {
    weights: cuv.alloc(Float32Array, 4), bias: cuv.alloc(Float32Array, 2),
  };
  const z = await cuv.mlp(x, 1, [layer]);
  const pinnedArray: Float64Array = cuv.pinned(Float64Array, 8);
  const isPinned: boolean = cuv.isPinned(pinnedArray);
  {
    using scratch = cuv.alloc(BigInt64Array, 2);
    scratch.setHazardMode('none').dispose();
  }
  const mod = cuv.loadModule(cuv.ptx.saxpy);
  const kernel: cuv.Kernel = mod.kernel('saxpy', ['u32', 'f32', 'read', 'rw']);
  await kernel.launch([1], 2, [2, 1.5, x, { buffer: y, byteOffset: 0 }],
    { signal, sharedBytes: 0 });
  await cuv.nop();
  try {
    await cuv.nop({ signal });
  } catch (e) {
    if (e instanceof cuv.AbortError && e.code === 'ABORT_ERR') return -1;
    const error = e as cuv.CuvError;
    if (error.code === 'CUV_ECUDA' && error.cuResult !== undefined) return error.errno;
  }
  const stats: cuv.Stats = cuv.stats();
  const config: cuv.Config = cuv.config();
  const queues: number = config.streams + config.submitThreads;
  const sync: 'off' | 'spin' | 'block' = config.hostSync;
  const driver: string | null = cuv.driver();
  const name: string = driver ? cuv.device() : '';
  const origin: cuv.PtxOrigin = cuv.ptxOrigin.testing;
  if (cuv.driver() === 'sim') {
    cuv.sim.kernelDuration('saxpy', 10);
    cuv.sim.fail('cuLaunchKernel', 1, 1);
    cuv.sim.clearFailures();
  }
  const used = cuv.sim.calls('cuMemFree') + cuv.pending() + cuv.liveBuffers() + stats.inFlight;
  const types: cuv.ElementType[] = [z.type, out.length > 0 ? 'float32' : 'int8'];
  return used + queues + sync.length + name.length + origin.length + types.length + Number(isPinned) +
    cuv.uvVersion.runtime.length;
}

export async function misuse(x: cuv.DeviceBuffer): Promise<void> {
  // @ts-expect-error a plain array is no TypedArray
  await cuv.upload([1, 2, 3]);
  // @ts-expect-error saxpy's a is a number
  await cuv.saxpy('2', x, x);
  // @ts-expect-error no such parameter kind
  cuv.loadModule('').kernel('k', ['float']);
  // @ts-expect-error DeviceBuffers come from upload or alloc
  new cuv.DeviceBuffer();
  // @ts-expect-error length is read-only
  x.length = 3;
  // @ts-expect-error an unknown hazard mode
  x.setHazardMode('sometimes');
  // @ts-expect-error alloc takes a TypedArray constructor
  cuv.alloc(Array, 3);
  // @ts-expect-error a signal is an AbortSignal
  await cuv.nop({ signal: true });
  // @ts-expect-error the module's functions are read-only
  cuv.config = () => null;
  // @ts-expect-error the bench's comparison bindings are not the package's
  cuv.baseline;
}
