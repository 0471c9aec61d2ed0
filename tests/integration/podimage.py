"""A private Podman store and a local test image, for the tclone Podman
runtime's tests and bench (no network: the image is built here, from
busybox-static, the host's tmux and its libraries, and the C.UTF-8 locale,
then `podman import`ed into a store of its own, never the host's)."""

import os
import shutil
import subprocess
import tempfile

PODMAN = "/usr/bin/podman"


class Store:
    """A podman store in a temp dir (vfs driver): CONTAINERS_STORAGE_CONF."""

    def __init__(self, tag="gensee-tclone-test"):
        self.dir = tempfile.mkdtemp(prefix="gensee-it-pod.", dir="/var/tmp")
        os.chmod(self.dir, 0o700)
        self.conf = os.path.join(self.dir, "storage.conf")
        with open(self.conf, "w") as f:
            f.write('[storage]\ndriver = "vfs"\nrunroot = "%s/run"\ngraphroot = "%s/graph"\n'
                    % (self.dir, self.dir))
        self.env = dict(os.environ, CONTAINERS_STORAGE_CONF=self.conf)
        self.image = "localhost/%s:%d" % (tag, os.getpid())

    def podman(self, *args, check=True, timeout=120):
        r = subprocess.run([PODMAN, "--runtime", "runc", "--cgroup-manager", "cgroupfs",
                            "--events-backend", "none"] + list(args), capture_output=True,
                           text=True, env=self.env, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("podman %s: %s" % (" ".join(args), r.stderr))
        return r

    def build(self, tmux=True, tag=None):
        """Import a busybox (+ tmux) image; returns its name."""
        root = tempfile.mkdtemp(prefix="gensee-it-rootfs.", dir=self.dir)
        os.chmod(root, 0o755)
        for d in ("bin", "usr/bin", "tmp", "proc", "sys", "dev", "etc", "var/tmp", "run"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        shutil.copy2("/bin/busybox", os.path.join(root, "bin", "busybox"))
        for a in ("sh", "sleep", "cat", "echo", "ls", "true", "id", "touch", "mkdir", "rm",
                  "nc", "wc", "grep", "printf", "test", "[", "env"):
            os.symlink("busybox", os.path.join(root, "bin", a))
        with open(os.path.join(root, "etc", "passwd"), "w") as f:
            f.write("root:x:0:0::/:/bin/sh\n")
        if tmux:
            shutil.copy2("/usr/bin/tmux", os.path.join(root, "usr/bin/tmux"))
            ldd = subprocess.run(["ldd", "/usr/bin/tmux"], capture_output=True, text=True,
                                 check=True).stdout
            for word in ldd.split():
                if word.startswith("/") and os.path.exists(word):
                    dst = os.path.join(root, word.lstrip("/"))
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copy2(os.path.realpath(word), dst)
            if os.path.isdir("/usr/lib/locale/C.utf8"):
                shutil.copytree("/usr/lib/locale/C.utf8",
                                os.path.join(root, "usr/lib/locale/C.utf8"))
        name = tag or (self.image if tmux else self.image + "-notmux")
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        r = subprocess.run([PODMAN, "import", "-", name], stdin=tar.stdout, capture_output=True,
                           env=self.env, timeout=120)
        tar.stdout.close()
        tar.wait()
        shutil.rmtree(root, ignore_errors=True)
        if r.returncode != 0:
            raise RuntimeError("podman import: %s" % r.stderr)
        return name

    def containers(self):
        out = self.podman("ps", "--all", "--format", "{{.Names}}").stdout
        return [n for n in out.split() if n]

    def cleanup(self):
        """Every container and image of this store, then the store."""
        try:
            self.podman("rm", "--all", "--force", "--time", "0", check=False)
            self.podman("rmi", "--all", "--force", check=False)
        finally:
            subprocess.run(["umount", "-R", "-l", os.path.join(self.dir, "graph")],
                           capture_output=True)
            shutil.rmtree(self.dir, ignore_errors=True)
