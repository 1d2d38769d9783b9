# SPDX-License-Identifier: MIT
"""PyTorch's own CUDA IPC, the limit bench/regions.sh sets device frames beside.

A tensor on the GPU goes to a worker process through torch.multiprocessing
(spawn: the storage travels as a CUDA IPC handle, opened once in the
worker).  For every frame the parent signals over a Pipe, the worker runs
the same kernel as the daemon's pipeline on the shared memory (echo: a
device-to-device copy; affine: y = 2x + 0.5 in one kernel), synchronises
its stream and signals back.  One frame in flight, as a client at window 1.

    python3 bench/regions_torch.py --op echo|affine --bytes N --count N

prints one line, `frames=N seconds=S frames_per_s=R in_GBps=R p50_us=L`,
and checks the last result against the same arithmetic on the CPU.  Exit
status 3 when torch or a GPU is missing (the caller reports it as skipped).
"""
import argparse
import statistics
import sys
import time


def worker(x, y, op, conn):
    import torch
    torch.cuda.set_device(x.device)
    a = torch.tensor(2.0, device=x.device)
    b = torch.tensor(0.5, device=x.device)
    stream = torch.cuda.current_stream()
    while conn.recv():
        if op == "echo":
            y.copy_(x)
        else:
            torch.addcmul(b, x, a, out=y)
        stream.synchronize()
        conn.send(True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", choices=("echo", "affine"), required=True)
    ap.add_argument("--bytes", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    args = ap.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        print("torch_ipc skipped: %s" % e)
        return 3
    if not torch.cuda.is_available():
        print("torch_ipc skipped: torch sees no CUDA device")
        return 3
    mp.set_start_method("spawn", force=True)
    n = args.bytes // 4
    g = torch.Generator().manual_seed(1)
    host = (torch.rand(n, generator=g) * 8 - 4).float()
    x = host.to("cuda")
    y = torch.empty_like(x)
    parent, child = mp.Pipe()
    p = mp.Process(target=worker, args=(x, y, args.op, child))
    p.start()
    for _ in range(10):  # warm-up: the IPC open, the kernels' first launch
        parent.send(True)
        parent.recv()
    lat = []
    start = time.perf_counter()
    for _ in range(args.count):
        t = time.perf_counter()
        parent.send(True)
        parent.recv()
        lat.append(time.perf_counter() - t)
    seconds = time.perf_counter() - start
    parent.send(False)
    p.join()
    want = host if args.op == "echo" else torch.addcmul(torch.tensor(0.5), host, torch.tensor(2.0))
    got = y.cpu()
    if not torch.equal(got, want):
        print("torch_ipc FAIL: the worker's result differs from the CPU's", file=sys.stderr)
        return 1
    print("frames=%d seconds=%.3f frames_per_s=%.1f in_GBps=%.3f p50_us=%.1f" %
          (args.count, seconds, args.count / seconds, args.count * args.bytes / seconds / 1e9,
           statistics.median(lat) * 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
