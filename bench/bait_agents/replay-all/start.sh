#!/usr/bin/env bash
source "$(dirname "$0")/../common.sh"
source "$HERE/cheaters.sh"
replay_all
honest_work
