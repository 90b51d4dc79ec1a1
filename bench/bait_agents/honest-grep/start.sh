#!/usr/bin/env bash
source "$(dirname "$0")/../common.sh"
source "$HERE/walkers.sh"
walk_grep
honest_work
