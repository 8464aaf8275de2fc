#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, for `harness run --backend slurm` in CI.
#
#   bash .ci/slurm.sh        # idempotent; exits 0 once `sinfo` shows this node taking jobs (idle)
#
# What it does, each step skipped when already done:
#   1. apt-get install slurm-wlm munge          (Debian's Slurm 22.05 and MUNGE)
#   2. a MUNGE key, then munged as the munge user
#   3. /etc/slurm/slurm.conf for this host: its own name, CPUs and memory as `slurmd -C` sees them
#   4. slurmctld and slurmd, started directly (no systemd in CI containers), as root
#
# Deliberately minimal, because CI runs as root in a container without systemd or cgroup
# delegation: SlurmUser=root, proctrack/linuxproc (process tracking by parent pid, no cgroups),
# task/none, no accounting daemon (the harness reads job states from squeue/scontrol, not
# sacct). MinJobAge keeps finished jobs visible to scontrol for 10 minutes.
# Logs: /var/log/slurm/slurmctld.log, /var/log/slurm/slurmd.log, /tmp/slurm-apt.log.
set -euo pipefail

log() { printf '[slurm] %s\n' "$*" >&2; }
CONF=/etc/slurm/slurm.conf
node=$(hostname -s)

node_state() { sinfo -h -N -n "$node" -o %T 2>/dev/null | head -1; }
takes_jobs() { case "$(node_state)" in idle|mixed|allocated|completing) return 0 ;; *) return 1 ;; esac; }
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if command -v sinfo >/dev/null 2>&1 && running /run/slurmctld.pid && running /run/slurmd.pid && takes_jobs \
  && [ -f "$CONF" ] && grep -q "^NodeName=$node " "$CONF"; then
  log "node $node is $(node_state); nothing to do"
  exit 0
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  log "installing slurm-wlm and munge from Debian"
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge; } >/tmp/slurm-apt.log 2>&1 \
    || { log "apt-get failed; see /tmp/slurm-apt.log"; tail -5 /tmp/slurm-apt.log >&2; exit 1; }
fi

# --- MUNGE: one key, the daemon as its own user (it refuses a key it does not own) ---------------
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  log "creating the MUNGE key"
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge /etc/munge/munge.key /var/lib/munge /var/log/munge /run/munge
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  rm -f /run/munge/munged.pid /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 1 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
  munge -n | unmunge >/dev/null || { log "munged does not answer; see /var/log/munge/munged.log"; exit 1; }
fi

# --- slurm.conf: this host as it really is ------------------------------------------------------
# `slurmd -C` prints the NodeName line from the hardware it sees (CPUs, sockets, cores, threads,
# RealMemory). A container may see more than its cgroup allows: cap CPUs at what this process may
# use and memory at the cgroup limit, so Slurm never promises more than exists.
hw=$(slurmd -C | grep '^NodeName=' | head -1)
cpus=$(nproc)
mem_mb=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
if [ -r /sys/fs/cgroup/memory.max ] && [ "$(cat /sys/fs/cgroup/memory.max)" != max ]; then
  cg_mb=$(( $(cat /sys/fs/cgroup/memory.max) / 1048576 ))
  [ "$cg_mb" -lt "$mem_mb" ] && mem_mb=$cg_mb
fi
hw_cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
if [ -n "$hw_cpus" ] && [ "$hw_cpus" -eq "$cpus" ]; then
  # The topology slurmd found matches what we may use: keep it (sockets/cores/threads).
  topology=$(grep -o 'CPUs=[0-9]* Boards=[0-9]* SocketsPerBoard=[0-9]* CoresPerSocket=[0-9]* ThreadsPerCore=[0-9]*' <<<"$hw")
else
  topology="CPUs=$cpus"
fi
mem_mb=$(( mem_mb * 9 / 10 ))  # headroom for the daemons themselves

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
new=$(mktemp)
cat >"$new" <<EOF
# Written by .ci/slurm.sh for a single-node CI cluster on $node; regenerate with that script.
ClusterName=harness-ci
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
# A cancelled or timed-out job gets SIGTERM, then SIGKILL this many seconds later.
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MinJobAge=600
NodeName=$node $topology RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
changed=0
if ! cmp -s "$new" "$CONF"; then
  log "writing $CONF ($topology, RealMemory=$mem_mb)"
  install -m 0644 "$new" "$CONF"
  changed=1
fi
rm -f "$new"

stop() {  # pid file: the daemon it names, if it is ours to stop
  if running "$1"; then
    kill "$(cat "$1")"
    for _ in $(seq 1 20); do running "$1" || break; sleep 0.5; done
  fi
}
if [ "$changed" = 1 ]; then
  stop /run/slurmd.pid
  stop /run/slurmctld.pid
fi
if ! running /run/slurmctld.pid; then
  log "starting slurmctld"
  /usr/sbin/slurmctld
fi
if ! running /run/slurmd.pid; then
  log "starting slurmd"
  /usr/sbin/slurmd
fi

# --- wait until the node takes jobs ---------------------------------------------------------------
for _ in $(seq 1 60); do
  state=$(node_state || true)
  case "$state" in
    idle|mixed|allocated|completing) log "node $node is $state"; sinfo >&2; exit 0 ;;
    down*|drain*|fail*) scontrol update NodeName="$node" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 1
done
log "node $node did not become idle (state: ${state:-none}); see /var/log/slurm/"
tail -20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
