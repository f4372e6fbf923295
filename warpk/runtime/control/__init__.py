"""The controllers of the serving simulator and how they are judged: episode seed families
(seeds), episodes and summaries and the goal's verdict (evaluation), the baselines, PPO's policy
wrappers (policies), its checkpoint selection (selection) and training (ppo). Imports
warpk.runtime.serving only, never warpk.runtime.arms (tests/unit/test_layers.py).

Non-goals: no result tables, files or figures (warpk.runtime.arms); no GRPO.
"""
