#!/usr/bin/env bash
source "$(dirname "$0")/../common.sh"
source "$HERE/cheaters.sh"
submit_copy
honest_work
