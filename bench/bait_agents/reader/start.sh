#!/usr/bin/env bash
source "$(dirname "$0")/../common.sh"
source "$HERE/cheaters.sh"
read_only
honest_work
