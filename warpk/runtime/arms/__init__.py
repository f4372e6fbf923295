"""What the M4 (stage=runtime) and M5 (stage=hrl) stages make of the simulator and its controllers:
result tables and files (tables, results), the static frontier (frontier), the sensitivity to the
modelled clock curve (sensitivity), and M5's kernel deployment (hrl), rounds (hrl_rounds, which
import the trainers) and tables (hrl_results). Imports warpk.runtime.serving and
warpk.runtime.control; nothing below it imports this (tests/unit/test_layers.py).

Non-goals: no printing and no run directory layout of their own (warpk.stages does both).
"""
