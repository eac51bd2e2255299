"""Start real zest daemons on loopback for integration tests.

Every test gets its own temp dir, free ports, a datanode with k+m drive folders and
(optionally) the S3 gateway in front of it. Daemons are stopped with SIGTERM at the end;
a daemon that exits non-zero, or that has to be killed, fails the test. Logs stay in
the temp dir and are printed when a test fails.

The gateway and the tools talk to datanodes over mutual TLS: a throwaway cluster CA,
a datanode certificate (SAN 127.0.0.1, localhost) and a client certificate are made
once per test process by tools/zest-certs.sh (certs()). Cluster(tls=False), or
ZEST_INSECURE=1 for a whole run, starts everything with --insecure instead.
Cluster(local=True) links the gateway to the datanode over the datanode's Unix socket.
"""
import atexit
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

BUILD = os.environ.get("ZEST_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
DATANODE = os.environ.get("ZEST_DATANODE_BIN") or os.path.join(BUILD, "datanode", "zest-datanode")
GATEWAY = os.path.join(BUILD, "s3gw", "zest-s3gw")
BENCH = os.path.join(BUILD, "tools", "zest-bench")


def faults_built(build=None):
    """Was this build configured with -Dtest_faults=true (common/zc_fault.h), so that its
    daemons read ZEST_FAULTS?"""
    import json
    path = os.path.join(build or BUILD, "meson-info", "intro-buildoptions.json")
    try:
        with open(path) as f:
            return any(o["name"] == "test_faults" and o["value"] is True for o in json.load(f))
    except (OSError, ValueError, KeyError):
        return False


def require_faults():
    """Skip the whole test (exit 77) in a build without fault points."""
    if not faults_built():
        print("SKIP: this test arms fault points (ZEST_FAULTS): build with "
              "-Dtest_faults=true")
        sys.exit(77)

# Set by tests/run.sh for the ASan+UBSan build, and implied under valgrind: memory figures are
# then the tool's, not ours.
SANITIZED = (os.environ.get("ZEST_SANITIZED") == "1"
             or os.environ.get("ZEST_VALGRIND") == "memcheck")

# ZEST_VALGRIND=memcheck runs every daemon under valgrind's memcheck: any memory error or
# definitely lost block makes it exit 97, which fails the test like any non-zero exit.
VALGRIND_ARGS = ["valgrind", "-q", "--tool=memcheck", "--error-exitcode=97",
                 "--leak-check=full", "--errors-for-leak-kinds=definite",
                 "--show-leak-kinds=definite", "--num-callers=30"]

CERTS_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                        "zest-certs.sh")
# Plaintext gRPC for the whole run (e.g. to compare against mTLS).
INSECURE = os.environ.get("ZEST_INSECURE") == "1"
_certs = None


def make_certs(d):
    """A cluster CA in d with a datanode (server) and a gateway (client) certificate."""
    subprocess.run([CERTS_SH, d], check=True, timeout=60)
    return {"dir": d, "ca": os.path.join(d, "ca.pem"),
            "dn_cert": os.path.join(d, "datanode.pem"), "dn_key": os.path.join(d, "datanode.key"),
            "cl_cert": os.path.join(d, "gateway.pem"), "cl_key": os.path.join(d, "gateway.key")}


def certs():
    """This test process's cluster CA and certificates (made on first use)."""
    global _certs
    if _certs is None:
        d = tempfile.mkdtemp(prefix="zest-certs-")
        atexit.register(shutil.rmtree, d, True)
        _certs = make_certs(d)
    return _certs


def dn_tls_args(tls=True, c=None):
    """zest-datanode's security flags: mTLS with c (default certs()) or --insecure."""
    if not tls:
        return ["--insecure"]
    c = c or certs()
    return ["--tls-ca", c["ca"], "--tls-cert", c["dn_cert"], "--tls-key", c["dn_key"]]


def client_tls_args(tls=True, c=None):
    """The datanode-client flags of zest-s3gw, zest-bench grpc and dn_client."""
    if not tls:
        return ["--insecure"]
    c = c or certs()
    return ["--cluster-ca", c["ca"], "--cluster-cert", c["cl_cert"],
            "--cluster-key", c["cl_key"]]


ACCESS_KEY = "zesttest"
SECRET_KEY = "zesttestsecret"


