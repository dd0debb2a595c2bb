#!/bin/sh
# Installs SLURM (slurm-wlm: slurmctld, slurmd and the client commands)
# and MUNGE, its authentication service, from Debian or Ubuntu when they
# are missing, for the test that runs the sbatch scripts of docs/cluster.md
# on a one-node cluster (scripts/slurm-up.sh). Run as root; elsewhere it
# says what is missing and exits 0, and that test is skipped.
set -e
missing=""
command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 && command -v sbatch >/dev/null 2>&1 || missing="$missing slurm-wlm"
command -v munged >/dev/null 2>&1 || missing="$missing munge"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "note:$missing not installed (needs root and apt-get); the SLURM test will be skipped"
  exit 0
fi
echo "installing:$missing"
apt-get update -qq >/dev/null
# The packages' services are not started here: scripts/slurm-up.sh starts
# its own daemons with their own configuration.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null \
  || echo "warning: could not install$missing; the SLURM test will be skipped"
