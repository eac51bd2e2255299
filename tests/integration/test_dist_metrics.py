"""Every metric the Grafana dashboard (dist/grafana/zest.json) and the Prometheus alert
rules (dist/prometheus/zest-alerts.yml) name is one the daemons export.

etcd, six datanodes (RS 4+2) and the gateway --cluster; a few PUTs and GETs so that every
histogram and per-operation series exists; then /metrics of every daemon is scraped and each
zest_* name in the dashboard's and the rules' expressions must be among the sample names
(a histogram's _bucket/_sum/_count as exported). The dashboard's expressions must also be
PromQL that promtool accepts (written as recording rules, Grafana's $__rate_interval as 5m).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

DIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "dist")
NAME = re.compile(r"\bzest_[a-z0-9_]+")


def dashboard_exprs():
    with open(os.path.join(DIST, "grafana", "zest.json")) as f:
        d = json.load(f)
    return [t["expr"] for p in d["panels"] for t in p.get("targets", [])]


def rule_exprs():
    # the rules file is plain: one `expr:` a rule, on one line
    with open(os.path.join(DIST, "prometheus", "zest-alerts.yml")) as f:
        return [ln.split("expr:", 1)[1].strip() for ln in f if ln.strip().startswith("expr:")]


def sample_names(text):
    out = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            out.add(re.split(r"[{ ]", line, 1)[0])
    return out


def test_dashboard_promql():
    promtool = shutil.which("promtool")
    if not promtool:
        raise ch.Skip("promtool is not installed (Debian prometheus)")
    exprs = dashboard_exprs()
    assert len(exprs) >= 15, exprs
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, e in enumerate(exprs):
            f.write(f"      - record: zest_dashboard_{i}\n        expr: {json.dumps(e.replace('$__rate_interval', '5m'))}\n")
    try:
        p = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
    finally:
        os.unlink(f.name)


def test_every_name_exported():
    wanted = {}
    for where, exprs in (("dashboard", dashboard_exprs()), ("alert rules", rule_exprs())):
        for e in exprs:
            for n in NAME.findall(e):
                wanted.setdefault(n, where)
    # what the panels and rules must show
    for n in ["zest_s3_payload_bytes_total", "zest_s3_request_seconds_bucket",
              "zest_payload_copied_bytes_total", "zest_heal_pending_cells",
              "zest_cluster_health", "zest_drive_capacity_bytes", "zest_drive_free_bytes",
              "zest_cluster_etcd_txn_seconds_bucket", "zest_drive_state",
              "zest_checksum_mismatches_total"]:
        assert n in wanted, n
    with ch.cluster(nodes=6, ec="4+2", cell_size="64KiB") as c:
        s3 = c.s3(retries=3)
        s3.create_bucket(Bucket="dash")
        for i in range(4):
            s3.put_object(Bucket="dash", Key=f"k{i}", Body=os.urandom(100_000 + i))
            s3.get_object(Bucket="dash", Key=f"k{i}")["Body"].read()
        have = sample_names(ch.http_get(c.gw.host, c.gw.metrics_port))
        for i in c.nodes:
            n = c.node(i)
            have |= sample_names(ch.http_get(n.host, n.metrics_port))
        missing = sorted(f"{n} ({w})" for n, w in wanted.items() if n not in have)
        assert not missing, "named but not exported: " + ", ".join(missing)
        print(f"{len(wanted)} names checked against {len(have)} exported", flush=True)


if __name__ == "__main__":
    ch.run([test_dashboard_promql, test_every_name_exported])
