#!/bin/sh
# Open MPI's remote shell for the simulated nodes of the cluster tests:
# mpirun calls it as `rsh-agent.sh HOST COMMAND...` to start its daemon on
# HOST; every host is this machine, so the command runs here.
shift
exec /bin/sh -c "$*"
