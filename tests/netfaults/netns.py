"""Network namespaces on one bridge, with nftables drop rules per pair and direction.

    with netns.Net() as net:                      # bridge zf<pid>-br, host side 10.77.N.254
        a = net.add("e0", 1)                      # namespace zf<pid>-e0, 10.77.N.1/24
        net.popen(a, argv, ...)                   # a process inside it (its pid is the daemon's)
        net.block("e0", ["dn-1"])                 # e0 -> dn-1 dropped (one way)
        net.heal()                                # every drop rule gone

- Every name carries this run's prefix zf<pid hex> (interface names <= 15 bytes), so two
  runs never collide; a run's /24 (10.77.N.0/24) is one no interface on the host uses yet.
  Leftovers of a run whose process is gone (a SIGKILLed test) are removed at the next start.
- Each namespace has its own nftables table (inet zf) with an output and an input chain: a
  drop rule for a destination is "this namespace may not send there", one for a source "nor
  receive from there". block(a, b) drops a -> b; block(a, b, both=True) both directions,
  with every rule in a's namespace (a partition costs one nft call per role on its smaller
  side). A TCP connection needs both directions, so a one-way block cuts
  the connections a dials as well as b's answers, but b's packets still reach a (what a sees
  of b: SYNs, keepalives, RSTs is what a one-way fault means on TCP).
- close() (also at exit, and from SIGTERM) kills what runs in the namespaces, deletes them
  (their veth ends go with them) and the bridge. It runs even when the test failed.
"""
import atexit
import fcntl
import os
import re
import signal
import subprocess
import time

IP = "/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else "ip"
NFT = "/usr/sbin/nft" if os.path.exists("/usr/sbin/nft") else "nft"
LOCK = "/tmp/zest-netns.lock"
PREFIX_RE = re.compile(r"^zf([0-9a-f]+)-")


def sh(*argv, check=True, input=None):
    p = subprocess.run(list(argv), capture_output=True, input=input, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.decode().strip()}")
    return p.stdout.decode()


