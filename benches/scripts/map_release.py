#!/usr/bin/env python3
"""What releasing a segment map's pages costs, beside reading the same bytes with pread
(issue 25): a file of SIZE MiB (default 1024) in the page cache, mapped shared and read-only as
log-core maps a segment, read in 1 MiB chunks (a copy out of the map: what the kernel does when
it writes a fetched slice to a socket) and released with madvise in 1 MiB chunks. Prints GiB/s
for each step and the process's RssFile after it.

Usage: python3 benches/scripts/map_release.py [DIR] [SIZE_MIB]
"""
import mmap
import os
import sys
import time

DIR = sys.argv[1] if len(sys.argv) > 1 else "target/bench-data"
SIZE = (int(sys.argv[2]) if len(sys.argv) > 2 else 1024) << 20
CHUNK = 1 << 20
MADV_COLD, MADV_PAGEOUT = 20, 21  # not in Python's mmap module


def rss_file_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) // 1024
    return -1


def step(name, fn):
    t = time.perf_counter()
    fn()
    dt = time.perf_counter() - t
    print(f"{name:<44} {SIZE / dt / (1 << 30):8.2f} GiB/s {dt * 1e6 / (SIZE // CHUNK):8.1f} us/MiB"
          f"   RssFile {rss_file_mib():5} MiB")


os.makedirs(DIR, exist_ok=True)
path = os.path.join(DIR, "map-release.bin")
block = os.urandom(CHUNK)
with open(path, "wb") as f:
    for _ in range(SIZE // CHUNK):
        f.write(block)
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
view = memoryview(m)
buf = bytearray(CHUNK)


def copy_out():
    for at in range(0, SIZE, CHUNK):
        buf[:] = view[at:at + CHUNK]


def advise(advice):
    def run():
        for at in range(0, SIZE, CHUNK):
            m.madvise(advice, at, CHUNK)
    return run


def pread():
    for at in range(0, SIZE, CHUNK):
        os.preadv(fd, [buf], at)


print(f"{SIZE >> 20} MiB file in the page cache, 1 MiB steps; RssFile at start {rss_file_mib()} MiB")
step("pread into a buffer", pread)
step("copy out of the map: first touch (faults)", copy_out)
step("copy out of the map: pages mapped", copy_out)
step("madvise(MADV_DONTNEED), pages mapped", advise(mmap.MADV_DONTNEED))
step("madvise(MADV_DONTNEED), nothing mapped", advise(mmap.MADV_DONTNEED))
step("copy out of the map after DONTNEED", copy_out)
step("madvise(MADV_COLD)", advise(MADV_COLD))
step("copy out of the map after COLD", copy_out)
step("madvise(MADV_PAGEOUT)", advise(MADV_PAGEOUT))
step("copy out of the map after PAGEOUT", copy_out)
view.release()
m.close()
os.close(fd)
os.remove(path)
