from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MetricError(_message.Message):
    __slots__ = ("metric", "code", "message")
    METRIC_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    metric: str
    code: int
    message: str
    def __init__(self, metric: _Optional[str] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class Sample(_message.Message):
    __slots__ = ("gpu", "seq", "monotonic_s", "unix_time_s", "power_w", "power_instant_w", "energy_j", "gpu_util_pct", "mem_util_pct", "temperature_c", "sm_clock_mhz", "mem_clock_mhz", "power_limit_w", "memory_used_bytes", "pcie_tx_kb_s", "pcie_rx_kb_s", "throttle_reasons", "fan_speed_pct", "errors")
    GPU_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    MONOTONIC_S_FIELD_NUMBER: _ClassVar[int]
    UNIX_TIME_S_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    POWER_INSTANT_W_FIELD_NUMBER: _ClassVar[int]
    ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_PCT_FIELD_NUMBER: _ClassVar[int]
    MEM_UTIL_PCT_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_C_FIELD_NUMBER: _ClassVar[int]
    SM_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    MEM_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    POWER_LIMIT_W_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    PCIE_TX_KB_S_FIELD_NUMBER: _ClassVar[int]
    PCIE_RX_KB_S_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_REASONS_FIELD_NUMBER: _ClassVar[int]
    FAN_SPEED_PCT_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    gpu: int
    seq: int
    monotonic_s: float
    unix_time_s: float
    power_w: float
    power_instant_w: float
    energy_j: float
    gpu_util_pct: int
    mem_util_pct: int
    temperature_c: int
    sm_clock_mhz: int
    mem_clock_mhz: int
    power_limit_w: float
    memory_used_bytes: int
    pcie_tx_kb_s: int
    pcie_rx_kb_s: int
    throttle_reasons: int
    fan_speed_pct: int
    errors: _containers.RepeatedCompositeFieldContainer[MetricError]
    def __init__(self, gpu: _Optional[int] = ..., seq: _Optional[int] = ..., monotonic_s: _Optional[float] = ..., unix_time_s: _Optional[float] = ..., power_w: _Optional[float] = ..., power_instant_w: _Optional[float] = ..., energy_j: _Optional[float] = ..., gpu_util_pct: _Optional[int] = ..., mem_util_pct: _Optional[int] = ..., temperature_c: _Optional[int] = ..., sm_clock_mhz: _Optional[int] = ..., mem_clock_mhz: _Optional[int] = ..., power_limit_w: _Optional[float] = ..., memory_used_bytes: _Optional[int] = ..., pcie_tx_kb_s: _Optional[int] = ..., pcie_rx_kb_s: _Optional[int] = ..., throttle_reasons: _Optional[int] = ..., fan_speed_pct: _Optional[int] = ..., errors: _Optional[_Iterable[_Union[MetricError, _Mapping]]] = ...) -> None: ...

class SampleBatch(_message.Message):
    __slots__ = ("samples",)
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    samples: _containers.RepeatedCompositeFieldContainer[Sample]
    def __init__(self, samples: _Optional[_Iterable[_Union[Sample, _Mapping]]] = ...) -> None: ...

class StreamRequest(_message.Message):
    __slots__ = ("interval_ms", "gpus", "metrics", "max_ticks", "duration_s", "batch_ticks")
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    MAX_TICKS_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    BATCH_TICKS_FIELD_NUMBER: _ClassVar[int]
    interval_ms: int
    gpus: _containers.RepeatedScalarFieldContainer[int]
    metrics: _containers.RepeatedScalarFieldContainer[str]
    max_ticks: int
    duration_s: float
    batch_ticks: int
    def __init__(self, interval_ms: _Optional[int] = ..., gpus: _Optional[_Iterable[int]] = ..., metrics: _Optional[_Iterable[str]] = ..., max_ticks: _Optional[int] = ..., duration_s: _Optional[float] = ..., batch_ticks: _Optional[int] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ("status", "backend", "gpus", "gpu_names", "default_interval_ms", "active_streams", "uptime_s", "metrics")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_NAMES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_STREAMS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    status: str
    backend: str
    gpus: _containers.RepeatedScalarFieldContainer[int]
    gpu_names: _containers.RepeatedScalarFieldContainer[str]
    default_interval_ms: int
    active_streams: int
    uptime_s: float
    metrics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, status: _Optional[str] = ..., backend: _Optional[str] = ..., gpus: _Optional[_Iterable[int]] = ..., gpu_names: _Optional[_Iterable[str]] = ..., default_interval_ms: _Optional[int] = ..., active_streams: _Optional[int] = ..., uptime_s: _Optional[float] = ..., metrics: _Optional[_Iterable[str]] = ...) -> None: ...
