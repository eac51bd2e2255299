"""A zest cluster with every daemon in its own network namespace (netns.Net), mutual TLS as
deployed (tools/zest-certs.sh, certificates naming the namespace addresses), and faults by name.

    with NFCluster() as c:                 # etcd e0-e2, dn-1..dn-8, gateways gw1 gw2
        s3 = c.s3("gw1")
        c.partition(["dn-1"], ["dn-2"], oneway=True)
        c.isolate_from_etcd("dn-3"); c.gateway_sees_half("gw2"); c.pause("dn-4")
        c.heal_all()                        # rules gone, paused go on, killed start again

Addresses on 10.77.N.0/24 (N picked per run): etcd .1-.3 (client 2379, peer 2380), dn-i
.10+i (gRPC 7000, metrics 9100), gw1 .21 and gw2 .22 (S3 8000, metrics 9200); the test
process itself is .254 on the bridge (the clients, etcdctl, metrics scrapes, zest-admin).
Faults never cut the host from a daemon: the clients see what a gateway answers.
Pieces reused from tests/integration/cluster_harness.py: Proc (start, /metrics wait,
kill9, stop), record decoding, metrics parsing; the binaries of ZEST_BUILD.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import cluster_harness as ch  # noqa: E402
import netns  # noqa: E402
import zest_harness as zh  # noqa: E402

ADMIN = os.environ.get("ZEST_ADMIN") or os.path.join(zh.BUILD, "tools", "zest-admin")
ETCD_ROLES = ["e0", "e1", "e2"]
LEASE_TTL = ch.LEASE_TTL


def skip_reason():
    """Why this machine cannot run the cluster (None: it can)."""
    why = netns.usable()
    if why:
        return why
    try:
        ch.require_tools()
    except ch.Skip as e:
        return str(e)
    if not os.access(zh.DATANODE, os.X_OK) or not os.access(zh.GATEWAY, os.X_OK):
        return f"the daemons are not built in {zh.BUILD}"
    return None


class NFCluster:
    def __init__(self, nodes=8, gateways=2, ec="4+2", gc_grace=3, read_grace=2, heal_after=4,
                 cell_size=65536, stripes_per_group=4, drives=2, root=None):
        self.root = root or tempfile.mkdtemp(prefix="zest-nf-")
        self.ec = ec
        self.gc_grace, self.read_grace, self.heal_after = gc_grace, read_grace, heal_after
        self.cell_size, self.spg, self.ndrives = cell_size, stripes_per_group, drives
        self.dn_roles = [f"dn-{i}" for i in range(1, nodes + 1)]
        self.gw_roles = [f"gw{i}" for i in range(1, gateways + 1)]
        self.procs = {}
        self.paused = set()
        self.killed = set()
        self.net = None
        try:
            self.net = netns.Net()
            for i, r in enumerate(ETCD_ROLES):
                self.net.add(r, 1 + i)
            for i, r in enumerate(self.dn_roles):
                self.net.add(r, 11 + i)
            for i, r in enumerate(self.gw_roles):
                self.net.add(r, 21 + i)
            self._certs()
            self._start_etcd()
            for r in self.dn_roles:
                self.procs[r] = self._datanode(r)
                self.procs[r].spawn()
            for r in self.dn_roles:
                self.procs[r].wait_ready()
            self.wait_live(len(self.dn_roles))
            for r in self.gw_roles:
                self.procs[r] = self._gateway(r)
                self.procs[r].start()
        except BaseException:
            self.close(failed=True)
            raise

    # ---- setup
    def _cert(self, *args):
        subprocess.run([ch.CERTS_SH, *args], check=True, timeout=60, capture_output=True)

    def _certs(self):
        d = self.certs = os.path.join(self.root, "certs")
        self._cert("ca", d)
        for r in ETCD_ROLES:
            self._cert("server", d, r, f"IP:{self.net.addr(r)}")
        for r in self.dn_roles:
            self._cert("server", d, r, f"IP:{self.net.addr(r)},DNS:{r}")
        for name in ("gateway", "etcdctl", "tool"):
            self._cert("client", d, name)
        self.ca = f"{d}/ca.pem"

    def tls(self, name):
        return f"{self.certs}/{name}.pem", f"{self.certs}/{name}.key"

    @property
    def endpoints(self):
        return ",".join(f"https://{self.net.addr(r)}:2379" for r in ETCD_ROLES)

    def _start_etcd(self):
        initial = ",".join(f"{r}=https://{self.net.addr(r)}:2380" for r in ETCD_ROLES)
        for r in ETCD_ROLES:
            a = self.net.addr(r)
            pem, key = self.tls(r)
            argv = [ch.ETCD, "--name", r, "--data-dir", os.path.join(self.root, r),
                    "--listen-client-urls", f"https://{a}:2379",
                    "--advertise-client-urls", f"https://{a}:2379",
                    "--listen-peer-urls", f"https://{a}:2380",
                    "--initial-advertise-peer-urls", f"https://{a}:2380",
                    "--initial-cluster", initial, "--initial-cluster-token",
                    f"zest-nf-{os.getpid()}",
                    "--cert-file", pem, "--key-file", key, "--trusted-ca-file", self.ca,
                    "--client-cert-auth", "--peer-cert-file", pem, "--peer-key-file", key,
                    "--peer-trusted-ca-file", self.ca, "--peer-client-cert-auth",
                    "--heartbeat-interval", "100", "--election-timeout", "1000"]
            self.procs[r] = ch.Proc(r, self.net.argv(r, argv), os.path.join(self.root, f"{r}.log"))
            self.procs[r].start()
        ch.wait_for("etcd healthy", lambda: self.etcdctl("endpoint", "health",
                                                         check=False).returncode == 0, 60, 0.3)

    def _datanode(self, r):
        a = self.net.addr(r)
        drives = [os.path.join(self.root, r, f"d{j}") for j in range(self.ndrives)]
        for d in drives:
            os.makedirs(d, exist_ok=True)
        pem, key = self.tls(r)
        argv = [zh.DATANODE, "--listen", f"{a}:7000", "--metrics", f"{a}:9100",
                "--cluster", self.endpoints, "--node", r, "--ec", self.ec,
                "--tls-ca", self.ca, "--tls-cert", pem, "--tls-key", key,
                "--cell-size", str(self.cell_size), "--stripes-per-group", str(self.spg),
                "--gc-grace", str(self.gc_grace), "--read-grace", str(self.read_grace),
                "--heal-after", str(self.heal_after)]
        for d in drives:
            argv += ["--drive", d]
        p = ch.Proc(r, self.net.argv(r, argv), os.path.join(self.root, f"{r}.log"), a, 9100,
                    start_timeout=max(ch.START_TIMEOUT, LEASE_TTL + 60))
        p.drives = drives
        return p

    def _gateway(self, r):
        a = self.net.addr(r)
        pem, key = self.tls("gateway")
        argv = [zh.GATEWAY, "--listen", f"{a}:8000", "--metrics", f"{a}:9200",
                "--cluster", self.endpoints, "--access-key", zh.ACCESS_KEY,
                "--secret-key", zh.SECRET_KEY, "--cluster-ca", self.ca,
                "--cluster-cert", pem, "--cluster-key", key]
        return ch.Proc(r, self.net.argv(r, argv), os.path.join(self.root, f"{r}.log"), a, 9200)

    # ---- clients and views
    def s3(self, gw, read_timeout=20, connect_timeout=3):
        import boto3
        from botocore.config import Config
        return boto3.client(
            "s3", endpoint_url=f"http://{self.net.addr(gw)}:8000",
            aws_access_key_id=zh.ACCESS_KEY, aws_secret_access_key=zh.SECRET_KEY,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, read_timeout=read_timeout,
                          connect_timeout=connect_timeout, max_pool_connections=4,
                          retries={"max_attempts": 1, "mode": "standard"}))

    def etcdctl(self, *args, check=True, timeout=20):
        pem, key = self.tls("etcdctl")
        return subprocess.run([ch.ETCDCTL, "--endpoints", self.endpoints, "--cacert", self.ca,
                               "--cert", pem, "--key", key, "--command-timeout", "5s", *args],
                              env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                              check=check, timeout=timeout)

    def records(self):
        """{etcd key: decoded ObjectRecord} of every object record."""
        import base64
        import json
        out = json.loads(self.etcdctl("get", "--prefix", "/zest/objects/", "-w",
                                      "json").stdout or b"{}")
        recs = {}
        for kv in out.get("kvs", []):
            k = base64.b64decode(kv["key"]).decode()
            recs[k] = ch.decode_record(base64.b64decode(kv.get("value", "")))
        return recs

    def cells(self, r):
        """{(extent hex, group, cell)} of the cell files on r's drives."""
        out = set()
        for d in self.procs[r].drives:
            for dirpath, _, files in os.walk(os.path.join(d, "data")):
                for f in files:
                    m = ch.CELL_FILE.match(f)
                    if m:
                        out.add((m[1], int(m[2]), int(m[3])))
        return out

    def metrics(self, r):
        return self.procs[r].metrics()

    def live_view(self, r):
        try:
            return self.metrics(r).get("zest_cluster_live_nodes")
        except OSError:
            return None

    def wait_live(self, n, timeout=LEASE_TTL + 60):
        for r in self.dn_roles:
            if self.procs[r].running and r not in self.paused:
                ch.wait_for(f"{r} to see {n} live nodes", lambda r=r: self.live_view(r) == n,
                            timeout, 0.2)

    def admin_status(self):
        """(exit status, output) of zest-admin status."""
        pem, key = self.tls("tool")
        p = subprocess.run([ADMIN, "--cluster", self.endpoints, "--tls-ca", self.ca,
                            "--tls-cert", pem, "--tls-key", key, "status"],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    # ---- faults by name
    def _roles(self, x):
        return [x] if isinstance(x, str) else list(x)

    def partition(self, a, b, oneway=False):
        """a | b: no packet from a side to the other (oneway: only a -> b)."""
        a, b = self._roles(a), self._roles(b)
        if oneway:
            for x in a:
                self.net.block(x, b)
            return
        for x in (a if len(a) <= len(b) else b):
            self.net.block(x, b if x in a else a, both=True)

    def others(self, role):
        return [r for r in ETCD_ROLES + self.dn_roles + self.gw_roles if r != role]

    def isolate(self, role):
        """role cut from every other daemon (the test host still reaches it)."""
        self.partition([role], self.others(role))

    def isolate_from_etcd(self, role):
        self.partition([role], [r for r in ETCD_ROLES if r != role])

    def gateway_sees_half(self, gw, half=None):
        """gw reaches only half the datanodes (by default the upper half)."""
        n = len(self.dn_roles)
        self.partition([gw], half or self.dn_roles[: n // 2])

    def pause(self, role):
        os.kill(self.procs[role].pid, signal.SIGSTOP)
        self.paused.add(role)

    def resume(self, role):
        if role in self.paused:
            os.kill(self.procs[role].pid, signal.SIGCONT)
            self.paused.discard(role)

    def kill(self, role):
        self.resume(role)
        self.procs[role].kill9()
        self.killed.add(role)

    def restart(self, role, wipe=False):
        p = self.procs[role]
        if p.running:
            self.kill(role)
        if wipe:
            for d in getattr(p, "drives", []):
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(d)
        for _ in range(40):
            try:
                p.start()
                break
            except zh.PortTaken:
                time.sleep(0.5)
        self.killed.discard(role)

    def restart_wiped(self, role):
        self.restart(role, wipe=True)

    def heal_all(self):
        """Every drop rule gone, every paused daemon resumed, every killed one started."""
        self.net.heal()
        for r in list(self.paused):
            self.resume(r)
        for r in list(self.killed):
            self.restart(r)

    def wait_settled(self, timeout=120):
        """After heal_all: etcd healthy and every datanode sees all of them live."""
        ch.wait_for("etcd healthy", lambda: self.etcdctl("endpoint", "health",
                                                         check=False).returncode == 0,
                    timeout, 0.5)
        self.wait_live(len(self.dn_roles), timeout)

    # ---- teardown
    def dump_logs(self, n=3000):
        for f in sorted(x for x in os.listdir(self.root) if x.endswith(".log")):
            sys.stderr.write(f"----- {f} (tail) -----\n{ch.tail(os.path.join(self.root, f), n)}\n")

    def close(self, failed=False):
        bad = []
        if self.net is not None:
            self.net.heal()
        for r in self.gw_roles + self.dn_roles + ETCD_ROLES:
            p = self.procs.get(r)
            if p is None:
                continue
            try:
                self.resume(r)
                rc = p.stop(timeout=30) if r not in ETCD_ROLES else p.kill9()
            except (RuntimeError, OSError) as e:
                bad.append((r, str(e)))
                continue
            if rc not in (None, 0):
                bad.append((r, rc))
        if self.net is not None:
            self.net.close()
        if failed or bad:
            self.dump_logs()
            sys.stderr.write(f"kept {self.root} (daemons exiting non-zero: {bad})\n")
        elif not os.environ.get("ZEST_KEEP"):
            shutil.rmtree(self.root, ignore_errors=True)
        return bad

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        bad = self.close(failed=et is not None)
        if et is None and bad:
            raise AssertionError(f"daemons exited non-zero at shutdown: {bad}")
