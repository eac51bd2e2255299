"""Real zest clusters on loopback for integration tests (docs/cluster.md).

    with ch.cluster(nodes=8, ec="4+2") as c:       # etcd, 8 datanodes, a gateway --cluster
        s3 = c.s3()
        c.kill(3)                                   # SIGKILL dn-3
        c.restart(3, wipe=True)                     # back on the same address, drives empty
        c.etcd.stop_member(0); c.etcd.start_member(0)
        c.node_metrics(1)["zest_heal_pending_cells"]

- Addresses: each test process has its own 127.a.b.0/24 (NET, from its pid), so tests can
  run side by side; ports are drawn below the ephemeral range (zest_harness.free_port).
- etcd: one or three members (Etcd). Free ports on NET.1-3 by default; fixed=True uses
  127.0.1.1-3:2379/2380 like `make cluster` and skips when they are taken.
- Datanodes: dn-1..dn-N, each on its own address NET.<base+i> (free ports there), with its
  own certificate naming its node (DNS:dn-i, its identity: peers and the gateway count a node
  only when its certificate names it) and its address (tools/zest-certs.sh server, serverAuth +
  clientAuth: the datanodes dial each other), --cluster/--node, a few drive folders, the scheme and the small
  cell and group sizes a test asks for. A flag the built datanode does not know yet
  (--heal-after before the healer lands) is left out, so the harness runs against any branch;
  `DataNode.has_flag` tells a test.
- The gateway: zest-s3gw --cluster over the same etcd, mTLS with a client certificate of the
  same CA; boto3 clients from c.s3().
- add_node(i, tls_files=(CA, cert, key)) starts dn-i with other TLS files (a node of another
  CA); etcd_trust=[CA files] makes etcd take those CAs' client certificates too.
- kill (SIGKILL) and restart (same name, address, ports, certificate; optionally wiped drive
  folders), etcd members stopped and started, /metrics of every daemon as dicts.
- Teardown: SIGTERM everything still running (the datanodes first, so they deregister while
  etcd is up; a SIGSTOPped one gets SIGCONT first), a daemon exiting non-zero at SIGTERM fails
  the test, logs' tails are printed when a test fails, the folder is removed when it passed
  (ZEST_KEEP=1 keeps it). stop_nodes() stops the datanodes before the end of a test, each
  required to exit 0 (their leak checks run at exit).
- valgrind=True: under `make memcheck` (ZEST_VALGRIND=memcheck) the datanodes run under
  valgrind's memcheck as zest_harness.Daemon runs a daemon (an error or a definite leak: exit
  97, which fails the test), with 4x the start and stop timeouts.
- memcpy=(1, ...): those datanodes run with the LD_PRELOAD memcpy counter
  (tests/integration/memcpy_count.c, $ZEST_MEMCPY_COUNT; not under ASan, which interposes
  memcpy itself); memcpy_counts(i) is what it counted when dn-i exited.
- Objects' records (cluster/cluster.proto's ObjectRecord) read from etcd and decoded (record),
  the cell files on a datanode's drives (DataNode.cells), the layout of a cell
  (cell_len, data_cell_bytes), and tests/integration/dn_client against a datanode (its
  zest.Datanode calls, over mTLS with a client certificate of the CA).
- Skip (exit 77, raised as Skip): etcd or etcdctl or openssl missing, fixed addresses taken,
  the gateway without --cluster (the branch does not have it yet).

ZEST_INSECURE=1 (or Cluster(tls=False)) runs the internal gRPC and etcd in plaintext (the
daemons with --insecure). With TLS, etcd serves https and demands client certificates of the
cluster CA (--client-cert-auth, peers too), as `make cluster` does.
"""
import base64
import contextlib
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pb_wire  # noqa: E402
import zest_harness as zh  # noqa: E402

ETCD = os.environ.get("ZEST_ETCD", "/usr/bin/etcd")
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"
CERTS_SH = zh.CERTS_SH
LEASE_TTL = 10  # DN_CLUSTER_TTL_S: a SIGKILLed node leaves /zest/nodes/ after this
START_TIMEOUT = float(os.environ.get("ZEST_START_TIMEOUT", "60"))  # a hang check
DN_CLIENT = os.environ.get("ZEST_DN_CLIENT") or os.path.join(zh.BUILD, "tests", "integration",
                                                               "dn_client")
MEMCPY_COUNT = os.environ.get("ZEST_MEMCPY_COUNT")
CELL_FILE = re.compile(r"^([0-9a-f]{16})\.(\d+)\.(\d+)$")  # <extent>.<group>.<cell>


