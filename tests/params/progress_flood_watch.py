#!/usr/bin/env python3
"""The watcher and stranger of tests/params/progress_flood.sh; not a test
itself (contrib/check's params lane runs tests/params/*.sh only).

    progress_flood_watch.py TAG MODE WAIT_S [NP]

Finds the ranks of the job whose processes (named rma_busy_target) carry
BTL_OFI_JOB_TAG=TAG in their environment, waits (at most WAIT_S seconds)
until rank 0 (OMPI_COMM_WORLD_RANK=0) has a thread named btl-ofi-look,
lists every UDP socket of the ranks, then for a 3 s window:

  MODE flood: sends random 16-byte datagrams, about 25 000 a second in
              all, to each UDP port of rank 0 (round robin), each at the
              socket's own local address (127.0.0.1, or ::1 for a udp6
              socket, when that address is the wildcard): loopback or an
              address of this host, never anywhere else.  It stops by
              itself at the window's end.
  MODE idle:  sends nothing (the baseline).

and samples, at the window's start and end, the CPU time (utime + stime,
clock ticks) of each of rank 0's threads but its main one.  The window
closes early, at the last of its samples taken every 0.1 s, when rank 0
ends or the watcher gets SIGTERM (the job ended).  Waiting for the job, it
gives up on SIGTERM or after WAIT_S.  It prints, one per line, flushed as
it goes:

  rank RANK PID
  socket RANK PID PROTO ADDR PORT INODE    (at the window's start and again
                                           at its end)
  look TID
  sent=N failed=N                          (flood: datagrams sent / refused)
  thread TID COMM TICKS                    (each non-main thread, the window)
  window_ms=N                              (the window's length)
  cpu_ticks=N                              (the threads' sum)
  error=WHY                                (what kept it from the above)
"""

import os
import signal
import socket
import struct
import sys
import time

WINDOW_S = 3.0
RATE = 25000  # datagrams per second, all ports together
COMM = "rma_busy_target"


def say(line):
    print(line, flush=True)


def read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def job_ranks(tag):
    """{rank: pid} of the processes of the job tagged TAG."""
    ranks = {}
    want = ("BTL_OFI_JOB_TAG=" + tag).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        if (read("/proc/%s/comm" % name) or "").strip() != COMM:
            continue
        env = (read("/proc/%s/environ" % name, "rb") or b"").split(b"\0")
        if want not in env:
            continue
        for item in env:
            if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                try:
                    ranks[int(item.split(b"=", 1)[1])] = int(name)
                except ValueError:
                    pass
    return ranks


def threads(pid):
    """{tid: comm} of the process, empty once it is gone."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        comm = read("/proc/%d/task/%s/comm" % (pid, tid))
        if comm is not None:
            out[int(tid)] = comm.strip()
    return out


def decode(hexaddr, proto):
    """'0100007F:1F90' of /proc/net/udp (udp6: 32 hex digits) -> (addr, port);
    the kernel prints each 32-bit word of the address in host order."""
    addr, port = hexaddr.split(":")
    words = [int(addr[i:i + 8], 16) for i in range(0, len(addr), 8)]
    raw = b"".join(struct.pack("=I", w) for w in words)
    family = socket.AF_INET if proto == "udp" else socket.AF_INET6
    return socket.inet_ntop(family, raw), int(port, 16)


def udp_sockets(rank, pid):
    """[(rank, pid, proto, addr, port, inode)] of the process's UDP sockets."""
    inodes = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return []
    for fd in fds:
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for proto in ("udp", "udp6"):
        # the process's own network namespace
        for line in (read("/proc/%d/net/%s" % (pid, proto)) or "").splitlines()[1:]:
            f = line.split()
            if len(f) > 9 and f[9] in inodes:
                addr, port = decode(f[1], proto)
                found.append((rank, pid, proto, addr, port, f[9]))
    return found


def list_sockets(ranks):
    out = []
    for rank in sorted(ranks):
        for s in udp_sockets(rank, ranks[rank]):
            say("socket %d %d %s %s %d %s" % s)
            out.append(s)
    return out


