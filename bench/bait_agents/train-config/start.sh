#!/usr/bin/env bash
source "$(dirname "$0")/../common.sh"
source "$HERE/cheaters.sh"
train_config
honest_work
