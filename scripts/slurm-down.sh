#!/bin/bash
# Stops the daemons scripts/slurm-up.sh DIR started (slurmd, slurmctld,
# munged), by the process numbers it recorded in DIR, and waits for them.
dir=${1:?usage: scripts/slurm-down.sh DIR}
stop() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}
stop "$dir/slurmd.daemon"
stop "$dir/slurmctld.daemon"
stop "$dir/munge/munged.pid"
exit 0