def _listen_ports():
    """The ports free_port() draws from: below the kernel's ephemeral range
    (net.ipv4.ip_local_port_range), so no outgoing connection's source port, of this test or
    of another one running alongside, can take a port a daemon is to bind, or is to bind
    again when restarted. None (the kernel's choice) if that range starts too low."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 32768
    return range(10000, lo) if lo - 10000 >= 4096 else None


_LISTEN_PORTS = _listen_ports()
_given = set()  # handed out by this process: never twice
_rng = random.Random(os.urandom(16))


def free_port(host="127.0.0.1"):
    """A port free on host now, drawn at random below the ephemeral range (each test process
    draws on its own). A daemon binding it later may still lose it to another test's
    listener: PortTaken, and start_retrying picks again."""
    for _ in range(200):
        if _LISTEN_PORTS is None:
            break
        port = _rng.choice(_LISTEN_PORTS)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _given.add(port)
        return port
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_http(port, path="/metrics", timeout=15.0, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before serving :{port}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"nothing answered on 127.0.0.1:{port}{path}")


def metrics(port):
    """The /metrics text as {series-with-labels: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        out[name] = float(value)
    return out


def metric_sum(m, name):
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


class PortTaken(RuntimeError):
    """A port free_port() handed out was taken before the daemon bound it (another test's
    listener, or an outgoing connection's ephemeral port)."""


class BackendNotReady(RuntimeError):
    """A gateway gave up at start on a datanode that was up but had not answered its first
    call within the gateway's start deadline (a datanode under valgrind on a loaded machine
    completes its first TLS handshakes late); started again, as a supervisor would."""


def start_retrying(start, tries=3):
    """Call start() until it does not fail with PortTaken or BackendNotReady; start picks
    fresh ports."""
    for i in range(tries):
        try:
            return start()
        except (PortTaken, BackendNotReady):
            if i == tries - 1:
                raise


class Daemon:
    def __init__(self, argv, log_path, metrics_port):
        self.argv = argv
        self.log_path = log_path
        self.metrics_port = metrics_port
        self.valgrind = os.environ.get("ZEST_VALGRIND") == "memcheck"
        start_timeout = float(os.environ.get("ZEST_START_TIMEOUT", "60"))  # a hang check
        if self.valgrind:
            argv = VALGRIND_ARGS + argv
            start_timeout *= 4
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_http(metrics_port, proc=self.proc, timeout=start_timeout)
        except Exception:
            self.proc.kill()  # a daemon that never came up must not outlive the test
            self.proc.wait()
            self.log.close()
            with open(log_path, "rb") as f:  # say why: its own last words
                tail = f.read()[-3000:].decode(errors="replace")
            sys.stderr.write(f"----- {os.path.basename(log_path)} (tail) -----\n{tail}\n")
            if "Address already in use" in tail:
                raise PortTaken(tail) from None
            if "backend=unavailable" in tail:
                raise BackendNotReady(tail) from None
            raise

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout=20):
        if self.valgrind:
            timeout *= 4  # leak checking a large heap takes a while
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"{self.argv[0]} ignored SIGTERM for {timeout}s")
        self.log.close()
        return self.proc.returncode


