#!/usr/bin/env python3
"""A soak of `attnlab serve` on loopback: everything at once, bounded in count and time.

Starts `attnlab serve --port 0` and, for --seconds (default 60), runs together:
  - 4 clients sending small valid requests (POST /api/attention on the default scenario),
  - 2 clients sending invalid ones (broken JSON, text/plain, a foreign Host, an unknown path),
  - 2 clients sending heavy ones (a 12.6 MB random head, and a probe of it),
  - 8 slow senders (a header byte a second), and 64 idle sockets (reopened when closed),
while the health check is timed every 50 ms. Prints requests/s, p50/p99 of /api/health
during the attack, the replies by status, connection errors, and the server's resident
memory before, at its largest during, and after. Loopback only; every loop stops at the
deadline.

Run:  python3 bench/soak.py [--attnlab build/attnlab] [--seconds 60]
"""
import argparse
import collections
import http.client
import json
import socket
import subprocess
import threading
import time

SMALL = json.dumps({"scenario": "three-tokens"})
HEAVY = json.dumps({"scenario": {"format": "attnlab-scenario/1", "tokens": ["a"], "embeddings": [[1] * 1024],
                                 "heads": [{"random": 1, "d_k": 512, "d_v": 512}]}})
INVALID = [("POST", "/api/attention", "{\"scenario\": [[[", "application/json", None),
           ("POST", "/api/attention", SMALL, "text/plain", None),
           ("POST", "/api/attention", SMALL, "application/json", "evil.example"),
           ("GET", "/api/nope", None, None, None)]


def resident_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.statuses = collections.Counter()
        self.errors = 0
        self.requests = 0

    def add(self, status):
        with self.lock:
            self.requests += 1
            self.statuses[status] += 1

    def error(self):
        with self.lock:
            self.errors += 1


def request(port, method, path, body=None, content_type="application/json", host=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Host": host or f"127.0.0.1:{port}"}
    if body is not None:
        headers["Content-Type"] = content_type
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attnlab", default="build/attnlab")
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    server = subprocess.Popen([args.attnlab, "serve", "--port", "0"], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline().strip().rsplit(":", 1)[1].rstrip("/"))
    time.sleep(0.5)
    before = resident_bytes(server.pid)
    tally, health, largest = Tally(), [], [before]
    stop_at = time.monotonic() + args.seconds

    def running():
        return time.monotonic() < stop_at

    def loop(send):
        while running():
            try:
                tally.add(send())
            except OSError:
                tally.error()

    def slow_sender():
        while running():
            try:
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                while running():
                    s.sendall(b"a")
                    time.sleep(1)
                s.close()
            except OSError:
                tally.error()
                time.sleep(0.1)

    def idle_sockets():
        held = []
        while running():
            held = [s for s in held if s.fileno() >= 0]
            while len(held) < 64:
                try:
                    held.append(socket.create_connection(("127.0.0.1", port)))
                except OSError:
                    tally.error()
                    break
            time.sleep(0.5)
            for s in list(held):  # reopen those the server closed
                s.setblocking(False)
                try:
                    if s.recv(1) == b"":
                        s.close()
                        held.remove(s)
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    held.remove(s)
        for s in held:
            s.close()

    def timed_health():
        while running():
            start = time.perf_counter()
            try:
                if request(port, "GET", "/api/health", timeout=10) == 200:
                    health.append(time.perf_counter() - start)
            except OSError:
                tally.error()
            largest.append(resident_bytes(server.pid))
            time.sleep(0.05)

    workers = [threading.Thread(target=loop, args=(lambda: request(port, "POST", "/api/attention", SMALL),))
               for _ in range(4)]
    def invalid():
        method, path, body, content_type, host = INVALID[int(time.monotonic() * 10) % len(INVALID)]
        return request(port, method, path, body, content_type or "application/json", host)

    workers += [threading.Thread(target=loop, args=(invalid,)) for _ in range(2)]
    workers.append(threading.Thread(target=loop, args=(lambda: request(port, "POST", "/api/attention", HEAVY),)))
    workers.append(threading.Thread(target=loop, args=(lambda: request(port, "POST", "/api/probe", HEAVY),)))
    workers += [threading.Thread(target=slow_sender) for _ in range(8)]
    workers += [threading.Thread(target=idle_sockets), threading.Thread(target=timed_health)]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - started
    time.sleep(2)
    after = resident_bytes(server.pid)
    alive = request(port, "GET", "/api/health") == 200
    server.terminate()
    server.wait(timeout=60)
    health.sort()

    def quantile(q):
        return health[min(len(health) - 1, int(q * len(health)))] * 1e3 if health else float("nan")

    mib = 1 << 20
    print(f"soak of attnlab serve on loopback, {elapsed:.0f} s: 4 small, 2 invalid and 2 heavy request loops, "
          f"8 slow senders, 64 idle sockets")
    print(f"  requests: {tally.requests} ({tally.requests / elapsed:.0f}/s); by status: "
          f"{dict(sorted(tally.statuses.items()))}; connection errors: {tally.errors}")
    print(f"  /api/health during the attack: {len(health)} checks, p50 {quantile(0.5):.1f} ms, "
          f"p99 {quantile(0.99):.1f} ms, slowest {health[-1] * 1e3 if health else float('nan'):.1f} ms")
    print(f"  resident memory: before {before / mib:.0f} MiB, largest during {max(largest) / mib:.0f} MiB, "
          f"after {after / mib:.0f} MiB; server answering after: {alive}")


if __name__ == "__main__":
    main()
