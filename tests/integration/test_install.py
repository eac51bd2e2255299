"""meson install into a staging folder, then the daemons started as systemd would.

`meson install --destdir` into a folder under the build folder; every file the project
installs is there (five programs, two systemd units, example configs, a man page per
program, the dashboard and the alert rules). Then the installed units' ExecStart lines, with
their paths moved into the staging folder and the instance name filled in, start a
datanode and a gateway, each from a config file written where the unit reads it; boto3
PUTs and GETs an object; both stop on SIGTERM with exit 0. The installed example
configs are read without a complaint; a config with an unknown name, or a bad value, is
refused with its file and line.
"""
import configparser
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

BUILD = os.path.abspath(zh.BUILD)
PROGRAMS = ["zest-datanode", "zest-s3gw", "zest-admin", "zest-bench", "zest-prof"]


def build_option(name):
    with open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")) as f:
        return next(o["value"] for o in json.load(f) if o["name"] == name)


def install(stage):
    shutil.rmtree(stage, ignore_errors=True)
    p = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet",
                        "--destdir", stage], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def staged(stage, path):
    """An installed absolute path inside the staging folder."""
    return os.path.join(stage, path.lstrip("/"))


def exec_start(unit_path, instance, stage):
    """The unit's ExecStart as argv: %i filled in, absolute paths moved into stage."""
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    cp.optionxform = str
    cp.read(unit_path)
    argv = cp["Service"]["ExecStart"].replace("%i", instance).split()
    return [staged(stage, a) if a.startswith("/") else a for a in argv]


