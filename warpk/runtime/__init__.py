"""Runtime control (issue #6): a calibrated LLM-serving simulator, its actuators, baselines and M4 PPO.

- `calibration`: loads the measured prefill/decode file, fits the cost model, reports held-out error;
  power-cap and clock effects on top of it are modelled from published curves and labelled so.
- `env`: `ServingEnv` (gymnasium), continuous batching under a concurrency limit.
- `baselines`: static max, best static cap, Zeus-style power-limit optimizer, SLO-slack controller,
  oracle static.
- `ppo`: stable-baselines3 PPO training and its policy wrapper.
- `evaluation`: episodes on fixed held-out seeds, mean and 95% t-interval, tables.
- `actuators`: simulated (default) and NVML (explicit opt-in, restores the card's settings).

Non-goals: no real serving engine; no power limit or clock is changed unless actuator=nvml is
explicitly opted into.
"""
