#!/usr/bin/env bash
# A one-node Slurm cluster on this machine (Debian's munge, slurmctld and slurmd, as root,
# configuration and logs in a temporary directory), then the main job through it:
# `salloc -n 4 mirrorcl run -n 4 -- vecadd_multi`, which inside the allocation launches
# the ranks with `srun --mpi=pmix` (Open MPI 4.1 direct launch over Slurm's PMIx plugin),
# and again with the MPICH build when there is one (`srun --mpi=pmi2`).
# Checks the device table (4 ranks, 2 PoCL devices each) and a PASS line from every rank,
# then stops the daemons it started. Needs root (or sudo) and the release build
# (`bash .ci/setup`); installs slurmctld, slurmd, slurm-client and munge if missing.
#
#   bash tests/slurm/run.sh            # KEEP=1 keeps the temporary directory (logs)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
t0=$(date +%s)
ranks=4
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# 1. Packages (idempotent).
packages=(slurmctld slurmd slurm-client munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "slurm: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
t_install=$(date +%s)

# 2. What the main job runs: the release build and its program, as in .ci/main-job.
mirrorcl="$root/target/release/mirrorcl"
lib="$root/target/release/libmirrorcl.so"
for f in "$mirrorcl" "$lib"; do
  [ -f "$f" ] || { echo "slurm: $f missing: run bash .ci/setup (or cargo build --release)"; exit 1; }
done
out="$root/target/slurm"
mkdir -p "$out"
cc -O2 -std=c11 -pthread -o "$out/vecadd_multi" tests/c/vecadd_multi.c -lOpenCL -lm

# 3. A one-node cluster: this host, with CPUs for $ranks tasks even on a 2-core machine
#    (config_overrides: slurmd takes the declared CPUs rather than the counted ones).
work=$(mktemp -d /tmp/mirrorcl-slurm.XXXXXX)
host=$(hostname -s)
cpus=$(nproc)
[ "$cpus" -ge "$ranks" ] || cpus=$ranks
export SLURM_CONF="$work/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=mirrorcl-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$work/state" "$work/spool"

pids=()
munged_pid=""
stop() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -z "$munged_pid" ] || kill "$munged_pid" 2>/dev/null || true
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$rc" -ne 0 ]; then
    for log in slurmctld slurmd; do
      echo "--- $work/$log.log (last lines)"
      tail -n 30 "$work/$log.log" 2>/dev/null || true
    done
  fi
  [ "${KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ] || rm -rf "$work"
  exit "$rc"
}
trap stop EXIT

# munge: reuse a running munged, or start one (as the munge user, as its package does).
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  [ -f /etc/munge/munge.key ] || $sudo runuser -u munge -- mungekey --create
  $sudo mkdir -p /run/munge && $sudo chown munge:munge /run/munge
  $sudo runuser -u munge -- /usr/sbin/munged
  munged_pid=$(cat /run/munge/munged.pid)
  munge -n | unmunge >/dev/null
fi

# The daemons in the foreground of background jobs, so that their ids are ours to stop.
$sudo slurmctld -D -c -f "$SLURM_CONF" >>"$work/slurmctld.out" 2>&1 &
pids+=($!)
$sudo slurmd -D -f "$SLURM_CONF" >>"$work/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 1 60); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || { echo "slurm: node $host not idle after 60 s (state: ${state:-none})"; exit 1; }
t_up=$(date +%s)
echo "slurm: node $host idle, $cpus CPUs ($(sinfo --version)); srun --mpi=list: $(srun --mpi=list 2>&1 | tr -s ' \n' ' ')"

# 4. The main job through Slurm (5 minutes at most), for each MPI built here (Open MPI's
#    target/release; MPICH's target/mpich/release when `MIRRORCL_BUILD_MPI=mpich` built
#    it): the allocation's `mirrorcl run` picks srun with the MPI's plugin (pmix, pmi2);
#    every rank's output, prefixed with its rank.
main_job() {
  local mirrorcl=$1 mpi=$2 plugin=$3
  echo "== vecadd_multi on $ranks ranks ($mpi): salloc -n $ranks mirrorcl run -n $ranks --output all"
  local log="$out/vecadd_multi-$mpi.log"
  POCL_DEVICES="pthread pthread" POCL_KERNEL_CACHE=0 MIRRORCL_SHOW_DEVICES=1 MIRRORCL_EXPECT=1 \
    timeout 300 salloc -n "$ranks" bash -c '
      echo "doctor: $("$0" doctor | grep "launcher:")"
      echo "line: $("$0" run -n "$1" --output all --dry-run -- "$2")"
      exec "$0" run -n "$1" --output all -- "$2"' "$mirrorcl" "$ranks" "$out/vecadd_multi" \
    >"$log" 2>&1 || { cat "$log"; echo "slurm: the $mpi job failed"; exit 1; }
  grep -E 'salloc|doctor:|line:|MirrorCL:|  id  rank|Portable|result:|PASS|FAIL|CHECK' "$log"
  # Its output: the table of the ranks' devices, every rank's result and PASS line.
  local fail=0
  grep -q "$ranks rank(s), $((2 * ranks)) device(s)" "$log" || { echo "slurm: no table of $ranks ranks"; fail=1; }
  for r in $(seq 0 $((ranks - 1))); do
    owned=$(awk -v r="$r" '/Portable Computing Language/ && $2 == r' "$log" | wc -l)
    [ "$owned" -eq 2 ] || { echo "slurm: rank $r owns $owned device(s) in the table, not 2"; fail=1; }
    for what in "result: OK" "PASS vecadd_multi"; do
      grep -q "^\[rank $r\] $what" "$log" || { echo "slurm: no '$what' from rank $r"; fail=1; }
    done
  done
  grep -q "^line: [^ ]*/srun .*--mpi=$plugin " "$log" || { echo "slurm: mirrorcl run did not pick srun --mpi=$plugin"; fail=1; }
  [ "$fail" -eq 0 ] || { cat "$log"; exit 1; }
}
main_job "$mirrorcl" "Open MPI" pmix
jobs_run="Open MPI"
mpich_mirrorcl="$root/target/mpich/release/mirrorcl"
if [ -x "$mpich_mirrorcl" ] && [ -f "$root/target/mpich/release/libmirrorcl.so" ]; then
  main_job "$mpich_mirrorcl" MPICH pmi2
  jobs_run="Open MPI and MPICH"
fi
t_job=$(date +%s)
echo "slurm: PASS ($ranks ranks through srun, $jobs_run; install $((t_install - t0)) s, daemons up $((t_up - t_install)) s, jobs $((t_job - t_up)) s, total $(($(date +%s) - t0)) s)"
