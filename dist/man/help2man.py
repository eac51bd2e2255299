#!/usr/bin/env python3
"""A man page (section 1) from a program's own --help and --version text, so the page
never disagrees with the program: help2man.py PROG OUT.1 "one-line description"."""
import subprocess
import sys


def roff(line):
    line = line.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + line if line[:1] in (".", "'") else line


def main():
    prog, out, what = sys.argv[1], sys.argv[2], sys.argv[3]
    name = prog.rsplit("/", 1)[-1]
    # --help may go to stdout or stderr and exit 0 or 1 or 2 by program: take what it said
    r = subprocess.run([prog, "--help"], capture_output=True, text=True, timeout=30)
    text = r.stdout or r.stderr
    if not text.strip():
        sys.exit("help2man.py: %s --help printed nothing" % prog)
    v = subprocess.run([prog, "--version"], capture_output=True, text=True, timeout=30)
    version = (v.stdout or v.stderr).strip().split("\n")[0] if v.returncode == 0 else name
    with open(out, "w") as f:
        f.write('.TH %s 1 "" "%s" "zest"\n' % (name.upper(), version))
        f.write(".SH NAME\n%s \\- %s\n" % (name, what))
        f.write(".SH DESCRIPTION\nThe text of\n.B %s \\-\\-help:\n.PP\n.nf\n" % name)
        for line in text.rstrip("\n").split("\n"):
            f.write(roff(line) + "\n")
        f.write(".fi\n.SH SEE ALSO\nzest's docs/operations.md (install, configuration file, "
                "upgrades, drives, dashboards).\n")


if __name__ == "__main__":
    main()
