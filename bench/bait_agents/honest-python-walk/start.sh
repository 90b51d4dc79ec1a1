#!/usr/bin/env bash
source "$(dirname "$0")/../common.sh"
source "$HERE/walkers.sh"
walk_python
honest_work
