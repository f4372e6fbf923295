#!/bin/bash
# Prepare .carry/ (git-ignored) for a GPU machine that has torch but not bubblewrap, Hydra or the
# training stack: bwrap with its libraries, the pure-Python packages the tests import, and
# upstream KernelBench's levels for benchmarks/kernelbench_refcheck.py.
#   scripts/make_carry.sh /path/to/KernelBench-git-dir     (a clone, or a bare mirror)
#   scripts/make_carry.sh train     (instead of KernelBench: trl and datasets with pyarrow, built for
#                                    the GPU machine's Python 3.12, for benchmarks/bench_grpo.py)
# Then on the GPU machine: bash scripts/device_acceptance.sh   (see its header)
set -euo pipefail
KB_GIT=${1:?usage: scripts/make_carry.sh KERNELBENCH_GIT_DIR|train}
SP=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
rm -rf .carry && mkdir -p .carry/bin .carry/lib .carry/py .carry/kb
cp "$(command -v bwrap)" .carry/bin/bwrap.real
for lib in $(ldd "$(command -v bwrap)" | awk '/=>/ {print $3}' | grep -v -E 'libc\.so|ld-linux'); do
    cp -L "$lib" .carry/lib/
done
cat > .carry/bin/bwrap <<'WRAP'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")
exec /lib64/ld-linux-x86-64.so.2 --library-path "$d/../lib" "$d/bwrap.real" "$@"
WRAP
chmod +x .carry/bin/bwrap
# (wandb is left out: 60 MB, over the carry limit; the GPU tests run with logger=disabled)
for pkg in hydra omegaconf antlr4 gymnasium farama_notifications cloudpickle stable_baselines3 \
           submitit hydra_plugins; do
    [ -e "$SP/$pkg" ] && cp -r "$SP/$pkg" .carry/py/
done
if [ "$KB_GIT" = train ]; then
    # pyarrow's wheel alone is ~55 MB, over what travels; unpacked without its headers and tests
    # and xz-compressed it is ~38 MB. device_acceptance.sh unpacks it into .carry/py.
    W=$(mktemp -d)
    pip download --quiet --only-binary=:all: --python-version 3.12 --no-deps -d "$W" \
        --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
        trl==1.16.0 datasets pyarrow dill xxhash multiprocess pandas
    mkdir "$W/site" && for w in "$W"/*.whl; do
        case "$w" in *pandas*) cp "$w" .carry/ ;; *) unzip -q -o "$w" -d "$W/site" ;; esac
    done
    rm -rf "$W/site/pyarrow/include" "$W/site/pyarrow/tests" "$W/site/pyarrow/src"
    tar -cJf .carry/train-site.tar.xz -C "$W/site" . && rm -rf "$W"
    du -sh .carry; exit 0
fi
git --git-dir="$KB_GIT" archive HEAD KernelBench/level1 KernelBench/level2 KernelBench/level3 | tar -x -C .carry/kb
du -sh .carry
