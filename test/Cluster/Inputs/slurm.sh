#!/usr/bin/env bash
# A private Slurm for the tests: munged, slurmctld and one slurmd per node,
# all on this machine, started as root in a directory of their own on free
# loopback ports. Nothing is read from or written to /etc, /run or /var; the
# nodes are named node1..nodeN and all live on this host.
#
#   slurm.sh up DIR [--nodes N] [--cpus C]   start N nodes of C CPUs (1 x 4);
#                                            DIR/env then sets SLURM_CONF
#   slurm.sh down DIR                        stop what `up` started
#   slurm.sh run DIR [--nodes N] [--cpus C] -- CMD...
#                                            up, CMD with SLURM_CONF set, then
#                                            down (also on failure or signal);
#                                            exits with CMD's status
#   slurm.sh probe DIR                       up, `srun -n 1 true`, down; says
#                                            why and exits 1 when it cannot
#   slurm.sh batch SCRIPT [SBATCH ARGS...]   (with SLURM_CONF set) submits
#                                            SCRIPT and exits with its status
#                                            when it ends, polling every 0.2 s
#                                            (`sbatch --wait` takes 10 s)
set -uo pipefail

die() { echo "slurm.sh: $*" >&2; exit 2; }

need_tools() {
  local t
  for t in munged slurmctld slurmd sinfo srun sbatch scontrol; do
    if ! command -v "$t" > /dev/null 2>&1; then
      echo "slurm.sh: '$t' is not installed (Debian: munge slurmctld slurmd slurm-client)" >&2
      return 1
    fi
  done
  if [ "$(id -u)" != 0 ]; then
    echo "slurm.sh: slurmd runs jobs as their user only when started as root; this is uid $(id -u)" >&2
    return 1
  fi
}

# N free TCP ports on the loopback interface, one a line.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print("\n".join(str(s.getsockname()[1]) for s in socks))
PY
}

show_log() {
  echo "slurm.sh: $1 did not start; the end of $2:" >&2
  tail -n 5 "$2" >&2 2>/dev/null
}

up() {
  local dir="$1" nodes="$2" cpus="$3" host sock ports i
  need_tools || return 1
  rm -rf "$dir" && mkdir -p "$dir"/{munge,state,log} || return 1
  dir="$(cd "$dir" && pwd)"
  host="$(hostname -s)"

  # munged with a fresh key, on a socket of its own. The socket's directory
  # must be searchable by all (munged checks); the key is root's alone.
  chmod 755 "$dir" "$dir/munge"
  head -c 1024 /dev/urandom > "$dir/munge/munge.key" && chmod 400 "$dir/munge/munge.key"
  sock="$dir/munge/munge.socket"
  munged --force --socket="$sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" 2> "$dir/log/munged.err" ||
    { show_log munged "$dir/log/munged.err"; return 1; }

  ports="$(free_ports $((nodes + 1)))" || return 1
  mapfile -t ports <<< "$ports"

  {
    cat <<CONF
ClusterName=zerotest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
# The PMIx plugin makes each step's client directory under TmpFS; one per
# node, as the nodes share this machine's /tmp.
TmpFS=$dir/tmp-%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The nodes claim more CPUs than the machine has.
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
KillWait=5
CONF
    for ((i = 1; i <= nodes; i++)); do
      echo "NodeName=node$i NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[$i]} CPUs=$cpus State=UNKNOWN"
    done
    echo "PartitionName=test Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
  } > "$dir/slurm.conf"
  echo "export SLURM_CONF=$dir/slurm.conf" > "$dir/env"
  export SLURM_CONF="$dir/slurm.conf"

  slurmctld -i 2> "$dir/log/slurmctld.err" ||
    { show_log slurmctld "$dir/log/slurmctld.log"; return 1; }
  for ((i = 1; i <= nodes; i++)); do
    mkdir -p "$dir/tmp-node$i"
    slurmd -N "node$i" 2> "$dir/log/slurmd-node$i.err" ||
      { show_log "slurmd node$i" "$dir/log/slurmd-node$i.log"; return 1; }
  done

  # A bounded wait for every node to be idle.
  local idle=""
  for ((i = 0; i < 150; i++)); do
    idle="$(sinfo -h -t idle -o %D 2>/dev/null)"
    [ "$idle" = "$nodes" ] && return 0
    sleep 0.2
  done
  echo "slurm.sh: after 30 s, ${idle:-0} of $nodes nodes are idle:" >&2
  sinfo -N >&2 2>&1
  tail -n 5 "$dir"/log/slurm*.log >&2
  return 1
}

