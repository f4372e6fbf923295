"""Runtime control (issue #6): a calibrated LLM-serving simulator, the controllers that act on it,
and what the M4 and M5 stages make of them. Three subpackages, imported one way only (the arrows
are checked by tests/unit/test_layers.py):

    serving/   the simulated server, knowing nothing of who controls it
               calibration (measured prefill/decode file, fitted cost model, modelled cap/clock
               effect), workload (arrivals, token lengths), env (`ServingEnv`, gymnasium),
               actuators (simulated; NVML on explicit opt-in), data/ (the measured file)
        ^
    control/   the controllers and how they are judged on episodes; imports serving only
               seeds (episode families), evaluation (episodes, summaries, the goal's verdict),
               baselines, policies, selection (PPO's checkpoint choice), ppo (M4's training)
        ^
    arms/      what the stages do with both: imports serving and control (and, for M5's rounds,
               the trainers); warpk.stages imports these
               tables, results, frontier, sensitivity (stage=runtime, M4); hrl (kernels -> cost
               model), hrl_rounds, hrl_results (stage=hrl, M5)

Non-goals: no real serving engine; no power limit or clock is changed unless
runtime.actuator.kind=nvml is explicitly opted into.
"""
