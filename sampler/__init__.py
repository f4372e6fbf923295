"""GPU telemetry sampler: a standalone daemon streaming NVML metrics over gRPC.

    python -m sampler serve --addr 127.0.0.1:50052 --interval-ms 100 --gpus 0,1
    python -m sampler serve --backend replay --trace tests/data/trace.jsonl.gz
    python -m sampler record --out trace.jsonl.gz --duration-s 60 --interval-ms 10 --gpus 0

Modules: `trace` (the recorded-trace file format), `backends` (nvml, replay), `server` (the gRPC
services Health and Sampler.StreamSamples), `sampler.proto` and its committed stubs.

Non-goals: this package never imports warpk (WARP-K's client lives in
warpk.telemetry.sampler_client); it never changes a GPU setting (power limit, clocks, modes);
it has no authentication, so it binds loopback unless told otherwise.
"""

__version__ = "0.1.0"
