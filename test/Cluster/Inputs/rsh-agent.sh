#!/bin/sh
# Open MPI's remote shell for the simulated nodes of the cluster tests:
# mpirun calls it as `rsh-agent.sh HOST COMMAND...` to start its daemon on
# HOST; every host is this machine, so the command runs here. Each host's
# daemon gets a session directory of its own (under orte_tmpdir_base): two
# daemons of one job creating the same one race, and one fails ("mkdir ...:
# File exists").
host=$1
shift
cmd="$*"
case "$cmd" in
*'-mca orte_tmpdir_base "'*)
  base=$(printf '%s\n' "$cmd" | sed 's/.*-mca orte_tmpdir_base "\([^"]*\)".*/\1/')
  mkdir -p "$base/$host"
  cmd=$(printf '%s\n' "$cmd" | sed "s|-mca orte_tmpdir_base \"[^\"]*\"|-mca orte_tmpdir_base \"$base/$host\"|")
  ;;
*)
  base=${TMPDIR:-/tmp}/zero-run-simulated.$(id -u)
  mkdir -p "$base/$host"
  cmd="$cmd -mca orte_tmpdir_base $base/$host"
  ;;
esac
exec /bin/sh -c "$cmd"
