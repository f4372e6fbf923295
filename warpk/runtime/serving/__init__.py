"""The serving simulator: measured cost fit (calibration), request traces (workload), the
gymnasium env (env), its server's queue and batch (server) and where a setting goes
(actuators). Imports nothing of warpk.runtime.control or warpk.runtime.arms
(tests/unit/test_layers.py).

Non-goals: no policy, no training, no evaluation of policies (warpk.runtime.control).
"""
