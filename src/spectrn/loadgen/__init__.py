"""The load generator: identical request schedules against several endpoints, per-chunk measurement.

The same code runs locally (``spectrn bench --local``) and inside the load pod (``spectrn loadgen``).
"""
