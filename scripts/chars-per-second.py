#!/usr/bin/env python3
"""Generated characters per second against a running genq, by concurrency.

A black-box check with the standard library only (urllib, one connection per
request, as a plain client makes them): each level runs closed-loop clients
that POST /generate one request after another, and reports all answers'
characters over the wall time, median of the rounds, and each level against
concurrency 1.

    make run &                                   # variant B's tiny model
    scripts/chars-per-second.py http://localhost:8080 1,4 150 5
"""
import json
import statistics
import sys
import threading
import time
import urllib.request

PROMPTS = [
    "Write a haiku about queues.",
    "Explain continuous batching in two sentences.",
    "What is the capital of France?",
    "List three uses of a message broker.",
    "Translate 'good morning' into German.",
    "Give me a name for a cat.",
]


def generate(url, i):
    body = json.dumps({"text": PROMPTS[i % len(PROMPTS)]}).encode()
    req = urllib.request.Request(url + "/generate", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return len(json.loads(r.read())["generated_text"])


def round_rate(url, clients, requests):
    lock = threading.Lock()
    state = {"next": 0, "chars": 0}

    def client():
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= requests:
                return
            n = generate(url, i)
            with lock:
                state["chars"] += n

    start = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return state["chars"] / (time.monotonic() - start)


def main():
    url = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8080"
    levels = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1,4").split(",")]
    requests = int(sys.argv[3]) if len(sys.argv) > 3 else 150
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    rates = {}
    for c in levels:
        runs = [round_rate(url, c, max(requests, 3 * c)) for _ in range(rounds)]
        rates[c] = statistics.median(runs)
        print(f"c{c}: {rates[c]:.0f} chars/s (rounds: {', '.join(f'{r:.0f}' for r in runs)})", flush=True)
    if 1 in rates:
        for c in levels:
            if c != 1:
                print(f"c{c}/c1 = {rates[c] / rates[1]:.2f}")


if __name__ == "__main__":
    main()