class Skip(Exception):
    """The test cannot run here (exit 77): say why."""


def require_tools():
    if not os.access(ETCD, os.X_OK):
        raise Skip(f"etcd is not installed ({ETCD}; Debian etcd-server)")
    if not os.access(ETCDCTL, os.X_OK):
        raise Skip("etcdctl is not installed (Debian etcd-client)")
    if not shutil.which("openssl"):
        raise Skip("openssl is not installed")


def addr_free(host, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "taken"
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


free_port = zh.free_port  # a port free on host now, below the ephemeral range


def _net_block():
    """This test process's own 127.a.b.0/24 (from its pid, a in 64..253), for its etcd
    members (.1-.3) and datanodes (.<dn_base + i>): tests running side by side never share
    an address, so one's ports cannot be taken by another while a node is down for a
    restart. ZEST_NET_BLOCK=a.b picks it."""
    v = os.environ.get("ZEST_NET_BLOCK")
    if v:
        return f"127.{v}"
    pid = os.getpid()
    return f"127.{64 + (pid // 250) % 190}.{1 + pid % 250}"


NET = _net_block()


def http_get(host, port, path="/metrics", timeout=5):
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout) as r:
        return r.read().decode()


def parse_metrics(text):
    """Prometheus text as {series-with-labels: value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


metric_sum = zh.metric_sum


def wait_for(what, cond, timeout, step=0.1):
    """Poll cond() until true; an AssertionError naming what after timeout s."""
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.time() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(step)


def tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class Proc:
    """A daemon: started by start(), its metrics endpoint waited for (when it has one)."""

    def __init__(self, name, argv, log_path, host="127.0.0.1", metrics_port=None,
                 start_timeout=START_TIMEOUT, env=None, valgrind=False):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.host = host
        self.metrics_port = metrics_port
        # under `make memcheck` (ZEST_VALGRIND=memcheck) as zest_harness.Daemon runs it
        self.valgrind = valgrind and os.environ.get("ZEST_VALGRIND") == "memcheck"
        self.start_timeout = start_timeout * (4 if self.valgrind else 1)
        self.env = env
        self.proc = None
        self.log = None

    def start(self):
        self.spawn()
        self.wait_ready()

    def spawn(self):
        """The process, not waited for (wait_ready: several start side by side)."""
        self.log = open(self.log_path, "ab")
        self.log.write(f"===== {time.strftime('%H:%M:%S')} start {' '.join(self.argv)}\n"
                       .encode())
        self.log.flush()
        argv = zh.VALGRIND_ARGS + self.argv if self.valgrind else self.argv
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env)

    def wait_ready(self):
        """Until /metrics answers; PortTaken or RuntimeError when the daemon died."""
        if self.metrics_port is None:
            return
        deadline = time.time() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                self.log.close()
                t = tail(self.log_path, 3000)
                if "Address already in use" in t:
                    raise zh.PortTaken(t)
                raise RuntimeError(f"{self.name} exited {self.proc.returncode} at start:\n{t}")
            try:
                http_get(self.host, self.metrics_port, timeout=1)
                return
            except OSError:
                pass
            if time.time() > deadline:
                self.proc.kill()
                self.proc.wait()
                self.log.close()
                raise RuntimeError(f"{self.name} did not serve /metrics on "
                                   f"{self.host}:{self.metrics_port} within "
                                   f"{self.start_timeout:.0f} s:\n{tail(self.log_path, 3000)}")
            time.sleep(0.05)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid

    def metrics(self):
        return parse_metrics(http_get(self.host, self.metrics_port))

    def promtool(self):
        """Its /metrics pass Prometheus' own check (when promtool is installed)."""
        if not shutil.which("promtool"):
            return
        p = subprocess.run(["promtool", "check", "metrics"],
                           input=http_get(self.host, self.metrics_port).encode(),
                           capture_output=True, timeout=60)
        assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()

    def kill9(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def stop(self, timeout=30):
        """SIGTERM; the exit status (or None when it was not running). A daemon ignoring
        SIGTERM is killed and the stop fails."""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            self._close()
            return None
        if self.valgrind:
            timeout *= 4  # leak checking a large heap takes a while
        self.proc.send_signal(signal.SIGCONT)  # a paused daemon would not act on SIGTERM
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._close()
            raise RuntimeError(f"{self.name} ignored SIGTERM for {timeout} s")
        self._close()
        return self.proc.returncode

    def cpu_seconds(self):
        """utime + stime of the process from /proc (its threads included)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        tick = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / tick

    def _close(self):
        if self.log is not None and not self.log.closed:
            self.log.close()


class Etcd:
    """1 or 3 etcd members, member i on NET.(i+1). fixed: 127.0.1.(i+1), client :2379, peer :2380
    (as `make cluster`; Skip when taken), else free ports on those addresses."""

    def __init__(self, root, members=1, fixed=False, certs=None, trust=()):
        """certs: a zest-certs.sh folder with the CA: https with client certificates.
        trust: more CA files whose client certificates etcd takes (a node of another CA
        that holds etcd credentials)."""
        assert members in (1, 3)
        self.root = root
        self.certs = certs
        self.scheme = "https" if certs else "http"
        self.hosts = ([f"127.0.1.{i + 1}" for i in range(members)] if fixed else
                      [f"{NET}.{i + 1}" for i in range(members)])
        if fixed:
            busy = [(h, p) for h in self.hosts for p in (2379, 2380) if not addr_free(h, p)]
            if busy:
                raise Skip(f"etcd's fixed addresses are taken: {busy}")
            self.ports = [(2379, 2380) for _ in self.hosts]
        else:
            self.ports = [(free_port(h), free_port(h)) for h in self.hosts]
        s = self.scheme
        initial = ",".join(f"e{i}={s}://{h}:{p[1]}"
                           for i, (h, p) in enumerate(zip(self.hosts, self.ports)))
        self.ctl_tls = []
        if certs:
            subprocess.run([CERTS_SH, "client", certs, "etcdctl"], check=True, timeout=60)
            self.ctl_tls = ["--cacert", f"{certs}/ca.pem", "--cert", f"{certs}/etcdctl.pem",
                            "--key", f"{certs}/etcdctl.key"]
        self.procs = []
        for i, (h, (cp, pp)) in enumerate(zip(self.hosts, self.ports)):
            tls = []
            if certs:
                subprocess.run([CERTS_SH, "server", certs, f"etcd{i}", f"IP:{h},DNS:localhost"],
                               check=True, timeout=60)
                pem, key, ca = f"{certs}/etcd{i}.pem", f"{certs}/etcd{i}.key", f"{certs}/ca.pem"
                if trust:
                    ca = f"{certs}/etcd-trust.pem"
                    with open(ca, "wb") as out:
                        for f in (f"{certs}/ca.pem", *trust):
                            with open(f, "rb") as src:
                                out.write(src.read())
                tls = ["--cert-file", pem, "--key-file", key, "--trusted-ca-file", ca,
                       "--client-cert-auth", "--peer-cert-file", pem, "--peer-key-file", key,
                       "--peer-trusted-ca-file", ca, "--peer-client-cert-auth"]
            argv = [ETCD, "--name", f"e{i}", "--data-dir", os.path.join(root, f"etcd{i}"),
                    "--listen-client-urls", f"{s}://{h}:{cp}",
                    "--advertise-client-urls", f"{s}://{h}:{cp}",
                    "--listen-peer-urls", f"{s}://{h}:{pp}",
                    "--initial-advertise-peer-urls", f"{s}://{h}:{pp}", *tls,
                    "--initial-cluster", initial,
                    "--initial-cluster-token", f"zest-test-{os.getpid()}",
                    # a member's loss is noticed in ~1 s, not 5
                    "--heartbeat-interval", "100", "--election-timeout", "1000"]
            self.procs.append(Proc(f"etcd{i}", argv, os.path.join(root, f"etcd{i}.log")))
        for p in self.procs:
            p.start()
        self.wait_healthy()

    @property
    def endpoints(self):
        """The --cluster value: every member's client address."""
        return ",".join(self.member_endpoint(i) for i in range(len(self.procs)))

    def member_endpoint(self, i):
        """https://HOST:PORT with TLS, HOST:PORT in plaintext."""
        a = f"{self.hosts[i]}:{self.ports[i][0]}"
        return f"https://{a}" if self.certs else a

    def live_endpoints(self):
        return ",".join(self.member_endpoint(i) for i, p in enumerate(self.procs) if p.running)

    def ctl(self, *args, check=True, endpoints=None, timeout=20):
        return subprocess.run([ETCDCTL, "--endpoints", endpoints or self.live_endpoints(),
                               *self.ctl_tls, "--command-timeout", "5s", *args],
                              env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                              check=check, timeout=timeout)

    def healthy(self):
        eps = self.live_endpoints()
        return bool(eps) and self.ctl("endpoint", "health", check=False,
                                      endpoints=eps).returncode == 0

    def wait_healthy(self, timeout=30):
        deadline = time.time() + timeout
        while not self.healthy():
            for p in self.procs:
                if p.proc is not None and p.proc.poll() is not None and p.proc.returncode:
                    raise RuntimeError(f"{p.name} exited {p.proc.returncode}:\n"
                                       f"{tail(p.log_path, 3000)}")
            if time.time() > deadline:
                raise RuntimeError(f"etcd not healthy within {timeout} s:\n"
                                   f"{tail(self.procs[0].log_path, 3000)}")
            time.sleep(0.2)

    def keys(self, prefix):
        out = self.ctl("get", "--prefix", prefix, "--keys-only").stdout.decode()
        return sorted(k for k in out.splitlines() if k)

    def get(self, key):
        """The value of key as bytes, or None."""
        out = self.ctl("get", key, "--print-value-only").stdout
        return out[:-1] if out.endswith(b"\n") else (out or None)

    def value(self, key):
        """The value of key exactly as stored (etcdctl's JSON, base64), or None."""
        kvs = json.loads(self.ctl("get", key, "-w", "json").stdout).get("kvs", [])
        return base64.b64decode(kvs[0].get("value", "")) if kvs else None

    def stop_member(self, i, sig=signal.SIGKILL):
        p = self.procs[i]
        if sig == signal.SIGKILL:
            p.kill9()
        else:
            p.stop()

    def start_member(self, i):
        """Again on its ports and data dir (it rejoins with its log)."""
        self.procs[i].start()

    def stop_all(self):
        for i in range(len(self.procs)):
            self.stop_member(i)

    def start_all(self):
        for p in self.procs:
            if not p.running:
                p.start()
        self.wait_healthy()

    def close(self):
        for p in self.procs:
            p.kill9()


M64 = (1 << 64) - 1
PLACE_SEED = 0xcbf29ce484222325


def _fnv(h, b):
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & M64
    return h


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


def place_rank(bucket, key, names):
    """names in the order the gateway tries them as coordinator for (bucket, key):
    common/zc_place.c's zc_place_rank over s3_place's object hash (ties: earlier name)."""
    h = _fnv(_fnv(PLACE_SEED, bucket.encode() + b"\0"), key.encode())
    w = {n: _mix(_fnv(h, n.encode())) for n in names}
    return sorted(names, key=lambda n: (-w[n], names.index(n)))


_help_cache = {}


def help_text(binary):
    if binary not in _help_cache:
        p = subprocess.run([binary, "--help"], capture_output=True, timeout=10)
        _help_cache[binary] = (p.stdout + p.stderr).decode(errors="replace")
    return _help_cache[binary]


def has_flag(binary, flag):
    return f"  {flag} " in help_text(binary) or f"  {flag}\n" in help_text(binary)


class DataNode(Proc):
    def __init__(self, c, i, tls_files=None):
        """tls_files: (CA, certificate, key) instead of dn-i's own of the cluster CA."""
        self.i = i
        self.node = f"dn-{i}"
        self.tls_files = tls_files
        host = f"{NET}.{c.dn_base + i}"
        self.drives = [os.path.join(c.root, self.node, f"d{j}") for j in range(c.drives)]
        for d in self.drives:
            os.makedirs(d, exist_ok=True)
        self.port, mport = free_port(host), free_port(host)
        self.address = f"{host}:{self.port}"
        super().__init__(self.node, [], os.path.join(c.root, f"{self.node}.log"), host, mport,
                         start_timeout=max(START_TIMEOUT, LEASE_TTL + 60), env=c.node_env(i),
                         valgrind=c.valgrind)
        self.argv = self._argv(c)

    def _argv(self, c):
        argv = [zh.DATANODE, "--listen", self.address,
                "--metrics", f"{self.host}:{self.metrics_port}",
                "--cluster", c.etcd.endpoints, "--node", self.node, "--ec", c.ec]
        if c.tls:
            ca, pem, key = self.tls_files or (c.certs["ca"], *c.node_cert(self.node, self.host))
            argv += ["--tls-ca", ca, "--tls-cert", pem, "--tls-key", key]
        else:
            argv += ["--insecure"]
        opt = {"--cell-size": c.cell_size, "--stripes-per-group": c.stripes_per_group,
               "--gc-grace": c.gc_grace, "--read-grace": c.read_grace,
               "--heal-after": c.heal_after,
               "--write-quorum": c.write_quorum, "--data-io": c.data_io}
        for flag, v in opt.items():
            if v is not None and has_flag(zh.DATANODE, flag):
                argv += [flag, str(v)]
        for d in self.drives:
            argv += ["--drive", d]
        if c.local == self.i:
            argv += ["--unix-socket", c.local_sock]
        return argv + list(c.extra_dn(self.i) if callable(c.extra_dn) else c.extra_dn)

    def wipe(self):
        """Empty every drive folder (a node back with replaced drives)."""
        for d in self.drives:
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)

    def cells(self):
        """{(extent hex, group, cell): path} of the cell files on its drives
        (<drive>/data/<xx>/<extent>.<group>.<cell>)."""
        out = {}
        for d in self.drives:
            for dirpath, _, files in os.walk(os.path.join(d, "data")):
                for f in files:
                    m = CELL_FILE.match(f)
                    if m:
                        out[(m[1], int(m[2]), int(m[3]))] = os.path.join(dirpath, f)
        return out


