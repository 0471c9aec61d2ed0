"""Debian packages a bench compares against (its peers) or needs, installed
with apt-get when missing. A policy-rc.d that refuses keeps a package from
starting a system-wide daemon (fapolicyd, squid, tinyproxy): each bench
runs its own for the measurement."""

import os
import shutil
import subprocess


def which(cmd):
    return shutil.which(cmd) or shutil.which(cmd, path="/usr/sbin:/sbin")


def install(packages, what="peers"):
    """packages: {command: Debian package}; installs those whose command is
    missing. Returns the commands still missing (each warned about)."""
    missing = sorted({pkg for cmd, pkg in packages.items() if which(cmd) is None})
    if missing:
        print("installing %s: %s" % (what, " ".join(missing)), flush=True)
        rcd = "/usr/sbin/policy-rc.d"
        had_rcd = os.path.exists(rcd)
        if not had_rcd:
            with open(rcd, "w") as f:
                f.write("#!/bin/sh\nexit 101\n")
            os.chmod(rcd, 0o755)
        try:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True,
                           timeout=600)
            r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] +
                               missing, env=env, capture_output=True, text=True, timeout=1200)
            if r.returncode != 0:
                print("warning: could not install %s: %s" % (" ".join(missing),
                                                             r.stderr[-300:]))
        finally:
            if not had_rcd:
                os.unlink(rcd)
    gone = [cmd for cmd in packages if which(cmd) is None]
    for cmd in gone:
        print("warning: %s is not available; its figures are missing" % cmd)
    return gone
