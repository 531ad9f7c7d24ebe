// Types of cuv for Node.js (index.js). Every asynchronous function returns a Promise and never
// throws: bad arguments reject too. Rejections are CuvError objects, or an AbortError when the
// call's AbortSignal aborted it.

/** The AbortSignal part cuv uses (Node's AbortSignal satisfies it). */
export interface CuvAbortSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** Options of every asynchronous call. */
export interface CallOptions {
  /** Aborting rejects the call's Promise with an AbortError at the loop's next iteration; the
   * GPU still finishes the work, and the memory it uses is freed only after. */
  signal?: CuvAbortSignal;
}

/** How a rejection describes a failure. */
export interface CuvError extends Error {
  /** cuv's code: 'CUV_EINVAL', 'CUV_EARGS', ...; 'CUV_ECUDA' for a failure of the driver. */
  code: string;
  /** cuv's status: a negative number (libuv's errno where POSIX has the meaning). */
  errno: number;
  /** For a driver failure, the CUresult's name: 'CUDA_ERROR_OUT_OF_MEMORY'. */
  cuResult?: string;
}

/** The rejection of an aborted call, as Node's own APIs make it. */
export class AbortError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
  readonly name: 'AbortError';
  readonly code: 'ABORT_ERR';
}

export type TypedArray =
  | Int8Array | Uint8Array | Uint8ClampedArray | Int16Array | Uint16Array | Int32Array
  | Uint32Array | Float32Array | Float64Array | BigInt64Array | BigUint64Array;

/** A TypedArray constructor: the element type of device memory. */
export type TypedArrayConstructor<T extends TypedArray = TypedArray> = {
  new (length: number): T;
  readonly BYTES_PER_ELEMENT: number;
};

/** A DeviceBuffer's element type: the constructor's name without "Array", in lower case. */
export type ElementType =
  | 'int8' | 'uint8' | 'uint8clamped' | 'int16' | 'uint16' | 'int32' | 'uint32' | 'float32'
  | 'float64' | 'bigint64' | 'biguint64';

/** How cuv orders work on a buffer across streams (include/cuv.h: cross-stream hazards). */
export type HazardMode = 'order' | 'strict' | 'none';

/** Device memory. dispose() (or `using`) gives up this object's reference at once, collection
 * otherwise (a thread of the package's drops it: README); the memory is freed once no work in
 * flight uses it either. */
export class DeviceBuffer {
  private constructor();
  readonly length: number;
  readonly byteLength: number;
  readonly type: ElementType;
  readonly disposed: boolean;
  dispose(): void;
  [Symbol.dispose](): void;
  setHazardMode(mode: HazardMode): this;
}

/** A kernel parameter's kind: C's int8_t ... double, or a buffer with its access. */
export type ParamKind =
  | 'i8' | 'u8' | 'i16' | 'u16' | 'i32' | 'u32' | 'i64' | 'u64' | 'f32' | 'f64'
  | 'read' | 'write' | 'rw';

/** A buffer argument at a byte offset. */
export interface BufferView {
  buffer: DeviceBuffer;
  byteOffset?: number;
}

/** A kernel argument: a number (a bigint too for i64 and u64), or a buffer. */
export type KernelArg = number | bigint | DeviceBuffer | BufferView;

/** Grid or block dimensions: x, or [x, y?, z?]. */
export type Dims = number | [number] | [number, number] | [number, number, number];

export interface LaunchOptions extends CallOptions {
  /** Dynamic shared memory per block, in bytes. */
  sharedBytes?: number;
}

/** A loaded PTX, cubin or fatbin image. */
export class Module {
  private constructor();
  /** The kernel `name`, whose parameters are `signature` (checked against the kernel's where
   * the driver reports them: CUV_EARGS). Throws a CuvError. */
  kernel(name: string, signature: readonly ParamKind[]): Kernel;
  dispose(): void;
  [Symbol.dispose](): void;
}

export class Kernel {
  private constructor();
  readonly name: string;
  /** Launches with typed arguments, checked against the signature and the kernel. */
  launch(grid: Dims, block: Dims, args: readonly KernelArg[], options?: LaunchOptions):
    Promise<void>;
  dispose(): void;
  [Symbol.dispose](): void;
}

/** Copies `array` to new device memory of its type and length. From an ordinary array the data
 * is copied before this returns (the array may change at once); from a pinned one it is read
 * when the copy runs. */
export function upload(array: TypedArray, options?: CallOptions): Promise<DeviceBuffer>;

export interface WriteOptions extends CallOptions {
  /** Where in the buffer the bytes go (default 0). */
  byteOffset?: number;
}

/** Copies `array`'s bytes into `buffer`; resolves with `buffer`. */
export function write(buffer: DeviceBuffer, array: TypedArray, options?: WriteOptions):
  Promise<DeviceBuffer>;