def usable():
    """None when namespaces can be made here, else why not (the test skips)."""
    if os.geteuid() != 0:
        return "not root (network namespaces need CAP_NET_ADMIN)"
    for tool in (IP, NFT):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            return f"{tool} is not installed (Debian iproute2, nftables)"
    return None


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def sweep_stale():
    """Namespaces and bridges of runs whose process is gone."""
    for line in sh(IP, "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        m = PREFIX_RE.match(name)
        if m and not _pid_alive(int(m[1], 16)):
            _kill_ns_pids(name)
            sh(IP, "netns", "del", name, check=False)
    for name in re.findall(r"^\d+: ([^:@]+)", sh(IP, "-o", "link", check=False), re.M):
        m = re.match(r"^zf([0-9a-f]+)(-br|h\d+)$", name)
        if m and not _pid_alive(int(m[1], 16)):
            sh(IP, "link", "del", name, check=False)


def _kill_ns_pids(ns):
    for pid in sh(IP, "netns", "pids", ns, check=False).split():
        try:
            os.kill(int(pid), signal.SIGCONT)
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _free_subnet():
    used = set(re.findall(r"inet 10\.77\.(\d+)\.", sh(IP, "-o", "addr", check=False)))
    start = os.getpid() % 250
    for i in range(250):
        n = (start + i) % 250
        if str(n) not in used:
            return n
    raise RuntimeError("no free 10.77.N.0/24 on this host")


class Net:
    def __init__(self):
        why = usable()
        if why:
            raise RuntimeError(why)
        self.prefix = f"zf{os.getpid():x}"
        assert len(self.prefix) <= 9  # + "-" + 5 bytes: IFNAMSIZ
        self.bridge = f"{self.prefix}-br"
        self.spaces = {}  # role -> (namespace, address)
        self.drops = {}  # role -> {("out" | "in", address)} dropped
        self.veths = []  # the host ends
        self.closed = False
        atexit.register(self.close)
        self._old_term = signal.signal(signal.SIGTERM, self._on_term)
        try:
            # one run at a time picks its /24 and takes it (the plain and the ASan build's
            # tests start side by side)
            with open(LOCK, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                sweep_stale()
                self.subnet = _free_subnet()
                self.host_ip = self.ip(254)
                sh(IP, "link", "add", self.bridge, "type", "bridge")
                sh(IP, "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            sh(IP, "link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise

    def _on_term(self, signum, frame):
        raise SystemExit(128 + signum)  # finally blocks and atexit run

    def ip(self, host):
        return f"10.77.{self.subnet}.{host}"

    def ns(self, role):
        return self.spaces[role][0]

    def addr(self, role):
        return self.spaces[role][1]

    def add(self, role, host):
        """Namespace for role with address 10.77.N.host on the bridge; its address."""
        idx = len(self.spaces)
        ns = f"{self.prefix}-{re.sub(r'[^a-z0-9]', '', role)[:5]}"
        hv = f"{self.prefix}h{idx}"
        addr = self.ip(host)
        self.spaces[role] = (ns, addr)
        self.drops[role] = set()
        self.veths.append(hv)
        sh(IP, "netns", "add", ns)
        sh(IP, "link", "add", hv, "type", "veth", "peer", "name", f"{self.prefix}n{idx}")
        sh(IP, "link", "set", f"{self.prefix}n{idx}", "netns", ns)
        sh(IP, "link", "set", hv, "master", self.bridge)
        sh(IP, "link", "set", hv, "up")
        x = [IP, "netns", "exec", ns]
        sh(*x, IP, "link", "set", f"{self.prefix}n{idx}", "name", "eth0")
        sh(*x, IP, "addr", "add", f"{addr}/24", "dev", "eth0")
        sh(*x, IP, "link", "set", "eth0", "up")
        sh(*x, IP, "link", "set", "lo", "up")
        self._apply(role)
        return addr

    def argv(self, role, argv):
        """argv run inside role's namespace (ip netns exec execs it: same pid)."""
        return [IP, "netns", "exec", self.ns(role), *argv]

    def run(self, role, *argv, check=True):
        return sh(*self.argv(role, list(argv)), check=check)

    # ---- drop rules
    def _apply(self, role):
        out = "".join(f"\t\tip daddr {a} drop\n" for d, a in sorted(self.drops[role])
                      if d == "out")
        inp = "".join(f"\t\tip saddr {a} drop\n" for d, a in sorted(self.drops[role])
                      if d == "in")
        text = (f"table inet zf\nflush table inet zf\n"
                f"table inet zf {{\n"
                f"\tchain out {{\n\t\ttype filter hook output priority 0;\n{out}\t}}\n"
                f"\tchain in {{\n\t\ttype filter hook input priority 0;\n{inp}\t}}\n}}\n")
        sh(IP, "netns", "exec", self.ns(role), NFT, "-f", "-", input=text.encode())

    def _dst(self, b):
        return self.addr(b) if b in self.spaces else b

    def block(self, a, bs, both=False):
        """a may not send to any of bs (roles, or addresses such as the host's); both: nor
        receive from them. The rules all go in a's namespace (one nft call)."""
        bs = [bs] if isinstance(bs, str) else bs
        new = {("out", self._dst(b)) for b in bs}
        if both:
            new |= {("in", self._dst(b)) for b in bs}
        if not new <= self.drops[a]:
            self.drops[a] |= new
            self._apply(a)

    def blocked(self):
        """{role: sorted (direction, address)} of the rules in force."""
        return {r: sorted(v) for r, v in self.drops.items() if v}

    def heal(self):
        for role, v in self.drops.items():
            if v:
                v.clear()
                self._apply(role)

    def rules_text(self, role):
        return self.run(role, NFT, "list", "table", "inet", "zf")

    # ---- teardown
    def close(self):
        if self.closed:
            return
        self.closed = True
        for ns, _ in self.spaces.values():
            _kill_ns_pids(ns)
        deadline = time.time() + 10
        for ns, _ in self.spaces.values():
            while sh(IP, "netns", "pids", ns, check=False).split() and time.time() < deadline:
                time.sleep(0.05)
        # the veth pairs first, synchronously: a namespace's own go with it only later,
        # from the kernel's clean-up work
        for hv in self.veths:
            sh(IP, "link", "del", hv, check=False)
        for ns, _ in self.spaces.values():
            sh(IP, "netns", "del", ns, check=False)
        sh(IP, "link", "del", self.bridge, check=False)
        try:
            signal.signal(signal.SIGTERM, self._old_term or signal.SIG_DFL)
        except (ValueError, TypeError):
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def leftovers(prefix, timeout=10):
    """Namespaces and links still named with prefix (a test of close()), after giving the
    kernel's asynchronous clean-up up to timeout s."""
    deadline = time.time() + timeout
    while True:
        names = [line.split()[0] for line in sh(IP, "netns", "list", check=False).splitlines()
                 if line.strip()]
        links = re.findall(r"^\d+: ([^:@]+)", sh(IP, "-o", "link", check=False), re.M)
        left = [n for n in names + links if n.startswith(prefix)]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.2)
