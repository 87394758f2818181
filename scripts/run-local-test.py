#!/usr/bin/env python3
"""run-local-test.py: make run as a newcomer meets it (make test-run-local).

Over scripts/run-local.sh and bin/ (built first), with a tiny model in a
temporary directory:
  1. a port that is taken stops it at once, naming the variable that moves
     it (API_METRICS_ADDR for the api's metrics);
  2. with every port moved (PORT, EMBEDDED_NATS_PORT, API_METRICS_ADDR,
     METRICS_ADDR, EMBEDDING_METRICS_ADDR) the stack comes up there, its
     worker live, its embedding worker's metrics served;
  3. Ctrl-C, SIGINT to the foreground process group as a terminal sends it,
     stops the worker before the api: no "pull failed" in its output;
  3b. the worker process killed by SIGILL, as an engine crash kills it:
     make run names the worker and the signal, and exits 132;
  3c. variant A (4-bit) on an empty model directory answers POST /generate
     with the seed's {"generated_text": …}, twice;
  4. variant C on an empty model directory, on either engine (the default
     ggml, and IMAGE_ENGINE=onnx), writes the files that engine
     reads and answers a PNG; IMAGE_ENGINE=ggml on a directory with the
     ONNX export alone stops at once, saying what to do;
  5. make run's process group sent SIGKILL, or SIGTERM then SIGKILL a
     second later (as supervisors and test harnesses do), leaves no process
     behind and every port free, so the next make run starts.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail(msg, out=""):
    sys.stderr.write(f"FAIL: {msg}\n{out[-4000:]}\n")
    sys.exit(1)


def foreground():
    # A session of its own, SIGINT at its default: the group is what a
    # terminal's foreground job would be.
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def session_procs(sid):
    """The processes still alive in session sid, as "pid command" lines."""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            left.append(pid + " " + stat[stat.index("(") + 1:stat.rindex(")")])
    return left


def port_free(port):
    """Whether a new listener can take port, as Go's do: with SO_REUSEADDR,
    past the TIME_WAIT of connections the killed stack had accepted."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def wait_live(p, port):
    """Whether the stack p started answers on port with a live worker
    within two minutes (False at once if p exits)."""
    for _ in range(240):
        try:
            root = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2))
            if root.get("live_workers", 0) >= 1:
                return True
        except OSError:
            pass
        if p.poll() is not None:
            return False
        time.sleep(0.5)
    return False


