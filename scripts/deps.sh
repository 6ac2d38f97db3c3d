#!/usr/bin/env bash
# Local servers for integration tests and development, all on 127.0.0.1:
#   etcd      Debian's etcd-server (3.4)
#   kafka     Apache Kafka 4.x, single KRaft node (broker+controller), jars
#             resolved from Maven Central via scripts/kafka/pom.xml
#   ferretdb  FerretDB v1 (MongoDB wire protocol) on its SQLite backend, built
#             with scripts/ferretdb/*.patch (atomic conditional writes, filters,
#             sorts and limits in SQLite, WAL checkpoints off the write path)
#
# Also built (not started): toxiproxy, a TCP proxy the fault suite puts between the roles
# and these servers to inject network faults (bin/toxiproxy).
#
# Usage: scripts/deps.sh up|down|status
#   up      install what is missing, start what is not running, wait until
#           each service accepts connections (idempotent)
#   down    stop all three (SIGTERM, SIGKILL after a grace period)
#   status  one line per service: running/stopped
#
# Environment: DEPS_DIR (default <repo>/.deps), ETCD_PORT (2379; peer port is
# +1), KAFKA_PORT (9092; controller port is +1), KAFKA_ADVERTISED_PORT (the port clients
# are told to use; default KAFKA_PORT), MONGO_PORT (27017),
# PYTHON (default <repo>/.venv/bin/python, used for readiness checks),
# DEPS_CACHE_DIR (default DEPS_DIR): where the built FerretDB binary
# (bin/ferretdb) and the Kafka jars (kafka/libs) are installed. A second
# instance on other ports (e.g. the fault suite's private servers) points it at
# the first instance's DEPS_DIR, so nothing is rebuilt or downloaded again.
# Each service keeps data, its log (<svc>/log) and pid file under DEPS_DIR.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
DEPS_DIR=${DEPS_DIR:-$ROOT/.deps}
ETCD_PORT=${ETCD_PORT:-2379}
KAFKA_PORT=${KAFKA_PORT:-9092}
# The address clients are told to use: the broker's own port, or a proxy in front of it
# (the fault suite's Toxiproxy).
KAFKA_ADVERTISED_PORT=${KAFKA_ADVERTISED_PORT:-$KAFKA_PORT}
MONGO_PORT=${MONGO_PORT:-27017}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
for port in "$ETCD_PORT" "$KAFKA_PORT" "$KAFKA_ADVERTISED_PORT" "$MONGO_PORT"; do
  [[ $port =~ ^[0-9]+$ ]] || { echo "deps.sh: ports must be numbers, got '$port'" >&2; exit 1; }
done
ETCD_PEER_PORT=$((ETCD_PORT + 1))
KAFKA_CONTROLLER_PORT=$((KAFKA_PORT + 1))

KAFKA_VERSION=4.1.1
# Any 16 random bytes, base64url without padding. Fixed so nothing has to
# generate one; the cluster only ever lives in this DEPS_DIR.
KAFKA_CLUSTER_ID=Z3LWfMzTQx6jPbnxKQ5Zdw
FERRETDB_VERSION=v1.24.2
TOXIPROXY_VERSION=v2.5.0
FERRETDB_PATCH=$ROOT/scripts/ferretdb/ferretdb-$FERRETDB_VERSION.patch

SERVICES=(etcd kafka ferretdb)

say() { printf '%s\n' "$*"; }
warn() { printf 'deps.sh: %s\n' "$*" >&2; }
die() {
  warn "$*"
  exit 1
}

as_root() {
  if ((EUID == 0)); then "$@"; else sudo "$@"; fi
}

