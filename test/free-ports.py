#!/usr/bin/env python3
"""Prints N free TCP ports on 127.0.0.1 (default 1), one a line, for the
test scripts' stacks.

The ports come from below the kernel's ephemeral range, which outgoing
connections draw their source ports from: a port picked there with bind(0)
and released could be taken by a NATS or HTTP client's connection before
its server bound it, and a stack then failed as "embedded nats did not
start". All N sockets stay bound until every port is picked, so the N
differ.
"""
import random
import socket
import sys


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    low, high = 10000, ephemeral_low()
    held, ports = [], []
    for _ in range(100 * n):
        if len(ports) == n:
            break
        port = random.randrange(low, high)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        held.append(s)
        ports.append(port)
    if len(ports) < n:
        sys.exit(f"free-ports: found {len(ports)} of {n} free ports in {low}-{high - 1}")
    print("\n".join(map(str, ports)))
    for s in held:
        s.close()


main()