work = tempfile.mkdtemp()
try:
    ports = {name: free_port() for name in ("PORT", "EMBEDDED_NATS_PORT", "API_METRICS", "WORKER_METRICS", "EMBEDDING_METRICS")}
    env = dict(os.environ, VARIANT="B", MODEL_DIR=os.path.join(work, "model"), EMBEDDED_NATS_STORE=os.path.join(work, "nats"),
               EMBEDDING_MODEL_DIR=os.path.join(work, "model-embedding"),
               PORT=str(ports["PORT"]), EMBEDDED_NATS_PORT=str(ports["EMBEDDED_NATS_PORT"]),
               API_METRICS_ADDR=f"127.0.0.1:{ports['API_METRICS']}", METRICS_ADDR=f"127.0.0.1:{ports['WORKER_METRICS']}",
               EMBEDDING_METRICS_ADDR=f"127.0.0.1:{ports['EMBEDDING_METRICS']}")

    # 1. The api's metrics port taken.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports["API_METRICS"]))
        busy.listen()
        p = subprocess.run(["scripts/run-local.sh"], env=env, capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or "API_METRICS_ADDR (127.0.0.1:%d is taken)" % ports["API_METRICS"] not in p.stderr:
        fail("a taken metrics port is not named by API_METRICS_ADDR", p.stdout + p.stderr)
    print("ok: a taken port names API_METRICS_ADDR")

    # 2. Every port moved.
    log = open(os.path.join(work, "run.log"), "w+")
    p = subprocess.Popen(["scripts/run-local.sh"], env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=foreground)
    live = wait_live(p, ports["PORT"])
    log.seek(0)
    if not live:
        p.kill()
        fail("the stack did not come up on the moved ports", log.read())
    for name in ("API_METRICS", "WORKER_METRICS", "EMBEDDING_METRICS"):
        with urllib.request.urlopen(f"http://127.0.0.1:{ports[name]}/metrics", timeout=5) as r:
            if r.status != 200:
                fail(f"no /metrics on {name}")
    print("ok: the stack serves on the moved ports")

    # 3. Ctrl-C.
    os.killpg(p.pid, signal.SIGINT)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail("Ctrl-C did not stop the stack")
    log.seek(0)
    out = log.read()
    stopped, api_down = out.find('"worker stopped"'), out.find('"shutting down')
    if "pull failed" in out or stopped < 0 or api_down < 0 or stopped > api_down:
        fail("Ctrl-C: the worker did not stop cleanly before the api", out)
    print("ok: Ctrl-C stops the worker, then the api, with no pull failures")

    # 3b. An engine crash: SIGILL to the worker process (its supervisor's
    # child, whose pid the supervisor logs).
    log = open(os.path.join(work, "run-sigill.log"), "w+")
    p = subprocess.Popen(["scripts/run-local.sh"], env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=foreground)
    try:
        if not wait_live(p, ports["PORT"]):
            log.seek(0)
            fail("the stack did not come up for the SIGILL check", log.read())
        log.seek(0)
        # The chat worker's, not the embedding worker's (<host>-embedding).
        started = [json.loads(line) for line in log.read().splitlines()
                   if '"msg":"worker process started"' in line and '-embedding"' not in line]
        if not started:
            log.seek(0)
            fail("the worker's supervisor did not log its worker process", log.read())
        os.kill(started[0]["pid"], signal.SIGILL)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    log.seek(0)
    out = log.read()
    said = re.search(r"make run: the worker \(pid \d+\) died of SIGILL \(illegal instruction\); see its log above", out)
    if p.returncode != 132 or not said or '"msg":"worker process died"' not in out:
        fail(f"SIGILL to the worker process: make run exited {p.returncode} without naming the worker and the signal", out)
    print("ok: SIGILL to the worker process: make run names the worker and the signal, and exits 132")

    # 3c. Variant A, the 4-bit model whose first request killed the worker
    # on CPUs with AMX (docs/engine.md, patch 0005): make run on an empty
    # model directory answers POST /generate with the seed's shape, twice.
    env_a = dict(env, VARIANT="A", MODEL_DIR=os.path.join(work, "model-a"), EMBEDDED_NATS_STORE=os.path.join(work, "nats-a"))
    log = open(os.path.join(work, "run-a.log"), "w+")
    p = subprocess.Popen(["scripts/run-local.sh"], env=env_a, stdout=log, stderr=subprocess.STDOUT, preexec_fn=foreground)
    answers = []
    try:
        if wait_live(p, ports["PORT"]):
            for _ in range(2):
                req = urllib.request.Request(f"http://127.0.0.1:{ports['PORT']}/generate", data=b'{"text":"Once upon a time"}',
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=120) as r:
                        answers.append((r.status, json.loads(r.read())))
                except (OSError, ValueError) as e:
                    answers.append((None, str(e)))
    finally:
        try:
            os.killpg(p.pid, signal.SIGINT)
            p.wait(timeout=60)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
    log.seek(0)
    if len(answers) != 2 or any(st != 200 or not isinstance(body, dict) or set(body) != {"generated_text"} or not isinstance(body["generated_text"], str)
                                for st, body in answers):
        fail(f"make run VARIANT=A did not answer POST /generate twice with {{\"generated_text\": …}}: {answers}", log.read())
    print("ok: make run VARIANT=A (4-bit) answers POST /generate")

    # 4. Variant C on either engine, from an empty model directory.
    def generate_c(engine):
        env_c = dict(env, VARIANT="C", IMAGE_ENGINE=engine, MODEL_DIR=os.path.join(work, "model-c-" + engine),
                     EMBEDDED_NATS_STORE=os.path.join(work, "nats-c-" + engine))
        log = open(os.path.join(work, f"run-c-{engine}.log"), "w+")
        p = subprocess.Popen(["scripts/run-local.sh"], env=env_c, stdout=log, stderr=subprocess.STDOUT, preexec_fn=foreground)
        png = b""
        try:
            if wait_live(p, ports["PORT"]):
                req = urllib.request.Request(f"http://127.0.0.1:{ports['PORT']}/generate", data=b'{"text":"a red fox"}',
                                             headers={"Content-Type": "application/json"})
                try:
                    png = urllib.request.urlopen(req, timeout=170).read()
                except OSError:
                    pass
        finally:
            try:
                os.killpg(p.pid, signal.SIGINT)
                p.wait(timeout=60)
            except ProcessLookupError:
                pass  # the stack had already stopped
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        log.seek(0)
        if not png.startswith(b"\x89PNG\r\n\x1a\n"):
            fail(f"IMAGE_ENGINE={engine} make run VARIANT=C on an empty model directory answered no PNG", log.read())
        return env_c

    env_c = generate_c("ggml")
    print("ok: make run VARIANT=C (ggml, the default) writes both engines' files and answers a PNG")
    generate_c("onnx")
    print("ok: IMAGE_ENGINE=onnx make run VARIANT=C answers a PNG")

    onnx_only = os.path.join(work, "model-c-onnx-only")
    subprocess.run(["bin/genqctl", "models", "tiny", "--variant", "C", "--engine", "onnx", "--dir", onnx_only], check=True, capture_output=True)
    p = subprocess.run(["scripts/run-local.sh"], env=dict(env_c, MODEL_DIR=onnx_only), capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or "IMAGE_ENGINE=ggml (the default) reads" not in p.stderr:
        fail("IMAGE_ENGINE=ggml on an ONNX-only model directory did not stop with a sentence", p.stdout + p.stderr)
    print("ok: IMAGE_ENGINE=ggml on the ONNX export alone stops and says what to do")

    # 5. make run's group killed: nothing left behind, every port free.
    for signals in ((signal.SIGKILL,), (signal.SIGTERM, signal.SIGKILL)):
        what = " then ".join(sig.name for sig in signals)
        log = open(os.path.join(work, f"run-{what}.log"), "w+")
        p = subprocess.Popen(["make", "--no-print-directory", "run"], env=env, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=foreground)
        if not wait_live(p, ports["PORT"]):
            os.killpg(p.pid, signal.SIGKILL)
            log.seek(0)
            fail(f"make run did not come up before {what}", log.read())
        for i, sig in enumerate(signals):
            if i:
                time.sleep(1)
            os.killpg(p.pid, sig)
        p.wait(timeout=30)
        left, held = [], []
        for _ in range(50):  # the kernel closes a killed process's sockets as it reaps it
            left = session_procs(p.pid)
            held = [name for name, port in ports.items() if not port_free(port)]
            if not left and not held:
                break
            time.sleep(0.1)
        if left or held:
            for line in left:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            fail(f"{what} to make run's group left processes {left} and ports {held}")
        print(f"ok: {what} to make run's group leaves no process and no port behind")
finally:
    shutil.rmtree(work, ignore_errors=True)
