#!/bin/sh
# PgBouncer in transaction mode in front of one PostgreSQL database, configured from the environment:
#   DATABASE_HOST, DATABASE_PORT (5432), DATABASE_NAME, DATABASE_USER, DATABASE_PASSWORD (required),
#   PGBOUNCER_POOL_SIZE (40: the server connections every Trawl process together may use), PGBOUNCER_PORT (6432),
#   PGBOUNCER_LISTEN (0.0.0.0), PGBOUNCER_DIR (where the generated files go; /tmp/pgbouncer).
# Clients authenticate with SCRAM against the same user and password PgBouncer uses towards PostgreSQL.
set -eu
: "${DATABASE_HOST:=postgres}" "${DATABASE_PORT:=5432}" "${DATABASE_NAME:=trawl}" "${DATABASE_USER:=trawl}"
: "${DATABASE_PASSWORD:?set DATABASE_PASSWORD: PgBouncer never runs without one}"
: "${PGBOUNCER_POOL_SIZE:=40}" "${PGBOUNCER_PORT:=6432}" "${PGBOUNCER_LISTEN:=0.0.0.0}" "${PGBOUNCER_DIR:=/tmp/pgbouncer}"
mkdir -p "$PGBOUNCER_DIR"
umask 077
printf '"%s" "%s"\n' "$DATABASE_USER" "$DATABASE_PASSWORD" > "$PGBOUNCER_DIR/userlist.txt"
cat > "$PGBOUNCER_DIR/pgbouncer.ini" <<INI
[databases]
$DATABASE_NAME = host=$DATABASE_HOST port=$DATABASE_PORT dbname=$DATABASE_NAME
[pgbouncer]
listen_addr = $PGBOUNCER_LISTEN
listen_port = $PGBOUNCER_PORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $PGBOUNCER_DIR/userlist.txt
pool_mode = transaction
default_pool_size = $PGBOUNCER_POOL_SIZE
max_db_connections = $PGBOUNCER_POOL_SIZE
max_client_conn = 5000
ignore_startup_parameters = extra_float_digits
INI
exec pgbouncer "$PGBOUNCER_DIR/pgbouncer.ini"
