#!/bin/bash
# Starts a one-node SLURM cluster whose every file lives in DIR: a MUNGE
# daemon with its own key and socket, slurmctld and slurmd on free ports,
# their state, spool and logs. Nothing outside DIR is configured, so
# several such clusters (and a system one) can run side by side. Needs
# root, slurm-wlm and munge (scripts/install-slurm.sh); DIR and the
# directories above it must be searchable by the munge user.
#
#   scripts/slurm-up.sh DIR        start; then: export SLURM_CONF=DIR/slurm.conf
#   scripts/slurm-down.sh DIR      stop every daemon started here
#
# With SLURM_CGROUP=1 the tasks run in cgroups (task/cgroup,
# proctrack/cgroup, ConstrainRAMSpace=yes), so that a job's --mem is
# enforced by the kernel; without, --mem is only accounted by SLURM. The
# cgroup version is the machine's (v1 or v2). DIR/mode says which came up:
# "cgroup" or "accounting".
set -eu
dir=${1:?usage: scripts/slurm-up.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
for c in munged slurmctld slurmd sinfo; do
  command -v $c >/dev/null || { echo "slurm-up: $c not installed (scripts/install-slurm.sh)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "slurm-up: needs root (slurmd runs jobs as their users)" >&2; exit 1; }

# A free TCP port: the kernel's choice for a socket bound to port 0.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
  || echo $((20000 + RANDOM % 20000)); }

# MUNGE: its own key and socket, its directory owned by the munge user.
mkdir -p "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$dir/munge"
chmod 711 "$dir/munge"
chmod 400 "$dir/munge/munge.key"
chmod 755 "$dir"
runuser -u munge -- munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"

host=$(hostname -s)
cpus=$(nproc)
ctld=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld" ]; do slurmd_port=$(free_port); done
# Job numbers of their own, so that two clusters on one machine never
# share a job's cgroup.
first=$(( (RANDOM * 32768 + RANDOM) % 60000000 + 1000000 ))
mode=accounting
task="TaskPlugin=task/none
ProctrackType=proctrack/linuxproc"
if [ "${SLURM_CGROUP:-0}" = 1 ]; then
  mode=cgroup
  task="TaskPlugin=task/cgroup,task/affinity
ProctrackType=proctrack/cgroup"
  version=v1
  [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && version=v2
  cat >"$dir/cgroup.conf" <<CG
CgroupPlugin=cgroup/$version
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
CG
fi
mkdir -p "$dir/state" "$dir/spool" "$dir/log"
cat >"$dir/slurm.conf" <<CONF
ClusterName=tl$(printf %s "$dir" | md5sum | cut -c1-8)
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
$task
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
FirstJobId=$first
ReturnToService=2
SchedulerParameters=sched_interval=1
MessageTimeout=30
KillWait=5
InactiveLimit=0
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
echo $mode >"$dir/mode"
export SLURM_CONF=$dir/slurm.conf
slurmctld -D -f "$SLURM_CONF" >>"$dir/log/slurmctld.out" 2>&1 &
echo $! >"$dir/slurmctld.daemon"
slurmd -D -f "$SLURM_CONF" -N "$host" >>"$dir/log/slurmd.out" 2>&1 &
echo $! >"$dir/slurmd.daemon"
# Ready when the node is idle.
for _ in $(seq 60); do
  if sinfo -h -N -o %t 2>/dev/null | grep -qx idle; then
    echo "slurm-up: one-node cluster up in $dir ($mode; SLURM_CONF=$SLURM_CONF)"
    exit 0
  fi
  sleep 1
done
echo "slurm-up: the node did not come up within 60 s; logs in $dir/log:" >&2
tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
exit 1
