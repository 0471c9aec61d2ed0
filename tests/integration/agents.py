"""The real agent CLIs the integration suite drives: pinned npm packages,
installed on demand into a cache, and how to run each one for a single
non-interactive turn against a mock model server (mockmodel.py).

    ensure(name)                      -> path of the agent's executable
    prepare_home(name, home, base_url)   writes the config files the agent
                                         needs in a fresh HOME
    env(name, base_url, home)         -> environment variables for the run
    argv(name, prompt, workspace)     -> the command line for one turn

base_url is the mock's origin, e.g. "http://127.0.0.1:18080" (no path);
each agent appends what its API needs. Only documented settings are used,
nothing in an agent is patched. Every agent's own sandbox is turned off:
the suite runs the agents inside Gensee's sandbox instead.

Stdlib only. ensure() installs with `npm install --prefix` (the npm
registry is the only network the suite may use) and raises InstallError
with npm's output when that fails: a missing agent fails the suite, it is
never skipped.
"""

import fcntl
import json
import os
import shutil
import subprocess
import tempfile

CACHE = "/var/cache/gensee-it-agents"

# The model name each agent is told to use. The mocks accept any name.
MODELS = {
    "codex": "gpt-5-codex",
    "claude": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}

AGENTS = {
    "codex": {"package": "@openai/codex", "version": "0.171.0", "bin": "codex",
              "mock": "openai"},
    "claude": {"package": "@anthropic-ai/claude-code", "version": "2.1.332", "bin": "claude",
               "mock": "anthropic"},
    "gemini": {"package": "@google/gemini-cli", "version": "0.61.0", "bin": "gemini",
               "mock": "gemini"},
}

FAKE_KEYS = {
    "codex": "sk-gensee-mock-openai-key",
    "claude": "sk-ant-gensee-mock-anthropic-key-0000000000",
    "gemini": "gensee-mock-gemini-key",
}

INSTALL_TIMEOUT = 900


class InstallError(RuntimeError):
    pass


def install_dir(name):
    a = AGENTS[name]
    return os.path.join(CACHE, "%s-%s" % (name, a["version"]))


def bin_path(name):
    return os.path.join(install_dir(name), "node_modules", ".bin", AGENTS[name]["bin"])


def _installed(name):
    """True if the pinned version answers --version."""
    path = bin_path(name)
    if not os.access(path, os.X_OK):
        return False
    home = tempfile.mkdtemp(prefix="gensee-agent-version-", dir="/var/tmp")
    # As root, in a new network namespace without even loopback: the agent
    # gets no chance to phone home from the host's namespace.
    cmd = (["unshare", "--net", "--"] if os.geteuid() == 0 else []) + [path, "--version"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL,
                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home})
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return r.returncode == 0 and AGENTS[name]["version"] in r.stdout


def ensure(name):
    """Install AGENTS[name] at its pinned version into CACHE unless it is
    there already; return the path of its executable. Safe to call from
    several processes at once (an flock on CACHE/.lock serialises them)."""
    a = AGENTS[name]
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed(name):
            return bin_path(name)
        d = install_dir(name)
        tmp = d + ".partial"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        cmd = ["npm", "install", "--prefix", tmp, "--no-audit", "--no-fund",
               "--no-save", "--loglevel=warn", "%s@%s" % (a["package"], a["version"])]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
                               stdin=subprocess.DEVNULL)
            out, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = "%s\n%s\ntimed out after %ds" % (e.stdout, e.stderr, INSTALL_TIMEOUT), -1
        except OSError as e:
            out, rc = str(e), -1
        if rc != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise InstallError("%s failed (%s):\n%s" % (" ".join(cmd), rc, out))
        shutil.rmtree(d, ignore_errors=True)
        os.rename(tmp, d)
        if not _installed(name):
            raise InstallError("%s installed into %s but `%s --version` does not answer %s:\n%s"
                               % (a["package"], d, bin_path(name), a["version"], out))
        return bin_path(name)


def argv(name, prompt, workspace):
    """The command line for one non-interactive turn in workspace, with
    tools run without asking and the agent's own sandbox off."""
    exe = bin_path(name)
    if name == "codex":
        # exec: one turn, then exit. The bypass flag is "approval_policy =
        # never" plus "sandbox_mode = danger-full-access" (also in
        # config.toml, see prepare_home).
        return [exe, "exec", "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check", "--color", "never", "-C", workspace,
                "-m", MODELS[name], prompt]
    if name == "claude":
        return [exe, "-p", prompt, "--dangerously-skip-permissions",
                "--permission-mode", "bypassPermissions", "--model", MODELS[name],
                "--output-format", "stream-json", "--verbose"]
    if name == "gemini":
        return [exe, "-p", prompt, "--approval-mode", "yolo", "--skip-trust",
                "-m", MODELS[name], "--output-format", "stream-json"]
    raise KeyError(name)