def ticks(pid):
    """{tid: utime + stime} of the process's threads but the main one;
    None once the process is gone."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    for tid in tids:
        if int(tid) == pid:
            continue
        stat = read("/proc/%d/task/%s/stat" % (pid, tid))
        if stat is None:
            continue  # ended between the listing and the read
        rest = stat[stat.rindex(")") + 2:].split()  # rest[0] is field 3
        out[int(tid)] = int(rest[11]) + int(rest[12])  # fields 14 and 15
    if read("/proc/%d/stat" % pid) is None:
        return None
    return out


STOP = []  # set on SIGTERM: the job ended, the window closes now


def window(pid0, targets):
    """The window of WINDOW_S seconds: floods TARGETS [(family, (addr,
    port))] at RATE in all (none: idle) and samples rank 0's threads every
    0.1 s.  Closes early when rank 0 ends or on SIGTERM, with the last
    sample.  Returns (seconds, before, after, sent, failed); None if rank 0
    was gone at the start."""
    socks = {}
    dests = []
    for family, dest in targets:
        if family not in socks:
            socks[family] = socket.socket(family, socket.SOCK_DGRAM)
            socks[family].setblocking(False)
        dests.append((socks[family], dest))
    payloads = [os.urandom(16) for _ in range(1024)]
    sent = failed = i = 0
    before = ticks(pid0)
    start = time.monotonic()
    if before is None:
        return None
    after, at = before, start
    end = start + WINDOW_S
    sample = start + 0.1
    while not STOP:
        now = time.monotonic()
        if now >= end:
            break
        due = min(int((now - start) * RATE), sent + failed + 500) if dests else 0
        while sent + failed < due:
            sock, dest = dests[i % len(dests)]
            try:
                sock.sendto(payloads[i % len(payloads)], dest)
                sent += 1
            except OSError:
                failed += 1
            i += 1
        if now >= sample:
            sample += 0.1
            now_ticks = ticks(pid0)
            if now_ticks is None:
                break
            after, at = now_ticks, now
        time.sleep(0.001 if dests else 0.02)
    for sock in socks.values():
        sock.close()
    now = time.monotonic()
    now_ticks = ticks(pid0)
    if now_ticks is not None:
        after, at = now_ticks, now
    return at - start, before, after, sent, failed


def main():
    tag, mode, wait_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    signal.signal(signal.SIGTERM, lambda *_: STOP.append(1))
    np = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    deadline = time.monotonic() + wait_s

    ranks = {}
    while len(ranks) < np or 0 not in ranks:
        if STOP or time.monotonic() > deadline:
            say("error=found ranks %s of the job, not all %d, within %g s"
                % (sorted(ranks) or "none", np, time.monotonic() - deadline + wait_s))
            return
        time.sleep(0.05)
        ranks = job_ranks(tag)
    for rank in sorted(ranks):
        say("rank %d %d" % (rank, ranks[rank]))
    pid0 = ranks[0]

    look = None
    while look is None:
        tids = threads(pid0)
        if not tids:
            say("error=rank 0 (pid %d) ended without a btl-ofi-look thread" % pid0)
            return
        look = next((t for t, c in tids.items() if c == "btl-ofi-look"), None)
        if look is None:
            if STOP or time.monotonic() > deadline:
                say("error=rank 0 (pid %d) had no btl-ofi-look thread within %g s"
                    % (pid0, time.monotonic() - deadline + wait_s))
                return
            time.sleep(0.005)
    say("look %d" % look)

    targets = []
    for _, pid, proto, addr, port, _ in list_sockets(ranks):
        if pid != pid0:
            continue
        if proto == "udp":
            targets.append((socket.AF_INET, (addr if addr != "0.0.0.0" else "127.0.0.1", port)))
        else:
            targets.append((socket.AF_INET6, (addr if addr != "::" else "::1", port)))

    if mode == "flood" and not targets:
        say("error=rank 0 has no UDP socket to flood")
    got = window(pid0, targets if mode == "flood" else [])
    list_sockets(ranks)
    if got is None:
        say("error=rank 0 (pid %d) ended before the window" % pid0)
        return
    seconds, before, after, sent, failed = got
    if mode == "flood":
        say("sent=%d failed=%d" % (sent, failed))
    names = threads(pid0)
    total = 0
    for tid in sorted(after):
        used = after[tid] - before.get(tid, 0)
        total += used
        say("thread %d %s %d" % (tid, names.get(tid, "?").replace(" ", "_"), used))
    say("window_ms=%d" % round(seconds * 1000))
    say("cpu_ticks=%d" % total)


if __name__ == "__main__":
    main()
