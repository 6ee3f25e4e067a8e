-- xv schema, version 5: device health and energy of each attempt (issue 6) and the device probe of
-- each worker (issue 3). docs/worker.md § Device health and § Probe.

-- Sampled by the worker while the attempt ran. NULL: not measured (a CPU worker reports source
-- 'none' and nothing else); '' source: a result from before version 5 or from a worker that does
-- not sample.
ALTER TABLE results ADD COLUMN health_source TEXT NOT NULL DEFAULT '';  -- nvml | hwmon | none
ALTER TABLE results ADD COLUMN health_samples INTEGER;
ALTER TABLE results ADD COLUMN avg_power_w REAL;
ALTER TABLE results ADD COLUMN energy_j REAL;
ALTER TABLE results ADD COLUMN peak_temp_c REAL;
ALTER TABLE results ADD COLUMN throttle_events INTEGER;      -- NULL when the source has no throttle reasons
ALTER TABLE results ADD COLUMN throttled_seconds REAL;
ALTER TABLE results ADD COLUMN throttled INTEGER;            -- 1: thermal/hardware slowdown seen
ALTER TABLE results ADD COLUMN health_json TEXT NOT NULL DEFAULT '';  -- xv.v1.DeviceHealth as JSON
-- The probed best matmul FLOP/s of the worker that ran it: MFU against the measured ceiling.
ALTER TABLE results ADD COLUMN measured_peak_flops REAL;
-- Every attempt's health, failed ones included.
ALTER TABLE attempts ADD COLUMN health_json TEXT NOT NULL DEFAULT '';

-- `xv-train probe` at the worker's registration; kept when it re-registers without one.
ALTER TABLE workers ADD COLUMN probe_json TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN probe_matmul_tflops REAL;
ALTER TABLE workers ADD COLUMN probe_bandwidth_gbs REAL;
ALTER TABLE workers ADD COLUMN probed_at TEXT;