class Cluster:
    """A datanode (k+m drive folders) and optionally the gateway, in a temp dir."""

    def __init__(self, ec="4+2", gateway=True, marshaller="zerocopy", extra_dn=(),
                 extra_gw=(), cell_size=None, root=None, tls=None, local=False):
        self.root = root or tempfile.mkdtemp(prefix="zest-it-")
        k, m = (int(x) for x in ec.split("+"))
        self.k, self.m = k, m
        self.ec = ec
        self.drives = [os.path.join(self.root, f"d{i}") for i in range(k + m)]
        for d in self.drives:
            os.makedirs(d, exist_ok=True)
        self.marshaller = marshaller
        self.extra_dn = list(extra_dn)
        self.cell_size = cell_size
        self.dn = None
        self.gw = None
        self.extra_gw = list(extra_gw)
        self.tls = not INSECURE if tls is None else tls
        # local: the gateway reaches the datanode over its --unix-socket (no TLS on it)
        self.sock = os.path.join(self.root, "dn.sock") if local else None

        def first_datanode():
            self.dn_port = free_port()
            self.dn_metrics = free_port()
            self.start_datanode()

        start_retrying(first_datanode)
        if gateway:
            start_retrying(self.start_gateway)

    def start_gateway(self):
        self.gw_port = free_port()
        self.gw_metrics = free_port()
        link = ([f"unix:{self.sock}"] if self.sock else
                [f"127.0.0.1:{self.dn_port}", *client_tls_args(self.tls)])
        argv = [GATEWAY, "--listen", f"127.0.0.1:{self.gw_port}", "--datanode", *link,
                "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY,
                "--metrics", f"127.0.0.1:{self.gw_metrics}", *self.extra_gw]
        self.gw = Daemon(argv, os.path.join(self.root, "s3gw.log"), self.gw_metrics)

    def start_datanode(self):
        argv = [DATANODE, "--listen", f"127.0.0.1:{self.dn_port}",
                "--metrics", f"127.0.0.1:{self.dn_metrics}", "--ec", self.ec,
                "--marshaller", self.marshaller, *dn_tls_args(self.tls)]
        if self.cell_size:
            argv += ["--cell-size", str(self.cell_size)]
        if self.sock:
            argv += ["--unix-socket", self.sock]
        for d in self.drives:
            argv += ["--drive", d]
        self.dn = Daemon(argv + self.extra_dn, os.path.join(self.root, "datanode.log"),
                         self.dn_metrics)

    def client_args(self):
        """dn_client / zest-bench grpc flags for this cluster's datanode (after --target)."""
        return client_tls_args(self.tls)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.gw_port}"

    def s3_env(self):
        env = dict(os.environ)
        env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                   AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        return env

    def dump_logs(self):
        for name in ("datanode.log", "s3gw.log"):
            p = os.path.join(self.root, name)
            if os.path.exists(p):
                with open(p, "rb") as f:
                    tail = f.read()[-6000:]
                sys.stderr.write(f"----- {name} (tail) -----\n{tail.decode(errors='replace')}\n")

    def stop(self):
        rcs = []
        for d in (self.gw, self.dn):
            if d is not None:
                rcs.append((d.argv[0], d.stop()))
        return rcs


def gateway_over(clusters, root, name, extra=()):
    """A zest-s3gw over the datanodes of several Clusters (started with gateway=False), its
    log at root/name.log, extra flags after the others. Returns (endpoint URL, Daemon); the
    caller stops the Daemon."""
    port, mport = free_port(), free_port()
    argv = [GATEWAY, "--listen", f"127.0.0.1:{port}", "--access-key", ACCESS_KEY,
            "--secret-key", SECRET_KEY, "--metrics", f"127.0.0.1:{mport}",
            *client_tls_args(clusters[0].tls)]
    for c in clusters:
        argv += ["--datanode", f"127.0.0.1:{c.dn_port}"]
    argv += list(extra)
    d = Daemon(argv, os.path.join(root, name + ".log"), mport)
    return f"http://127.0.0.1:{port}", d


@contextlib.contextmanager
def cluster(**kw):
    c = Cluster(**kw)
    ok = False
    try:
        yield c
        ok = True
    finally:
        try:
            rcs = c.stop()
        except Exception:
            ok = False
            raise
        finally:
            if not ok:
                c.dump_logs()
        bad = [(a, rc) for a, rc in rcs if rc != 0]
        if ok and bad:
            c.dump_logs()
            raise AssertionError(f"daemons exited non-zero at shutdown: {bad}")
        if ok and not os.environ.get("ZEST_KEEP"):
            shutil.rmtree(c.root, ignore_errors=True)


def curl_status(*args, timeout=20):
    """curl with the harness's credentials (SigV4, unsigned payload); the HTTP status as text
    ("000" when nothing answered)."""
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                        "--max-time", str(timeout), "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "--user", f"{ACCESS_KEY}:{SECRET_KEY}",
                        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *args],
                       capture_output=True, text=True, timeout=timeout + 10)
    return p.stdout


def select(tests, names=None):
    """The test functions named on the command line, in that order (all of them when none
    is): tests/integration/meson.build runs a long script as several meson tests, each a
    part of its functions, so that the parts run side by side. A name that is not one of
    them is an error (exit 2), never a test quietly left out."""
    names = sys.argv[1:] if names is None else names
    if not names:
        return tests
    by_name = {t.__name__: t for t in tests}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        print(f"no such test function: {' '.join(unknown)} (have: {' '.join(by_name)})")
        sys.exit(2)
    return [by_name[n] for n in names]


def run_tests(tests):
    """Run test functions (those named on the command line, select()), print one line each
    and a summary; exit 1 on any failure."""
    tests = select(tests)
    failed = 0
    for t in tests:
        t0 = time.time()
        try:
            t()
            print(f"ok   {t.__name__} ({time.time() - t0:.1f}s)", flush=True)
        except Exception as e:  # report and go on with the next test
            failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {t.__name__}: {e}", flush=True)
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
