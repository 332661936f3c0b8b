#!/usr/bin/env bash
# Start, stop or inspect a whole vdn cluster from one machine over ssh, driven by the cluster
# config (ops/cluster.example.conf): the coordinator on the host of worker_endpoint, and one
# vdn-worker@SPEC unit per `worker = HOST gpus=SPEC` line (gpus defaults to 0-7).
#
#   ops/cluster.sh start|stop|restart|status CONF [--dry-run]
#
# Stop order is workers first (each finishes its job; systemd's TimeoutStopSec bounds it), then
# the coordinator; start order is the reverse. --dry-run prints the commands instead.
set -euo pipefail
usage() { echo "usage: $0 start|stop|restart|status CONF [--dry-run]" >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1 conf=$2 dry=${3:-}
case $action in start|stop|restart|status) ;; *) usage ;; esac
[ -z "$dry" ] || [ "$dry" = --dry-run ] || usage
[ -r "$conf" ] || { echo "$0: cannot read $conf" >&2; exit 2; }

run() { if [ -n "$dry" ]; then echo "$*"; else "$@"; fi; }

coord=""
workers=()
n=0
while IFS= read -r line || [ -n "$line" ]; do
  n=$((n + 1))
  line=${line%%#*}
  [[ $line =~ ^[[:space:]]*$ ]] && continue
  if [[ ! $line =~ ^[[:space:]]*([a-z0-9_]+)[[:space:]]*=[[:space:]]*(.*[^[:space:]])[[:space:]]*$ ]]; then
    echo "$conf:$n: expected 'key = value'" >&2; exit 2
  fi
  key=${BASH_REMATCH[1]} val=${BASH_REMATCH[2]}
  case $key in
    worker_endpoint)
      [[ $val =~ ^tcp://([^:/]+):[0-9]+$ ]] || { echo "$conf:$n: worker_endpoint '$val': expected tcp://HOST:PORT" >&2; exit 2; }
      coord=${BASH_REMATCH[1]} ;;
    worker)
      read -r host rest <<<"$val"
      spec=0-7
      for kv in $rest; do
        case $kv in
          gpus=*) spec=${kv#gpus=} ;;
          *) echo "$conf:$n: worker '$val': unknown setting '$kv' (expected gpus=SPEC)" >&2; exit 2 ;;
        esac
      done
      [[ $spec =~ ^[0-9,-]+$ ]] || { echo "$conf:$n: worker '$host': gpus '$spec' is not a GPU list" >&2; exit 2; }
      workers+=("$host $spec") ;;
  esac
done <"$conf"
[ -n "$coord" ] || { echo "$conf: no worker_endpoint (the coordinator's host)" >&2; exit 2; }

on_workers() {
  for w in "${workers[@]}"; do
    read -r host spec <<<"$w"
    run ssh "$host" sudo systemctl "$1" "vdn-worker@$spec"
  done
}
case $action in
  start)   run ssh "$coord" sudo systemctl start vdn-coordinator; on_workers start ;;
  stop)    on_workers stop; run ssh "$coord" sudo systemctl stop vdn-coordinator ;;
  restart) on_workers stop; run ssh "$coord" sudo systemctl restart vdn-coordinator; on_workers start ;;
  status)  run ssh "$coord" systemctl --no-pager status vdn-coordinator; on_workers "--no-pager status" ;;
esac
