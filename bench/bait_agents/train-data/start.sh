#!/usr/bin/env bash
source "$(dirname "$0")/../common.sh"
source "$HERE/cheaters.sh"
train_data
honest_work
