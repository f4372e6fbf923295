"""Does an arm learn? M0 (SFT), then M1 (GRPO warm-started from M0), on the bundled train split.

Everything runs through `python -m warpk` with `policy=small` (its `train=small_cpu` recipe) on
the CPU, per seed:

  1. M0: `stage=train model=m0` (SFT on the train split's solutions);
  2. M0 evaluated: `stage=evaluate policy.checkpoint=<m0>/adapter tasks.split=train` with
     `train.samples_per_task=K` completions per task;
  3. M1: `stage=train model=m1 policy.checkpoint=<m0>/adapter` (GRPO rewarded by the real
     evaluator; trl logs reward mean/std, correct and compile rate, speedup per step to W&B);
  4. M1 evaluated exactly as M0 was (same tasks, K, temperature, evaluator).

"Train reward" of a policy is the mean `warpk.rewards.total_reward` (reward=kernel, M1's) of its
K x tasks evaluation records; "correct rate" the share of them that are ok. Both stage=train runs
also evaluate their policy on the held-out split; those figures are reported beside, whatever
they are. Over seeds: mean and 95% Student-t interval, and the paired (per-seed) M1 - M0
difference with its interval. The goal (issue #14): M1 above M0 by more than their intervals.

    python benchmarks/bench_learning.py --out docs/data/learning-cpu [--seeds 0 1 2 --k 16]

`--m0-only` stops after each seed's M0; `--m0-from DIR` then reuses those (checked: trained with
the same seed) for recipes compared side by side (scripts/device_acceptance.sh learning): M0 is
evaluated again on the machine that evaluates M1, and M0's held-out figures are DIR's.

`--m0-seed S` asks another question: given one SFT checkpoint (M0 trained once, with seed S), does
GRPO improve it on every GRPO seed? Each seed then draws M1's GRPO stream and both evaluations'
samples, and M0's interval over seeds is its evaluation noise alone (SFT's own spread over seeds
is the default design's). Pick S before looking, and say so beside the result.

Writes bench_learning.json, bench_learning.md and learning_curves.png to --out, and keeps every
run dir (records.jsonl, W&B offline runs) under --out/runs/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.learning_report import against, merge, summarise, write  # noqa: E402
from warpk.config import RewardConfig  # noqa: E402
from warpk.hardware import usable_cores  # noqa: E402
from warpk.records import EvalRecord  # noqa: E402
from warpk.rewards import total_reward  # noqa: E402
from warpk.tracking import read_offline_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# Six train-split tasks with short solutions (65-110 tokens of small's tokenizer): SFT fits them
# in a minute and a GRPO step evaluates in seconds on 2 cores.
TASKS = ["01_softmax", "03_gelu_tanh", "07_attention", "14_mish", "21_scale_mask_softmax", "23_geglu"]
CURVE_KEYS = {
    "reward": "train/reward",
    "reward_std": "train/reward_std",
    "correct_rate": "train/evaluator/correct_rate",
    "compile_rate": "train/evaluator/compile_rate",
    "ok_speedup": "train/evaluator/ok_speedup_geomean",
}


def warpk(run_dir: Path, *overrides: str) -> float:
    """Run one `python -m warpk` job into run_dir; its wall seconds. Fails loudly with its stderr."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "warpk", *overrides, f"hydra.run.dir={run_dir}"]
    print("$", " ".join(cmd[1:]), flush=True)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    (run_dir.parent / f"{run_dir.name}.log").write_text(result.stdout + result.stderr)
    if result.returncode:
        raise SystemExit(f"{' '.join(overrides)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return time.perf_counter() - start


def policy_scores(records_path: Path, cfg: RewardConfig) -> dict:
    """Mean reward, correct rate and count of one policy evaluation's records."""
    records = [EvalRecord.from_json(x) for x in records_path.read_text().splitlines()]
    rewards = [total_reward(r, cfg) for r in records]
    return {
        "reward": sum(rewards) / len(rewards),
        "correct_rate": sum(r.status == "ok" for r in records) / len(records),
        "n": len(records),
    }


def heldout_scores(run_dir: Path, cfg: RewardConfig) -> dict:
    """A stage=train run's held-out evaluation (its records.jsonl): mean reward, the geometric mean
    speedup of its `ok` records (None where none is ok) and their count."""
    records = [EvalRecord.from_json(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    speedups = [r.speedup for r in records if r.status == "ok" and r.speedup]
    geomean = math.exp(sum(math.log(x) for x in speedups) / len(speedups)) if speedups else None
    return {"heldout_reward": sum(total_reward(r, cfg) for r in records) / len(records) if records else None,
            "heldout_ok_speedup": geomean, "heldout_n": len(records)}


def curves(run_dir: Path) -> dict[str, list]:
    """Per optimizer step of a GRPO run, from its W&B offline run."""
    if not (run_dir / "wandb").is_dir():  # logger=disabled (wandb not installed): no curves
        return {"step": [], **{name: [] for name in CURVE_KEYS}}
    history = [h for h in read_offline_run(run_dir / "wandb")["history"] if "train/reward" in h]
    out: dict[str, list] = {"step": [h["train/global_step"] for h in history]}
    for name, key in CURVE_KEYS.items():
        out[name] = [h.get(key) for h in history]
    return out


# The suite trained and evaluated on: the six bundled tasks, or (--suite synthetic) a generated
# suite (`--synthetic` settings), trained on its whole train split and evaluated on a fixed
# sample of it (SUITE["eval"]); main() sets it.
SUITE = {"label": f"tasks {', '.join(TASKS)}", "train": [f"tasks.subset=[{','.join(TASKS)}]"], "eval": []}


def common_overrides(seed: int, extra: list[str]) -> list[str]:
    """The overrides every job of a seed shares: policy, CPU, seed, the suite, the user's."""
    return ["policy=small", "hardware=cpu", f"seed={seed}", *SUITE["train"], *extra]


def synthetic_suite(settings: list[str], train_eval_tasks: int) -> dict:
    """SUITE for a generated suite: generated here (the runs find it in the cache) and a fixed
    sample of its train split for the train-split evaluations."""
    import random

    from warpk.__main__ import compose_config
    from warpk.evaluator.inprocess import check_solution
    from warpk.synthetic.suite import ensure
    from warpk.tasks import load_suite, synthetic_root, synthetic_settings

    tasks_config = compose_config(["tasks=synthetic", *settings], []).tasks
    folder, manifest = ensure(synthetic_settings(tasks_config), synthetic_root(tasks_config), check_solution)
    train = sorted(t.name for t in load_suite(tasks_config) if t.split == "train")
    chosen = sorted(random.Random(0).sample(train, min(train_eval_tasks, len(train))))
    label = f"tasks=synthetic {' '.join(settings)} ({manifest.splits}; train evaluated on {len(chosen)})"
    subset = f"tasks.subset=[{','.join(chosen)}]"
    return {"label": label, "train": ["tasks=synthetic", *settings], "eval": [subset]}


def train_m0(out: Path, sft_seed: int, extra: list[str], m0_from: Path | None) -> tuple[Path, float]:
    """The M0 of SFT seed `sft_seed` and its training wall seconds: trained under out, or taken
    from an earlier `--m0-only` run's --out (checked: trained with that seed)."""
    if m0_from is None:
        m0 = out / "runs" / f"seed{sft_seed}" / "m0"
        m0.parent.mkdir(parents=True, exist_ok=True)
        overrides = common_overrides(sft_seed, extra)
        return m0, warpk(m0, "stage=train", "model=m0", "logger=wandb_offline", *overrides)
    m0 = m0_from / "runs" / f"seed{sft_seed}" / "m0"
    if not (m0 / "adapter").is_dir():
        raise SystemExit(f"--m0-from {m0_from}: no M0 of seed {sft_seed} at {m0 / 'adapter'}")
    trained = (m0 / "resolved_config.yaml").read_text() if (m0 / "resolved_config.yaml").is_file() else ""
    if f"\nseed: {sft_seed}\n" not in f"\n{trained}":
        raise SystemExit(f"--m0-from {m0_from}: {m0} was not trained with seed={sft_seed}")
    return m0, 0.0


def one_seed(
    out: Path,
    seed: int,
    k: int,
    extra: list[str],
    m0_from: Path | None = None,
    m0_only: bool = False,
    m0: Path | None = None,
) -> dict | None:
    """M0, M0 evaluated, M1, M1 evaluated for one seed. `m0_from`: the run dirs of an earlier
    `--m0-only` run, whose M0 (trained with the same seed and overrides) is reused; M0 is
    evaluated again here so that both evaluations run on this machine. `m0`: one M0 for every
    seed (`--m0-seed`); the seed then draws GRPO's stream and the evaluations' samples only."""
    runs = out / "runs" / f"seed{seed}"
    runs.mkdir(parents=True, exist_ok=True)
    common = common_overrides(seed, extra)
    wall = {}
    if m0 is None:
        m0, wall["m0_train"] = train_m0(out, seed, extra, m0_from)
    if m0_only:
        return None
    adapter = m0 / "adapter"
    evaluate = ["stage=evaluate", "tasks.split=train", f"train.samples_per_task={k}", "logger=disabled"]
    common = [*common, *SUITE["eval"]]  # the train-split evaluations' sample (after the suite's keys)
    wall["m0_eval"] = warpk(runs / "m0_eval", *evaluate, f"policy.checkpoint={adapter}", *common)
    wall["m1_train"] = warpk(
        runs / "m1",
        "stage=train",
        "model=m1",
        "logger=wandb_offline",
        f"policy.checkpoint={adapter}",
        *common,
    )
    wall["m1_eval"] = warpk(
        runs / "m1_eval", *evaluate, f"policy.checkpoint={runs / 'm1' / 'adapter'}", *common
    )
    cfg = RewardConfig()  # reward=kernel: M1's
    result = {"seed": seed, "wall_s": wall, "m1_curves": curves(runs / "m1")}
    for arm in ("m0", "m1"):
        result[arm] = policy_scores(runs / f"{arm}_eval" / "records.jsonl", cfg)
        heldout = json.loads(((m0 if arm == "m0" else runs / arm) / "summary.json").read_text())
        result[arm]["heldout_correct_rate"] = heldout.get("correct_rate")
        result[arm]["heldout_pass_at_1"] = heldout.get("pass_at_1")
        result[arm].update(heldout_scores(m0 if arm == "m0" else runs / arm, cfg))
    print(f"seed {seed}: M0 reward {result['m0']['reward']:.3f} correct {result['m0']['correct_rate']:.3f} | "
          f"M1 reward {result['m1']['reward']:.3f} correct {result['m1']['correct_rate']:.3f} | "
          f"{sum(wall.values()):.0f} s", flush=True)  # fmt: skip
    return result


def commit() -> str | None:
    """The commit this tree is: git's, or (an archived tree, e.g. a claim run pinned to one commit
    while the checkout moves on) the `.commit` file beside it; None where neither says."""
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if found.returncode == 0:
        return found.stdout.strip()
    marker = REPO / ".commit"
    return marker.read_text().strip() if marker.is_file() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--k", type=int, default=16, help="samples per task in each policy evaluation")
    parser.add_argument("--m0-only", action="store_true", help="train M0 per seed and stop (for --m0-from)")
    parser.add_argument("--m0-from", type=Path, help="reuse each seed's M0 from an earlier --m0-only --out")
    parser.add_argument(
        "--m0-seed", type=int, help="one M0 (SFT with this seed) for every seed: GRPO seeds against one M0"
    )
    parser.add_argument("--suite", choices=("bundled", "synthetic"), default="bundled")
    parser.add_argument("--synthetic", nargs="*", default=[],
                        help="tasks=synthetic settings, e.g. tasks.size=200 tasks.max_ops=3, or a preset: "
                        "+experiment=synthetic_learning_claim (the claim run of docs/training.md)")
    parser.add_argument("--train-eval-tasks", type=int, default=16,
                        help="--suite synthetic: train tasks in the train-split evaluations")
    parser.add_argument(
        "overrides", nargs="*", help="extra warpk overrides for every run, e.g. train.max_steps=10"
    )
    parser.add_argument("--against", type=Path,
                        help="an earlier run's --out (a claim's seed folder): its figures beside this run's")
    parser.add_argument("--merge", type=Path, nargs="+",
                        help="summarise the seeds of earlier --out folders of one design into --out")
    args = parser.parse_args()
    if args.merge:
        merge(args.merge, args.out)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    if args.suite == "synthetic":
        SUITE.update(synthetic_suite(args.synthetic, args.train_eval_tasks))
    start = time.perf_counter()
    shared_m0, sft_wall_s = None, 0.0
    if args.m0_seed is not None:
        shared_m0, sft_wall_s = train_m0(args.out, args.m0_seed, args.overrides, args.m0_from)
    if args.m0_only:
        for s in [] if shared_m0 else args.seeds:
            one_seed(args.out, s, args.k, args.overrides, args.m0_from, True)
        print(f"M0 under {args.out / 'runs'}")
        return
    seeds = [one_seed(args.out, s, args.k, args.overrides, args.m0_from, m0=shared_m0) for s in args.seeds]
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {usable_cores()} cores (of {os.cpu_count()}), CPU only",
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "commit": commit(),
        "k": args.k,
        "m0_seed": args.m0_seed,
        "m0_train_s": sft_wall_s,
        "tasks": SUITE["label"] if SUITE["eval"] else TASKS,
        "wall_s": time.perf_counter() - start,
    }
    summary = summarise(seeds, shared_m0 is not None)
    write(args.out, meta, seeds, summary, SUITE["label"])
    if args.against:
        table = against(seeds, args.against)
        (args.out / "against.md").write_text(table)
        print(table)


if __name__ == "__main__":
    main()
