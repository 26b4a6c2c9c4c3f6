# helpers; source after env.sh

# start_bg NAME CMD...: run CMD detached in its own session, log to $S/log/NAME.out, pid to $S/pids/NAME.pid
start_bg() {
  local name=$1; shift
  setsid "$@" >"$S/log/$name.out" 2>&1 </dev/null 9>&- &
  echo $! >"$S/pids/$name.pid"
  echo "  started $name (pid $!)"
}

# wait_http URL TIMEOUT_S: any HTTP answer (even 401) counts
wait_http() {
  local url=$1 tmo=${2:-60} i=0
  until curl -s -o /dev/null -m 5 "$url"; do
    i=$((i+1)); [ $i -ge $((tmo*5)) ] && { echo "TIMEOUT waiting for $url (see $S/log)"; return 1; }
    sleep 0.2
  done
}

wait_port() {
  local port=$1 tmo=${2:-60} i=0
  until (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do
    i=$((i+1)); [ $i -ge $((tmo*5)) ] && { echo "TIMEOUT waiting for port $port"; return 1; }
    sleep 0.2
  done
}

# pid_alive NAME
pid_alive() { [ -f "$S/pids/$1.pid" ] && kill -0 "$(cat "$S/pids/$1.pid")" 2>/dev/null; }

# stop_pid NAME: TERM the recorded process group (start_bg made it), wait, then KILL. Never by name.
stop_pid() {
  local name=$1 pid
  [ -f "$S/pids/$name.pid" ] || return 0
  pid=$(cat "$S/pids/$name.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi
    echo "  stopped $name ($pid)"
  fi
  rm -f "$S/pids/$name.pid"
}

pg_running() { [ -f $S/pg/data/postmaster.pid ] && runuser -u postgres -- $PGBIN/pg_ctl -D $S/pg/data status >/dev/null 2>&1; }