now_ms() { echo $((${EPOCHREALTIME//[^0-9]/} / 1000)); }
since() { # elapsed seconds since a now_ms value, one decimal
  local ms=$(($(now_ms) - $1))
  printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100))
}

svc_dir() { echo "$DEPS_DIR/$1"; }
pid_file() { echo "$DEPS_DIR/$1/pid"; }
log_file() { echo "$DEPS_DIR/$1/log"; }

# True if pid is alive and its command line mentions this service's directory.
# Every server is started with a path under DEPS_DIR/<svc>/ on its command
# line, so a stale pid file whose pid got recycled is not mistaken for it
# (and neither is a zombie, whose cmdline is empty).
pid_is_svc() {
  local pid=$1 svc=$2 cmdline
  kill -0 "$pid" 2>/dev/null || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"$(svc_dir "$svc")/"* ]]
}

# Print the pid of the running service, or fail.
running_pid() {
  local svc=$1 pid
  pid=$(cat "$(pid_file "$svc")" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  pid_is_svc "$pid" "$svc" || return 1
  echo "$pid"
}

port_open() {
  timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

require_free_ports() {
  local svc=$1 port
  for port in $(svc_ports "$svc"); do
    if port_open "$port"; then
      die "$svc: port $port is already in use by a process that is not this" \
        "checkout's $svc (DEPS_DIR=$DEPS_DIR); stop it or set another port"
    fi
  done
}

# Python with a given module importable? Cached per module.
declare -A PY_HAS=()
py_has() {
  if [[ -z ${PY_HAS[$1]:-} ]]; then
    if [[ -x $PYTHON ]] && "$PYTHON" -c "import $1" >/dev/null 2>&1; then
      PY_HAS[$1]=yes
    else
      PY_HAS[$1]=no
    fi
  fi
  [[ ${PY_HAS[$1]} == yes ]]
}

# Run an install command with its output appended to a log file; on failure
# show the tail of that log and exit.
run_logged() {
  local log=$1
  shift
  if ! "$@" >>"$log" 2>&1; then
    warn "failed: $*"
    warn "---- last 30 lines of $log ----"
    tail -n 30 "$log" >&2 || true
    exit 1
  fi
}

APT_UPDATED=
apt_install() {
  local log=$DEPS_DIR/apt.log
  if [[ -z $APT_UPDATED ]]; then
    run_logged "$log" as_root apt-get update -qq
    APT_UPDATED=1
  fi
  run_logged "$log" as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "$@"
}

rotate_log() {
  local log
  log=$(log_file "$1")
  if [[ -f $log ]]; then mv -f "$log" "$log.prev"; fi
  : >"$log"
}

# Run a server detached: its own session (setsid) so it outlives this script
# and the terminal or CI step, output appended to the service log. fd 9 is
# the lock held by this script; the server must not inherit it.
start_detached() {
  local svc=$1
  shift
  setsid nohup "$@" </dev/null >>"$(log_file "$svc")" 2>&1 9>&- &
  echo $! >"$(pid_file "$svc")"
}

stop_svc() {
  local svc=$1 grace=$2 pid deadline
  if ! pid=$(running_pid "$svc"); then
    rm -f "$(pid_file "$svc")"
    say "$(printf '%-9s' "$svc") not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + grace))
  while pid_is_svc "$pid" "$svc" && ((SECONDS < deadline)); do sleep 0.2; done
  if pid_is_svc "$pid" "$svc"; then
    warn "$svc: still running ${grace}s after SIGTERM, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in {1..50}; do
      pid_is_svc "$pid" "$svc" || break
      sleep 0.1
    done
  fi
  rm -f "$(pid_file "$svc")"
  say "$(printf '%-9s' "$svc") stopped (pid $pid)"
}

fail_start() {
  local svc=$1 why=$2 log
  log=$(log_file "$svc")
  warn "$svc: $why"
  warn "---- last 30 lines of $log ----"
  tail -n 30 "$log" >&2 || true
  warn "----"
  exit 1
}

# Poll a readiness check until it passes; fail (and stop the half-started
# server) if the process dies or the timeout expires.
wait_ready() {
  local svc=$1 timeout=$2 pid
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    if ! pid=$(running_pid "$svc"); then
      rm -f "$(pid_file "$svc")"
      fail_start "$svc" "exited during startup"
    fi
    if ((SECONDS >= deadline)); then
      stop_svc "$svc" 5 >/dev/null
      fail_start "$svc" "not ready after ${timeout}s (stopped it)"
    fi
    sleep 0.5
  done
}

# ---------------------------------------------------------------- etcd

install_etcd() {
  if command -v etcd >/dev/null && command -v etcdctl >/dev/null; then return 0; fi
  local t0
  t0=$(now_ms)
  say "etcd: installing etcd-server etcd-client (apt)"
  # The package's postinst starts a system etcd on 2379 through invoke-rc.d
  # unless policy-rc.d forbids it (exit 101). Most container images ship one;
  # add a temporary one if this machine doesn't.
  local policy=/usr/sbin/policy-rc.d
  if [[ ! -e $policy ]]; then
    trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"
  fi
  apt_install etcd-server etcd-client
  # Belt and braces: if a system etcd got started anyway, stop it.
  if pgrep -u etcd -x etcd >/dev/null 2>&1; then
    warn "etcd: stopping the system etcd service started by the package"
    as_root /etc/init.d/etcd stop || true
  fi
  say "etcd: installed $(etcd --version 2>/dev/null | sed -n 1p) ($(since "$t0"))"
}

etcdctl_local() {
  ETCDCTL_API=3 etcdctl --endpoints="http://127.0.0.1:$ETCD_PORT" \
    --dial-timeout=1s --command-timeout=2s "$@"
}

etcd_ready() {
  etcdctl_local endpoint health >/dev/null 2>&1
}

start_etcd() {
  local dir
  dir=$(svc_dir etcd)
  mkdir -p "$dir/data"
  chmod 700 "$dir/data"
  rotate_log etcd
  local peer=http://127.0.0.1:$ETCD_PEER_PORT client=http://127.0.0.1:$ETCD_PORT
  # etcd reads ETCD_* variables as flags; keep our port knobs away from it.
  start_detached etcd env -u ETCD_PORT -u ETCD_PEER_PORT etcd \
    --name deps --data-dir "$dir/data" --logger zap \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "deps=$peer" --initial-cluster-state new \
    --initial-cluster-token deps
}

# ---------------------------------------------------------------- kafka

KAFKA_POM=$ROOT/scripts/kafka/pom.xml
KAFKA_LOG4J=$ROOT/scripts/kafka/log4j2.properties

java_major() {
  java -version 2>&1 | sed -n '1s/.*version "\([0-9]*\).*/\1/p'
}

install_kafka() {
  local libs stamp
  libs=$KAFKA_LIBS
  stamp="$KAFKA_VERSION $(sha256sum <"$KAFKA_POM" | cut -c1-16)"
  if [[ -f $libs/.installed && $(<"$libs/.installed") == "$stamp" ]]; then return 0; fi

  command -v java >/dev/null || apt_install openjdk-17-jre-headless
  command -v mvn >/dev/null || apt_install maven
  local t0
  t0=$(now_ms)
  say "kafka: resolving kafka_2.13 $KAFKA_VERSION and its runtime deps (maven, ~/.m2)"
  rm -rf "$libs"
  local log
  log=$DEPS_CACHE_DIR/kafka/install.log
  : >"$log"
  run_logged "$log" mvn -B -ntp -Dstyle.color=never -f "$KAFKA_POM" \
    dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$libs" -Dkafka.version="$KAFKA_VERSION"
  echo "$stamp" >"$libs/.installed"
  say "kafka: $(find "$libs" -name '*.jar' | wc -l) jars in $libs ($(since "$t0"))"
}

# The JVM command line shared by the storage tool and the broker.
kafka_java() {
  KAFKA_JAVA=(java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$KAFKA_LOG4J"
    -cp "$KAFKA_LIBS/*")
}

write_kafka_config() {
  local dir=$1
  cat >"$dir/server.properties" <<EOF
# Generated by scripts/deps.sh on every start; edits are overwritten.
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_ADVERTISED_PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# A consumer that dies (SIGKILL) keeps its partitions until its session times out: 45 s by
# default, 10 s here so that the tests which kill executors finish sooner. Heartbeats must
# come well within it.
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=1000
group.consumer.heartbeat.interval.ms=2000
EOF
}

# Format the log dir once. Formatting with --standalone records the
# controller's address in the log dir, so a changed port needs a new one.
format_kafka() {
  local dir=$1 data=$1/data ports="$KAFKA_PORT $KAFKA_CONTROLLER_PORT"
  if [[ -f $data/meta.properties && -f $dir/formatted && $(<"$dir/formatted") == "$ports" ]]; then
    return 0
  fi
  if [[ -d $data ]]; then
    warn "kafka: ports changed or data dir unformatted; wiping $data"
  fi
  rm -rf "$data" "$dir/formatted"
  mkdir -p "$data"
  if ! "${KAFKA_JAVA[@]}" kafka.tools.StorageTool format --standalone \
    -t "$KAFKA_CLUSTER_ID" -c "$dir/server.properties" >>"$(log_file kafka)" 2>&1; then
    fail_start kafka "formatting $data failed"
  fi
  echo "$ports" >"$dir/formatted"
}

kafka_ready() {
  if py_has confluent_kafka; then
    "$PYTHON" - "127.0.0.1:$KAFKA_PORT" >/dev/null 2>&1 <<'EOF'
import sys
from confluent_kafka.admin import AdminClient
md = AdminClient({"bootstrap.servers": sys.argv[1]}).list_topics(timeout=3)
sys.exit(0 if md.brokers else 1)
EOF
  else
    port_open "$KAFKA_PORT" && grep -q 'Kafka Server started' "$(log_file kafka)"
  fi
}

start_kafka() {
  local dir major
  dir=$(svc_dir kafka)
  major=$(java_major)
  ((${major:-0} >= 17)) || die "kafka: Kafka 4.x needs Java 17+, found '${major:-?}'"
  rotate_log kafka
  kafka_java
  write_kafka_config "$dir"
  format_kafka "$dir"
  start_detached kafka "${KAFKA_JAVA[@]}" kafka.Kafka "$dir/server.properties"
}

# ---------------------------------------------------------------- ferretdb

# The version the patched build reports, e.g. v1.24.2-jobscheduler-0123456789ab: the store
# recognizes "-jobscheduler" (atomic conditional writes), and a changed patch rebuilds.
ferretdb_build_version() {
  echo "$FERRETDB_VERSION-jobscheduler-$(sha256sum "$FERRETDB_PATCH" | cut -c1-12)"
}

install_ferretdb() {
  local version= build_version
  build_version=$(ferretdb_build_version)
  if [[ -x $FERRETDB_BIN ]]; then version=$("$FERRETDB_BIN" --version 2>/dev/null || true); fi
  if [[ $version == *"version: $build_version"* ]]; then return 0; fi

  command -v go >/dev/null || die "ferretdb: go is needed to build FerretDB"
  command -v patch >/dev/null || apt_install patch
  local t0 log
  t0=$(now_ms)
  log=$DEPS_CACHE_DIR/ferretdb/install.log
  : >"$log"
  say "ferretdb: building FerretDB $FERRETDB_VERSION with $(basename "$FERRETDB_PATCH") (go; ~2 min with cold caches)"
  # Not `go install ...@version`: that binary panics at startup because
  # FerretDB embeds build/version/version.txt, which its release tooling
  # generates and the module zip lacks. So copy the module source out of the
  # module cache, add that file, and build there. GOTOOLCHAIN=local: the
  # installed Go is new enough, never fetch another toolchain.
  # -buildvcs=false: the copy sits inside this git checkout, whose VCS info
  # must not be stamped into (or break) the build.
  export GOTOOLCHAIN=local
  local moddir src=$DEPS_CACHE_DIR/ferretdb/src
  moddir=$(cd "$DEPS_CACHE_DIR" &&
    go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" 2>>"$log" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || true
  [[ -n $moddir && -d $moddir ]] || die "ferretdb: go mod download failed (see $log)"
  rm -rf "$src"
  mkdir -p "$(dirname "$src")" "$(dirname "$FERRETDB_BIN")"
  cp -R "$moddir" "$src"
  chmod -R u+w "$src"
  echo "$build_version" >"$src/build/version/version.txt"
  echo "deps.sh" >"$src/build/version/package.txt"
  run_logged "$log" patch -p1 -d "$src" -i "$FERRETDB_PATCH"
  run_logged "$log" go build -C "$src" -buildvcs=false -trimpath \
    -o "$FERRETDB_BIN.tmp" ./cmd/ferretdb
  mv -f "$FERRETDB_BIN.tmp" "$FERRETDB_BIN"
  rm -rf "$src"
  say "ferretdb: built $FERRETDB_BIN ($(since "$t0"))"
}

# ---------------------------------------------------------------- toxiproxy

# Not a service of the stack: the fault suite starts its own servers of it, to put a bad
# network between the roles and etcd, Kafka and FerretDB. `go install` builds it as a
# binary named `server`; it is kept as bin/toxiproxy with its version beside it.
install_toxiproxy() {
  if [[ -x $TOXIPROXY_BIN && $(cat "$TOXIPROXY_BIN.version" 2>/dev/null) == "$TOXIPROXY_VERSION" ]]; then
    return 0
  fi
  command -v go >/dev/null || die "toxiproxy: go is needed to build Toxiproxy"
  local t0 log tmp
  t0=$(now_ms)
  log=$DEPS_CACHE_DIR/toxiproxy.log
  : >"$log"
  say "toxiproxy: building Toxiproxy $TOXIPROXY_VERSION (go install)"
  tmp=$(mktemp -d)
  run_logged "$log" env GOTOOLCHAIN=local GOBIN="$tmp" \
    go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mkdir -p "$(dirname "$TOXIPROXY_BIN")"
  mv -f "$tmp/server" "$TOXIPROXY_BIN"
  rm -rf "$tmp"
  echo "$TOXIPROXY_VERSION" >"$TOXIPROXY_BIN.version"
  say "toxiproxy: built $TOXIPROXY_BIN ($(since "$t0"))"
}

ferretdb_ready() {
  if py_has pymongo; then
    "$PYTHON" - "mongodb://127.0.0.1:$MONGO_PORT" >/dev/null 2>&1 <<'EOF'
import sys
import pymongo
pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=1000).admin.command("ping")
EOF
  else
    port_open "$MONGO_PORT"
  fi
}

start_ferretdb() {
  local dir
  dir=$(svc_dir ferretdb)
  mkdir -p "$dir/data" "$dir/state"
  rotate_log ferretdb
  # --debug-addr=-: no metrics/pprof HTTP listener (default 127.0.0.1:8088).
  # synchronous(normal): SQLite in WAL mode syncs at checkpoints, not on every commit. A
  # FerretDB crash loses nothing; an OS crash may lose the last commits, which is fine for
  # a development and test server, and makes its one-at-a-time writes about 1.5x faster.
  start_detached ferretdb env FERRETDB_TELEMETRY=disable "$FERRETDB_BIN" \
    --handler=sqlite --sqlite-url="file:$dir/data/?_pragma=synchronous(normal)" \
    --listen-addr="127.0.0.1:$MONGO_PORT" --state-dir="$dir/state" \
    --telemetry=disable --debug-addr=- --log-level=info
}

# ---------------------------------------------------------------- commands

svc_addr() {
  case $1 in
  etcd) echo "http://127.0.0.1:$ETCD_PORT" ;;
  kafka) echo "127.0.0.1:$KAFKA_PORT" ;;
  ferretdb) echo "mongodb://127.0.0.1:$MONGO_PORT" ;;
  esac
}