def env(name, base_url, home):
    """Environment variables for a run (merge over a minimal base env: PATH,
    HOME, USER, ...). Points the agent at the mock at base_url, gives it a
    fake key, and turns off updates, telemetry and other nonessential
    traffic."""
    base_url = base_url.rstrip("/")
    e = {"HOME": home, "NO_COLOR": "1"}
    if name == "codex":
        e.update({
            "CODEX_HOME": os.path.join(home, ".codex"),
            # The key of the gensee_mock provider (env_key in config.toml).
            "GENSEE_MOCK_API_KEY": FAKE_KEYS[name],
            # Not read with the gensee_mock provider; set so that nothing
            # falls back to the built-in openai provider with a real key.
            "OPENAI_API_KEY": FAKE_KEYS[name],
            "CODEX_API_KEY": FAKE_KEYS[name],
            "OPENAI_BASE_URL": base_url + "/v1",
        })
    elif name == "claude":
        e.update({
            "CLAUDE_CONFIG_DIR": os.path.join(home, ".claude"),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": FAKE_KEYS[name],
            "ANTHROPIC_MODEL": MODELS[name],
            "ANTHROPIC_SMALL_FAST_MODEL": MODELS[name],
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        })
    elif name == "gemini":
        e.update({
            "GEMINI_API_KEY": FAKE_KEYS[name],
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_MODEL": MODELS[name],
            "GEMINI_SANDBOX": "false",
            "GEMINI_TELEMETRY_ENABLED": "false",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        })
    else:
        raise KeyError(name)
    return e


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def prepare_home(name, home, base_url, workspace=None):
    """Write the config files name needs in the fresh HOME home to use the
    mock at base_url without asking anything. Returns the paths written.
    The caller chowns home to the agent's user afterwards."""
    base_url = base_url.rstrip("/")
    written = []
    if name == "codex":
        path = os.path.join(home, ".codex", "config.toml")
        lines = [
            'model = "%s"' % MODELS[name],
            'model_provider = "gensee_mock"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            'check_for_update_on_startup = false',
            '',
            '[model_providers.gensee_mock]',
            'name = "Gensee mock"',
            'base_url = "%s/v1"' % base_url,
            'env_key = "GENSEE_MOCK_API_KEY"',
            'wire_api = "responses"',
            'request_max_retries = 0',
            'stream_max_retries = 0',
            '',
            '[analytics]',
            'enabled = false',
            '',
            '[feedback]',
            'enabled = false',
            '',
            '# The plugin marketplace sync contacts github.com, api.github.com',
            '# and chatgpt.com at start-up.',
            '[features]',
            'plugins = false',
        ]
        if workspace:
            lines += ['', '[projects."%s"]' % workspace, 'trust_level = "trusted"']
        _write(path, "\n".join(lines) + "\n")
        written.append(path)
    elif name == "claude":
        cdir = os.path.join(home, ".claude")
        settings = {
            "env": {"DISABLE_AUTOUPDATER": "1",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
            "permissions": {"defaultMode": "bypassPermissions"},
            # Claude Code's own Bash sandbox (bubblewrap on Linux); off is
            # the default, stated so that no user setting turns it on.
            "sandbox": {"enabled": False},
            # Else --dangerously-skip-permissions writes it here itself.
            "skipDangerousModePermissionPrompt": True,
        }
        path = os.path.join(cdir, "settings.json")
        _write(path, json.dumps(settings, indent=2) + "\n")
        written.append(path)
        # Global state file: with CLAUDE_CONFIG_DIR set it lives in that
        # directory. Onboarding done, the fake key approved.
        state = {"hasCompletedOnboarding": True,
                 "customApiKeyResponses": {"approved": [FAKE_KEYS[name][-20:]], "rejected": []}}
        if workspace:
            state["projects"] = {workspace: {"hasTrustDialogAccepted": True,
                                             "allowedTools": []}}
        path = os.path.join(cdir, ".claude.json")
        _write(path, json.dumps(state, indent=2) + "\n")
        written.append(path)
    elif name == "gemini":
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"},
                         "folderTrust": {"enabled": False}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "tools": {"sandbox": False},
            "model": {"name": MODELS[name]},
            "ide": {"enabled": False},
        }
        path = os.path.join(home, ".gemini", "settings.json")
        _write(path, json.dumps(settings, indent=2) + "\n")
        written.append(path)
    else:
        raise KeyError(name)
    return written