class Cluster:
    """etcd, N datanodes dn-1..dn-N with --cluster, and (gateway=True) zest-s3gw --cluster."""

    def __init__(self, nodes=3, ec="4+2", etcd_members=1, fixed_etcd=False, gateway=True,
                 drives=2, cell_size=None, stripes_per_group=None, gc_grace=None,
                 read_grace=None, heal_after=None, write_quorum=None, data_io=None, extra_dn=(),
                 extra_gw=(), tls=None, dn_base=20, env=None, dn_env=None, memcpy=(),
                 valgrind=False, root=None, local=None, etcd_trust=()):
        require_tools()
        if gateway and not has_flag(zh.GATEWAY, "--cluster"):
            raise Skip("zest-s3gw has no --cluster yet")
        self.root = root or tempfile.mkdtemp(prefix="zest-cl-")
        self.ec = ec
        self.k, self.m = (int(x) for x in ec.split("+"))
        self.drives = drives
        self.cell_size = cell_size
        self.stripes_per_group = stripes_per_group
        self.gc_grace = gc_grace
        self.read_grace = read_grace  # --read-grace: replaced cells' life after a read
        self.heal_after = heal_after
        self.write_quorum = write_quorum
        self.data_io = data_io
        # extra datanode flags: a list, or a function of the node number (--zone per node)
        self.extra_dn = extra_dn if callable(extra_dn) else list(extra_dn)
        self.extra_gw = list(extra_gw)
        # local=i: dn-i serves a Unix socket and the gateway is on its host (--local-node)
        self.local = local
        self.local_sock = os.path.join(self.root, f"dn-{local}.sock") if local else None
        self.tls = not zh.INSECURE if tls is None else tls
        self.dn_base = dn_base
        self.env = env  # the gateway's environment (None: ours)
        self.dn_env = dn_env  # the datanodes' (a dict, or a function of the node number)
        self.valgrind = valgrind  # the datanodes under memcheck in `make memcheck`
        # the nodes the memcpy counter runs in (none under ASan or when it is not built)
        self.memcpy = set(memcpy) if MEMCPY_COUNT and not zh.SANITIZED else set()
        self._memcpy_counts = {}
        self.nodes = {}
        self.gw = None
        self.etcd = None
        self.certs = None
        try:
            if self.tls:
                d = os.path.join(self.root, "certs")
                subprocess.run([CERTS_SH, "ca", d], check=True, timeout=60)
                subprocess.run([CERTS_SH, "client", d, "gateway"], check=True, timeout=60)
                self.certs = {"dir": d, "ca": f"{d}/ca.pem", "gw_cert": f"{d}/gateway.pem",
                              "gw_key": f"{d}/gateway.key"}
            self.etcd = Etcd(self.root, etcd_members, fixed_etcd,
                             self.certs["dir"] if self.tls else None, etcd_trust)
            self.add_nodes(range(1, nodes + 1))
            self.wait_live(nodes)
            if gateway:
                zh.start_retrying(self.start_gateway)
        except BaseException:
            self.close(failed=True)
            raise

    # ---- certificates
    def node_cert(self, node, host):
        d = self.certs["dir"]
        pem, key = f"{d}/{node}.pem", f"{d}/{node}.key"
        if not os.path.exists(pem):
            subprocess.run([CERTS_SH, "server", d, node, f"IP:{host},DNS:localhost,DNS:{node}"],
                           check=True, timeout=60)
        return pem, key

    def client_cert(self, name):
        """A client certificate of the cluster CA: (pem, key)."""
        d = self.certs["dir"]
        pem, key = f"{d}/{name}.pem", f"{d}/{name}.key"
        if not os.path.exists(pem):
            subprocess.run([CERTS_SH, "client", d, name], check=True, timeout=60)
        return pem, key

    # ---- datanodes
    def node_env(self, i):
        """dn-i's environment (None: ours): dn_env's, with the memcpy counter if asked."""
        env = self.dn_env(i) if callable(self.dn_env) else self.dn_env
        if i in self.memcpy:
            env = dict(env or os.environ, LD_PRELOAD=MEMCPY_COUNT,
                       ZEST_MEMCPY_OUT=self.memcpy_path(i))
        return env

    def memcpy_path(self, i):
        return os.path.join(self.root, f"dn-{i}.memcpy")

    def memcpy_counts(self, i):
        """{"program": bytes, "libraries": bytes} of memcpy/memmove calls of >= 1 KiB the
        counter wrote when dn-i exited (zest's own code, linked statically, and the shared
        libraries'), or None (not counted, or not exited yet)."""
        if i not in self._memcpy_counts:
            try:
                with open(self.memcpy_path(i)) as f:
                    self._memcpy_counts[i] = {k: int(v) for k, v in
                                              (w.split("=") for w in f.read().split())}
            except OSError:
                return None
        return self._memcpy_counts[i]

    def stop_nodes(self):
        """SIGTERM every running datanode; each must exit 0 (its leak checks run at exit)."""
        for n in self.running_nodes():
            assert n.stop() == 0, f"{n.node} exited non-zero (leak check)"

    def add_node(self, i, tls_files=None):
        """dn-i started (tls_files: DataNode's)."""
        def start():
            n = DataNode(self, i, tls_files)
            n.start()
            return n
        self.nodes[i] = zh.start_retrying(start)
        return self.nodes[i]

    def add_nodes(self, numbers):
        """dn-i for each i, started side by side (a node whose port was taken meanwhile is
        started again alone, on fresh ports); one after the other under memcheck, whose
        start-up load would otherwise keep them from registering in time."""
        if self.valgrind and os.environ.get("ZEST_VALGRIND") == "memcheck":
            for i in numbers:
                self.add_node(i)
            return
        fresh = {}
        for i in numbers:
            fresh[i] = DataNode(self, i)
            fresh[i].spawn()
        for i, n in fresh.items():
            try:
                n.wait_ready()
                self.nodes[i] = n
            except zh.PortTaken:
                self.add_node(i)
            except BaseException:
                for other in fresh.values():
                    other.kill9()
                raise

    def node(self, i):
        return self.nodes[i]

    def running_nodes(self):
        return [n for n in self.nodes.values() if n.running]

    def kill(self, i):
        """SIGKILL dn-i: its lease stays until the TTL runs out."""
        self.nodes[i].kill9()

    def stop_node(self, i):
        return self.nodes[i].stop()

    def restart(self, i, wipe=False):
        """dn-i again on its address, ports and certificate; wipe=True empties its drive
        folders first. A predecessor's unexpired lease is waited out by the node (<= TTL)."""
        n = self.nodes[i]
        if n.running:
            n.kill9()
        if wipe:
            n.wipe()
        for attempt in range(20):  # the kernel may hold the killed node's ports a moment
            try:
                n.start()
                return n
            except zh.PortTaken:
                time.sleep(0.5)
        raise RuntimeError(f"{n.node}'s ports stayed taken")

    def cell_files(self, i):
        """The cell files on dn-i's drives (<drive>/data/<xx>/<id>.<group>.<cell>)."""
        return list(self.nodes[i].cells().values())

    def record(self, bucket, key):
        """bucket/key's ObjectRecord in etcd, decoded (decode_record), or None."""
        v = self.etcd.value(f"/zest/objects/{bucket}/{key}")
        return decode_record(v) if v is not None else None

    def dn_client(self, i, *args, check=True, timeout=60):
        """tests/integration/dn_client CMD ARGS against dn-i (put, get, stat, ... as it
        documents), over mTLS with a client certificate of the CA; check: a non-zero exit fails
        the test. The CompletedProcess (text)."""
        pem, key = self.client_cert("tool")
        argv = [DN_CLIENT, "--target", self.nodes[i].address, "--cluster-ca", self.certs["ca"],
                "--cluster-cert", pem, "--cluster-key", key, *args]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"dn_client {args} failed: {p.stdout} {p.stderr}")
        return p

    def node_metrics(self, i):
        return self.nodes[i].metrics()

    def live_view(self, i):
        return self.nodes[i].metrics().get("zest_cluster_live_nodes")

    def wait_live(self, n, timeout=LEASE_TTL + 60):
        """Every running datanode's view counts n live nodes."""
        for node in self.running_nodes():
            wait_for(f"{node.node} to see {n} live nodes",
                     lambda node=node: node.metrics().get("zest_cluster_live_nodes") == n,
                     timeout)

    def registered(self):
        return [k.rpartition("/")[2] for k in self.etcd.keys("/zest/nodes/")]

    def wait_registered(self, names, timeout=LEASE_TTL + 60):
        names = sorted(names)
        wait_for(f"/zest/nodes/ to hold exactly {names}",
                 lambda: sorted(self.registered()) == names, timeout, step=0.3)

    def sum_metric(self, name, nodes=None):
        """name summed over the running datanodes (or the given ones)."""
        total = 0.0
        for n in (nodes or self.running_nodes()):
            total += metric_sum(n.metrics(), name)
        return total

    # ---- gateway
    def start_gateway(self):
        self.gw_port, self.gw_metrics = free_port(), free_port()
        argv = [zh.GATEWAY, "--listen", f"127.0.0.1:{self.gw_port}",
                "--cluster", self.etcd.endpoints,
                "--access-key", zh.ACCESS_KEY, "--secret-key", zh.SECRET_KEY,
                "--metrics", f"127.0.0.1:{self.gw_metrics}"]
        if self.tls:
            argv += ["--cluster-ca", self.certs["ca"], "--cluster-cert", self.certs["gw_cert"],
                     "--cluster-key", self.certs["gw_key"]]
        else:
            argv += ["--insecure"]
        if self.local:
            argv += ["--local-node", f"dn-{self.local}=unix:{self.local_sock}"]
        self.gw = Proc("s3gw", argv + self.extra_gw, os.path.join(self.root, "s3gw.log"),
                       "127.0.0.1", self.gw_metrics, env=self.env)
        self.gw.start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.gw_port}"

    def gw_metrics_now(self):
        return self.gw.metrics()

    def s3(self, retries=0, read_timeout=60, connect_timeout=5, pool=10):
        """A boto3 client of the gateway, path style; retries=0: every error shows."""
        import boto3
        from botocore.config import Config
        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=zh.ACCESS_KEY,
            aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, read_timeout=read_timeout,
                          connect_timeout=connect_timeout, max_pool_connections=pool,
                          retries={"max_attempts": retries + 1, "mode": "standard"}))

    # ---- teardown
    def dump_logs(self, n=4000):
        names = sorted(f for f in os.listdir(self.root) if f.endswith(".log"))
        for f in names:
            sys.stderr.write(f"----- {f} (tail) -----\n{tail(os.path.join(self.root, f), n)}\n")

    def close(self, failed=False):
        """Stop everything: gateway, datanodes (SIGTERM, so they deregister), etcd. Returns
        [(name, rc)] of the daemons that exited non-zero at SIGTERM."""
        bad = []
        procs = ([self.gw] if self.gw else []) + list(self.nodes.values())
        for p in procs:
            try:
                rc = p.stop()
            except RuntimeError as e:
                bad.append((p.name, str(e)))
                continue
            if rc not in (None, 0):
                bad.append((p.name, rc))
        if self.etcd is not None:
            self.etcd.close()
        for i in self.memcpy:
            self.memcpy_counts(i)  # read before the folder goes
        if failed or bad:
            self.dump_logs()
            sys.stderr.write(f"kept {self.root}\n")
        elif not os.environ.get("ZEST_KEEP"):
            shutil.rmtree(self.root, ignore_errors=True)
        return bad