svc_ports() {
  case $1 in
  etcd) echo "$ETCD_PORT $ETCD_PEER_PORT" ;;
  kafka) echo "$KAFKA_PORT $KAFKA_CONTROLLER_PORT" ;;
  ferretdb) echo "$MONGO_PORT" ;;
  esac
}

svc_timeout() {
  case $1 in
  etcd) echo 30 ;;
  kafka) echo 90 ;;
  ferretdb) echo 30 ;;
  esac
}

cmd_up() {
  local svc pid
  local -a to_start=()
  local -A started=() note=()
  # A shared cache (DEPS_CACHE_DIR elsewhere) is locked while installing into it, so
  # two instances never build into it at once; the lock is dropped before any start.
  if [[ $DEPS_CACHE_DIR != "$DEPS_DIR" ]]; then
    exec 8>"$DEPS_CACHE_DIR/.lock"
    flock 8
  fi
  install_etcd
  install_kafka
  install_ferretdb
  install_toxiproxy
  if [[ $DEPS_CACHE_DIR != "$DEPS_DIR" ]]; then exec 8>&-; fi

  for svc in "${SERVICES[@]}"; do
    if running_pid "$svc" >/dev/null; then
      note[$svc]="already running"
    else
      to_start+=("$svc")
    fi
  done
  # Check all ports before launching anything, so that a conflict doesn't
  # leave a half-started set behind.
  for svc in "${to_start[@]}"; do require_free_ports "$svc"; done
  # Launch everything, then wait, so the startups overlap. Kafka goes first
  # (its start includes formatting) and is waited for last.
  for svc in kafka etcd ferretdb; do
    [[ " ${to_start[*]} " == *" $svc "* ]] || continue
    started[$svc]=$(now_ms)
    "start_$svc"
  done
  for svc in etcd ferretdb kafka; do
    wait_ready "$svc" "$(svc_timeout "$svc")" "${svc}_ready"
    if [[ -n ${started[$svc]:-} ]]; then note[$svc]="started in $(since "${started[$svc]}")"; fi
  done
  for svc in "${SERVICES[@]}"; do
    pid=$(running_pid "$svc")
    printf '%-9s running  pid %-7s %-26s (%s)\n' "$svc" "$pid" "$(svc_addr "$svc")" "${note[$svc]}"
  done
}