# Stops what `up` started: cancels the cluster's jobs and waits (bounded)
# for them to end, then sends every daemon whose pid file lies in DIR SIGTERM
# at once, SIGKILL to those still there after 10 s, and SIGKILL to any step
# daemon (slurmstepd) of this cluster left behind. DIR/stopped lists them.
down() {
  local dir="$1" f pid pids=() i
  [ -d "$dir" ] || return 0
  dir="$(cd "$dir" && pwd)"
  if [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
    export SLURM_CONF="$dir/slurm.conf"
    scancel --quiet --full --user="$(id -un)" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$f" ] || continue
    pid="$(cat "$f" 2>/dev/null)"
    if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
      pids+=("$pid")
      echo "$(basename "$f" .pid) $pid" >> "$dir/stopped"
    fi
  done
  for ((i = 0; i < 100 && ${#pids[@]}; i++)); do
    local left=()
    for pid in "${pids[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then left+=("$pid"); fi
    done
    pids=("${left[@]}")
    ((${#pids[@]})) && sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  # Step daemons outlive slurmd; ours carry this cluster's SLURM_CONF.
  for f in /proc/[0-9]*/environ; do
    pid="${f#/proc/}"; pid="${pid%/environ}"
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmstepd ] || continue
    if tr '\0' '\n' < "$f" 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf"; then
      kill -KILL "$pid" 2>/dev/null && echo "slurmstepd $pid" >> "$dir/stopped"
    fi
  done
  return 0
}

# Submits a batch script, waits (bounded) for it to end and exits with its
# exit code, or 128 + the signal that ended it.
batch() {
  local job state="" info code i
  [ -n "${SLURM_CONF:-}" ] || die "batch: SLURM_CONF is not set (run it under 'slurm.sh run')"
  job="$(sbatch --parsable "${@:2}" "$1")" || exit 1
  job="${job%%;*}"
  for ((i = 0; i < 18000; i++)); do
    info="$(scontrol -o show job "$job" 2>/dev/null)"
    state="$(sed -n 's/.* JobState=\([A-Z_]*\).*/\1/p' <<< "$info")"
    case "$state" in
      PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|"") sleep 0.2 ;;
      *)
        code="$(sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\1 \2/p' <<< "$info")"
        read -r status signal <<< "$code"
        if [ "${signal:-0}" != 0 ]; then exit $((128 + signal)); fi
        if [ "$state" != COMPLETED ] && [ "${status:-0}" = 0 ]; then
          echo "slurm.sh: batch job $job ended $state" >&2
          exit 1
        fi
        exit "${status:-1}"
        ;;
    esac
  done
  echo "slurm.sh: batch job $job is still $state after an hour; cancelled" >&2
  scancel "$job"
  exit 1
}

cmd="${1:-}"
if [ "$cmd" = batch ]; then
  [ $# -ge 2 ] || die "usage: slurm.sh batch SCRIPT [SBATCH ARGS...]"
  batch "${@:2}"
fi
[ $# -ge 2 ] || die "usage: slurm.sh up|down|run|probe DIR [--nodes N] [--cpus C] [-- CMD...]"
dir="$2"; shift 2
nodes=1 cpus=4
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
case "$cmd" in
  up) up "$dir" "$nodes" "$cpus" || { down "$dir"; exit 1; } ;;
  down) down "$dir" ;;
  run|probe)
    trap 'down "$dir"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    up "$dir" "$nodes" "$cpus" || exit 1
    if [ "$cmd" = probe ]; then
      out="$(SLURM_CONF="$dir/slurm.conf" timeout 60 srun -n 1 true 2>&1)" ||
        { echo "slurm.sh: 'srun -n 1 true' failed: $out" >&2; exit 1; }
    else
      [ $# -ge 1 ] || die "run: no command after --"
      SLURM_CONF="$dir/slurm.conf" "$@"
    fi
    ;;
  *) die "unknown command '$cmd' (up, down, run, probe)" ;;
esac
