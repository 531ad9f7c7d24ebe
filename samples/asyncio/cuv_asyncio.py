#!/usr/bin/env python3
"""asyncio: cuv's completion queue as a reader of Python's asyncio loop (cuv_queue_fd).

    cuv_asyncio.py LIBCUV [CHAINS]

LIBCUV is the path of libcuv.so (the build passes its own; libcuv finds libcuv-sim beside
itself). Through ctypes, the program opens device 0, makes a queue, and hands the queue's
descriptor to loop.add_reader: asyncio wakes the reader while completions wait, and the reader
calls cuv_queue_drain, whose callbacks resolve asyncio futures. Each chain uploads random words,
overwrites a random range of them on the device (cuv_memset32), copies the buffer to a second one
(cuv_memcpy_dtod) and downloads that; its future's result is compared with the same edit done on
the host. Several coroutines run chains concurrently, and a ticker coroutine shows the loop stays
free meanwhile. No kernel is needed, so nothing but libcuv is loaded.

Runs on whatever driver cuv loads (CUV_DRIVER=sim: the CPU simulator); without any CUDA driver
it says so and exits with status 77. No chain's result may be missing after 60 s (a watchdog)."""
import asyncio
import ctypes
import random
import sys

EXIT_NO_DRIVER = 77
CUV_ENODRIVER = -9001
CUV_COPY_STAGE = 0
WORKERS = 8


class Output(ctypes.Structure):
    """cuv_output_t (include/cuv.h)."""
    _fields_ = [("data", ctypes.c_void_p), ("release", ctypes.c_void_p),
                ("release_arg", ctypes.c_void_p)]


DONE_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.POINTER(Output), ctypes.c_void_p)