/** The buffer's contents, as a TypedArray of its type (over pinned memory where the runtime
 * allows external buffers, else a copy). */
export function download(buffer: DeviceBuffer, options?: CallOptions): Promise<TypedArray>;

/** y = a*x + y on float32 buffers of one length; resolves with y. */
export function saxpy(a: number, x: DeviceBuffer, y: DeviceBuffer, options?: CallOptions):
  Promise<DeviceBuffer>;

export interface DenseLayer {
  /** out x in floats, row-major */
  weights: DeviceBuffer;
  /** out floats */
  bias: DeviceBuffer;
}

/** A dense layer per element of `layers` over `rows` rows of x, ReLU between layers. */
export function mlp(x: DeviceBuffer, rows: number, layers: readonly DenseLayer[],
  options?: CallOptions): Promise<DeviceBuffer>;

/** An empty op: the round trip of the submission and Promise machinery alone. */
export function nop(options?: CallOptions): Promise<void>;

/** Device memory of `length` elements of `type`, allocated now; contents undefined. */
export function alloc<T extends TypedArray>(type: TypedArrayConstructor<T>, length: number):
  DeviceBuffer;

/** A zeroed TypedArray over pinned host memory: uploads from it and downloads into it are one
 * DMA each. Where the runtime refuses external buffers, an ordinary array. */
export function pinned<T extends TypedArray>(type: TypedArrayConstructor<T>, length: number): T;

/** Whether the array's memory is cuv's pinned memory. */
export function isPinned(array: TypedArray): boolean;

/** Loads a module now: PTX text, or a cubin or fatbin image. Throws a CuvError. */
export function loadModule(image: string | Uint8Array): Module;

/** 'cuda', 'sim' or the driver's path (CUV_DRIVER); null when no driver loads. */
export function driver(): string | null;

/** The configuration in force (cuv_config_get; the CUV_* variables, cuv's docs/configuration.md), cuv
 * initialized by the call. Throws a CuvError when the environment's is invalid. */
export interface Config {
  driver: string;
  /** The default policy's streams: CUV_STREAMS, else CUDA_DEVICE_MAX_CONNECTIONS (1 to 32), else
   * 8 (README: independent ops overlap on the GPU). */
  streams: number;
  submitThreads: number;
  submitInline: 'idle' | 'never' | 'always';
  submitRing: number;
  spinBudgetUs: number;
  hostSync: 'off' | 'spin' | 'block';
  strictHazards: boolean;
  uvPollMaxUs: number;
  nccl: string | null;
}

export function config(): Config;

/** Device 0's name. Throws a CuvError without a driver. */
export function device(): string;

/** cuv_stats()'s counters (include/cuv.h). */
export interface Stats {
  submitted: number;
  completed: number;
  completedSpin: number;
  completedReactor: number;
  completedPolled: number;
  completedHostfn: number;
  completedSync: number;
  fallbacks: number;
  faults: number;
  waitsInserted: number;
  leaked: number;
  inFlight: number;
  /** Submissions whose driver calls the JavaScript thread made itself: when the engine was idle
   * (engineInline), or because its ring was full (engineHelped, README). */
  engineInline: number;
  /** Submissions whose driver calls a submitter thread made. */
  engineQueued: number;
  engineHelped: number;
  /** DeviceBuffer references (disposed or collected) handed to the process's thread that drops
   * them (README) and not dropped yet. */
  releasing: number;
}

export function stats(): Stats;

/** This thread's (environment's) calls whose callback has not run yet, and cancelled calls whose
 * GPU work has not finished. A call whose completion waits for its settling slice (README) is not
 * counted, though its Promise has not settled yet. */
export function pending(): number;

/** DeviceBuffer objects not collected yet, in the whole process. */
export function liveBuffers(): number;

/** The CPU simulator (CUV_DRIVER=sim); each throws CUV_ENOTSUP on another driver. */
export const sim: {
  /** Every launch of the kernel takes at least `usec` microseconds. */
  kernelDuration(name: string, usec: number): void;
  /** The nth call (0: every call) of a driver entry point returns the CUresult `result`. */
  fail(entry: string, nth: number, result: number): void;
  clearFailures(): void;
  /** Calls made so far to a driver entry point. */
  calls(entry: string): number;
};

/** The libuv version of the headers the addon was built with, and of the process (Node's). */
export const uvVersion: { readonly header: string; readonly runtime: string };

/** The PTX of the package's kernel modules. */
export const ptx: { readonly saxpy: string; readonly mlp: string; readonly testing: string };

/** Where each module's PTX came from: nvcc at install, the tarball, or a listing of names that
 * only the simulator runs. */
export const ptxOrigin: {
  readonly saxpy: PtxOrigin;
  readonly mlp: PtxOrigin;
  readonly testing: PtxOrigin;
};

export type PtxOrigin = 'nvcc' | 'shipped' | 'listing';
