#!/usr/bin/env bash
# A one-node Slurm cluster for the sweep's Slurm test (tests/e2e/sweep_slurm.sh), in a folder of its own: munge (its own key
# and socket), slurmctld and slurmd with a slurm.conf there, nothing under /etc changed.
# Usage: cluster.sh start DIR   (prints "export SLURM_CONF=DIR/slurm.conf"; exit 77 when the
#                                      daemons cannot start here: not root, not installed, refused)
#        cluster.sh stop DIR    (stops exactly the daemons that start wrote pid files for)
set -uo pipefail
cmd=$1; dir=$2
skip() { echo "slurm cluster: cannot start here: $*" >&2; exit 77; }
if [ "$cmd" = stop ]; then
  for p in slurmd slurmctld munged; do
    [ -f "$dir/$p.pid" ] && kill "$(cat "$dir/$p.pid")" 2>/dev/null
  done
  sleep 1
  exit 0
fi
[ "$(id -u)" -eq 0 ] || skip "not root"
for b in munged mungekey slurmctld slurmd sbatch squeue; do
  command -v "$b" > /dev/null || skip "$b is not installed (tools/setup installs Debian's slurmctld, slurmd and munge)"
done
mkdir -p "$dir"/{spool,state,log}
host=$(hostname -s)
mungekey --create --keyfile="$dir/munge.key" --force 2> "$dir/log/mungekey.log" || skip "mungekey failed"
chmod 600 "$dir/munge.key"
munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed" 2> "$dir/log/munged.err" || skip "munged: $(cat "$dir/log/munged.err")"
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
cat > "$dir/slurm.conf" <<CONF
ClusterName=exasim-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
MaxArraySize=1001
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$dir/slurm.conf" 2> "$dir/log/slurmctld.err" || skip "slurmctld: $(cat "$dir/log/slurmctld.err")"
slurmd -f "$dir/slurm.conf" 2> "$dir/log/slurmd.err" || skip "slurmd: $(cat "$dir/log/slurmd.err")"
for i in $(seq 1 30); do
  state=$(sinfo -h -o %t 2> /dev/null | head -1)
  case "$state" in idle*|mix*|alloc*) echo "export SLURM_CONF=$dir/slurm.conf"; exit 0;; esac
  sleep 1
done
skip "the node did not come up (state '${state:-none}'): $(tail -3 "$dir/log/slurmd.log" 2> /dev/null)"