# ---- objects' records (cluster/cluster.proto's ObjectRecord) and the layout of their cells

# cluster/cluster.proto's Extent: its integer fields by number
_EXTENT_INTS = {1: "id", 2: "size", 3: "k", 4: "m", 5: "cell_size", 6: "spg"}


def decode_record(b):
    """An ObjectRecord's bytes as {"size", "etag", "crc32c", "extents": [{"id", "size", "k",
    "m", "cell_size", "spg", "nodes": [names], "groups": [{"cells": [node index per cell],
    "missing": bitmask}]}]}: a reader of the wire format, enough for these fields."""
    rec = {"size": 0, "etag": "", "extents": []}
    for f, v in pb_wire.fields(b):
        if f == 1:
            rec["size"] = v
        elif f == 2:
            rec["etag"] = v.decode()
        elif f == 3:
            rec["crc32c"] = v
        elif f == 6:
            e = {"nodes": [], "groups": [], "size": 0}
            for g, w in pb_wire.fields(v):
                if g in _EXTENT_INTS:
                    e[_EXTENT_INTS[g]] = w
                elif g == 7:
                    e["nodes"].append(w.decode())
                elif g == 8:
                    grp = {"cells": [], "missing": 0}
                    for h, x in pb_wire.fields(w):
                        if h == 1:
                            grp["cells"] += pb_wire.packed(x) if isinstance(x, bytes) else [x]
                        elif h == 2:
                            grp["missing"] = x
                    e["groups"].append(grp)
            rec["extents"].append(e)
    return rec


