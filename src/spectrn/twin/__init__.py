"""A digital twin of a measured server: a simulator preset fitted to run folders, and offline predictions.

    steps.py       records -> the server's engine steps (batch, context, prefill tokens, duration)
    costs.py       steps -> step costs of the simulator's roofline (robust least squares, standard errors)
    acceptance.py  per-class stream acceptance -> conditional acceptance per position, decay beyond it
    calibrate.py   run folders -> Twin (preset + calibration sidecar)
    model.py       the twin.yaml contract: Preset + Calibration, load and dump
    engine.py      the simulator's scheduling offline (closed loop, no HTTP)
    predict.py     twin -> predictions per window and load with intervals, best window, crossover
    compare.py     a twin's prediction for a run's own workload next to what the run measured

Method, measurements and limits: docs/twin.md.
"""