def bind(path):
    """libcuv with the signatures this program uses."""
    lib = ctypes.CDLL(path)
    p, i, sz, u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint32
    pp = ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "cuv_init": (i, []), "cuv_init_error": (ctypes.c_char_p, []),
        "cuv_strerror": (ctypes.c_char_p, [i]), "cuv_err_name": (ctypes.c_char_p, [i]),
        "cuv_driver_is_sim": (ctypes.c_bool, []),
        "cuv_device_open": (i, [pp, i]), "cuv_device_unref": (None, [p]),
        "cuv_buffer_create": (i, [pp, p, sz]), "cuv_buffer_unref": (None, [p]),
        "cuv_memcpy_htod": (p, [p, sz, p, sz, ctypes.c_uint]),
        "cuv_memset32": (p, [p, sz, u32, sz]),
        "cuv_memcpy_dtod": (p, [p, sz, p, sz, sz]),
        "cuv_download": (p, [p, sz, sz]), "cuv_seq": (p, [p, p]),
        "cuv_queue_create": (i, [pp, p, p]), "cuv_queue_fd": (i, [p, ctypes.POINTER(i)]),
        "cuv_queue_drain": (i, [p]), "cuv_queue_pending": (ctypes.c_uint, [p]),
        "cuv_queue_destroy": (i, [p]),
        "cuv_submit": (i, [p, p, DONE_FN, p, p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class CuvError(Exception):
    def __init__(self, lib, what, rc):
        why = lib.cuv_init_error()
        super().__init__("%s: %s (%s)%s" % (what, lib.cuv_err_name(rc).decode(),
                                            lib.cuv_strerror(rc).decode(),
                                            ": " + why.decode() if why else ""))


class Queue:
    """A cuv queue whose completions resolve asyncio futures, drained when its descriptor is
    readable. Everything runs on the loop's thread: the callbacks run inside cuv_queue_drain."""

    def __init__(self, lib, loop):
        self.lib, self.loop = lib, loop
        self.handle = ctypes.c_void_p()
        self.check("cuv_queue_create", lib.cuv_queue_create(ctypes.byref(self.handle), None, None))
        fd = ctypes.c_int(-1)
        self.check("cuv_queue_fd", lib.cuv_queue_fd(self.handle, ctypes.byref(fd)))
        self.fd = fd.value
        self.waiting = {}  # submission id -> (future, bytes to read from its output)
        self.next_id = 1
        self.wakeups = 0
        self.done_fn = DONE_FN(self.on_done)  # kept alive as long as the queue
        loop.add_reader(self.fd, self.on_readable)

    def check(self, what, rc):
        if rc != 0:
            raise CuvError(self.lib, what, rc)

    def on_readable(self):
        # Level-triggered: the drain delivers everything, and the descriptor is then unreadable
        # until the next completion.
        self.wakeups += 1
        self.lib.cuv_queue_drain(self.handle)

    def on_done(self, status, output, arg):
        # Called from C: an exception here would be printed and lost, so it only sets the future.
        future, nbytes = self.waiting.pop(arg)
        if status != 0:
            future.set_exception(CuvError(self.lib, "a chain", status))
        else:
            future.set_result(ctypes.string_at(output.contents.data, nbytes))

    def submit(self, op, nbytes):
        """Submits op (consumed); a future of the first nbytes of its output."""
        future = self.loop.create_future()
        ident, self.next_id = self.next_id, self.next_id + 1
        self.waiting[ident] = (future, nbytes)
        rc = self.lib.cuv_submit(self.handle, op, self.done_fn, ident, None)
        if rc != 0:  # refused: no callback will come
            del self.waiting[ident]
            raise CuvError(self.lib, "cuv_submit", rc)
        return future

    def close(self):
        self.loop.remove_reader(self.fd)  # before the destroy closes the descriptor
        self.check("cuv_queue_destroy", self.lib.cuv_queue_destroy(self.handle))


async def chain(lib, dev, queue, rng):
    """One chain on fresh buffers; True when the download matches the host's edit."""
    n = rng.randrange(256, 65536)
    nbytes = n * 4
    words = bytearray(rng.randbytes(nbytes))
    start = rng.randrange(n)
    count = rng.randrange(1, n - start + 1)
    value = rng.getrandbits(32)
    a, b = ctypes.c_void_p(), ctypes.c_void_p()
    for buf in (a, b):
        rc = lib.cuv_buffer_create(ctypes.byref(buf), dev, nbytes)
        if rc != 0:
            raise CuvError(lib, "cuv_buffer_create", rc)
    host = (ctypes.c_char * nbytes).from_buffer(words)  # staged: free to change after this call
    op = lib.cuv_memcpy_htod(a, 0, host, nbytes, CUV_COPY_STAGE)
    op = lib.cuv_seq(op, lib.cuv_memset32(a, start * 4, value, count))
    op = lib.cuv_seq(op, lib.cuv_memcpy_dtod(b, 0, a, 0, nbytes))
    op = lib.cuv_seq(op, lib.cuv_download(b, 0, nbytes))
    del host  # the bytearray may change size again
    future = queue.submit(op, nbytes)
    lib.cuv_buffer_unref(a)  # the submission holds both until its work is done
    lib.cuv_buffer_unref(b)
    words[start * 4:(start + count) * 4] = value.to_bytes(4, sys.byteorder) * count
    got = await future
    return got == bytes(words)


async def worker(lib, dev, queue, rng, chains, results):
    for _ in range(chains):
        results.append(await chain(lib, dev, queue, rng))


async def ticker(stop, ticks):
    while not stop.is_set():
        ticks[0] += 1
        await asyncio.sleep(0.001)


async def run(lib, dev, chains):
    loop = asyncio.get_running_loop()
    queue = Queue(lib, loop)
    rng = random.Random()
    seed = rng.getrandbits(32)
    rng.seed(seed)
    print("seed: %d" % seed)
    results, ticks, stop = [], [0], asyncio.Event()
    tick = asyncio.ensure_future(ticker(stop, ticks))
    per = [chains // WORKERS + (k < chains % WORKERS) for k in range(WORKERS)]
    try:
        await asyncio.wait_for(asyncio.gather(
            *(worker(lib, dev, queue, rng, m, results) for m in per)), timeout=60)
    finally:
        stop.set()
        await tick
    pending = lib.cuv_queue_pending(queue.handle)
    queue.close()
    ok = len(results) == chains and all(results) and not queue.waiting and pending == 0
    print("asyncio: %d chains checked of %d (%d matched), %d wake-ups of the queue's descriptor, "
          "%d ticks meanwhile %s" % (len(results), chains, sum(results), queue.wakeups, ticks[0],
                                     "OK" if ok else "FAILED"))
    return ok


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    chains = int(argv[2]) if len(argv) > 2 else 64
    lib = bind(argv[1])
    rc = lib.cuv_init()
    if rc == CUV_ENODRIVER:
        why = lib.cuv_init_error()
        print("asyncio: no CUDA driver: %s; CUV_DRIVER=sim runs it on the CPU simulator"
              % (why.decode() if why else lib.cuv_strerror(rc).decode()), file=sys.stderr)
        return EXIT_NO_DRIVER
    if rc != 0:
        print("asyncio: %s" % CuvError(lib, "cuv_init", rc), file=sys.stderr)
        return 1
    print("driver: %s" % ("sim" if lib.cuv_driver_is_sim() else "cuda"))
    dev = ctypes.c_void_p()
    rc = lib.cuv_device_open(ctypes.byref(dev), 0)
    if rc != 0:
        print("asyncio: %s" % CuvError(lib, "cuv_device_open", rc), file=sys.stderr)
        return 1
    try:
        ok = asyncio.run(run(lib, dev, chains))
    except (CuvError, asyncio.TimeoutError) as e:
        print("asyncio: FAILED: %r" % e, file=sys.stderr)
        ok = False
    lib.cuv_device_unref(dev)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
