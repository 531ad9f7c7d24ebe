'use strict';
// cuv for Node.js: GPU work whose Promises settle on Node's own event loop (index.d.ts has the
// types and README.md the guide). The addon (src/) does the work; this file adds what is easier
// in JavaScript: AbortSignal support on every asynchronous call, TypedArray constructors as
// element types, and Symbol.dispose.
const native = require('./build/Release/cuv_node.node');

// Element types by TypedArray constructor, named as a DeviceBuffer's `type` says.
const typeNames = new Map([
  [Int8Array, 'int8'], [Uint8Array, 'uint8'], [Uint8ClampedArray, 'uint8clamped'],
  [Int16Array, 'int16'], [Uint16Array, 'uint16'], [Int32Array, 'int32'], [Uint32Array, 'uint32'],
  [Float32Array, 'float32'], [Float64Array, 'float64'], [BigInt64Array, 'bigint64'],
  [BigUint64Array, 'biguint64'],
]);

// The rejection of an aborted call, as Node's own APIs make it (fs, timers/promises).
class AbortError extends Error {
  constructor(message = 'The operation was aborted', options = undefined) {
    super(message, options);
    this.name = 'AbortError';
    this.code = 'ABORT_ERR';
  }
}

function abortError(signal) {
  return new AbortError(undefined, { cause: signal.reason });
}

function invalid(detail) {
  const error = new Error(`invalid argument: ${detail}`);
  error.code = 'CUV_EINVAL';
  error.errno = -22;
  return error;
}

// options.signal, checked; undefined when there is none.
function signalOf(options) {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== 'object') throw invalid('options must be an object');
  const { signal } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw invalid('options.signal must be an AbortSignal');
  }
  return signal;
}

// Runs start(token), a native call that returns a Promise and, when it submitted work, puts the
// submission's ticket in token. An abort cancels the submission (cuv_uv_cancel): its Promise
// rejects with an AbortError at the loop's next iteration, while the GPU finishes the work with
// what it holds (freed only after).
function submit(options, start) {
  let signal;
  try {
    signal = signalOf(options);
  } catch (error) {
    return Promise.reject(error);
  }
  if (!signal) return start(undefined);
  if (signal.aborted) return Promise.reject(abortError(signal));
  const token = {};
  const promise = start(token);
  if (token.ticket === undefined) return promise; // refused before submitting: rejected already
  const onAbort = () => native.cancel(token.ticket);
  signal.addEventListener('abort', onAbort, { once: true });
  return promise.then((value) => {
    signal.removeEventListener('abort', onAbort);
    return value;
  }, (error) => {
    signal.removeEventListener('abort', onAbort);
    throw error.code === 'CUV_ECANCELED' && signal.aborted ? abortError(signal) : error;
  });
}

const { DeviceBuffer, Module, Kernel, handleKey } = native;

// What a hot call passes for a buffer argument: a DeviceBuffer's number (src/handles.h: the addon
// finds it by index, not by unwrapping the object), the object when it has none, null for
// anything else (refused as "must be a DeviceBuffer").
const handleOf = (b) => (b instanceof DeviceBuffer ? (b[handleKey] ?? b) : null);

Kernel.prototype.launch = function launch(grid, block, args, options) {
  const shared = options === null || typeof options !== 'object' ? undefined : options.sharedBytes;
  return submit(options, (token) => native.launch(this, grid, block, args, shared, token));
};

for (const cls of [DeviceBuffer, Module, Kernel]) {
  if (typeof Symbol.dispose === 'symbol') {
    cls.prototype[Symbol.dispose] = function dispose() {
      this.dispose();
    };
  }
}

DeviceBuffer.prototype[Symbol.for('nodejs.util.inspect.custom')] = function inspect() {
  return `DeviceBuffer { type: '${this.type}', length: ${this.length}` +
    `${this.disposed ? ', disposed' : ''} }`;
};

const byteOffsetOf = (options) =>
  options === null || typeof options !== 'object' ? undefined : options.byteOffset;

module.exports = {
  upload: (array, options) => submit(options, (token) => native.upload(array, token)),
  write: (buffer, array, options) =>
    submit(options, (token) => native.write(buffer, array, byteOffsetOf(options), token)),
  download: (buffer, options) => submit(options, (token) => native.download(buffer, token)),
  // Without options, no closure: every object a call makes lives in V8's young generation until
  // the op settles, and with thousands in flight its scavenges are the loop's longest pauses.
  saxpy: (a, x, y, options) => (options === undefined
    ? native.saxpy(a, handleOf(x), handleOf(y), undefined, y)
    : submit(options, (token) => native.saxpy(a, handleOf(x), handleOf(y), token, y))),
  mlp: (x, rows, layers, options) =>
    submit(options, (token) => native.mlp(x, rows, layers, token)),
  nop: (options) => submit(options, (token) => native.nop(token)),
  alloc: (type, length) => native.alloc(typeNames.get(type), length),
  pinned: (type, length) => native.pinned(typeNames.get(type), length),
  isPinned: native.isPinned,
  loadModule: native.loadModule,
  driver: native.driver,
  config: native.config,
  device: native.device,
  stats: native.stats,
  pending: native.pending,
  liveBuffers: native.liveBuffers,
  DeviceBuffer,
  Module,
  Kernel,
  AbortError,
  sim: native.sim,
  uvVersion: native.uvVersion,
  ptx: native.ptx,
  ptxOrigin: native.ptxOrigin,
};