def cell_len(size, g, c, k, cell, spg):
    """dn_coord_cell_len: the length of cell c of group g of a size-byte object, RS(k, m) with
    cells of cell bytes and spg stripes a group (the single-node layout of a cell file)."""
    sb, gb = k * cell, k * cell * spg
    start = g * gb
    if start >= size:
        return 0
    gl = min(size - start, gb)
    ns = (gl + sb - 1) // sb
    last = (ns - 1) * sb + (c if c < k else 0) * cell
    return (ns - 1) * cell + max(0, min(cell, gl - last))


def data_cell_bytes(data, g, c, k, cell, spg):
    """What data cell c (< k) of group g holds of the object data: its part of each stripe."""
    gb = k * cell * spg
    return b"".join(data[g * gb + s * k * cell + c * cell:][:cell] for s in range(spg))


def body(seed, size):
    """size deterministic bytes for seed (cheap to make again for a comparison)."""
    import random
    return random.Random(seed).randbytes(size)


def digest(data):
    import hashlib
    return hashlib.sha256(data).hexdigest()


def get_digest(s3, bucket, key):
    """(size, sha256) of the object as GET streams it."""
    import hashlib
    h = hashlib.sha256()
    n = 0
    stream = s3.get_object(Bucket=bucket, Key=key)["Body"]
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        h.update(chunk)
        n += len(chunk)
    return n, h.hexdigest()


