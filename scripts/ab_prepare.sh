#!/bin/bash
# The tree of an older commit in .ab/<commit> (ignored; carry it to the device with .carry), for
# `OLD=<commit> bash scripts/device_acceptance.sh ab`: the same refcheck at that commit and at
# HEAD side by side in one call.
#   bash scripts/ab_prepare.sh 750652e
set -euo pipefail
commit=$(git rev-parse --short "${1:?a commit}")
rm -rf ".ab/$commit" && mkdir -p ".ab/$commit"
git archive "$commit" -- warpk sampler benchmarks conf kernelbench pyproject.toml | tar -x -C ".ab/$commit"
du -sh ".ab/$commit"