def write_conf(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("# written by test_install.py\n\n" + "\n".join(lines) + "\n")


def test_install_and_run():
    stage = os.path.join(BUILD, "tests", f"install-staging-{os.getpid()}")
    install(stage)
    prefix = build_option("prefix")
    bindir = os.path.join(prefix, build_option("bindir"))
    sysconfdir = os.path.join(prefix, build_option("sysconfdir"))
    datadir = os.path.join(prefix, build_option("datadir"))
    mandir = os.path.join(prefix, build_option("mandir"))
    unit_dir = build_option("systemd_unit_dir") or os.path.join(prefix, "lib/systemd/system")

    # exactly these files, each where an operator looks for it: no test program, no library
    want = {os.path.join(bindir, p) for p in PROGRAMS}
    want |= {os.path.join(mandir, "man1", p + ".1") for p in PROGRAMS}
    want |= {os.path.join(unit_dir, u) for u in ("zest-datanode@.service", "zest-s3gw.service")}
    want |= {os.path.join(datadir, "zest", f) for f in (
        "datanode.conf.example", "s3gw.conf.example", "grafana/zest.json",
        "prometheus/zest-alerts.yml")}
    got = set()
    for root, _, files in os.walk(stage):
        got |= {"/" + os.path.relpath(os.path.join(root, f), stage) for f in files}
    assert got == {os.path.normpath(w) for w in want}, (sorted(got ^ want))
    for p in PROGRAMS:
        exe = staged(stage, os.path.join(bindir, p))
        assert os.access(exe, os.X_OK), exe
        page = open(staged(stage, os.path.join(mandir, "man1", p + ".1"))).read()
        assert page.startswith(f".TH {p.upper()} 1"), page[:80]
        assert "\\-\\-help" in page and "usage: " in page, p
    dn_page = open(staged(stage, os.path.join(mandir, "man1", "zest-datanode.1"))).read()
    assert "\\-\\-config FILE" in dn_page and "\\-\\-drive DIR" in dn_page
    for f in ["zest/datanode.conf.example", "zest/s3gw.conf.example", "zest/grafana/zest.json",
              "zest/prometheus/zest-alerts.yml"]:
        assert os.path.isfile(staged(stage, os.path.join(datadir, f))), f
    json.load(open(staged(stage, os.path.join(datadir, "zest/grafana/zest.json"))))
    dn_unit = staged(stage, os.path.join(unit_dir, "zest-datanode@.service"))
    gw_unit = staged(stage, os.path.join(unit_dir, "zest-s3gw.service"))

    # the units' command lines, with the configs where they read them
    work = os.path.join(stage, "var")
    dn_argv = exec_start(dn_unit, "t1", stage)
    assert dn_argv == [staged(stage, os.path.join(bindir, "zest-datanode")), "--config",
                       staged(stage, os.path.join(sysconfdir, "zest/datanode-t1.conf"))], dn_argv
    gw_argv = exec_start(gw_unit, "", stage)
    assert gw_argv == [staged(stage, os.path.join(bindir, "zest-s3gw")), "--config",
                       staged(stage, os.path.join(sysconfdir, "zest/s3gw.conf"))], gw_argv

    # the installed examples hold only names and values their programs take (every line
    # of the file is parsed before --help is reached)
    for prog, ex in (("zest-datanode", "datanode"), ("zest-s3gw", "s3gw")):
        p = subprocess.run([staged(stage, os.path.join(bindir, prog)), "--config",
                            staged(stage, os.path.join(datadir, f"zest/{ex}.conf.example")),
                            "--help"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and "--config FILE" in p.stdout, (prog, p.returncode, p.stderr)

    # an unknown name: refused before anything starts, with the file and line
    write_conf(dn_argv[2], ["listen = 127.0.0.1:0", "drives = /tmp/x"])
    p = subprocess.run(dn_argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert f"{dn_argv[2]}:4: unknown setting 'drives'" in p.stderr, p.stderr

    # a bad value: the gateway's own check, with the file and line in front
    write_conf(gw_argv[2], ["listen = 127.0.0.1:0", "anonymous = true", "threads = 99"])
    p = subprocess.run(gw_argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert f"{gw_argv[2]}:5: --threads must be 1..16" in p.stderr, p.stderr

    dn_port, dn_metrics = zh.free_port(), zh.free_port()
    drives = [os.path.join(work, f"d{i}") for i in range(6)]
    for d in drives:
        os.makedirs(d)
    write_conf(dn_argv[2], [f"listen = 127.0.0.1:{dn_port}", f"metrics = 127.0.0.1:{dn_metrics}",
                            *[f"drive = {d}" for d in drives], "ec = 4+2", "cell-size = 64KiB",
                            "insecure = true", "data-io = buffered", "shutdown-grace = 2s"])
    gw_port, gw_metrics = zh.free_port(), zh.free_port()
    write_conf(gw_argv[2], [f"listen = 127.0.0.1:{gw_port}", f"metrics = 127.0.0.1:{gw_metrics}",
                            f"datanode = 127.0.0.1:{dn_port}", "insecure = true",
                            f"access-key = {zh.ACCESS_KEY}", f"secret-key = {zh.SECRET_KEY}",
                            "# the keys could live in s3gw.env instead", "workers = 4"])
    dn = zh.Daemon(dn_argv, os.path.join(work, "datanode.log"), dn_metrics)
    gw = None
    try:
        gw = zh.Daemon(gw_argv, os.path.join(work, "s3gw.log"), gw_metrics)
        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{gw_port}",
                          aws_access_key_id=zh.ACCESS_KEY, aws_secret_access_key=zh.SECRET_KEY,
                          region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"},
                                        retries={"max_attempts": 1}))
        s3.create_bucket(Bucket="installed")
        body = os.urandom(300 * 1024 + 17)
        s3.put_object(Bucket="installed", Key="k", Body=body)
        assert s3.get_object(Bucket="installed", Key="k")["Body"].read() == body
        # the settings came from the file: the datanode has the six drives it names
        m = zh.metrics(dn_metrics)
        assert sum(1 for k in m if k.startswith("zest_drive_capacity_bytes{")) == 6, m
        with open(os.path.join(work, "datanode.log")) as f:
            assert f" config={dn_argv[2]}" in f.read()  # the start line names its file
    finally:
        rc_gw = gw.stop() if gw else 0
        rc_dn = dn.stop()
        for log in ("s3gw.log", "datanode.log"):
            path = os.path.join(work, log)
            if (rc_gw or rc_dn) and os.path.exists(path):
                sys.stderr.write(f"----- {log} -----\n{open(path).read()[-3000:]}\n")
    assert (rc_gw, rc_dn) == (0, 0), (rc_gw, rc_dn)
    shutil.rmtree(stage)


if __name__ == "__main__":
    zh.run_tests([test_install_and_run])
