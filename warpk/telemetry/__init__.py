"""Energy telemetry: measured (NVML, sampler) and modelled energy behind one small seam."""