cmd_down() {
  stop_svc kafka 30
  stop_svc ferretdb 10
  stop_svc etcd 10
}

cmd_status() {
  local svc pid
  for svc in "${SERVICES[@]}"; do
    if pid=$(running_pid "$svc"); then
      printf '%-9s running  pid %-7s %s\n' "$svc" "$pid" "$(svc_addr "$svc")"
    else
      printf '%-9s stopped\n' "$svc"
    fi
  done
}

main() {
  local cmd=${1:-}
  case $cmd in
  up | down | status) ;;
  *) die "usage: $0 up|down|status" ;;
  esac
  mkdir -p "$DEPS_DIR"
  DEPS_DIR=$(cd "$DEPS_DIR" && pwd -P)
  DEPS_CACHE_DIR=${DEPS_CACHE_DIR:-$DEPS_DIR}
  mkdir -p "$DEPS_CACHE_DIR"/{kafka,ferretdb}
  DEPS_CACHE_DIR=$(cd "$DEPS_CACHE_DIR" && pwd -P)
  FERRETDB_BIN=$DEPS_CACHE_DIR/bin/ferretdb
  TOXIPROXY_BIN=$DEPS_CACHE_DIR/bin/toxiproxy
  KAFKA_LIBS=$DEPS_CACHE_DIR/kafka/libs
  KAFKA_JAVA=()
  mkdir -p "$DEPS_DIR"/{etcd,kafka,ferretdb}
  # Serialize up/down (e.g. two test runs calling `up` at once); status only
  # reads pid files and must not wait behind a long cold install.
  if [[ $cmd != status ]]; then
    exec 9>"$DEPS_DIR/.lock"
    flock 9
  fi

  "cmd_$cmd"
}

main "$@"