def wrong_objects(s3, bucket, objects):
    """The objects of {key: (size, sha256)} that do not read back so, as (key, error code)
    or (key, "differs", size read, size wanted); empty when all do."""
    bad = []
    for key, want in sorted(objects.items()):
        try:
            got = get_digest(s3, bucket, key)
        except Exception as e:  # botocore's many error classes: all count
            bad.append((key, error_code(e)))
            continue
        if got != want:
            bad.append((key, "differs", got[0], want[0]))
    return bad


def error_code(e):
    """(HTTP status, S3 code) of a botocore ClientError, else (None, exception class)."""
    r = getattr(e, "response", None)
    if r:
        return (r.get("ResponseMetadata", {}).get("HTTPStatusCode"),
                r.get("Error", {}).get("Code"))
    return None, type(e).__name__


@contextlib.contextmanager
def cluster(**kw):
    """A Cluster for the with block; its daemons stopped after, a non-zero exit at
    SIGTERM fails the test (unless the block failed already)."""
    c = Cluster(**kw)
    ok = False
    try:
        yield c
        ok = True
    finally:
        bad = c.close(failed=not ok)
        if ok and bad:
            raise AssertionError(f"daemons exited non-zero at shutdown: {bad}")


def run(tests, gateway=True):
    """zest_harness.run_tests, with Skip before any test ran meaning exit 77 (gateway=False:
    the tests start no gateway, so its --cluster is not needed)."""
    try:
        require_tools()
        if gateway and not has_flag(zh.GATEWAY, "--cluster"):
            raise Skip("zest-s3gw has no --cluster yet")
    except Skip as e:
        print(f"skip: {e}")
        sys.exit(77)
    failed = skipped = 0
    for t in tests:
        t0 = time.time()
        try:
            t()
            print(f"ok   {t.__name__} ({time.time() - t0:.1f}s)", flush=True)
        except Skip as e:
            skipped += 1
            print(f"skip {t.__name__}: {e}", flush=True)
        except Exception as e:  # report and go on with the next test
            failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {t.__name__} ({time.time() - t0:.1f}s): {e}", flush=True)
    print(f"{len(tests) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    if failed:
        sys.exit(1)
    sys.exit(77 if skipped == len(tests) else 0)
